"""The training loop: train a section's configs in this process and keep their results in a store.

Every config is trained by its own program - its seeds vmapped, its outer steps a ``lax.scan``, ``eval_every`` steps
per call (:func:`run_steps`) - so the numbers stored for a config do not depend on what else was trained, by how many
processes, or through which entry point. Configs of equal shapes share the jitted program (same process) or the
persistent compilation cache (other processes), so a figure's splits or seeds compile once; on an accelerator they
train as lanes of one program (:func:`train_lanes`, :func:`use_lanes`).

Between calls the driver prints a progress line, evaluates, saves a checkpoint if asked
(:class:`compgen.checkpoint.Checkpointer`) and checks the run: a run whose outer updates have all been
non-finite for :data:`DIVERGED_STEPS` steps (or a whole call's steps) stops with :class:`TrainingDiverged` and is not
stored. :func:`train_and_store` trains and stores configs holding each one's lock in the store
(:func:`compgen.storage.lock`), so two processes asked for a config train it once; :func:`load` reads a stored run.

Which process trains what - this one, worker processes, one thread per device, Ray tasks - is decided by
:func:`compgen.dispatch.train_or_load`, which notebooks, the command line, sweeps and tools call
(:mod:`compgen.backends`).
"""

from __future__ import annotations

import contextlib
import shutil
import time
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

from compgen import checkpoint, devices, memory, params, results, storage, timing

DIVERGED_STEPS = 100  # consecutive non-finite outer updates after which a run is stopped
# A training loss above this stops a run as diverged: every section's losses start below 10 (a half-MSE, a KL or a
# cross-entropy of standardised targets) and fall from there.
DIVERGED_LOSS = 1e6


class TrainingDiverged(RuntimeError):
    """A run whose outer updates stayed non-finite; it is not stored."""


def program(section, cfg):
    """The jitted :class:`compgen.section.Program` of ``cfg`` with the device's knobs (:func:`compgen.devices.resolve`)
    and the task sharding of the enclosing :func:`compgen.devices.shard_tasks`, if any (:meth:`Section.program
    <compgen.section.Section.program>`: one per shape, built once per process)."""
    return section.program(devices.resolve(section, cfg), devices.task_mesh())


# --------------------------------------------------------------------------------------------- one run


class Hooks(NamedTuple):
    """What :func:`run_steps` does between its calls of steps, as one value: ``evaluate(state) -> dict`` (at step 0 and
    after each call), ``describe(step_metrics, eval_metrics) -> str`` (the progress line's tail), ``log``, ``saver``
    (a :class:`compgen.checkpoint.Checkpointer`: resume from its latest valid checkpoint and save every
    ``saver.every`` calls), ``check(step_metrics, done, evaluation, first_evaluation)`` (may raise to stop the run)
    and ``clock`` (a :class:`compgen.timing.Stopwatch` adding up "train" and "evaluate" seconds)."""

    evaluate: Callable | None = None
    describe: Callable | None = None
    log: Callable = print
    saver: object = None
    check: Callable | None = None
    clock: object = None


def run_steps(steps_fn, state, num_steps, steps_per_call, hooks: Hooks | None = None):
    """Drive a compiled training loop, ``steps_per_call`` outer steps per call, with ``hooks`` between calls.

    ``steps_fn(state, n) -> (state, metrics)`` runs ``n`` outer steps (``n`` static; at most two distinct values, so
    at most two compilations). Returns ``(state, history)``: the per-step metrics concatenated, the evaluations
    stacked, and the steps at which they were taken; resumed from a checkpoint, the history is the same as an
    uninterrupted run's."""
    hooks = Hooks() if hooks is None else hooks
    clock = timing.Stopwatch() if hooks.clock is None else hooks.clock
    hooks = hooks._replace(clock=clock)
    state, progress = _start(state, num_steps, hooks)
    start, first, calls = time.perf_counter(), progress["done"], 0
    while progress["done"] < num_steps:
        n = min(steps_per_call, num_steps - progress["done"])
        state = _call(steps_fn, state, n, progress, hooks)
        done = progress["done"]
        rate = (done - first) / (time.perf_counter() - start)
        line = f"step {done:>7d}/{num_steps}  {rate:7.1f} steps/s  ETA {(num_steps - done) / rate:6.0f} s"
        if hooks.describe is not None:
            line += "  " + hooks.describe(progress["steps"][-1], progress["evals"][-1] if hooks.evaluate else None)
        hooks.log(line)
        calls += 1
        if hooks.saver is not None and calls % hooks.saver.every == 0 and done < num_steps:
            hooks.saver.save(state, progress)
    return state, _history(progress)


def _start(state, num_steps, hooks) -> tuple:
    """``(state, progress)`` to continue from: the latest valid checkpoint of ``hooks.saver``, else ``state`` with
    the evaluation at step 0 (where there is an ``evaluate``)."""
    restored = None if hooks.saver is None else hooks.saver.restore(state)
    if restored is not None:
        state, progress = restored
        progress.pop("extra", None)
        hooks.log(f"resumed from step {progress['done']}/{num_steps}")
        return state, progress
    progress = {"done": 0, "steps": [], "evals": [], "eval_steps": []}
    if hooks.evaluate is not None:
        with hooks.clock.measure("evaluate"):
            progress["evals"].append(jax.device_get(hooks.evaluate(state)))
        progress["eval_steps"].append(0)
    return state, progress


