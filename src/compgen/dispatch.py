"""Train or load a section's configs: :func:`train_or_load`, the one call that notebooks, the command line, sweeps
and tools make.

Results in a :class:`compgen.results.Store` are loaded, the rest are trained by a backend (a value of
:mod:`compgen.backends`: ``Local()``, ``Workers(n)``, ``Devices()``, ``Ray(address, gpus, cpus)``) and stored.
Every config is trained by its own program (:mod:`compgen.runner`), so its numbers do not depend on the backend. A
config at the paper's sizes trains alone in a worker that shards its tasks over every CPU core
(:func:`compgen.devices.shard_count` decides from the config and the machine only); otherwise each worker runs on a
core of its own (:mod:`compgen.cores`). :func:`check_environment` refuses a bad ``COMPGEN_*`` variable before
anything loads or trains.
"""

from __future__ import annotations

import sys

import jax

from compgen import backends, cores, devices, models, params, precision, results, runner, timing
from compgen.backends.ray import train_on_ray
from compgen.backends.workers import Settings, balance, default_workers, requested_workers, run_workers


def check_environment() -> None:
    """Refuse a bad ``COMPGEN_*`` environment variable (each read by :func:`compgen.params.env_text`'s rule) or a bad
    ``XLA_FLAGS`` (:func:`compgen.devices.check_xla_flags`) before anything is loaded or trained; JAX's backend does not
    start here."""
    params.check_environment_names()
    devices.check_xla_flags()
    params.env_path("COMPGEN_RESULTS")
    params.env_path("COMPGEN_CHECKPOINTS")
    params.env_path("COMPGEN_KEY_CACHE")
    runner.checkpoint_interval()
    requested_workers()
    params.env_flag(devices.SHARD_ENV)
    params.env_flag(cores.PIN_ENV)
    params.env_flag(runner.LANES_ENV)
    precision.requested()


def train_or_load(section, configs, store=None, backend=None, force=False, log=print) -> list:
    """Results for each config (a list, in order): dicts of arrays with a leading seed axis.

    Results in ``store`` (a :class:`compgen.results.Store`; default :meth:`~compgen.results.Store.default`) are
    loaded unless ``force``; the rest are trained by ``backend`` (a :mod:`compgen.backends` value; default
    :class:`~compgen.backends.Workers`) and stored there. A learner registered by name in this process only (a
    notebook's) trains in this process, whatever the backend. The first config whose training fails raises; to
    train the others and collect the failures use :func:`train_or_load_each`."""
    outputs, errors = _load_or_train(section, configs, store, backend, force, log, keep_going=False)
    if errors:
        raise next(iter(errors.values()))
    return outputs


def train_or_load_each(section, configs, store=None, backend=None, force=False, log=print) -> tuple:
    """:func:`train_or_load` that trains every config it can: ``(results, failures)``, a config whose training failed
    having ``None`` as its result and ``"<error type>: <message>"`` in ``failures`` (``{config: message}``)."""
    outputs, errors = _load_or_train(section, configs, store, backend, force, log, keep_going=True)
    return outputs, {c: f"{type(e).__name__}: {e}" for c, e in errors.items()}


def _load_or_train(section, configs, store, backend, force, log, keep_going) -> tuple:
    """``(results in the order of configs, {config: exception})``: load what ``store`` holds, train the rest."""
    backend = backends.Workers() if backend is None else backend
    if not isinstance(backend, backends.Backend):
        raise params.ParameterError(
            f"backend must be a compgen.backends value ({', '.join(backends.NAMES)}: e.g. backends.Workers(2)), "
            f"got {params._short(backend)}"
        )
    store = results.Store.default() if store is None else store
    configs = list(configs)
    check_environment()  # a bad value fails before anything loads or trains
    store.check_root()  # before the keys' programs are lowered
    loaded, todo = {}, []
    for c in dict.fromkeys(configs):
        stored = None if force else store.load(section, c, log=log)
        if stored is None:
            todo.append(c)
            continue
        loaded[c] = stored[0]
        prov = stored[1].provenance
        log(
            f"[results] reusing {section.label(c)}: run {store.paths(section, c)[0].stem} ({prov['date']}, "
            f"{prov['wall_time_s']:.0f} s on {prov['device']}, commit {prov['git_commit'][:8]})"
        )
    errors = _train(section, todo, store, backend, force, log, keep_going) if todo else {}
    for c in errors:
        log(f"[train] FAILED {section.label(c)}: {errors[c]}")
    for c in todo:
        if c in errors:
            loaded[c] = None
            continue
        stored = store.load(section, c, log=log)
        if stored is None:
            raise RuntimeError(
                f"the run of {c} was not found in the store after training: it was stored "
                "under another code version (was the library edited during the run?)"
            )
        loaded[c] = stored[0]
    return [loaded[c] for c in configs], errors


def _train(section, todo, store, backend, force, log, keep_going) -> dict:
    """Train and store ``todo`` with ``backend``; ``{config: exception}`` of those that failed (without
    ``keep_going`` a failure in this process raises at once)."""
    every = runner.checkpoint_interval(backend.checkpoint_every)
    store.check_writable(section, bool(every))  # a store that cannot take the results fails now, not after training
    if not isinstance(backend, backends.Local) and not all(
        models.known_elsewhere(getattr(c, "model", None)) for c in todo
    ):
        log(
            f"[train] a learner registered in this process only (not by import path): {type(backend).__name__} -> Local"
        )
        backend = backends.Local(checkpoint_every=backend.checkpoint_every)
    timing.gemm_gflops()  # the machine's speed, read before the workers compete for its cores; every run records it
    if isinstance(backend, backends.Workers):  # a config sharded over every core (devices.shard_count) trains first
        shards = {c: 1 if devices.task_mesh() is not None else devices.shard_count(section, c) for c in todo}
        for c in (c for c in todo if shards[c] > 1):
            run_workers(section, [[c]], 1, Settings(store, log, every, shards[c], force))
        rest = [c for c in todo if shards[c] == 1]
        slots = default_workers(sys.maxsize) if backend.n is None else backend.n  # processes at once
        jobs = balance(rest, min(slots, len(rest)), section)
        # in workers when several run at once, or one job that a worker trains as it would beside others (on a core
        # of its own, so with the same numbers: compgen.cores)
        if slots > 1 and (len(jobs) > 1 or cores.shares(slots)):
            run_workers(section, jobs, slots, Settings(store, log, every, force=force))
            return {}
        return _train_here(section, rest, store, log, every, force, keep_going) if rest else {}
    if isinstance(backend, backends.Local):
        return _train_here(section, todo, store, log, every, force, keep_going)
    if isinstance(backend, backends.Devices):
        log(f"[train] one config per device at a time over {jax.local_device_count()} device(s): {jax.local_devices()}")
        job = lambda c, job_log: runner.train_and_store(section, [c], store, job_log, every, force)
        return dict(devices.train_on_devices(job, todo, log=log))
    options = {"address": backend.address, "num_gpus": backend.gpus, "num_cpus": backend.cpus}
    return dict(train_on_ray(section, todo, store, every, log, **options))


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
