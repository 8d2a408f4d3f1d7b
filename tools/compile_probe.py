"""Where a config's first minutes go: compile and run times of its programs, phase by phase, each variant in a process.

    python tools/compile_probe.py                                   # teacher-student paper, inner loop fused and scan
    python tools/compile_probe.py --preset smoke --timeout 60 --out /tmp/probe.json

For each variant (``fused``: the inner loop as one GPU kernel, ``fused_inner=True``; ``scan``: as a ``lax.scan``,
``fused_inner=False``) a child process builds the config's program (:func:`compgen.runner.program`) for ``--seeds``
seeds and prints, as each phase ends: ``init`` (compile and run), ``evaluate`` compile and run, ``steps`` compile (a
chunk of ``--steps`` outer steps) and its milliseconds per outer step. A variant still running after ``--timeout``
seconds is stopped, and the phases it finished are kept, so a compilation that never ends shows where. The variants
run one after the other. The record (``--out``, JSON): per variant its phases' seconds and ``ok`` (every phase ended),
and ``faster``: the variant whose outer step is faster among those that ended (``null`` if none did).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

VARIANTS = {"fused": True, "scan": False}


def child(variant: str, preset: str, seeds: int, steps: int) -> None:
    """Run the phases of ``variant`` in this process, one ``phase <name> <seconds>`` line each."""
    import jax

    from compgen import bench

    overrides = {"seeds": tuple(range(100, 100 + seeds)), "fused_inner": VARIANTS[variant]}
    _, _, runs, program = bench._program("teacher_student", preset, None, overrides)  # as the bench builds a case

    def phase(name, work):
        start = time.perf_counter()
        out = jax.block_until_ready(work())
        print(f"phase {name} {time.perf_counter() - start:.3f}", flush=True)
        return out

    state = phase("init", lambda: program.init(runs))
    evaluate = phase("evaluate_compile", lambda: program.evaluate.lower(runs, state).compile())
    phase("evaluate_run", lambda: evaluate(runs, state))
    chunk = phase("steps_compile", lambda: program.steps.lower(runs, state, steps).compile())
    state, _ = phase("steps_first_run", lambda: chunk(runs, state))
    start = time.perf_counter()
    jax.block_until_ready(chunk(runs, state))
    print(f"phase ms_per_step {(time.perf_counter() - start) / steps * 1e3:.3f}", flush=True)


def probe(variant: str, preset: str, seeds: int, steps: int, timeout: float, log=print) -> dict:
    """The phases of ``variant`` measured in a child process stopped after ``timeout`` s: ``{phase: seconds, "ok"}``."""
    cmd = [sys.executable, "-u", __file__, "--child", variant, "--preset", preset, "--seeds", str(seeds)]
    cmd += ["--steps", str(steps)]
    found, start = {}, time.perf_counter()
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as proc:
        try:
            out, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
    for line in out.splitlines():
        if line.startswith("phase "):
            _, name, value = line.split()
            found[name] = float(value)
            log(f"[{variant}] {name} {float(value):.2f}")
    found["ok"] = "ms_per_step" in found
    if not found["ok"]:
        tail = [line for line in out.splitlines() if line.strip()][-3:]
        log(f"[{variant}] stopped after {time.perf_counter() - start:.0f} s; its last lines: {tail}")
    return found


def faster(record: dict) -> str | None:
    """The variant of ``record`` whose outer step is faster, among those whose phases all ended."""
    done = {v: r["ms_per_step"] for v, r in record.items() if v in VARIANTS and r.get("ok")}
    return min(done, key=done.get) if done else None


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--preset", default="paper")
    parser.add_argument("--seeds", type=int, default=1, help="seeds vmapped together (runs)")
    parser.add_argument("--steps", type=int, default=20, help="outer steps in the timed chunk")
    parser.add_argument("--timeout", type=float, default=90, help="seconds per variant")
    parser.add_argument("--variants", nargs="+", choices=sorted(VARIANTS), default=list(VARIANTS))
    parser.add_argument("--out", type=Path)
    parser.add_argument("--child", choices=sorted(VARIANTS), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args.child, args.preset, args.seeds, args.steps)
        return 0
    record = {v: probe(v, args.preset, args.seeds, args.steps, args.timeout) for v in args.variants}
    record["faster"] = faster(record)
    record.update(preset=args.preset, seeds=args.seeds, steps=args.steps, timeout_s=args.timeout)
    print(json.dumps(record))
    if args.out:
        args.out.write_text(json.dumps(record, indent=1) + "\n")
    return 0 if record["faster"] else 1


if __name__ == "__main__":
    sys.exit(main())
