"""The engine: train a section's configs, one compiled program per config, and keep the results.

:func:`train_or_load` is what notebooks, the command line, sweeps and tools call: results in a
:class:`compgen.results.Store` are loaded, the rest are trained (by a backend: this process, worker processes - by
default one per CPU core -, one thread per device, or Ray tasks) and stored. Every config is trained by its own
program - its seeds vmapped, its outer steps a ``lax.scan``, ``eval_every`` steps per call (:func:`run_steps`) - so
the numbers stored for a config do not depend on what else was trained, by how many workers, or through which entry
point. Configs of equal shapes share the jitted program (same process) or the persistent compilation cache (other
processes), so a figure's splits or seeds compile once. A config at the paper's sizes trains alone in a worker that
shards its tasks over every CPU core (:func:`compgen.devices.shard_count` decides from the config and the machine
only); otherwise each worker runs on a core of its own (:mod:`compgen.cores`), so that every worker computes with a
one-thread pool: on a CPU, XLA splits some operations over the threads a process may use, and a process with more
cores can compute other numbers for a few configs (:mod:`compgen.cores` says which).

Between calls the driver prints a progress line, evaluates, saves a checkpoint if asked
(:class:`compgen.checkpoint.Checkpointer`) and checks the run: a run whose outer updates have all been
non-finite for :data:`DIVERGED_STEPS` steps (or a whole call's steps) stops with :class:`TrainingDiverged` and is not
stored.

Workers: ``python -m compgen.runner <job.json>`` trains the configs of the section that the job file names (found
in :data:`compgen.catalog.SECTIONS`, see :func:`run_workers`); it deletes the job file once read and ends when
its parent process dies. A config is trained under a lock in the store (:func:`compgen.storage.lock`), so two
processes asked for it train it once; the store and checkpoint folders are checked before anything trains.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

from compgen import allocator, catalog, checkpoint, cores, devices, memory, params, precision, results, storage, timing

DIVERGED_STEPS = 100  # consecutive non-finite outer updates after which a run is stopped
# A training loss above this stops a run as diverged: every section's losses start below 10 (a half-MSE, a KL or a
# cross-entropy of standardised targets) and fall from there.
DIVERGED_LOSS = 1e6
MAX_WORKERS = 1024  # the most training processes $COMPGEN_WORKERS may ask for (at most one per job is started)


class TrainingDiverged(RuntimeError):
    """A run whose outer updates stayed non-finite; it is not stored."""


# The errors a worker reports to its driver by name, in the file its job names (``error_file``), raised there again:
# a config refused before training first, then a diverged run (the errors a user can act on).
REPORTED_ERRORS = {"ParameterError": params.ParameterError, "TrainingDiverged": TrainingDiverged}


def program(section, cfg):
    """The jitted :class:`compgen.section.Program` of ``cfg`` with the device's knobs (:func:`compgen.devices.resolve`)
    and the task sharding of the enclosing :func:`compgen.devices.shard_tasks`, if any (:meth:`Section.program
    <compgen.section.Section.program>`: one per shape, built once per process)."""
    return section.program(devices.resolve(section, cfg), devices.task_mesh())


# --------------------------------------------------------------------------------------------- one run


def run_steps(
    steps_fn,
    state,
    num_steps,
    steps_per_call,
    evaluate=None,
    describe=None,
    log=print,
    saver=None,
    check=None,
    clock=None,
):
    """Drive a compiled training loop, ``steps_per_call`` outer steps per call, printing progress between calls.

    ``steps_fn(state, n) -> (state, metrics)`` runs ``n`` outer steps (``n`` static; at most two distinct
    values, so at most two compilations). ``evaluate(state) -> dict`` is called at step 0 and after each
    call; ``describe(step_metrics, eval_metrics) -> str`` formats the progress line and ``check(step_metrics,
    done, evaluation, first_evaluation)`` may raise to stop the run. Returns ``(state, history)``: the per-step
    metrics concatenated, the evaluations stacked, and the steps at which they were taken.

    With ``saver`` (a :class:`compgen.checkpoint.Checkpointer`) the run starts from its latest valid checkpoint
    if there is one and saves the state and history every ``saver.every`` calls; the returned history is the
    same as an uninterrupted run's. ``clock`` (a :class:`compgen.timing.Stopwatch`) adds up the seconds spent in
    calls ("train") and evaluations ("evaluate"), compilation apart.
    """
    clock = timing.Stopwatch() if clock is None else clock
    step_metrics, evals, eval_steps, done = [], [], [], 0
    restored = None if saver is None else saver.restore(state)
    if restored is not None:
        state, progress = restored
        step_metrics, evals, eval_steps, done = (progress[k] for k in ("steps", "evals", "eval_steps", "done"))
        log(f"resumed from step {done}/{num_steps}")
    elif evaluate is not None:
        with clock.measure("evaluate"):
            evals.append(jax.device_get(evaluate(state)))
        eval_steps.append(0)
    start, first, calls = time.perf_counter(), done, 0
    while done < num_steps:
        n = min(steps_per_call, num_steps - done)
        with clock.measure("train"):
            state, metrics = steps_fn(state, n)
            metrics = jax.device_get(metrics)
        done += n
        step_metrics.append(metrics)
        evaluation = None
        if evaluate is not None:
            with clock.measure("evaluate"):
                evaluation = jax.device_get(evaluate(state))
            evals.append(evaluation)
            eval_steps.append(done)
        if check is not None:
            check(metrics, done, evaluation, evals[0] if evals else None)
        rate = (done - first) / (time.perf_counter() - start)
        line = f"step {done:>7d}/{num_steps}  {rate:7.1f} steps/s  ETA {(num_steps - done) / rate:6.0f} s"
        if describe is not None:
            line += "  " + describe(metrics, evaluation)
        log(line)
        calls += 1
        if saver is not None and calls % saver.every == 0 and done < num_steps:
            saver.save(state, {"done": done, "steps": step_metrics, "evals": evals, "eval_steps": eval_steps})
    history = {"steps": jax.tree.map(lambda *xs: jnp.concatenate(xs, axis=0), *step_metrics)}
    if evals:
        history["eval"] = jax.tree.map(lambda *xs: jnp.stack(xs, axis=0), *evals)
        history["eval_steps"] = jnp.asarray(eval_steps)
    return state, history


def _divergence_check(section, configs, diverged):
    """A check for :func:`run_steps` over the lanes of ``configs`` (their seeds' rows in order). A config diverged,
    and is added to ``diverged`` ({config: message}), once one of its seeds

    * had every outer update non-finite for ``min(DIVERGED_STEPS, eval_every)`` steps,
    * ends a call of steps with a non-finite training loss or one above :data:`DIVERGED_LOSS`, or
    * has an evaluated loss that is not finite although it was at the first evaluation (other metrics, such as an
      alignment or R² computed from a degenerate decoder on a small evaluation set, may lose their value without
      the run diverging);

    once every config has diverged, the run stops with :class:`TrainingDiverged`."""
    cfg = configs[0]
    limit = min(DIVERGED_STEPS, cfg.eval_every)
    offsets = np.cumsum([0] + [len(c.seeds) for c in configs])

    def why_per_run(step_metrics, evaluation, first):
        streak = np.asarray(step_metrics["streak"])[-1]  # (runs,)
        loss = np.asarray(step_metrics["loss"], float)[-1]
        reasons = [[] for _ in streak]
        for run in range(len(streak)):
            if streak[run] >= limit:
                reasons[run].append(f"every outer update was non-finite for the last {int(streak[run])} steps")
            if not np.isfinite(loss[run]) or loss[run] > DIVERGED_LOSS:
                reasons[run].append(f"the training loss reached {loss[run]:.3g} (bound {DIVERGED_LOSS:g})")
        for name, value in (evaluation or {}).items():
            if not name.endswith("loss"):  # other metrics may lose their value in a degenerate evaluation set
                continue
            now, before = (np.asarray(a, float).reshape(len(streak), -1) for a in (value, first[name]))
            for run in np.flatnonzero((np.isfinite(before) & ~np.isfinite(now)).any(axis=1)):
                reasons[run].append(f"its evaluated {name} is no longer finite")
        return reasons

    def check(step_metrics, done, evaluation=None, first=None):
        reasons = why_per_run(step_metrics, evaluation, first)
        for c, start, end in zip(configs, offsets[:-1], offsets[1:]):
            bad = {seed: r for seed, r in zip(c.seeds, reasons[start:end]) if r}
            if c in diverged or not bad:
                continue
            rates = {k: getattr(c, k) for k in ("inner_lr", "outer_lr") if hasattr(c, k)}
            seed, what = next(iter(bad.items()))
            diverged[c] = (
                f"{section.name}: {section.label(c)}: diverged at step {done} (seed(s) {list(bad)}; seed {seed}: "
                f"{'; '.join(what)}; learning rates {rates}); the run is stopped and not stored"
            )
        if len(diverged) == len(configs):
            raise TrainingDiverged("; ".join(diverged.values()))

    return check


def train(section, cfg, log=print, saver=None):
    """Train every seed of ``cfg`` with its program; ``(history, seconds)``.

    Every array of ``history`` has a leading seed axis; with ``section.keep_params`` it also holds the final
    meta-parameters, flattened per seed (``history["final"]["meta"]``, (seeds, P)). ``seconds``: the run's
    ``wall`` time and its parts (:class:`compgen.timing.Stopwatch`): ``compile``, ``setup`` (task arrays and
    initial state), ``train`` (the calls of outer steps) and ``evaluate``; and the device's ``knobs`` it ran with
    (:func:`fitting_program`).
    """
    return train_lanes(section, [cfg], log, saver)[0]


def train_lanes(section, configs, log=print, saver=None):
    """Train ``configs`` of one shape (:meth:`Section.shape_key <compgen.section.Section.shape_key>`) as lanes of one
    program: their seeds' runs stacked and vmapped together, their steps in the same calls. ``[(history, seconds)]``
    per config, as :func:`train` returns for one (``seconds`` holds the whole program's times and ``lanes``, the
    number of configs it trained). Each config's numbers equal its training alone up to float32 round-off; on an
    accelerator the lanes cost little more than one config, on a CPU proportionally more (:func:`use_lanes`). A config
    whose run diverges (:func:`_divergence_check`) is not returned: the others are, and then :class:`TrainingDiverged`
    is raised for it, its exception carrying them as ``trained``."""
    if len({section.shape_key(c) for c in configs}) != 1:
        raise ValueError("train_lanes: the configs must share one shape (section.shape_key)")
    start, clock, cfg = time.perf_counter(), timing.Stopwatch(), configs[0]
    with clock.measure("setup"):
        runs = section.run_arrays(configs)
        prog, knobs = fitting_program(section, cfg, runs, log)
        initial = jax.block_until_ready(prog.init(runs))
    offsets = np.cumsum([0] + [len(c.seeds) for c in configs])

    def lanes(full, i, axis=1):  # config i's runs of an array whose axis ``axis`` holds every lane's runs
        return np.take(full, np.arange(offsets[i], offsets[i + 1]), axis=axis) if np.ndim(full) > axis else full

    def show(metrics, evaluation):  # metrics: (steps, runs, ...); an evaluation: (runs, ...)
        if len(configs) == 1:
            return section.progress(cfg, metrics, evaluation)
        return f"{len(configs)} lanes; first: " + section.progress(
            cfg,
            jax.tree.map(lambda a: lanes(a, 0), metrics),
            evaluation and jax.tree.map(lambda a: lanes(a, 0, axis=0), evaluation),
        )

    diverged = {}
    state, history = run_steps(
        lambda s, k: prog.steps(runs, s, k),
        initial,
        cfg.outer_steps,
        cfg.eval_every,
        lambda s: prog.evaluate(runs, s),
        show,
        log,
        saver,
        _divergence_check(section, configs, diverged),
        clock,
    )
    history = jax.tree.map(np.asarray, history)
    seconds = {"wall": round(time.perf_counter() - start, 3), **clock.seconds(), "knobs": knobs}
    if len(configs) > 1:
        seconds["lanes"] = len(configs)
    flat_params = None
    if section.keep_params:
        flat_params = np.asarray(jax.vmap(lambda p: ravel_pytree(p)[0])(state["meta"]))
    out = []
    for i, c in enumerate(configs):
        if c in diverged:
            continue
        own = jax.tree.map(lambda a: np.moveaxis(lanes(a, i), 1, 0) if np.ndim(a) > 1 else a, history)
        if flat_params is not None:
            own["final"] = {"meta": flat_params[offsets[i] : offsets[i + 1]]}
        out.append((own, dict(seconds)))
    if diverged:
        error = TrainingDiverged("; ".join(diverged.values()))
        error.trained = dict(zip([c for c in configs if c not in diverged], out))
        raise error
    return out


def lane_groups(section, configs, lanes=None) -> list:
    """``configs`` in the groups that train as one program each: with ``lanes`` (default :func:`use_lanes`) those of
    one shape together, else one by one; in order of first appearance."""
    if not (use_lanes() if lanes is None else lanes):
        return [[c] for c in configs]
    groups = {}
    for c in configs:
        groups.setdefault(section.shape_key(c), []).append(c)
    return list(groups.values())


LANES_ENV = "COMPGEN_LANES"  # "1" lanes, "0" one program per config; unset: the backend decides (use_lanes)


def use_lanes(backend=None) -> bool:
    """Whether configs of one shape train as lanes of one program (:func:`train_lanes`): ``$COMPGEN_LANES`` (0 or 1)
    where set, else on an accelerator, where a step of these small learners is bound by latency and launches, so lanes
    cost little more than one config; not on a CPU, where stacking configs cost proportionally (measured: a step of
    two goals configs stacked took as long as the two apart). One program per config keeps a config's stored bytes
    independent of what trains beside it; lanes keep them equal up to float32 round-off."""
    return params.env_flag(LANES_ENV, (jax.default_backend() if backend is None else backend) != "cpu")


def fitting_program(section, cfg, runs, log=print):
    """``(program, knobs)``: the program of ``cfg`` with the device's knobs (:func:`compgen.devices.resolve`), or, on
    an accelerator, of the first lighter version (:func:`compgen.devices.lighter`) whose traced programs fit its memory
    (:func:`compgen.memory.check`: traces, compiles nothing; jit reuses the traces). A config that fits in no version
    is a :class:`compgen.params.ParameterError`."""
    chosen = devices.resolve(section, cfg)
    refusal = None
    for candidate in (chosen, *devices.lighter(chosen, cfg)):
        prog = section.program(candidate, devices.task_mesh())
        try:  # a lighter version, chosen by a lower bound, must fit twice over
            memory.check(section, candidate, prog, runs, memory.device_bytes() // (1 if candidate is chosen else 2))
        except params.ParameterError as error:
            refusal = refusal or error
            continue
        knobs = {k: getattr(candidate, k) for k in devices.KNOBS if hasattr(candidate, k)}
        if candidate is not chosen:
            log(f"[memory] {section.label(cfg)} fits the device with {knobs}")
        return prog, knobs
    raise refusal


def flatten_history(history) -> dict:
    """``{"steps": {...}, "eval": {...}, "final": {...}, "eval_steps": a}`` -> ``{"steps/k", "eval/k", "final/k",
    "eval_steps"}`` ("final" is optional)."""
    flat = {f"steps/{k}": v for k, v in history["steps"].items()}
    flat.update({f"eval/{k}": v for k, v in history["eval"].items()})
    flat.update({f"final/{k}": v for k, v in history.get("final", {}).items()})
    flat["eval_steps"] = history["eval_steps"]
    return flat


def checkpoint_interval(value=None) -> int:
    """Chunks between checkpoints: ``value``, else ``$COMPGEN_CHECKPOINT_EVERY``, else 0 (off)."""
    if value is None:
        return params.env_int(
            "COMPGEN_CHECKPOINT_EVERY", 0, ge=0, meaning=" (evaluations between checkpoints, 0 = off)"
        )
    return params.check_int("checkpoint_every", value, ge=0)


def check_environment() -> None:
    """Refuse a bad ``COMPGEN_*`` environment variable before anything is loaded or trained."""
    params.check_environment_names()
    params.env_path("COMPGEN_RESULTS")
    params.env_path("COMPGEN_CHECKPOINTS")
    checkpoint_interval()
    default_workers(1)
    params.env_flag(devices.SHARD_ENV)
    params.env_flag(cores.PIN_ENV)
    params.env_flag(LANES_ENV)
    precision.requested()


def train_and_store(section, configs, store, log=print, checkpoint_every=None, force=False, lanes=None):
    """Train each of ``configs`` (one program each; same-shape ones share it) and keep its result in ``store``
    (a :class:`compgen.results.Store`). With ``lanes`` (default :func:`use_lanes`: on an accelerator) the configs of
    one shape train together as lanes of one program (:func:`train_lanes`), each still stored under its own key.

    With ``checkpoint_every`` = N > 0 (default ``$COMPGEN_CHECKPOINT_EVERY``, else 0 = off) a run saves its
    training state every N evaluations in the store's checkpoint folder (lanes: one folder for the group,
    :meth:`compgen.results.Store.lanes_checkpoint_dir`), resumes from there when started again, and removes its
    checkpoints once its result is stored.

    A config is trained and stored holding its lock in the store (:func:`compgen.storage.lock`, beside its entry),
    so two processes never train it at once: the second waits, then finds it stored and does not train it
    (unless ``force``).
    """
    every = checkpoint_interval(checkpoint_every)
    for group in lane_groups(section, configs, lanes):
        _train_and_store_group(section, group, store, log, every, force)


def _train_and_store_group(section, configs, store, log, every, force):
    """Train and store ``configs`` (one shape) as lanes of one program, holding each one's lock (in the order of
    their entries, so that two processes never wait on each other)."""
    with contextlib.ExitStack() as held:
        for cfg in sorted(configs, key=lambda c: store.paths(section, c)[0].name):
            where = store.paths(section, cfg)[0].with_suffix(".lock")
            label = section.label(cfg)
            held.enter_context(
                storage.lock(
                    where, lambda: log(f"[results] {label} is being trained by another process (lock {where}); waiting")
                )
            )
        todo = []
        for cfg in configs:
            if not force and store.load(section, cfg, log=log) is not None:
                log(f"[results] {section.label(cfg)} was stored by another process meanwhile; it is not trained again")
            else:
                todo.append(cfg)
                log(f"[train] {section.label(cfg)}")
        if not todo:
            return
        folder = None
        if every:
            folder = (
                store.checkpoint_dir(section, todo[0]) if len(todo) == 1 else store.lanes_checkpoint_dir(section, todo)
            )
        saver = checkpoint.Checkpointer(folder, every, log=log) if folder else None
        try:
            trained = train_lanes(section, todo, log, saver)
        except TrainingDiverged as error:
            _store_all(section, getattr(error, "trained", {}).items(), store)
            raise
        _store_all(section, zip(todo, trained), store)
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)


def _train_here(section, configs, store, log, every, force, keep_going) -> dict:
    """Train and store ``configs`` in this process, group by group (:func:`lane_groups`); ``{config: exception}`` of
    those that failed (with ``keep_going``; else the first failure raises). A group of lanes that fails otherwise
    than by divergence (its diverged lanes are known and the others stored) is trained again config by config, so
    that one failing config does not take its lane siblings with it."""
    errors = {}
    for group in lane_groups(section, configs):
        try:
            train_and_store(section, group, store, log, every, force)
            continue
        except Exception as error:  # noqa: BLE001  (one failing run must not stop the others)
            if not keep_going:
                raise
            failed = [c for c in group if store.load(section, c, log=log) is None]
            if len(group) == 1 or isinstance(error, TrainingDiverged):
                errors.update({c: error for c in failed})
                continue
            log(f"[train] {len(group)} lanes failed together ({type(error).__name__}: {error}); training each alone")
        for c in failed:
            try:
                train_and_store(section, [c], store, log, every, force)
            except Exception as error:  # noqa: BLE001
                errors[c] = error
    return errors


def _store_all(section, trained, store):
    for cfg, (history, seconds) in trained:
        knobs = seconds.pop("knobs")
        store.save(section, cfg, flatten_history(history), seconds["wall"], seconds=seconds, knobs=knobs)


# --------------------------------------------------------------------------------------------- many runs

BACKENDS = ("local", "workers", "devices", "ray")


def load(section, cfg, store=None, log=print):
    """The stored result of ``cfg`` (a dict of arrays with a leading seed axis) in ``store`` (default
    :meth:`compgen.results.Store.default`), or ``None``."""
    stored = (store or results.Store.default()).load(section, cfg, log=log)
    return None if stored is None else stored[0]


def train_or_load(
    section,
    configs,
    store=None,
    backend: str = "workers",
    force: bool = False,
    workers: int | None = None,
    checkpoint_every=None,
    log=print,
    failures: dict | None = None,
    ray_options: dict | None = None,
):
    """Results for each config (a list, in order): dicts of arrays with a leading seed axis.

    Results in ``store`` (a :class:`compgen.results.Store`; default :meth:`~compgen.results.Store.default`) are
    loaded unless ``force``; the rest are trained by ``backend`` and stored there:

    * ``"local"``: in this process, one config after another;
    * ``"workers"``: in ``workers`` processes (default one per CPU core, 1 on an accelerator); a config that
      :func:`compgen.devices.shard_count` shards trains first, alone in one worker with its tasks sharded over
      that many host devices;
    * ``"devices"``: one thread per local device, each config on one device;
    * ``"ray"``: one Ray task per config (``ray_options``: ``address``, ``num_gpus``, ``num_cpus``), each training
      into a private store and returning its files, so workers need no shared file system.

    Every config is trained by its own program, so its numbers do not depend on the backend. A config whose
    training fails raises; with ``failures`` (a dict) its error is recorded there (``{config: message}``) instead
    and its result is ``None``.
    """
    if backend not in BACKENDS:
        raise params.ParameterError(f"backend must be one of {BACKENDS}, got {backend!r}")
    store = results.Store.default() if store is None else store
    configs = list(configs)
    check_environment()  # a bad value fails before anything loads or trains
    every = checkpoint_interval(checkpoint_every)
    loaded, todo = {}, []
    for c in dict.fromkeys(configs):
        stored = None if force else store.load(section, c, log=log)
        if stored is None:
            todo.append(c)
            continue
        loaded[c] = stored[0]
        prov = stored[1]["provenance"]
        log(
            f"[results] reusing {section.label(c)}: run {store.paths(section, c)[0].stem} ({prov['date']}, "
            f"{prov['wall_time_s']:.0f} s on {prov['device']}, commit {prov['git_commit'][:8]})"
        )
    if not todo:
        return [loaded[c] for c in configs]
    store.check_writable(section, bool(every))  # a store that cannot take the results fails now, not after training
    timing.gemm_gflops()  # the machine's speed, read before the workers compete for its cores; every run records it
    errors = {}  # config -> the exception its training raised
    if backend == "workers":  # a config sharded over every core (devices.shard_count) trains first, alone
        shards = {c: 1 if devices.task_mesh() is not None else devices.shard_count(section, c) for c in todo}
        for c in (c for c in todo if shards[c] > 1):
            run_workers(section, [[c]], 1, store, log, every, shards=shards[c], force=force)
        rest = [c for c in todo if shards[c] == 1]
        slots = default_workers(sys.maxsize) if workers is None else workers  # processes this machine runs at once
        jobs = balance(rest, min(slots, len(rest)), section)
        # in workers when several run at once, or one job that a worker trains as it would beside others (on a core
        # of its own, so with the same numbers: compgen.cores)
        if slots > 1 and (len(jobs) > 1 or cores.shares(slots)):
            run_workers(section, jobs, slots, store, log, every, force=force)
        elif rest:
            errors = _train_here(section, rest, store, log, every, force, keep_going=failures is not None)
    elif backend == "local":
        errors = _train_here(section, todo, store, log, every, force, keep_going=failures is not None)
    elif backend == "devices":
        log(f"[train] one config per device at a time over {jax.local_device_count()} device(s): {jax.local_devices()}")
        job = lambda c, job_log: train_and_store(section, [c], store, job_log, every, force)
        errors = dict(devices.train_on_devices(job, todo, log=log))
    else:
        errors = dict(_train_on_ray(section, todo, store, every, log, **(ray_options or {})))
    if errors and failures is None:
        raise next(iter(errors.values()))
    for c in errors:
        log(f"[train] FAILED {section.label(c)}: {errors[c]}")
    for c in todo:
        if c in errors:
            failures[c] = f"{type(errors[c]).__name__}: {errors[c]}"
            loaded[c] = None
            continue
        stored = store.load(section, c, log=log)
        if stored is None:
            raise RuntimeError(
                f"the run of {c} was not found in the store after training: it was stored "
                "under another code version (was the library edited during the run?)"
            )
        loaded[c] = stored[0]
    return [loaded[c] for c in configs]


def _train_remote(section_name: str, config: dict, checkpoint_every, checkpoints: str) -> dict:
    """A Ray task: train one config into a private store; returns its files (path in the store -> bytes)."""
    section = catalog.get(section_name)
    with tempfile.TemporaryDirectory() as root:
        store = results.Store(root, checkpoints)
        train_and_store(section, [section.config_from_dict(config)], store, print, checkpoint_every)
        return {str(p.relative_to(root)): p.read_bytes() for p in Path(root).rglob("*") if p.is_file()}


def store_returned(section, config, files: dict, store, log=print) -> None:
    """Write the files a remote worker returned for ``config`` into ``store``: only the entry of that config
    (``<section>/<hash>.result`` and ``.json``; any other name, a path with separators or ``..`` included, is
    refused), each written atomically, and never over a valid entry already there."""
    entry, sidecar = store.paths(section, config)
    expected = {f"{section.name}/{entry.name}": entry, f"{section.name}/{sidecar.name}": sidecar}
    unexpected = sorted(set(files) - set(expected))
    if unexpected or not isinstance(files.get(f"{section.name}/{entry.name}"), bytes):
        raise RuntimeError(
            f"the worker returned {sorted(files)[:4]} instead of the entry {sorted(expected)} of its config: refused"
        )
    if store.load(section, config, log=log) is not None:
        log(f"[train] {entry} is already stored: kept")
        return
    entry.parent.mkdir(parents=True, exist_ok=True)
    for name in sorted(files, key=lambda n: n.endswith(".json")):  # the .result first: a .json alone is damage
        if not isinstance(files[name], bytes):
            raise RuntimeError(f"the worker returned {name} as {type(files[name]).__name__}, not bytes: refused")
        storage.write_atomic(expected[name], files[name])


def _train_on_ray(section, todo, store, every, log, address=None, num_gpus=0, num_cpus=1):
    """The ``"ray"`` backend of :func:`train_or_load`: ``[(config, error)]`` for the configs that failed."""
    try:
        import ray
    except ImportError:
        raise RuntimeError("the ray backend needs Ray: pip install 'compgen[cluster]' (or pip install ray)") from None
    if not ray.is_initialized():
        ray.init(address=address)
    task = ray.remote(_train_remote).options(num_gpus=num_gpus, num_cpus=num_cpus)
    checkpoints = str(store.checkpoints)
    pending = {task.remote(section.name, dataclasses.asdict(c), every, checkpoints): c for c in todo}
    failed = []
    while pending:
        (ref,), _ = ray.wait(list(pending), num_returns=1)
        config = pending.pop(ref)
        try:
            store_returned(section, config, ray.get(ref), store, log)
            if store.load(section, config, log=log) is None:
                raise RuntimeError(
                    "the worker stored the run under another config hash: is its compgen the same version as the "
                    "driver's?"
                )
        except Exception as error:  # noqa: BLE001
            lines = str(error).strip().splitlines() or [type(error).__name__]
            failed.append((config, RuntimeError(lines[-1])))  # a Ray task error ends with the original exception
            continue
        log(f"[train] stored {section.label(config)} ({len(todo) - len(pending)}/{len(todo)} done)")
    return failed


def default_workers(n_jobs: int) -> int:
    """``$COMPGEN_WORKERS`` if set, else one worker per CPU core on a CPU-only machine and 1 with an accelerator;
    at most ``n_jobs``."""
    workers = params.env_int("COMPGEN_WORKERS", None, ge=1, le=MAX_WORKERS, meaning=" (training processes at once)")
    if workers is not None:
        return min(n_jobs, workers)
    if jax.default_backend() != "cpu":
        return 1
    return max(1, min(n_jobs, os.cpu_count() or 1))


def balance(configs, workers: int, section) -> list:
    """Jobs for ``workers`` processes: same-shape configs together (they share a compiled program), a job of
    several configs halved while some worker would have none, or while the workers, given the jobs costliest first
    as :func:`run_workers` gives them, would end more than :data:`BALANCE_SLACK` after an even share of the whole
    (``section.cost``, or after the costliest config; :func:`makespan`) and halving a job does not end them later
    (the job whose halves end them soonest), so that no worker trains alone for long at the end. Grouping never
    changes the numbers, only compilation (a divided group compiles once per process, or loads the persistent
    cache)."""
    groups = {}
    for c in configs:
        groups.setdefault(section.shape_key(c), []).append(c)
    jobs = list(groups.values())
    cost = lambda job: sum(section.cost(c) for c in job)
    # no schedule ends before an even share, nor before the costliest config
    bound = max(sum(map(cost, jobs)) / max(workers, 1), max(section.cost(c) for c in configs))
    halved = lambda i: jobs[:i] + jobs[i + 1 :] + [jobs[i][: len(jobs[i]) // 2], jobs[i][len(jobs[i]) // 2 :]]
    ends = lambda js: makespan([cost(j) for j in js], workers)
    while workers > 1:
        splittable = [i for i in range(len(jobs)) if len(jobs[i]) > 1]
        filled = len(jobs) >= workers
        if not splittable or (filled and ends(jobs) <= bound * BALANCE_SLACK):
            break
        best = min((halved(i) for i in splittable), key=ends)
        if filled and ends(best) > ends(jobs):
            break
        jobs = best
    return jobs


BALANCE_SLACK = 1.05  # how much later than an even share the last worker may end (:func:`balance`)


def makespan(costs, workers: int) -> float:
    """When the last of ``workers`` ends, given jobs of ``costs`` costliest first, each to the first worker free."""
    ends = [0.0] * workers
    for c in sorted(costs, reverse=True):
        ends[ends.index(min(ends))] += c
    return max(ends)


def _start(section, configs, slot, store, log, checkpoint_every, shards=1, force=False, on_cores=None):
    handle = tempfile.NamedTemporaryFile("w", prefix="compgen-job-", suffix=".json", delete=False)
    job = {
        "section": section.name,
        "configs": [dataclasses.asdict(c) for c in configs],
        "store": [str(store.root), str(store.checkpoints)],
        "gemm_gflops": timing.gemm_gflops(),
        "checkpoint_every": checkpoint_every,
        "shards": shards,
        "force": force,
        "cores": None if on_cores is None else list(on_cores),  # the worker pins itself to them (compgen.cores)
        "parent": os.getpid(),
        "error_file": handle.name + ".error",  # the worker writes {"error": name, "message": text} there
    }
    json.dump(job, handle)
    handle.close()
    env = dict(os.environ)
    if shards > 1:  # the worker makes one CPU host device per share of the tasks (read when its jax starts)
        env["XLA_FLAGS"] = devices.xla_flags_with_host_devices(shards)
    if any(devices.huge_pages(section, c) for c in configs):  # glibc reads it when the worker starts
        env = allocator.environment(env)
    try:
        proc = subprocess.Popen(
            [sys.executable, "-u", "-m", "compgen.runner", handle.name],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
        )
    except BaseException:
        os.unlink(handle.name)
        raise

    last = []  # the worker's last line: what failed, if it failed without reporting an error (REPORTED_ERRORS)

    def forward():
        for line in proc.stdout:
            log(f"[worker {slot}] {line.rstrip()}")
            last[:] = [line.strip()]

    thread = threading.Thread(target=forward, daemon=True)
    thread.start()
    return proc, thread, handle.name, last


def _stop(proc, grace_s: float = 5.0) -> None:
    """End a worker: SIGTERM (see :func:`_end_with_parent`), SIGKILL if it is still there after ``grace_s``."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def run_workers(
    section, jobs, n_workers: int, store, log=print, checkpoint_every=None, poll_s: float = 0.5, shards=1, force=False
):
    """Train ``jobs`` (lists of configs) in at most ``n_workers`` processes at once, costliest first, starting the
    next job whenever a slot frees; with ``shards`` > 1 each process shards its tasks over that many host devices.
    Each slot's processes run on a core of their own (:func:`compgen.cores.shares`; not when sharded).

    If this process is stopped (an exception, ``KeyboardInterrupt``) its workers are ended; if it dies, they end
    themselves (:func:`_end_with_parent`). Checkpoints they saved stay; their job files do not."""
    costs = [sum(section.cost(c) for c in job) for job in jobs]
    pending = sorted(range(len(jobs)), key=lambda i: -costs[i])
    running, failed = {}, []  # slot -> (job, proc, thread, file, last line)
    shares = cores.shares(n_workers) if shards == 1 else None  # a sharded worker uses every core
    n_workers = max(1, min(n_workers, len(jobs)))  # never more processes (nor slots to look at) than jobs
    try:
        while pending or running:
            for slot in range(n_workers):
                if slot not in running and pending:
                    job = pending.pop(0)
                    on_cores = shares[slot] if shares else None
                    started = _start(section, jobs[job], slot, store, log, checkpoint_every, shards, force, on_cores)
                    running[slot] = (job, *started)
            time.sleep(poll_s)
            for slot, (_job, proc, thread, name, last) in list(running.items()):
                if proc.poll() is not None:
                    thread.join()
                    Path(name).unlink(missing_ok=True)  # the worker removes it once read
                    reported = _read_error(name + ".error")
                    if proc.returncode:
                        failed.append(reported or ("", last[0] if last else f"exit code {proc.returncode}"))
                    del running[slot]
    finally:
        for _job, proc, _thread, name, _last in running.values():
            _stop(proc)
            Path(name).unlink(missing_ok=True)
            Path(name + ".error").unlink(missing_ok=True)
    for kind in REPORTED_ERRORS:
        messages = [message for reported, message in failed if reported == kind]
        if messages:
            raise REPORTED_ERRORS[kind]("; ".join(dict.fromkeys(messages)))
    if failed:
        raise RuntimeError(f"{len(failed)} training job(s) failed: " + "; ".join(m for _, m in failed))


