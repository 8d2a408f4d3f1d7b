"""Train one configuration with the authors' implementation and write what it measured (run by tools/twin.py).

This script runs inside the twin virtualenv (``make twin-env REFERENCE=<checkout>``: jax 0.10.2, dm-haiku,
ml_collections, jmp), never in the project's: it imports the reference checkout given by ``--reference`` and
nothing from compgen. It calls the reference's own ``run_fewshot(cfg, logbook)`` unchanged, with

* a logbook that records every dictionary the reference logs (its evaluation every ``eval_every`` steps and the
  final step), instead of wandb (a stub module stands in for the wandb import);
* the evaluation sets cut to ``eval_tasks`` tasks each (the reference builds 1,024);
* one callback of ours at each evaluation that adapts the learner to the ``test`` and ``ood`` tasks with the
  reference's own inner loop and keeps the adapted fast parameters and the task codes, from which tools/twin.py
  computes our R² metric; the reference's own decoder R² (``decoder_r2_*``) is logged beside it.

Usage: twin_driver.py --reference DIR --config config.json --out result.npz [--theory]

The config is the reference's flat ml_collections dict (as tools/twin.py translates it) plus the keys
``eval_every``, ``eval_tasks`` and ``twin_keep_adapted`` (whether to keep the adapted fast parameters; default
true). The result holds ``log/<key>`` (n_logs,) for every scalar logged,
``log_step`` (n_logs,), ``adapted_test``/``adapted_ood`` (tasks, P) and ``codes_test``/``codes_ood``
(tasks, ...) of the last evaluation where kept, and ``wall_s``. With ``--theory`` the config is
``run_theory.py``'s dict, trained by that script's own ``run(cfg)``, whose ``wandb.log`` calls the stub records
(``log/<key>``; nothing adapted).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import types

import numpy as np


def reference_config(flat: dict, eval_tasks: int, dataset_config) -> dict:
    """The reference's config dict from its flat one: the ``dataset_*`` keys gathered into the dataset's config by
    the reference's own ``dataset_config``, each evaluation set of ``eval_tasks`` tasks."""
    cfg = dict(flat)
    names = {k: v for k, v in cfg.items() if k.startswith("dataset_")}
    dataset = dataset_config(cfg["dataset"], **{k[len("dataset_") :]: v for k, v in names.items()})
    for key in ("num_tasks_test", "num_tasks_valid", "num_tasks_ood"):
        dataset[key] = eval_tasks
    cfg["dataset"] = dataset.to_dict()
    for k in names:
        del cfg[k]
    return cfg


def _stub_wandb(recorder=None):
    """The reference imports wandb at module level; run_fewshot.py uses it through the logbook and for
    histograms, run_theory.py calls ``wandb.log`` directly (kept by ``recorder``)."""
    stub = types.ModuleType("wandb")
    stub.Histogram = lambda values: float(np.nanmean(values))
    stub.init = stub.finish = lambda *a, **k: None
    stub.log = recorder.log if recorder is not None else (lambda *a, **k: None)
    sys.modules["wandb"] = stub


class Recorder:
    """A logbook: keeps every logged scalar, in order."""

    def __init__(self):
        self.logs = []

    def log(self, values):
        if values:  # the reference also logs its (empty) start and end callbacks
            self.logs.append({k: float(np.mean(np.asarray(v))) for k, v in values.items() if np.size(v) >= 1})


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reference", required=True)
    parser.add_argument("--config", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--theory", action="store_true", help="train with run_theory.py (teacher-student)")
    args = parser.parse_args(argv)
    args.reference = os.path.abspath(args.reference)  # before the chdir into it
    with open(args.config) as f:
        flat = json.load(f)
    if args.theory:
        return theory(args.reference, flat, os.path.abspath(args.out))
    eval_every, eval_tasks = flat.pop("eval_every"), flat.pop("eval_tasks")
    keep_adapted = flat.pop("twin_keep_adapted", True)
    out = os.path.abspath(args.out)

    _stub_wandb()
    os.chdir(args.reference)  # the reference reads its configs relative to its root
    sys.path.insert(0, os.path.abspath(args.reference))
    import jax
    import run_fewshot as reference
    from absl import flags
    from configs.common import dataset_config
    from jax.flatten_util import ravel_pytree
    from ml_collections import ConfigDict

    flags.FLAGS(["twin"])
    flags.FLAGS.callback = True  # the reference adds its callbacks only with this flag; we keep one of them
    kept = {"callback_decode_modules"}
    adapted = {}

    def adapt_and_keep(rng, ctx, meta_state):
        """Adapt to every test and OOD task with the reference's inner loop; keep the fast parameters."""
        hparams, hstate = meta_state.hparams, meta_state.hstate

        @jax.jit
        def adapt_all(rng, batch):
            def one(rng, dataset):
                aux = ctx.meta_learner.outer_loss(rng, hstate, hparams, dataset, ctx.steps_inner_test)[1]
                return ravel_pytree(aux[0][0][1])[0]  # (((state, params) adapted, ...), ...)

            return jax.vmap(one)(jax.random.split(rng, len(batch.train.x)), batch)

        for name, loader in (("test", ctx.metatestset), ("ood", ctx.metaoodset)):
            batch = next(iter(loader))
            adapted[f"adapted_{name}"] = np.asarray(adapt_all(rng, batch))
            adapted[f"codes_{name}"] = np.asarray(batch.train.info["embeddings"][:, 0])
        return {}

    class Experiment(reference.FewshotExperiment):
        def __init__(self, *a, **k):
            super().__init__(*a, **k)
            self.eval_every_n_steps = eval_every
            if keep_adapted:
                super().add_callback(reference.CallbackEvent.STEP, adapt_and_keep)

        def add_callback(self, onevent, callback_fn):
            if onevent == reference.CallbackEvent.STEP and callback_fn.__name__ in kept:
                super().add_callback(onevent, callback_fn)

    reference.FewshotExperiment = Experiment
    cfg = reference_config(flat, eval_tasks, dataset_config)

    recorder = Recorder()
    start = time.perf_counter()
    reference.run_fewshot(ConfigDict(cfg, type_safe=False), logbook=recorder)  # as the reference's configs
    wall = time.perf_counter() - start
    n = flat["steps_outer"]
    steps = sorted(set(range(0, n, eval_every)) | {n - 1})  # the steps at which the reference evaluates
    keys = sorted({k for entry in recorder.logs for k in entry})
    arrays = {f"log/{k}": np.array([entry.get(k, np.nan) for entry in recorder.logs]) for k in keys}
    np.savez(out, log_step=np.array(steps), wall_s=wall, device=_device(), **arrays, **adapted)


def _device() -> str:
    """The device the reference ran on, as the results store names one (``cpu:...``, ``gpu:NVIDIA H200``)."""
    import jax

    return f"{jax.default_backend()}:{jax.devices()[0].device_kind}"


def theory(reference, cfg, out):
    """Train ``cfg`` with run_theory.py's ``run`` and save every logged scalar per evaluation."""
    recorder = Recorder()
    _stub_wandb(recorder)
    os.chdir(reference)
    sys.path.insert(0, os.path.abspath(reference))
    import run_theory

    start = time.perf_counter()
    run_theory.run(cfg)
    wall = time.perf_counter() - start
    keys = sorted({k for entry in recorder.logs for k in entry})
    arrays = {f"log/{k}": np.array([entry.get(k, np.nan) for entry in recorder.logs]) for k in keys}
    np.savez(out, log_step=arrays["log/step"].astype(int), wall_s=wall, device=_device(), **arrays)


if __name__ == "__main__":
    main()
