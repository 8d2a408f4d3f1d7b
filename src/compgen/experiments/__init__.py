"""One module per section of the book. Each defines a frozen config class (``CONFIG_CLASS``), its
``PRESETS``, ``KIND`` (its folder in the results store), ``code()`` (the modules its numbers depend
on), ``shape_key(cfg)`` (configs equal there share one compiled program), ``train_group(configs)``
and ``training_cost(cfg)``; the helpers below turn those into cached, parallel runs.
"""

from __future__ import annotations

import contextvars
import os
import shutil
import time

import jax
import numpy as np
from jax.flatten_util import ravel_pytree

from compgen import checkpoint, devices, meta, parallel, results

# The checkpointer of the group being trained (set by train_and_store; None: no checkpoints).
_CHECKPOINTER = contextvars.ContextVar("compgen_checkpointer", default=None)


def check_group(configs, shape_key, varying):
    """Raise unless ``configs`` can share one compiled program: equal ``shape_key(cfg)`` and as many seeds
    each; ``varying`` names the fields allowed to differ (for the message)."""
    if any(shape_key(c) != shape_key(configs[0]) for c in configs):
        raise ValueError(f"configs trained together must differ only in {varying}")
    if len({len(c.seeds) for c in configs}) != 1:
        raise ValueError("configs trained together must have the same number of seeds")


def compile_runs(cfg, runs, init_run, outer_step, evaluate_run):
    """The jitted pieces that train every run of ``runs`` (per-run arrays stacked on axis 0) together.

    ``init_run(cfg, run) -> state``, ``outer_step(cfg, run, state) -> (state, metrics)`` and
    ``evaluate_run(cfg, run, state) -> metrics`` describe one run; they are vmapped over runs.
    Returns ``(init() -> state, chunk(state, n) -> (state, per-step metrics), evaluate(state) -> metrics)``,
    ``chunk`` running ``n`` outer steps under one ``lax.scan``. Inside :func:`compgen.devices.use_devices`
    the run axis is padded to a multiple of the device count and sharded over the devices.
    """
    if devices.current_mesh() is not None:
        return devices.compile_sharded(cfg, runs, init_run, outer_step, evaluate_run, meta.scan_steps)
    init = jax.jit(lambda: jax.vmap(lambda r: init_run(cfg, r))(runs))
    step_all = lambda state: jax.vmap(lambda r, s: outer_step(cfg, r, s))(runs, state)
    chunk = jax.jit(lambda state, n: meta.scan_steps(step_all, state, n), static_argnums=1)
    evaluate = jax.jit(lambda state: jax.vmap(lambda r, s: evaluate_run(cfg, r, s))(runs, state))
    return init, chunk, evaluate


def train_compiled(make_train, configs, describe, log=print, keep_params=False):
    """Train every seed of same-shape ``configs`` with ``make_train(configs)``, printing ``describe`` lines.

    Returns ``(history, wall_time_s)``; every array in ``history`` has a leading run axis
    (config-major, then seed). With ``keep_params`` the final meta-parameters are kept too, flattened
    per run (``history["final"]["meta"]``, (runs, P); unflatten with ``jax.flatten_util.ravel_pytree``
    of the model's ``init``).
    """
    start = time.perf_counter()
    runs, init, chunk, evaluate = make_train(configs)
    n = len(jax.tree.leaves(runs)[0])  # the run axis may be padded on several devices: keep the first n
    show = describe and (lambda m, e: describe(jax.tree.map(lambda a: a[:, :n], m),
                                              e and jax.tree.map(lambda a: a[:n], e)))
    state, history = meta.run_chunks(chunk, init(), configs[0].outer_steps, configs[0].eval_every, evaluate,
                                     show, log, _CHECKPOINTER.get())
    history = jax.tree.map(lambda a: np.moveaxis(np.asarray(a), 1, 0)[:n] if np.ndim(a) > 1 else np.asarray(a),
                           history)
    if keep_params:
        history["final"] = {"meta": np.asarray(jax.vmap(lambda p: ravel_pytree(p)[0])(state["meta"]))[:n]}
    return history, time.perf_counter() - start


