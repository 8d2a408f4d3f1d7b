"""Spend a device lease on the paper-scale ledger, in a fixed order, and leave everything it advanced in $OUT.

    python3 tools/gpu_lease.py                    # on the GPU machine, from the repository root
    python3 tools/gpu_lease.py --cpu              # the rehearsal: preset smoke, budgets scaled down (CI runs it)
    python3 tools/gpu_lease.py --cpu --state /tmp/o1/paper --out /tmp/o2     # ... resumed from a previous $OUT

It needs only the image's python3 with jax, flax, optax and numpy: compgen is used from this checkout
(``PYTHONPATH=src``), nothing is installed. In order, never past ``--budget`` seconds (GPU 560, CPU 150):

1. **state**: the committed state (``--state``, default ``book/records/paper``) is copied to ``$OUT/paper``, which
   the lease then advances in place: whatever it leaves there is resumable, whenever the lease ends;
2. **device** (at most 60 s): jax's backend, devices and versions, ``nvidia-smi``, into ``$OUT/device.txt``;
3. **ledger**: the ledger's unfinished works in order (``book/records/ledger.json``, :mod:`compgen.ledger`), each in
   a child process (``advance``) that saves a checkpoint and ``progress.json`` after every chunk of steps and
   stops before a chunk would pass the time left minus ``--reserve`` (GPU 90 s, CPU 10 s), or ``--work-budget``
   seconds after it started (at least one chunk runs); a child still running
   15 s after that is killed (the last chunk's checkpoint stands). The device's choices are tried in order
   (:data:`CHOICES`): a choice whose first chunk has not compiled within ``--compile-bound`` seconds (GPU 150,
   CPU 60) is stopped and the next is taken. Two choices have no fallback, by design: lanes (a work is one
   program; a work without lanes is a ledger with one config per work) and matmul precision (the backend's
   default, as in the authors' runs; it changes no program's compile, and every lease records it);
4. **pack**: ``$OUT/lease.json`` (what each step did, with the seconds) and ``$OUT/summary.md``.

The developer then copies ``$OUT/paper/`` over ``book/records/paper/`` and commits it; the next lease, in any later
session and on a fresh machine, resumes from there. Exit status: 0 when every step ended as planned (a budget that
ends a work is planned), 1 when a choice or child failed, 2 for bad arguments.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT_OF_TIME = 3  # the exit status of a child whose budget ended its work before the last step
# The device's choices, first to last; {} leaves every knob to compgen.devices.resolve (on a GPU: the teacher-
# student's inner loop as one fused kernel).
CHOICES = {"gpu": ({}, {"fused_inner": False}), "cpu": ({},)}
DEVICE_PROBE = """
import os, sys, jax, flax, optax, numpy
print("python", sys.version.split()[0], "| jax", jax.__version__, "| flax", flax.__version__, "| optax",
      optax.__version__, "| numpy", numpy.__version__)
print("backend", jax.default_backend(), "| devices", jax.devices())
print("matmul precision", jax.config.jax_default_matmul_precision or "default", "| XLA_FLAGS",
      repr(os.environ.get("XLA_FLAGS", "")))
"""


def _advance(args) -> int:
    """The child: continue one work until the time ``--until`` (seconds since the epoch)."""
    from compgen import ledger

    works = {w.name: w for w in ledger.read(args.ledger)}
    try:
        ledger.advance(
            works[args.work],
            Path(args.state) / args.work,
            budget_s=args.until - time.time(),
            preset=args.preset,
            chunk=args.chunk,
            knobs=json.loads(args.knobs),
            log=lambda line: print(line, flush=True),
        )
    except ledger.OutOfTime as stopped:
        print(f"[ledger] budget spent: {stopped}", flush=True)
        return OUT_OF_TIME
    return 0


class Lease:
    """The lease's clock, log and steps (``steps``: one dict per step, as ``lease.json`` keeps them)."""

    def __init__(self, out: Path, budget: float):
        self.out, self.budget, self.start, self.steps = out, budget, time.monotonic(), []
        self.log_file = open(out / "lease.log", "a", buffering=1)  # noqa: SIM115 - open for the lease's life

    def left(self) -> float:
        return self.budget - (time.monotonic() - self.start)

    def say(self, line: str) -> None:
        stamped = f"[{time.monotonic() - self.start:7.1f} s] {line}"
        print(stamped, flush=True)
        self.log_file.write(stamped + "\n")

    def step(self, name: str, status: str, began: float, **more) -> dict:
        entry = {"step": name, "status": status, "seconds": round(time.monotonic() - began, 1), **more}
        self.steps.append(entry)
        self.say(f"[{name}] {status}")
        return entry


def run_child(lease, command, limit, compile_bound, env) -> str:
    """Run ``command``, echoing and logging its lines; its status: "ok", "out of time", "no compile within N s"
    (killed), "killed at its limit", or "failed (rc)"."""
    child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=ROOT)
    compiled = threading.Event()

    def read():
        for line in child.stdout:
            lease.say("  " + line.rstrip())
            if "[ledger]" in line and " compiled " in line:
                compiled.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    began = time.monotonic()
    why = None
    while child.poll() is None:
        waited = time.monotonic() - began
        if not compiled.is_set() and waited > compile_bound:
            why = f"no compile within {compile_bound:g} s"
        elif waited > limit:
            why = "killed at its limit"
        if why:
            child.terminate()
            try:
                child.wait(10)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
            break
        time.sleep(0.2)
    reader.join(5)
    if why:
        return why
    return {0: "ok", OUT_OF_TIME: "out of time"}.get(child.returncode, f"failed ({child.returncode})")


