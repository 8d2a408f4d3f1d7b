"""The ``"workers"`` backend of :func:`compgen.dispatch.train_or_load`: training in worker processes.

:func:`balance` groups the configs into jobs (same-shape configs together, halved until the workers end at about the
same time, :func:`makespan`) and :func:`run_workers` trains them in at most ``n`` processes at once, costliest first,
by default one per CPU core (:func:`default_workers`). Each worker runs on a core of its own (:mod:`compgen.cores`),
so that it computes with a one-thread pool: on a CPU, XLA splits some operations over the threads a process may use,
and a process with more cores can compute other numbers for a few configs (:mod:`compgen.cores` says which).

A worker is ``python -m compgen.backends.workers <job.json>`` (:func:`_start`): it trains the configs of the section
that the job file names (found in :data:`compgen.catalog.SECTIONS`) with :func:`compgen.runner.train_and_store`,
deletes the job file once read, reports a diverged or refused run by name (:data:`REPORTED_ERRORS`) and ends when its
parent process dies (:func:`_end_with_parent`).
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax

from compgen import allocator, catalog, cores, devices, params, results, runner, storage, timing

MAX_WORKERS = 1024  # the most training processes $COMPGEN_WORKERS may ask for (at most one per job is started)

# The errors a worker reports to its driver by name, in the file its job names (``error_file``), raised there again:
# a config refused before training first, then a diverged run (the errors a user can act on).
REPORTED_ERRORS = {"ParameterError": params.ParameterError, "TrainingDiverged": runner.TrainingDiverged}


def requested_workers() -> int | None:
    """``$COMPGEN_WORKERS`` (1 to :data:`MAX_WORKERS`), or ``None`` where it is unset; JAX's backend does not start."""
    return params.env_int("COMPGEN_WORKERS", None, ge=1, le=MAX_WORKERS, meaning=" (training processes at once)")


def default_workers(n_jobs: int) -> int:
    """``$COMPGEN_WORKERS`` if set, else one worker per CPU core on a CPU-only machine and 1 with an accelerator;
    at most ``n_jobs``."""
    workers = requested_workers()
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


@dataclasses.dataclass(frozen=True)
class Settings:
    """What every worker process of one call is given besides its configs: the results ``store``, where its lines go
    (``log``), how often it saves a checkpoint (``checkpoint_every``, outer steps; ``None``: never), the host devices
    it shards its tasks over (``shards``) and whether it trains stored runs again (``force``)."""

    store: Any
    log: Callable = print
    checkpoint_every: int | None = None
    shards: int = 1
    force: bool = False


def _start(section, configs, slot, settings: Settings, on_cores=None):
    """Start a worker process on ``configs`` (its job file written first); ``(process, thread forwarding its output to
    ``settings.log``, job file, its last line)``."""
    store, shards = settings.store, settings.shards
    handle = tempfile.NamedTemporaryFile("w", prefix="compgen-job-", suffix=".json", delete=False)
    job = {
        "section": section.name,
        "configs": [dataclasses.asdict(c) for c in configs],
        "store": [str(store.root), str(store.checkpoints)],
        "gemm_gflops": timing.gemm_gflops(),
        "checkpoint_every": settings.checkpoint_every,
        "shards": shards,
        "force": settings.force,
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
            [sys.executable, "-u", "-m", "compgen.backends.workers", handle.name],
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
            settings.log(f"[worker {slot}] {line.rstrip()}")
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


def run_workers(section, jobs, n_workers: int, settings: Settings, poll_s: float = 0.5):
    """Train ``jobs`` (lists of configs) in at most ``n_workers`` processes at once, costliest first, starting the
    next job whenever a slot frees, each given ``settings``; with ``settings.shards`` > 1 each process shards its
    tasks over that many host devices.
    Each slot's processes run on a core of their own (:func:`compgen.cores.shares`; not when sharded).

    If this process is stopped (an exception, ``KeyboardInterrupt``) its workers are ended; if it dies, they end
    themselves (:func:`_end_with_parent`). Checkpoints they saved stay; their job files do not."""
    costs = [sum(section.cost(c) for c in job) for job in jobs]
    pending = sorted(range(len(jobs)), key=lambda i: -costs[i])
    running, failed = {}, []  # slot -> (job, proc, thread, file, last line)
    shares = cores.shares(n_workers) if settings.shards == 1 else None  # a sharded worker uses every core
    n_workers = max(1, min(n_workers, len(jobs)))  # never more processes (nor slots to look at) than jobs
    try:
        while pending or running:
            for slot in range(n_workers):
                if slot not in running and pending:
                    job = pending.pop(0)
                    on_cores = shares[slot] if shares else None
                    started = _start(section, jobs[job], slot, settings, on_cores)
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
    try:  # a learner this process cannot import is a ParameterError, reported as below
        configs = [section.config_from_dict(d) for d in job["configs"]]
    except params.ParameterError as error:
        return _report(error, job)
    # JAX's CPU backend starts before the worker is pinned, so that its thread pool has every core, as the driver's
    # has: the thread count decides how XLA splits a large matrix product, and so the last bits of a run's numbers
    # (a worker's bytes equal a local run's). Building a config starts it in some sections, not in all.
    jax.devices()
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
            runner.train_and_store(section, configs, store, checkpoint_every=every, force=force)
    except (runner.TrainingDiverged, params.ParameterError) as error:
        return _report(error, job)
    return 0


def _report(error, job) -> int:
    """Print ``error`` and write it where the driver reads it and raises it again (REPORTED_ERRORS); exit code 1."""
    print(f"{type(error).__name__}: {error}", flush=True)
    report = {"error": type(error).__name__, "message": str(error)}
    storage.write_atomic(Path(job["error_file"]), json.dumps(report).encode())
    return 1


if __name__ == "__main__":
    try:
        sys.exit(_worker(sys.argv[1]))
    except WorkerStopped as stopped:  # unwound: the XLA computation under way would hold up a normal exit
        os._exit(stopped.code)