def _call(steps_fn, state, n, progress, hooks):
    """One call of ``n`` steps: its metrics, the evaluation after it and the check, added to ``progress``."""
    with hooks.clock.measure("train"):
        state, metrics = steps_fn(state, n)
        metrics = jax.device_get(metrics)
    progress["done"] += n
    progress["steps"].append(metrics)
    evaluation = None
    if hooks.evaluate is not None:
        with hooks.clock.measure("evaluate"):
            evaluation = jax.device_get(hooks.evaluate(state))
        progress["evals"].append(evaluation)
        progress["eval_steps"].append(progress["done"])
    if hooks.check is not None:
        evals = progress["evals"]
        hooks.check(metrics, progress["done"], evaluation, evals[0] if evals else None)
    return state


def _history(progress) -> dict:
    history = {"steps": jax.tree.map(lambda *xs: jnp.concatenate(xs, axis=0), *progress["steps"])}
    if progress["evals"]:
        history["eval"] = jax.tree.map(lambda *xs: jnp.stack(xs, axis=0), *progress["evals"])
        history["eval_steps"] = jnp.asarray(progress["eval_steps"])
    return history


def divergence_check(section, configs, diverged):
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
    whose run diverges (:func:`divergence_check`) is not returned: the others are, and then :class:`TrainingDiverged`
    is raised for it, its exception carrying them as ``trained``."""
    if len({section.shape_key(c) for c in configs}) != 1:
        raise ValueError("train_lanes: the configs must share one shape (section.shape_key)")
    start, clock, cfg = time.perf_counter(), timing.Stopwatch(), configs[0]
    with clock.measure("setup"):
        runs = section.run_arrays(configs)
        prog, knobs = fitting_program(section, cfg, runs, log)
        initial = jax.block_until_ready(prog.init(runs))
    offsets = np.cumsum([0] + [len(c.seeds) for c in configs])
    diverged = {}
    check = divergence_check(section, configs, diverged)
    hooks = Hooks(lambda s: prog.evaluate(runs, s), _progress_line(section, configs, offsets), log, saver, check, clock)
    state, history = run_steps(lambda s, k: prog.steps(runs, s, k), initial, cfg.outer_steps, cfg.eval_every, hooks)
    seconds = {"wall": round(time.perf_counter() - start, 3), **clock.seconds(), "knobs": knobs}
    if len(configs) > 1:
        seconds["lanes"] = len(configs)
    flat_params = np.asarray(jax.vmap(lambda p: ravel_pytree(p)[0])(state["meta"])) if section.keep_params else None
    trained = [
        (c, _lane_history(jax.tree.map(np.asarray, history), offsets, i, flat_params), dict(seconds))
        for i, c in enumerate(configs)
        if c not in diverged
    ]
    out = [(history, secs) for _, history, secs in trained]
    if diverged:
        error = TrainingDiverged("; ".join(diverged.values()))
        error.trained = {c: found for (c, *_), found in zip(trained, out)}
        raise error
    return out


def _lane(full, offsets, i, axis=1):
    """Config ``i``'s runs of an array whose axis ``axis`` holds every lane's runs (``offsets``: where each starts)."""
    return np.take(full, np.arange(offsets[i], offsets[i + 1]), axis=axis) if np.ndim(full) > axis else full


def _progress_line(section, configs, offsets):
    """``describe(metrics, evaluation)`` for :func:`run_steps`: the first lane's progress line (metrics: (steps,
    runs, ...); an evaluation: (runs, ...))."""
    cfg = configs[0]

    def show(metrics, evaluation):
        if len(configs) == 1:
            return section.progress(cfg, metrics, evaluation)
        return f"{len(configs)} lanes; first: " + section.progress(
            cfg,
            jax.tree.map(lambda a: _lane(a, offsets, 0), metrics),
            evaluation and jax.tree.map(lambda a: _lane(a, offsets, 0, axis=0), evaluation),
        )

    return show


def _lane_history(history, offsets, i, flat_params):
    """Config ``i``'s history, its seeds first, with its final meta-parameters where they are kept."""
    own = jax.tree.map(lambda a: np.moveaxis(_lane(a, offsets, i), 1, 0) if np.ndim(a) > 1 else a, history)
    if flat_params is not None:
        own["final"] = {"meta": flat_params[offsets[i] : offsets[i + 1]]}
    return own


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


# --------------------------------------------------------------------------------------------- train and store


def checkpoint_interval(value=None) -> int:
    """Chunks between checkpoints: ``value``, else ``$COMPGEN_CHECKPOINT_EVERY``, else 0 (off)."""
    if value is None:
        return params.env_int(
            "COMPGEN_CHECKPOINT_EVERY", 0, ge=0, meaning=" (evaluations between checkpoints, 0 = off)"
        )
    return params.check_int("checkpoint_every", value, ge=0)


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


def _store_all(section, trained, store):
    for cfg, (history, seconds) in trained:
        knobs = seconds.pop("knobs")
        store.save(section, cfg, flatten_history(history), seconds["wall"], seconds=seconds, knobs=knobs)


def load(section, cfg, store=None, log=print):
    """The stored result of ``cfg`` (a dict of arrays with a leading seed axis) in ``store`` (default
    :meth:`compgen.results.Store.default`), or ``None``."""
    stored = (store or results.Store.default()).load(section, cfg, log=log)
    return None if stored is None else stored[0]
