"""Which CPU cores each training worker runs on.

Two worker processes that may both use every core run slower than two that keep one core each. XLA's CPU runtime
sizes its thread pool by the cores a process may use when the process first computes, and with two threads it
splits some operations between them; two such processes on two cores keep displacing each other's threads.
Pinning a process only after its pool exists gains nothing: the gain is the one-thread pool (the measurements:
``book/records/choices.json``, drawn in the book's appendix).

What a worker does now: :func:`compgen.backends.workers.run_workers` gives each worker a core of its own
(:func:`shares`), but the worker starts JAX's backend before pinning itself, so its pool has a thread per core of
the machine, as the driver's has. The thread count decides how XLA splits a large matrix product, and so the last
bits of a run: with it equal, a config's bytes are the same trained in a worker or in the driver (tested in
``tests/backends/test_workers.py`` at quick sizes, where a one-thread worker differed: teacher-student's evaluation
loss, goals' ANIL from its first update). That gives up the one-thread pool's speed;
taking it back would mean training the driver's local runs with one thread too. ``COMPGEN_PIN_WORKERS=0`` turns
pinning off.
"""

from __future__ import annotations

import os

from compgen import params

PIN_ENV = "COMPGEN_PIN_WORKERS"  # 0: every worker may run on every core


def usable() -> tuple:
    """The cores this process may run on (all of them where the system cannot say)."""
    if hasattr(os, "sched_getaffinity"):
        return tuple(sorted(os.sched_getaffinity(0)))
    return tuple(range(os.cpu_count() or 1))


def shares(workers: int) -> list | None:
    """One core for each of ``workers`` workers, as 1-tuples (one core each whatever the machine); ``None`` where
    there are fewer cores than workers, no way to pin a process (not Linux) or ``COMPGEN_PIN_WORKERS=0``."""
    cores = usable()
    if len(cores) < workers or not (hasattr(os, "sched_setaffinity") and params.env_flag(PIN_ENV)):
        return None
    return [(core,) for core in cores[:workers]]


def pin(pid: int, cores) -> bool:
    """Let every thread of process ``pid`` run on ``cores`` only (threads it starts later inherit it from the
    thread that starts them); ``False`` where that was not possible (the process has ended, not Linux)."""
    if not hasattr(os, "sched_setaffinity"):
        return False
    try:
        threads = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        threads = [pid]
    pinned = False
    for thread in threads:
        try:
            os.sched_setaffinity(thread, cores)
            pinned = True
        except OSError:  # the thread (or process) ended meanwhile
            pass
    return pinned