def _read_error(path: str):
    """``(error name, message)`` a worker reported in ``path`` (then removed), or ``None``."""
    try:
        reported = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None
    finally:
        Path(path).unlink(missing_ok=True)
    return reported.get("error", ""), reported.get("message", "")


class WorkerStopped(SystemExit):
    """A worker told to stop (SIGTERM); it ends once unwound, without waiting for a computation under way."""


def _end_with_parent(parent: int, grace_s: float = 2.0) -> None:
    """Make this worker end when its ``parent`` process dies, leaving no temporary file.

    SIGTERM (or SIGINT) raises :class:`WorkerStopped` (once), so a file being written is removed
    (:func:`compgen.storage.write_atomic`) and the config's lock released. The parent's death sends SIGTERM (Linux:
    ``PR_SET_PDEATHSIG``) and is also seen by a thread watching ``os.getppid()`` (everywhere), which ends the
    process ``grace_s`` later if it is still running (a signal waits for the computation under way)."""

    def stop(signum, _frame):
        for name in (signal.SIGTERM, signal.SIGINT):
            signal.signal(name, signal.SIG_IGN)
        raise WorkerStopped(128 + signum)

    for name in (signal.SIGTERM, signal.SIGINT):  # Ctrl-C reaches the workers too: they stop the same way
        signal.signal(name, stop)
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG

    def watch():
        while os.getppid() == parent:
            time.sleep(0.5)
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(grace_s)
        storage.drop_locks()
        os._exit(128 + signal.SIGTERM)

    threading.Thread(target=watch, daemon=True).start()  # also covers a parent that died before prctl


