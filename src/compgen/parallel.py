"""Train independent configs in parallel worker processes on a multi-core CPU.

XLA runs the small matrix products of these experiments on about one core, so a 2-core machine
trains faster with two processes. The jobs are groups of configs that share one compiled program;
they are started longest first, each in its own ``python -m compgen.parallel`` process, and a new
one starts as soon as a running one ends, so that no core idles while work is left. Each job trains
its configs with the section's ``compgen.experiments.train_and_store`` and writes to the results
store; the caller then loads from the store. Progress lines are forwarded, prefixed with the slot.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import time


def default_workers(n_jobs: int) -> int:
    """``$COMPGEN_WORKERS`` if set (e.g. 1 when notebooks already run side by side), else one worker per
    CPU core on a CPU-only machine and 1 with an accelerator; at most ``n_jobs``."""
    import jax

    if os.environ.get("COMPGEN_WORKERS"):
        workers = int(os.environ["COMPGEN_WORKERS"])
        if workers < 1:
            raise ValueError(f"COMPGEN_WORKERS must be a positive integer, got {workers}")
        return min(n_jobs, workers)
    if jax.default_backend() != "cpu":
        return 1
    return max(1, min(n_jobs, os.cpu_count() or 1))


def _start(module_name, configs, slot, log):
    handle = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False)
    json.dump([dataclasses.asdict(c) for c in configs], handle)
    handle.close()
    proc = subprocess.Popen([sys.executable, "-u", "-m", "compgen.parallel", module_name, handle.name],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    def forward():
        for line in proc.stdout:
            log(f"[worker {slot}] {line.rstrip()}")

    thread = threading.Thread(target=forward, daemon=True)
    thread.start()
    return proc, thread, handle.name


def run_workers(module_name: str, jobs, costs, n_workers: int, log=print, poll_s: float = 0.5):
    """Train ``jobs`` (lists of configs, each list one compiled program) in at most ``n_workers``
    processes at once, longest ``costs`` first, starting the next job whenever a slot frees."""
    pending = sorted(range(len(jobs)), key=lambda i: -costs[i])
    running, failed = {}, []  # slot -> (job, proc, thread, file)
    while pending or running:
        for slot in range(n_workers):
            if slot not in running and pending:
                job = pending.pop(0)
                running[slot] = (job, *_start(module_name, jobs[job], slot, log))
        time.sleep(poll_s)
        for slot, (job, proc, thread, name) in list(running.items()):
            if proc.poll() is not None:
                thread.join()
                os.unlink(name)
                if proc.returncode:
                    failed.append((job, proc.returncode))
                del running[slot]
    if failed:
        raise RuntimeError(f"{len(failed)} job(s) failed (job, exit code: {failed}); see their output above")


def _worker(module_name: str, path: str):
    module = importlib.import_module(module_name)
    with open(path) as handle:
        configs = [module.CONFIG_CLASS(**d) for d in json.load(handle)]
    from compgen import experiments

    experiments.train_and_store(module, configs)


if __name__ == "__main__":
    _worker(sys.argv[1], sys.argv[2])
