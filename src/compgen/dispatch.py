"""Train or load a section's configs: :func:`train_or_load`, the one call that notebooks, the command line, sweeps
and tools make.

Results in a :class:`compgen.results.Store` are loaded, the rest are trained by one of :data:`BACKENDS` and stored:
``"local"`` (this process, :func:`compgen.runner.train_and_store`), ``"workers"`` (worker processes - by default one
per CPU core -, :mod:`compgen.backends.workers`), ``"devices"`` (one thread per device,
:func:`compgen.devices.train_on_devices`) or ``"ray"`` (Ray tasks, :mod:`compgen.backends.ray`). Every config is
trained by its own program (:mod:`compgen.runner`), so its numbers do not depend on the backend. A config at the
paper's sizes trains alone in a worker that shards its tasks over every CPU core
(:func:`compgen.devices.shard_count` decides from the config and the machine only); otherwise each worker runs on a
core of its own (:mod:`compgen.cores`). :func:`check_environment` refuses a bad ``COMPGEN_*`` variable before
anything loads or trains.
"""

from __future__ import annotations

import sys

import jax

from compgen import cores, devices, models, params, precision, results, runner, timing
from compgen.backends.ray import train_on_ray
from compgen.backends.workers import balance, default_workers, requested_workers, run_workers

BACKENDS = ("local", "workers", "devices", "ray")


def check_environment() -> None:
    """Refuse a bad ``COMPGEN_*`` environment variable (each read by :func:`compgen.params.env_text`'s rule) or a bad
    ``XLA_FLAGS`` (:func:`compgen.devices.check_xla_flags`) before anything is loaded or trained; JAX's backend does not
    start here."""
    params.check_environment_names()
    devices.check_xla_flags()
    params.env_path("COMPGEN_RESULTS")
    params.env_path("COMPGEN_CHECKPOINTS")
    runner.checkpoint_interval()
    requested_workers()
    params.env_flag(devices.SHARD_ENV)
    params.env_flag(cores.PIN_ENV)
    params.env_flag(runner.LANES_ENV)
    precision.requested()


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

    A learner registered by name in this process only (a notebook's) trains ``"local"``, whatever the backend.
    Every config is trained by its own program, so its numbers do not depend on the backend. A config whose
    training fails raises; with ``failures`` (a dict) its error is recorded there (``{config: message}``) instead
    and its result is ``None``.
    """
    if backend not in BACKENDS:
        raise params.ParameterError(f"backend must be one of {BACKENDS}, got {backend!r}")
    store = results.Store.default() if store is None else store
    configs = list(configs)
    check_environment()  # a bad value fails before anything loads or trains
    every = runner.checkpoint_interval(checkpoint_every)
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
    if backend != "local" and not all(models.known_elsewhere(getattr(c, "model", None)) for c in todo):
        log(f"[train] a learner registered in this process only (not by import path): {backend} -> local")
        backend = "local"
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
        job = lambda c, job_log: runner.train_and_store(section, [c], store, job_log, every, force)
        errors = dict(devices.train_on_devices(job, todo, log=log))
    else:
        errors = dict(train_on_ray(section, todo, store, every, log, **(ray_options or {})))
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


def _train_here(section, configs, store, log, every, force, keep_going) -> dict:
    """The ``"local"`` backend: train and store ``configs`` in this process, group by group
    (:func:`compgen.runner.lane_groups`); ``{config: exception}`` of those that failed (with ``keep_going``; else the
    first failure raises). A group of lanes that fails otherwise than by divergence (its diverged lanes are known and
    the others stored) is trained again config by config, so that one failing config does not take its lane siblings
    with it."""
    errors = {}
    for group in runner.lane_groups(section, configs):
        try:
            runner.train_and_store(section, group, store, log, every, force)
            continue
        except Exception as error:  # noqa: BLE001  (one failing run must not stop the others)
            if not keep_going:
                raise
            failed = [c for c in group if store.load(section, c, log=log) is None]
            if len(group) == 1 or isinstance(error, runner.TrainingDiverged):
                errors.update({c: error for c in failed})
                continue
            log(f"[train] {len(group)} lanes failed together ({type(error).__name__}: {error}); training each alone")
        for c in failed:
            try:
                runner.train_and_store(section, [c], store, log, every, force)
            except Exception as error:  # noqa: BLE001
                errors[c] = error
    return errors
