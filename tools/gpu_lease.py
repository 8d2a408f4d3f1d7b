"""Spend a device lease on a ledger of long work, in a fixed order, and leave everything it advanced in $OUT.

    python3 tools/gpu_lease.py                    # on the GPU machine, from the repository root
    python3 tools/gpu_lease.py --cpu              # the rehearsal: preset smoke, budgets scaled down (CI runs it)
    python3 tools/gpu_lease.py --cpu --state /tmp/o1/paper --out /tmp/o2     # ... resumed from a previous $OUT
    python3 tools/gpu_lease.py --bridge --budget 10800 --cores 1             # a CPU lease of the scale bridge

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
session and on a fresh machine, resumes from there. ``--bridge`` is a CPU lease of the scale bridge
(``book/records/bridge/ledger.json``, :mod:`compgen.analysis.scale`) that advances its state where it is committed
(``--in-place``), at the works' own presets, in the background of other work. ``--cores N`` bounds the cores the
children run on (the last N this process may use): on a GPU one child at a time takes them all; on the CPU up to N
works advance at once, each child on a core of its own. Every argument is checked before anything is copied or
probed, each refusal one line naming the flag or file, exit status 2: budgets finite and positive, a known preset, a
chunk that divides every work's ``eval_every``, works that each name their configs, a ``--state`` that exists (else
``--fresh``), an ``--out`` no other lease holds (a lock), and a state of regular files only (no link is followed),
each of bounded size. Exit
status: 0 when every step ended as planned (a budget that ends a work is planned), 1 when a choice or child failed.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import shutil
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT_OF_TIME = 3  # the exit status of a child whose budget ended its work before the last step
MAX_STATE_FILE = 2 * 2**30  # the largest file a state may hold (a paper run's checkpoint is well under 1 GiB)
MAX_STATE_BYTES = 16 * 2**30  # the most a state may hold in all
BRIDGE = ROOT / "book" / "records" / "bridge"  # the scale bridge's ledger.json and state
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
    """The child: continue one work until the time ``--until`` (seconds since the epoch), on the cores
    ``$COMPGEN_LEASE_CORES`` names (comma-separated) where that is set, pinned before JAX starts so that its threads
    keep to them."""
    cores = os.environ.get("COMPGEN_LEASE_CORES")
    if cores and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {int(c) for c in cores.split(",")})
        print(f"[cores] {args.work} on core(s) {cores}", flush=True)
    from compgen import ledger, params

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
            fresh=args.fresh,
        )
    except ledger.OutOfTime as stopped:
        print(f"[ledger] budget spent: {stopped}", flush=True)
        return OUT_OF_TIME
    except params.ParameterError as refused:
        print(f"[ledger] refused: {refused}", flush=True)
        return 2
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


def advance_work(lease, work, args, state, chosen, env) -> str:
    """Advance ``work`` in a child process with the first of the settings' choices (``chosen``, :func:`settings`)
    that compiles in time; the last status."""
    from compgen import ledger

    reserve, bound, preset = chosen["reserve"], chosen["bound"], chosen["preset"]
    before = ledger.status(work, state / work.name)
    for knobs in chosen["choices"]:
        began, left = time.monotonic(), lease.left() - reserve
        until = time.time() + min(left, args.work_budget)
        command = [sys.executable, "-u", str(Path(__file__).resolve()), "advance", "--work", work.name]
        command += ["--state", str(state), "--ledger", str(args.ledger), "--knobs", json.dumps(knobs)]
        command += ["--until", f"{until:.1f}"] + (["--preset", preset] if preset else [])
        command += ["--chunk", str(args.chunk)] if args.chunk else []
        command += ["--fresh"] if args.fresh else []
        status = run_child(lease, command, left + 15, bound, env)
        lease.step(f"ledger {work.name}", status, began, knobs=knobs, before=before)
        if not status.startswith("no compile"):
            return status
    return status


def advance_ledger(lease, pending, args, state, chosen, env) -> bool:
    """Advance the ``pending`` works in order, as many at once as :func:`core_slots` gives slots, each child on its
    slot's cores; no work starts after one ended other than "ok" (its budget spent, or failed). Whether any failed."""
    reserve, cpu = chosen["reserve"], chosen["kind"] == "cpu"
    pending, guard, outcome = list(pending), threading.Lock(), {"failed": False, "stop": False}

    def slot(cores):
        mine = env if cores is None else {**env, "COMPGEN_LEASE_CORES": ",".join(map(str, cores))}
        while True:
            with guard:
                if outcome["stop"] or not pending:
                    return
                work = pending.pop(0)
            if lease.left() - reserve < (5 if cpu else 30):
                lease.step(f"ledger {work.name}", "skipped (budget spent)", time.monotonic())
                continue
            try:
                status = advance_work(lease, work, args, state, chosen, mine)
            except BaseException as error:  # raised again below, once every other child has ended
                status = outcome["error"] = error
            with guard:
                outcome["failed"] |= status not in ("ok", "out of time", "killed at its limit")
                outcome["stop"] |= status != "ok"

    threads = [threading.Thread(target=slot, args=(c,)) for c in core_slots(args.cores, cpu)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["failed"]


class Refused(Exception):
    """A bad argument or input: one line naming the flag or file, exit status 2."""


def _finite(name: str, value, positive=True) -> float:
    if value is None or not math.isfinite(value) or (value <= 0 if positive else value < 0):
        raise Refused(f"{name} must be a finite number {'> 0' if positive else '>= 0'}, got {value!r}")
    return value


def settings(args) -> dict:
    """The lease's settings from ``args``, each checked (see module docstring), or :class:`Refused`."""
    kind = "cpu" if args.cpu or args.bridge else "gpu"
    budget = _finite("--budget", args.budget if args.budget is not None else (150 if args.cpu else 560))
    reserve = _finite("--reserve", args.reserve if args.reserve is not None else (10 if kind == "cpu" else 90))
    bound = _finite(
        "--compile-bound", args.compile_bound if args.compile_bound is not None else (60 if args.cpu else 150)
    )
    args.work_budget = _finite("--work-budget", args.work_budget if args.work_budget is not None else budget, False)
    if budget <= reserve:
        raise Refused(f"--budget ({budget:g} s) must exceed --reserve ({reserve:g} s)")
    if args.chunk is not None and args.chunk < 1:
        raise Refused(f"--chunk must be a whole number >= 1, got {args.chunk}")
    if args.cores is not None and not 1 <= args.cores <= (os.cpu_count() or 1):
        raise Refused(f"--cores must be between 1 and this machine's {os.cpu_count()} cores, got {args.cores}")
    try:
        choices = json.loads(args.choices) if args.choices else list(CHOICES[kind])
    except json.JSONDecodeError as error:
        raise Refused(f"--choices is not JSON: {error}") from None
    if not isinstance(choices, list) or not choices or not all(isinstance(c, dict) for c in choices):
        raise Refused(f"--choices must be a list of at least one object, got {args.choices!r}")
    preset = args.preset or ("smoke" if args.cpu else None)
    return {"kind": kind, "budget": budget, "reserve": reserve, "bound": bound, "choices": choices, "preset": preset}


def check_works(ledger_path: Path, preset, chunk) -> list:
    """The ledger's works, each checked to name its configs at ``preset`` (default its own) and to be divisible into
    ``chunk``-step calls; else :class:`Refused` naming the ledger file."""
    from compgen import bridge, ledger, params, recordfile, section

    if preset is not None and preset not in section.PRESET_NAMES and bridge.parse(preset) is None:
        raise Refused(f"--preset must be one of {section.PRESET_NAMES} or bridge-x<N>, got {preset!r}")
    try:
        works = ledger.read(ledger_path)
    except recordfile.RecordError as error:
        raise Refused(str(error)) from None
    if not works:
        raise Refused(f"{ledger_path}: the ledger lists no work")
    for work in works:
        try:
            configs = work.configs(preset)
            if chunk is not None:
                ledger.chunk_for(configs[0].eval_every, chunk)
        except params.ParameterError as error:
            raise Refused(f"{ledger_path}: {error}") from None
    return works


def check_state(folder: Path, fresh: bool) -> int:
    """The bytes of the state ``folder`` to copy, having checked that it holds regular files and folders only (no
    link, pipe or device: none is followed), each of at most :data:`MAX_STATE_FILE` bytes and all together at most
    :data:`MAX_STATE_BYTES`; a missing folder is :class:`Refused` unless ``fresh``."""
    if not folder.exists() and not folder.is_symlink():
        if fresh:
            return 0
        raise Refused(f"--state {folder} does not exist (to start every work afresh, pass --fresh)")
    total = 0
    for top, dirs, files in os.walk(folder, followlinks=False):
        for name in dirs + files:
            path = Path(top) / name
            info = os.lstat(path)
            if stat.S_ISDIR(info.st_mode):
                continue
            if not stat.S_ISREG(info.st_mode):
                raise Refused(f"--state: {path} is not a regular file (a link, pipe or device is never copied)")
            if info.st_size > MAX_STATE_FILE:
                raise Refused(f"--state: {path} holds {info.st_size:,} bytes, more than the {MAX_STATE_FILE:,} allowed")
            total += info.st_size
            if total > MAX_STATE_BYTES:
                raise Refused(f"--state {folder} holds more than the {MAX_STATE_BYTES:,} bytes allowed")
    if os.path.islink(folder) or not folder.is_dir():
        raise Refused(f"--state {folder} is not a folder")
    return total


def copy_state(source: Path, target: Path) -> None:
    """Copy the checked state ``source`` (:func:`check_state`) into ``target``, regular files only, links never
    followed."""
    for top, _, files in os.walk(source, followlinks=False):
        into = target / Path(top).relative_to(source)
        into.mkdir(parents=True, exist_ok=True)
        for name in files:
            if stat.S_ISREG(os.lstat(Path(top) / name).st_mode):
                shutil.copyfile(Path(top) / name, into / name, follow_symlinks=False)


@contextlib.contextmanager
def held(folder: Path, what: str):
    """Hold ``folder``'s lease lock for the block, or :class:`Refused` where another lease holds it."""
    import fcntl

    folder.mkdir(parents=True, exist_ok=True)
    handle = open(folder / ".lease.lock", "a")  # noqa: SIM115 - held for the block
    try:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise Refused(f"{what} {folder} is held by another lease (lock {folder / '.lease.lock'})") from None
        yield
    finally:
        handle.close()


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cpu", action="store_true", help="the rehearsal: preset smoke, budgets scaled down")
    parser.add_argument("--bridge", action="store_true", help="a CPU lease of the scale bridge, in place")
    parser.add_argument("--budget", type=float, help="seconds for the whole lease (GPU 560, CPU 150)")
    parser.add_argument("--reserve", type=float, help="seconds kept for packing (GPU 90, CPU 10)")
    parser.add_argument("--compile-bound", type=float, help="seconds a choice may take to compile (GPU 150, CPU 60)")
    parser.add_argument("--state", type=Path, help="the state to continue (default book/records/paper)")
    parser.add_argument("--ledger", type=Path, help="the ledger (default book/records/ledger.json)")
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "/tmp/gpu_lease")))
    parser.add_argument("--preset", help="the works' preset (default theirs; --cpu: smoke)")
    parser.add_argument("--chunk", type=int, help="outer steps per compiled call (default compgen.ledger.chunk_for)")
    parser.add_argument("--work-budget", type=float, help="seconds a work may train in this lease (default: all)")
    parser.add_argument("--choices", help="the device choices as JSON, e.g. '[{\"fused_inner\": false}]'")
    parser.add_argument("--fresh", action="store_true", help="start from no state (an earlier one is set aside)")
    parser.add_argument("--in-place", action="store_true", help="advance --state where it is ($OUT: logs only)")
    parser.add_argument(
        "--cores",
        type=int,
        help="the last N cores the lease may take; on the CPU one work per core at once (default: one at a time)",
    )
    sub = parser.add_subparsers(dest="command")
    child = sub.add_parser("advance", help="(the child) continue one work")
    for name in ("work", "state", "ledger", "knobs"):
        child.add_argument(f"--{name}", required=True)
    child.add_argument("--until", type=float, required=True)
    child.add_argument("--preset")
    child.add_argument("--chunk", type=int)
    child.add_argument("--fresh", action="store_true")
    args = parser.parse_args(argv)
    if args.command != "advance":
        bridge = args.bridge
        args.ledger = args.ledger or (BRIDGE / "ledger.json" if bridge else ROOT / "book" / "records" / "ledger.json")
        args.state = args.state or (BRIDGE if bridge else ROOT / "book" / "records" / "paper")
        args.in_place = args.in_place or bridge
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.command == "advance":
        return _advance(args)
    sys.path.insert(0, str(ROOT / "src"))
    try:
        chosen = settings(args)
        works = check_works(args.ledger, chosen["preset"], args.chunk)
        size = check_state(args.state, args.fresh)
        with contextlib.ExitStack() as locks:
            locks.enter_context(held(args.out, "--out"))
            if args.in_place and args.state.resolve() != args.out.resolve():
                locks.enter_context(held(args.state, "--state"))
            return lease_run(args, chosen, works, size)
    except Refused as refused:
        print(f"gpu_lease: {refused}", file=sys.stderr)
        return 2


