"""The authors' outer step at one configuration: its serial work per inner step, or its seconds.

Runs inside the twin virtualenv (``make twin-env REFERENCE=<checkout>``), never in the project's: it imports the
reference checkout given by ``--reference`` (smonsays/modular-hyperteacher) and, of this project, only
``tools/hlo_count.py`` and the wandb stub and config translation of ``tools/twin_driver.py``. The reference's own
code builds the step:

* a few-shot case runs ``run_fewshot(cfg)`` with its experiment's ``run`` replaced by one that keeps the experiment
  and its initial state, so nothing trains; the step is the experiment's jitted ``step`` (their
  ``ModelAgnosticMetaLearning.update``) on the next meta-batch of their training loader;
* teacher-student runs ``run_theory.run(cfg)`` until it first calls its jitted ``meta_train`` (a ``lax.scan`` of
  ``log_every`` outer steps, its tasks and inputs drawn inside), which is kept and not run.

``--count`` lowers the step for the CPU (one outer step) and counts its serial work per inner step
(:func:`hlo_count.count_lowered`); ``--time N`` runs one untimed outer step (compilation) and then ``N``, each
with its meta-batch drawn from their loader as their training loop does (teacher-student: chunks of ``--chunk``
steps, as ``meta_train`` runs them), and reports the median seconds per outer step. Both print one JSON line.

Usage: authors_step.py --reference DIR --config CASE.json (--count | --time N)

``CASE.json`` is ``{"case": name, "theory": bool, "inner_steps": int, "config": the reference's flat config}``, as
``tools/op_counts.py`` writes it from our paper configuration (:func:`tools.twin.translate`).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import hlo_count  # noqa: E402
from twin_driver import _stub_wandb, reference_config  # noqa: E402

EVAL_TASKS = 128  # tasks of each evaluation set the reference builds (never used here)


def _import_reference(reference: str):
    _stub_wandb()
    os.chdir(reference)  # the reference reads its configs relative to its root
    sys.path.insert(0, reference)


def fewshot_step(reference: str, flat: dict, steps_outer: int):
    """``(lower, meta_state, next_batch)``: the reference's jitted outer step as ``lower(rng, meta_state, batch)``
    lowers it (its experiment is a static argument), its initial state and a function drawing the next meta-batch
    of its training loader (``steps_outer`` of them)."""
    _import_reference(reference)
    import run_fewshot
    from absl import flags
    from configs.common import dataset_config
    from ml_collections import ConfigDict

    flags.FLAGS(["authors_step"])
    kept = {}

    class Experiment(run_fewshot.FewshotExperiment):
        def run(self, rng, meta_state):
            kept.update(experiment=self, meta_state=meta_state)
            return meta_state

    run_fewshot.FewshotExperiment = Experiment
    cfg = {k: v for k, v in flat.items() if k not in ("eval_every", "eval_tasks", "twin_keep_adapted")}
    cfg["steps_outer"] = steps_outer  # the loader's length; the paper's schedules are constant
    cfg = reference_config(cfg, EVAL_TASKS, dataset_config)
    run_fewshot.run_fewshot(ConfigDict(cfg, type_safe=False), logbook=None)
    experiment = kept["experiment"]
    batches = iter(experiment.metatrainset)
    lower = lambda *args: Experiment.step.lower(experiment, *args)  # noqa: E731
    return lower, kept["meta_state"], lambda: next(batches)


class _Captured(Exception):
    pass


def theory_step(reference: str, flat: dict, chunk: int):
    """``(meta_train, args)``: run_theory.py's jitted ``meta_train`` (``chunk`` outer steps) and its first
    arguments ``(rng, student_params, optim_state)``."""
    _import_reference(reference)
    import jax
    import run_theory

    real_jit, kept = jax.jit, {}

    def jit(fn=None, **options):
        if getattr(fn, "__name__", "") != "meta_train":
            return real_jit(fn, **options)

        def capture(*args):
            kept.update(fn=real_jit(fn, **options), args=args)
            raise _Captured

        return capture

    cfg = dict(flat, log_every=chunk)
    cfg["train_step"] = -(-chunk // cfg["n_task"])  # run() trains train_step x n_task steps, log_every at a time
    jax.jit = jit
    try:
        run_theory.run(cfg)
    except _Captured:
        pass
    finally:
        jax.jit = real_jit
    return kept["fn"], kept["args"]


def count(case: dict, reference: str) -> dict:
    """Both counts of the case's step (:func:`hlo_count.count_lowered`), lowered for the CPU."""
    import jax

    if case["theory"]:
        meta_train, args = theory_step(reference, case["config"], 1)
        lowered = meta_train.lower(*args)
    else:
        lower, state, next_batch = fewshot_step(reference, case["config"], 1)
        lowered = lower(jax.random.PRNGKey(0), state, next_batch())
    return hlo_count.count_lowered(lowered, case["inner_steps"])


def timed(case: dict, reference: str, n: int, chunk: int) -> dict:
    """Median seconds per outer step over ``n`` timed calls after an untimed one, and the compile seconds."""
    import jax

    times = []
    if case["theory"]:
        meta_train, (rng, params, state) = theory_step(reference, case["config"], chunk)
        start = time.perf_counter()
        compiled = meta_train.lower(rng, params, state).compile()
        compile_s = time.perf_counter() - start
        for _ in range(n + 1):
            start = time.perf_counter()
            rng = jax.random.split(rng)[0]
            params, state, metric = compiled(rng, params, state)
            jax.block_until_ready((params, state))
            times.append((time.perf_counter() - start) / chunk)
    else:
        chunk = 1
        lower, state, next_batch = fewshot_step(reference, case["config"], n + 2)
        rng = jax.random.PRNGKey(0)
        start = time.perf_counter()
        compiled = lower(rng, state, next_batch()).compile()
        compile_s = time.perf_counter() - start
        for _ in range(n + 1):
            start = time.perf_counter()
            rng, rng_step = jax.random.split(rng)
            state, metrics = compiled(rng_step, state, next_batch())
            jax.block_until_ready(state)
            times.append(time.perf_counter() - start)
    return {
        "s_per_step": statistics.median(times[1:]),
        "timed_steps": n,
        "chunk_steps": chunk,
        "compile_s": compile_s,
        "peak_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6,
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reference", required=True, help="a checkout of smonsays/modular-hyperteacher")
    parser.add_argument("--config", required=True, help="the case as JSON (module docstring)")
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--count", action="store_true", help="count the serial work per inner step")
    what.add_argument("--time", type=int, metavar="N", help="time N outer steps after an untimed one")
    parser.add_argument("--chunk", type=int, default=2, help="teacher-student: outer steps per meta_train call")
    args = parser.parse_args(argv)
    reference = os.path.abspath(args.reference)
    with open(args.config) as f:
        case = json.load(f)
    import jax

    found = count(case, reference) if args.count else timed(case, reference, args.time, args.chunk)
    found.update(case=case["case"], jax=jax.__version__, device_kind=jax.devices()[0].device_kind)
    print(json.dumps(found))
    return 0


if __name__ == "__main__":
    sys.exit(main())
