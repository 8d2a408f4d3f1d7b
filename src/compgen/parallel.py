"""Train independent configs in parallel worker processes on a multi-core CPU.

XLA runs the small matrix products of these experiments on one core, so a 2-core machine trains
twice as fast with two processes. Each worker trains its share of the configs with the section's
``compgen.experiments.train_and_store`` and writes to the results store; the caller then loads from the store.
Progress lines of the workers are forwarded, prefixed with the worker number.
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


def default_workers(n_jobs: int) -> int:
    """One worker per CPU core on a CPU-only machine (at most ``n_jobs``); 1 with an accelerator."""
    import jax

    if jax.default_backend() != "cpu":
        return 1
    return max(1, min(n_jobs, os.cpu_count() or 1))


def partition(costs, n_parts):
    """Greedy longest-first split of job indices into ``n_parts`` lists of similar total cost."""
    parts, totals = [[] for _ in range(n_parts)], [0.0] * n_parts
    for i in sorted(range(len(costs)), key=lambda i: -costs[i]):
        k = totals.index(min(totals))
        parts[k].append(i)
        totals[k] += costs[i]
    return [sorted(p) for p in parts if p]


def run_workers(module_name: str, configs, costs, n_workers: int, log=print):
    """Train ``configs`` in ``n_workers`` subprocesses of ``python -m compgen.parallel``."""
    procs, threads, files = [], [], []
    for w, part in enumerate(partition(costs, n_workers)):
        handle = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False)
        json.dump([dataclasses.asdict(configs[i]) for i in part], handle)
        handle.close()
        files.append(handle.name)
        proc = subprocess.Popen([sys.executable, "-u", "-m", "compgen.parallel", module_name, handle.name],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        procs.append(proc)

        def forward(proc=proc, w=w):
            for line in proc.stdout:
                log(f"[worker {w}] {line.rstrip()}")

        thread = threading.Thread(target=forward, daemon=True)
        thread.start()
        threads.append(thread)
    codes = [proc.wait() for proc in procs]
    for thread in threads:
        thread.join()
    for name in files:
        os.unlink(name)
    if any(codes):
        raise RuntimeError(f"a worker failed (exit codes {codes}); see its output above")


def _worker(module_name: str, path: str):
    module = importlib.import_module(module_name)
    with open(path) as handle:
        configs = [module.CONFIG_CLASS(**d) for d in json.load(handle)]
    from compgen import experiments

    experiments.train_and_store(module, configs)


if __name__ == "__main__":
    _worker(sys.argv[1], sys.argv[2])