def core_slots(cores: int | None, cpu: bool) -> list:
    """The cores each concurrent child runs on: the last ``cores`` of this process's, one slot each on the CPU, one
    slot holding them all on a GPU; ``[None]`` (one child, no pinning) without ``cores``."""
    if not cores or not hasattr(os, "sched_getaffinity"):
        return [None]
    mine = sorted(os.sched_getaffinity(0))[-cores:]
    return [[c] for c in mine] if cpu else [mine]


def lease_run(args, chosen, works, size) -> int:
    """The lease's steps (see module docstring) with checked ``args``, settings and works."""
    from compgen import ledger, records

    lease = Lease(args.out, chosen["budget"])
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{os.environ.get('PYTHONPATH', '')}".rstrip(":")}
    env.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    failed = False

    began = time.monotonic()
    state = args.state if args.in_place else args.out / "paper"
    if not args.in_place and args.state.resolve() != state.resolve():
        copy_state(args.state, state) if args.state.exists() else state.mkdir(parents=True, exist_ok=True)
    lease.step("state", "ok", began, source=str(args.state), bytes=size, in_place=bool(args.in_place))

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

    failed |= advance_ledger(lease, ledger.next_unfinished(works, state), args, state, chosen, env)

    standing = [ledger.status(w, state / w.name) for w in works]
    records.Lease(
        date=time.strftime("%Y-%m-%d %H:%M"),
        machine=chosen["kind"],
        budget_s=chosen["budget"],
        steps=lease.steps,
        ledger=standing,
    ).save(args.out / "lease.json")
    lines = ["| step | status | seconds |", "|---|---|---:|"]
    lines += [f"| {s['step']} | {s['status']} | {s['seconds']} |" for s in lease.steps]
    (args.out / "summary.md").write_text("\n".join([*lines, "", *standing]) + "\n")
    lease.say("ledger now: " + "; ".join(standing))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