def flatten_history(history):
    """``{"steps": {...}, "eval": {...}, "final": {...}, "eval_steps": a}`` -> flat ``{"steps/k": ..., "eval/k": ...,
    "final/k": ..., "eval_steps"}`` ("final" is optional)."""
    flat = {f"steps/{k}": v for k, v in history["steps"].items()}
    flat.update({f"eval/{k}": v for k, v in history["eval"].items()})
    flat.update({f"final/{k}": v for k, v in history.get("final", {}).items()})
    flat["eval_steps"] = history["eval_steps"]
    return flat


def shape_groups(section, configs):
    """``configs`` grouped by compiled program (equal ``shape_key`` and number of seeds), in first-seen order."""
    groups = {}
    for c in configs:
        groups.setdefault((section.shape_key(c), len(c.seeds)), []).append(c)
    return list(groups.values())


def split_jobs(groups, workers):
    """Halve the largest group until there are ``workers`` jobs (or none has two configs left), so
    that a few large groups still keep every worker busy."""
    jobs = list(groups)
    while len(jobs) < workers and max(len(j) for j in jobs) > 1:
        big = max(range(len(jobs)), key=lambda i: len(jobs[i]))
        group = jobs.pop(big)
        jobs += [group[: len(group) // 2], group[len(group) // 2:]]
    return jobs


def train_and_store(section, configs, log=print, checkpoint_every=None):
    """Train ``configs`` of ``section`` (grouped by shape, one compiled program per group); store each.

    With ``checkpoint_every`` = N > 0 (default: ``$COMPGEN_CHECKPOINT_EVERY``, else 0 = off) each group
    saves its training state every N chunks under :func:`compgen.checkpoint.group_dir`, resumes from
    there when started again, and removes its checkpoints once its results are stored.
    """
    if checkpoint_every is None:
        checkpoint_every = int(os.environ.get("COMPGEN_CHECKPOINT_EVERY") or 0)
    for group in shape_groups(section, configs):
        log(f"[train] {section.describe_group(group)}")
        folder = checkpoint.group_dir(section, group) if checkpoint_every > 0 else None
        saver = checkpoint.Checkpointer(folder, checkpoint_every, log=log) if folder else None
        token = _CHECKPOINTER.set(saver)
        try:
            history, wall = section.train_group(group, log)
        finally:
            _CHECKPOINTER.reset(token)
        flat = flatten_history(history)
        n_seeds = len(group[0].seeds)
        for j, config in enumerate(group):
            arrays = {k: (v if k == "eval_steps" else v[j * n_seeds:(j + 1) * n_seeds]) for k, v in flat.items()}
            results.save(section.KIND, config, arrays, wall / len(group), code=section.code())
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)


def run(section, configs, force=False, workers=None, log=print):
    """Results for each config (a list, in order): dicts of arrays with a leading seed axis.

    Stored results are loaded unless ``force``; the rest are trained, split over ``workers``
    processes (default: one per CPU core, 1 on an accelerator), and stored.
    """
    configs = list(configs)
    loaded, todo = {}, []
    for c in configs:
        stored = None if force else results.load(section.KIND, c, code=section.code())
        if stored is None:
            if c not in todo:
                todo.append(c)
        else:
            loaded[c] = stored[0]
            prov = stored[1]["provenance"]
            log(f"[results] reusing stored run {results.config_hash(c, section.code())} ({prov['date']}, "
                f"{prov['wall_time_s']:.0f} s on {prov['device']}, commit {prov['git_commit'][:8]})")
    if todo:
        workers = parallel.default_workers(len(todo)) if workers is None else workers
        jobs = split_jobs(shape_groups(section, todo), workers)
        if workers > 1 and len(jobs) > 1:
            costs = [sum(section.training_cost(c) for c in job) for job in jobs]
            parallel.run_workers(section.__name__, jobs, costs, workers, log)
        else:
            train_and_store(section, todo, log)
        for c in todo:
            stored = results.load(section.KIND, c, code=section.code())
            if stored is None:
                raise RuntimeError(f"the run of {c} was not found in the store after training: it was stored "
                                   "under another code version (was the library edited during the run?)")
            loaded[c] = stored[0]
    return [loaded[c] for c in configs]


def mean_std(values, digits=3):
    """``"mean ± std"`` of ``values`` (NaNs ignored); ``"value (1 seed)"`` when only one value is finite, since
    a spread of one value says nothing."""
    values = np.asarray(values, float)
    if np.isfinite(values).sum() == 1:
        return f"{np.nanmean(values):.{digits}f} (1 seed)"
    return f"{np.nanmean(values):.{digits}f} ± {np.nanstd(values):.{digits}f}"