def _worker(path: str) -> int:
    with open(path) as handle:
        job = json.load(handle)
    os.unlink(path)
    _end_with_parent(job.get("parent", os.getppid()))
    section = catalog.get(job["section"])
    configs = [section.config_from_dict(d) for d in job["configs"]]
    if job.get("cores") and cores.pin(os.getpid(), job["cores"]):  # before anything computes (compgen.cores)
        print(f"[cores] this worker runs on core(s) {','.join(map(str, job['cores']))}")
    timing.gemm_gflops(job.get("gemm_gflops"))
    store = results.Store(*job["store"])
    shards = job.get("shards", 1)
    if shards > 1:
        print(f"[devices] every meta-batch sharded over {jax.local_device_count()} {jax.default_backend()} device(s)")
    try:
        with devices.shard_tasks() if shards > 1 else contextlib.nullcontext():
            every, force = job["checkpoint_every"], job.get("force", False)
            train_and_store(section, configs, store, checkpoint_every=every, force=force)
    except (TrainingDiverged, params.ParameterError) as error:  # the driver raises it again (REPORTED_ERRORS)
        print(f"{type(error).__name__}: {error}", flush=True)
        report = {"error": type(error).__name__, "message": str(error)}
        storage.write_atomic(Path(job["error_file"]), json.dumps(report).encode())
        return 1
    return 0


if __name__ == "__main__":
    try:
        sys.exit(_worker(sys.argv[1]))
    except WorkerStopped as stopped:  # unwound: the XLA computation under way would hold up a normal exit
        os._exit(stopped.code)