def advance_work(lease, work, args, state, choices, reserve, bound, preset, env) -> str:
    """Advance ``work`` in a child process with the first of ``choices`` that compiles in time; the last status."""
    from compgen import ledger

    before = ledger.status(work, state / work.name)
    for knobs in choices:
        began, left = time.monotonic(), lease.left() - reserve
        until = time.time() + min(left, args.work_budget)
        command = [sys.executable, "-u", str(Path(__file__).resolve()), "advance", "--work", work.name]
        command += ["--state", str(state), "--ledger", str(args.ledger), "--knobs", json.dumps(knobs)]
        command += ["--until", f"{until:.1f}"] + (["--preset", preset] if preset else [])
        command += ["--chunk", str(args.chunk)] if args.chunk else []
        status = run_child(lease, command, left + 15, bound, env)
        lease.step(f"ledger {work.name}", status, began, knobs=knobs, before=before)
        if not status.startswith("no compile"):
            return status
    return status


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cpu", action="store_true", help="the rehearsal: preset smoke, budgets scaled down")
    parser.add_argument("--budget", type=float, help="seconds for the whole lease (GPU 560, CPU 150)")
    parser.add_argument("--reserve", type=float, help="seconds kept for packing (GPU 90, CPU 10)")
    parser.add_argument("--compile-bound", type=float, help="seconds a choice may take to compile (GPU 150, CPU 60)")
    parser.add_argument("--state", type=Path, default=ROOT / "book" / "records" / "paper")
    parser.add_argument("--ledger", type=Path, default=ROOT / "book" / "records" / "ledger.json")
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "/tmp/gpu_lease")))
    parser.add_argument("--preset", help="the works' preset (default theirs; --cpu: smoke)")
    parser.add_argument("--chunk", type=int, help="outer steps per compiled call (default compgen.ledger.chunk_for)")
    parser.add_argument(
        "--work-budget", type=float, default=float("inf"), help="seconds a work may train in this lease (default: all)"
    )
    parser.add_argument("--choices", help="the device choices as JSON, e.g. '[{\"fused_inner\": false}]'")
    sub = parser.add_subparsers(dest="command")
    child = sub.add_parser("advance", help="(the child) continue one work")
    for name in ("work", "state", "ledger", "knobs"):
        child.add_argument(f"--{name}", required=True)
    child.add_argument("--until", type=float, required=True)
    child.add_argument("--preset")
    child.add_argument("--chunk", type=int)
    args = parser.parse_args(argv)
    if args.command == "advance":
        return _advance(args)

    kind = "cpu" if args.cpu else "gpu"
    budget = args.budget if args.budget is not None else (150 if args.cpu else 560)
    reserve = args.reserve if args.reserve is not None else (10 if args.cpu else 90)
    bound = args.compile_bound if args.compile_bound is not None else (60 if args.cpu else 150)
    preset = args.preset or ("smoke" if args.cpu else None)
    choices = json.loads(args.choices) if args.choices else list(CHOICES[kind])
    if budget <= reserve or bound <= 0 or not choices:
        parser.error("--budget must exceed --reserve, --compile-bound be positive, --choices name at least one")
    args.out.mkdir(parents=True, exist_ok=True)
    lease = Lease(args.out, budget)
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{os.environ.get('PYTHONPATH', '')}".rstrip(":")}
    env.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    failed = False

    began = time.monotonic()
    state = args.out / "paper"
    if args.state.resolve() != state.resolve():
        shutil.copytree(args.state, state, dirs_exist_ok=True) if args.state.exists() else state.mkdir(exist_ok=True)
    lease.step("state", "ok", began, source=str(args.state))

    began = time.monotonic()
    try:
        probe = subprocess.run(
            [sys.executable, "-c", DEVICE_PROBE], capture_output=True, text=True, timeout=min(60, lease.left()), env=env
        )
        text = probe.stdout + probe.stderr
        if shutil.which("nvidia-smi"):
            text += subprocess.run(["nvidia-smi"], capture_output=True, text=True, timeout=20).stdout
        status = "ok" if probe.returncode == 0 else f"failed ({probe.returncode})"
    except subprocess.TimeoutExpired:
        text, status = "", "TIMEOUT (60 s)"
    (args.out / "device.txt").write_text(text)
    failed |= status != "ok"
    lease.step("device", status, began, first_line=(text.splitlines() or [""])[0])

    sys.path.insert(0, str(ROOT / "src"))
    from compgen import ledger, params

    works = ledger.read(args.ledger)
    for work in ledger.next_unfinished(works, state):
        if lease.left() - reserve < (5 if args.cpu else 30):
            lease.step(f"ledger {work.name}", "skipped (budget spent)", time.monotonic())
            continue
        try:
            work.configs(preset)
        except params.ParameterError as error:
            lease.step(f"ledger {work.name}", f"skipped ({error})", time.monotonic())
            continue
        status = advance_work(lease, work, args, state, choices, reserve, bound, preset, env)
        failed |= status not in ("ok", "out of time", "killed at its limit")
        if status != "ok":
            break

    standing = [ledger.status(w, state / w.name) for w in works]
    record = {"date": time.strftime("%Y-%m-%d %H:%M"), "kind": kind, "budget_s": budget, "steps": lease.steps}
    (args.out / "lease.json").write_text(json.dumps(record | {"ledger": standing}, indent=1) + "\n")
    lines = ["| step | status | seconds |", "|---|---|---:|"]
    lines += [f"| {s['step']} | {s['status']} | {s['seconds']} |" for s in lease.steps]
    (args.out / "summary.md").write_text("\n".join([*lines, "", *standing]) + "\n")
    lease.say("ledger now: " + "; ".join(standing))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
