"""Benchmarks (`make bench`): seconds per outer step, compile time, peak memory, throughput.

Each case runs in its own subprocess so that its peak memory is its own. A case times the loop the runner runs: it
compiles a chunk of outer steps under one ``lax.scan``, as long as the runner's (``cfg.eval_every``,
:func:`compgen.runner.train`) up to a cap (:func:`chunk_steps`; ``--steps``, else the case's default on a CPU and
:data:`ACCELERATOR_STEPS` on an accelerator), runs it once untimed (the first execution also pays for touching its
memory for the first time), then ``repeats`` times, and reports the median per-step time. Peak memory is the
device's (``memory_stats``) where it reports one, else the process's peak resident memory (a CPU).

Every paper case runs with glibc's transparent huge pages (:mod:`compgen.allocator`), as ``compgen-cli``
and ``make`` run the paper's sizes. The paper rows of the hyperteacher (and some of the other sections) are measured
twice: as a plain process runs them (one XLA device), and with each meta-batch sharded over one CPU host device per
core, as :func:`compgen.dispatch.train_or_load` trains a paper-sized run by default
(:func:`compgen.devices.shard_tasks`) and tcmalloc preloaded if it is installed (Debian:
``libtcmalloc-minimal4``). XLA's CPU kernels run most of a step's per-task batched products on one core, so the
split is what uses a multi-core CPU.

    python -m compgen.bench            # the table
    python -m compgen.bench --only "hyperteacher anil" --steps 50   # some cases, chunks of at most 50 outer steps
    python -m compgen.bench --case "hyperteacher anil paper (M=4, K=2)"   # one case, as JSON
    python -m compgen.bench --record      # the table, and this run's step times as a record (book/records/steps/)
    python -m compgen.bench --book book   # where an executed book's time went, per chapter
    python -m compgen.bench --book book --store S --record   # that, recorded (book/records/book_time.json)
    python -m compgen.bench --profile "preferences hnet_linear quick"   # one case's XLA thunks, by kind
    python -m compgen.bench --keys quick  # seconds to key every run of the book at a preset, cold and cached

``--profile`` runs one chunk of a case under JAX's profiler and groups the thunks XLA's CPU runtime executed by
kind (:func:`op_profile`): how many per outer step and how long they took, so a step far below the GEMM rate shows
whether its time goes to matrix products or to the many small operations around them. Tracing slows the step (the
table gives both times), small thunks most.

The records under ``book/records/`` are what the book's appendix ("Running it yourself",
:mod:`compgen.figures.running`) draws: the authors' step times and ours per device
(:func:`compgen.steptimes.step_records`; a run prints those taken on its kind of device beside its rows) and the last
measured build (:func:`compgen.booktime.book_time_record`).

``--keys`` times what a book pays to find its runs in the results store before it trains or loads any: the run key
of every config of every chapter (:func:`compgen.programs.key_of`), in two fresh processes. The first starts with
an empty key cache, as after an upgrade of JAX or an edit of a section's code, and lowers each program shape once
(:func:`compgen.programs.program_key`); the second reads the keys the first kept (:class:`compgen.programs.KeyCache`),
as every later build does. Both must give the same keys.

``--book`` reads the executed notebooks (papermill records each cell's duration) and the results store: the runs a
chapter trained are those stored while it executed, and each run records its seconds of compilation, set-up,
training and evaluation (:func:`compgen.runner.train`).
"""

from __future__ import annotations

import argparse
import ctypes.util
import dataclasses
import datetime
import json
import os
import resource
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from compgen import allocator, booktime, catalog, params, programs, results, steptimes, storage, timing
from compgen.records import Steps
from compgen.section import PRESET_NAMES

ACCELERATOR_STEPS = 100  # the timed chunk's default cap on a GPU or TPU, where a paper step takes milliseconds


def chunk_steps(cfg, cap: int) -> int:
    """Outer steps in the bench's timed chunk: those of the runner's chunk (``cfg.eval_every``, or the whole run if
    it is shorter; :func:`compgen.runner.run_steps`), at most ``cap``."""
    return min(cfg.eval_every, cfg.outer_steps, cap)


def default_cap(name: str, backend: str) -> int:
    """The cap on case ``name``'s chunk without ``--steps``: its own on a CPU, :data:`ACCELERATOR_STEPS` elsewhere."""
    return steptimes.CASES[name][4] if backend == "cpu" else ACCELERATOR_STEPS


def _time_chunks(program, runs, steps, repeats):
    """Compile a chunk of ``steps`` outer steps, run it once untimed (the first execution also pays for touching
    its memory for the first time), then ``repeats`` times: (median s/step, compile s, the compiled chunk, the state
    after the last run)."""
    import jax

    state = program.init(runs)
    start = time.perf_counter()
    compiled = program.steps.lower(runs, state, steps).compile()
    compile_s = time.perf_counter() - start
    state, _ = compiled(runs, state)
    jax.block_until_ready(state)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        state, _ = compiled(runs, state)
        jax.block_until_ready(state)
        times.append((time.perf_counter() - start) / steps)
    return float(np.median(times)), compile_s, compiled, state


def _program(section_name, preset, model, overrides):
    """A case's section, config, run arrays and compiled-program maker (:func:`compgen.runner.program`)."""
    from compgen import catalog, runner
    from compgen.section import make_config

    section = catalog.get(section_name)
    cfg = make_config(section, preset, "hnet_linear" if model == "tasks" else model, **overrides)
    runs = section.run_arrays([cfg])
    return section, cfg, runs, (None if model == "tasks" else runner.program(section, cfg))


def _case(section_name, preset, model, overrides, cap, repeats):
    """One config's outer step (its seeds vmapped) in a chunk of :func:`chunk_steps` of them, or
    (``model == "tasks"``) a few-shot world's task generation."""
    import jax

    section, cfg, runs, program = _program(section_name, preset, model, overrides)
    steps = chunk_steps(cfg, cap)
    if model != "tasks":
        s_per_step, compile_s, _, _ = _time_chunks(program, runs, steps, repeats)
        flops = section.flops_per_step(cfg) * len(cfg.seeds)  # every seed of the config, one outer step
        return {
            "runs": len(cfg.seeds),
            "chunk_steps": steps,
            "s_per_step": s_per_step,
            "compile_s": compile_s,
            "gflops": flops / s_per_step / 1e9,
        }
    from compgen.experiments import goals, preferences

    world = {"goals": goals.ENV, "preferences": preferences.ENV}[section_name]
    run = jax.tree.map(lambda a: a[0], runs)

    def meta_batch(key):
        tasks = world.sample_tasks(cfg, run, key, cfg.meta_batch)
        keys = jax.random.split(key, cfg.meta_batch)
        return jax.vmap(lambda t, k: world.task_data(cfg, run, {}, t, k, cfg.shots_query))(tasks, keys)

    generate = jax.jit(lambda key: jax.lax.map(meta_batch, jax.random.split(key, steps)))
    start = time.perf_counter()
    compiled = generate.lower(jax.random.key(0)).compile()
    compile_s = time.perf_counter() - start
    times = []
    for i in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(compiled(jax.random.key(i)))
        times.append((time.perf_counter() - start) / steps)
    median = sorted(times)[len(times) // 2]
    return {"runs": 1, "chunk_steps": steps, "s_per_step": median, "compile_s": compile_s, "gflops": float("nan")}


# thunk kinds that multiply matrices: XLA's dot thunks and the YNNPACK fusions (a product and what XLA fused into it)
PRODUCT_KINDS = ("dot", "ynn")


def op_kind(name: str) -> str:
    """The kind of an XLA CPU thunk from its trace name: the HLO name without its number and fusion suffix
    (``ynn_fusion.12`` -> ``ynn``, ``copy.3`` -> ``copy``, ``wrapped_add.1`` -> ``wrapped``)."""
    return name.split(".")[0].split("_")[0]


def is_thunk(event) -> bool:
    """Whether a Perfetto trace event is a complete span (``"ph": "X"``) of an HLO thunk, not the Python side (names
    starting ``$``), the runtime's own spans (``::`` or ``(`` in the name, e.g. ``ThunkExecutor::Execute``) or an
    end marker."""
    name = event.get("name", "")
    return event.get("ph") == "X" and not name.startswith(("$", "end:")) and "::" not in name and "(" not in name


def op_profile(events, steps: int) -> list:
    """Per kind of thunk (:func:`op_kind`, :func:`is_thunk`), from Perfetto trace events of ``steps`` outer steps:
    ``(kind, thunks per step, ms per step, mean µs per thunk)``, most time first."""
    totals = {}
    for e in filter(is_thunk, events):
        count, micros = totals.get(op_kind(e["name"]), (0, 0.0))
        totals[op_kind(e["name"])] = (count + 1, micros + float(e.get("dur", 0.0)))
    rows = [(k, c / steps, us / steps / 1e3, us / c) for k, (c, us) in totals.items()]
    return sorted(rows, key=lambda r: -r[2])


def profile_case(name: str, cap: int | None = None) -> str:
    """Markdown: the thunks of one chunk of case ``name`` (:func:`chunk_steps`, at most ``cap`` outer steps, default
    :func:`default_cap`), traced, by kind (:func:`op_profile`), with the untraced and traced step times and the
    products' share of the thunks' time."""
    import gzip
    import tempfile

    import jax

    section_name, preset, model, overrides, _, repeats = steptimes.CASES[name]
    if model == "tasks":
        raise SystemExit(f"--profile needs a case that trains a model, got {name!r}")
    section, cfg, runs, program = _program(section_name, preset, model, overrides)
    steps = chunk_steps(cfg, cap or default_cap(name, jax.default_backend()))
    plain, _, compiled, state = _time_chunks(program, runs, steps, repeats)
    with tempfile.TemporaryDirectory() as folder:
        with jax.profiler.trace(folder, create_perfetto_trace=True):
            state, _ = compiled(runs, state)
            jax.block_until_ready(state)
        (trace,) = Path(folder).rglob("perfetto_trace.json.gz")
        events = json.loads(gzip.decompress(trace.read_bytes()))["traceEvents"]
    rows = op_profile(events, steps)
    thunks = [e for e in events if is_thunk(e)]
    traced = (max(e["ts"] + e.get("dur", 0) for e in thunks) - min(e["ts"] for e in thunks)) / 1e6 / steps
    total = sum(r[2] for r in rows)
    products = sum(r[2] for r in rows if r[0] in PRODUCT_KINDS)
    flops = section.flops_per_step(cfg) * len(cfg.seeds)
    lines = [
        f"{name}, a chunk of {steps} outer steps: {plain * 1e3:.2f} ms per outer step untraced "
        f"({flops / plain / 1e9:.0f} GFLOP/s; a 1024² GEMM {timing.gemm_gflops():.0f} in this process), "
        f"{traced * 1e3:.2f} traced (first to last thunk); "
        f"{sum(r[1] for r in rows):.0f} thunks per step taking {total:.2f} ms summed over the executor's threads "
        f"({total / (traced * 1e3):.2f} threads busy on average), "
        f"{products / total:.0%} of it in matrix products ({', '.join(PRODUCT_KINDS)}), which alone run the step's "
        f"FLOPs at {flops / (products / 1e3) / 1e9:.0f} GFLOP/s of busy thread",
        "",
        "| thunk kind | per step | ms per step | µs each |",
        "|---|---|---|---|",
        *(f"| {k} | {n:.1f} | {ms:.3f} | {us:.1f} |" for k, n, ms, us in rows),
    ]
    return "\n".join(lines)


def _batched_gemm_gflops(tasks=128, rows=256, width=128):
    """GFLOP/s of the hypernetworks' typical matmul: one (rows, width) @ (width, width) product per task.

    Every task has its own generated weights, so the hyperteacher's inner loop is made of these
    batched products; on XLA's CPU backend they run far below a single large GEMM.
    """
    import jax
    import jax.numpy as jnp

    x = jax.random.normal(jax.random.key(0), (tasks, rows, width))
    w = jax.random.normal(jax.random.key(1), (tasks, width, width))
    return timing.jit_gflops(lambda x, w: jnp.einsum("bnh,bhk->bnk", x, w), (x, w), 2 * tasks * rows * width**2)


def tcmalloc():
    """The tcmalloc library's name if the system has one (for ``LD_PRELOAD``), else ``None``."""
    return ctypes.util.find_library("tcmalloc_minimal") or ctypes.util.find_library("tcmalloc")


def case_environment(name):
    """The environment a case's subprocess runs in: for a paper case glibc's huge pages, as ``compgen-cli``
    and ``make`` use at the paper's sizes (:mod:`compgen.allocator`); for a sharded case also one host device per core
    and tcmalloc if installed."""
    env = allocator.environment() if steptimes.CASES[name][1] == "paper" else dict(os.environ)
    if name.endswith(steptimes.SHARD_SUFFIX):
        from compgen import devices

        env["XLA_FLAGS"] = devices.xla_flags_with_host_devices(os.cpu_count(), env)
        if tcmalloc():
            env["LD_PRELOAD"] = " ".join(filter(None, [env.get("LD_PRELOAD"), tcmalloc()]))
    return env


def peak_device_gb(device):
    """The peak memory ``device`` has held in this process, GB, where it reports one (``memory_stats``, an
    accelerator), else ``None`` (a CPU)."""
    peak = (device.memory_stats() or {}).get("peak_bytes_in_use")
    return None if peak is None else peak / 1e9


def run_case(name, cap=None):
    """Case ``name``, its chunk at most ``cap`` outer steps (default :func:`default_cap`): a dict for the table."""
    import contextlib

    import jax

    from compgen import devices

    section_name, preset, model, overrides, _, repeats = steptimes.CASES[name]
    cap = cap or default_cap(name, jax.default_backend())
    with devices.shard_tasks() if name.endswith(steptimes.SHARD_SUFFIX) else contextlib.nullcontext():
        result = _case(section_name, preset, model, overrides, cap, repeats)
    result["peak_rss_gb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6
    result["peak_device_gb"] = peak_device_gb(jax.devices()[0])
    result["device_kind"] = jax.devices()[0].device_kind
    result["gemm_gflops"] = timing.gemm_gflops()
    result["batched_gemm_gflops"] = _batched_gemm_gflops()
    return result


def _seconds(s):
    return f"{s:.2f}" if s >= 0.1 else f"{s:.4f}"


def _authors_cells(name, s_per_step, gemm_gflops, kind="cpu", records=None):
    """The authors' figure on this kind of device and the ratio authors ÷ ours, and where we have a record on this
    kind of device (:func:`compgen.steptimes.earlier`) its reading. An accelerator's kind names its chip; a CPU's does
    not, so on a CPU
    the ratio is left out where this machine's GEMM differs from that of the authors' record."""
    records = steptimes.step_records() if records is None else records
    found = steptimes.authors(name, kind, records)
    if found is None:
        cells = f"{'–':>24s} | {'–':>14s}"
    else:
        record, row = found
        same = "cpu" not in kind.lower() or steptimes.comparable(gemm_gflops, record)
        ratio = f"{row['s_per_step'] / s_per_step:13.2f}×" if same else f"{'– (GEMM ≠)':>14s}"
        theirs = f"{_seconds(row['s_per_step'])} ({row['peak_gb']:.1f} GB)"
        cells = f"{theirs:>24s} | {ratio}"
    if steptimes.on_device(records, "compgen", kind) is not None:
        reading = steptimes.earlier(name, kind, records)
        cells += f" | {_seconds(reading[1]['s_per_step']) if reading else '–':>29s}"
    return cells


def step_record(measured: dict, kind: str, command: str) -> Steps:
    """This run's step-time record (:func:`compgen.steptimes.step_records`): ``measured`` is ``{case name:
    run_case's result}``."""
    cpu = "cpu" in kind.lower()
    rows = {}
    for name, r in measured.items():
        peak = r["peak_rss_gb"] if cpu else r["peak_device_gb"]
        rows[name] = {
            "s_per_step": r["s_per_step"],
            "peak_gb": peak,
            "compile_s": r["compile_s"],
            "runs": r["runs"],
            "chunk_steps": r["chunk_steps"],
            "gemm_gflops": r["gemm_gflops"],
        }
    gemm = [r["gemm_gflops"] for r in measured.values()]
    record = {
        "who": "compgen",
        "device": "cpu" if cpu else kind,
        "date": datetime.date.today().isoformat(),
        "code": f"compgen@{results._git_commit()}",
        "how": f"`{command}` on {os.cpu_count()} cores of {kind}: each case in its own process, the median per outer "
        "step over its timed chunks after an untimed one; peak memory " + ("resident" if cpu else "of the device"),
        "gemm_gflops": [min(gemm), max(gemm)] if cpu else None,
        "rows": rows,
    }
    return Steps.from_dict({**record, "code_key": catalog.code_key(), "code_versions": programs.versions()})


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in text.lower()).strip("-")


def table_header(kind, records=None):
    """The table's header on a device of kind ``kind``: the peak memory column is the device's on an accelerator,
    and a column of our last recorded reading is added where there is one (:func:`compgen.steptimes.earlier`)."""
    peak = "peak RSS GB" if "cpu" in kind.lower() else "peak dev GB"
    header = (
        f"| {'case':56s} | runs | chunk | s/outer step | s/run-step | compile s | {peak} | GFLOP/s | GEMM GFLOP/s "
        "| batched GEMM GFLOP/s | authors s/step (peak GB) | authors ÷ ours |"
    )
    found = steptimes.on_device(steptimes.step_records() if records is None else records, "compgen", kind)
    if found is not None:
        header += f" ours at {steptimes.record_commit(found)} ({found.date}) |"
    return header


def table_row(name, r, kind, records=None):
    """Case ``name``'s row from its result ``r`` (:func:`run_case`) on a device of kind ``kind``."""
    peak = r["peak_rss_gb"] if "cpu" in kind.lower() else r["peak_device_gb"]  # None: the device reports none
    peak = float("nan") if peak is None else peak
    return (
        f"| {name:56s} | {r['runs']:4d} | {r['chunk_steps']:5d} | {r['s_per_step']:12.4f} "
        f"| {r['s_per_step'] / r['runs']:10.4f} | {r['compile_s']:9.1f} | {peak:11.2f} | {r['gflops']:7.1f} "
        f"| {r['gemm_gflops']:12.1f} | {r['batched_gemm_gflops']:20.1f} "
        f"| {_authors_cells(name, r['s_per_step'], r['gemm_gflops'], kind, records)} |"
    )


def table_notes(kind, records=None):
    """What the table's figures taken elsewhere are, on a device of kind ``kind``."""
    records = steptimes.step_records() if records is None else records
    found = steptimes.on_device(records, "authors", kind)
    if found is None:
        notes = f"\nNo figures of the authors' code were taken on a {kind}."
    else:
        notes = f"\nThe authors' figures ({found.code}, {found.date}): {found.how}."
        if "cpu" in kind.lower():
            notes += (
                " A ratio against them is exact only between figures taken in one session on one machine, so it is "
                f"printed only where this run's GEMM column reads within {steptimes.COMPARABLE:.0%} of theirs "
                "('– (GEMM ≠)' "
                "elsewhere)."
            )
    ours = steptimes.on_device(records, "compgen", kind)
    if ours is not None:
        notes += f" The last column is our reading at {steptimes.record_commit(ours)} ({ours.date}): {ours.how}."
    return notes + f" Records: {steptimes.RECORDS}/steps/."


def device_kind() -> str:
    """The kind of the device the cases run on (``jax.devices()[0].device_kind``), asked of a subprocess so that
    this one does not take the accelerator's memory from the cases."""
    code = "import jax; print(jax.devices()[0].device_kind)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return out.stdout.strip().splitlines()[-1]


def case_process(name, cap=None):
    """Case ``name`` in its own process (:func:`case_environment`): its result (:func:`run_case`), or the last line
    of its error."""
    command = [sys.executable, "-m", "compgen.bench", "--case", name, *(["--steps", str(cap)] if cap else [])]
    out = subprocess.run(command, capture_output=True, text=True, env=case_environment(name))
    if out.returncode != 0:
        return (out.stderr.strip().splitlines() or [f"exit status {out.returncode}"])[-1]
    return json.loads(out.stdout.strip().splitlines()[-1])


def selected(only: str, kind: str) -> list:
    """The cases whose name contains ``only`` or one of its ``|``-separated parts; on a device of another ``kind``
    than ``cpu`` (:func:`device_kind`) not the sharded ones (they split a CPU into host devices)."""
    parts = only.split("|")
    return [
        n
        for n in steptimes.CASES
        if any(p in n for p in parts) and (kind == "cpu" or not n.endswith(steptimes.SHARD_SUFFIX))
    ]


class _Parser(argparse.ArgumentParser):
    """argparse, with a bad option reported in one line (argparse prints its usage above it), exit status 2."""

    def error(self, message):
        print(f"error: {self.prog}: {message} (see {self.prog} --help)", file=sys.stderr)
        raise SystemExit(2)


def parser() -> argparse.ArgumentParser:
    """The command line (see the module docstring)."""
    parser = _Parser(
        prog="python -m compgen.bench", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--case", choices=sorted(steptimes.CASES), help="run one case and print JSON")
    parser.add_argument(
        "--only", default="", help="run the cases whose name contains this text (or one of several, separated by |)"
    )
    parser.add_argument("--book", metavar="DIR", help="where the executed notebooks of DIR spent their time")
    parser.add_argument("--store", metavar="DIR", help="results store for --book (default: $COMPGEN_RESULTS)")
    parser.add_argument(
        "--check-budget",
        action="store_true",
        help="with --book: exit 1 unless every chapter's training is within the quick book's budget "
        f"({booktime.BUDGET_MINUTES['chapter']:.0f} min per chapter, {booktime.BUDGET_MINUTES['book']:.0f} in all, at "
        f"{booktime.BUDGET_GEMM:.0f} GFLOP/s)",
    )
    parser.add_argument(
        "--record",
        action="store_true",
        help="write what was measured as a record under --records: the cases' step times (steps/), or with --book "
        "the book's time (book_time.json; only a build whose every chapter was measured)",
    )
    parser.add_argument("--records", metavar="DIR", help=f"the records (default {steptimes.RECORDS})")
    parser.add_argument("--note", default="", help="with --record: what a reader of the record should know of the run")
    parser.add_argument(
        "--profile", choices=sorted(steptimes.CASES), metavar="CASE", help="one case's XLA thunks, by kind"
    )
    parser.add_argument(
        "--keys",
        choices=PRESET_NAMES,
        metavar="PRESET",
        help="seconds to key every run of the book at PRESET, with an empty key cache and then with the one it filled",
    )
    parser.add_argument(
        "--steps",
        type=int,
        help=f"at most this many outer steps in a timed chunk, which is otherwise the runner's (eval_every) up to "
        f"the case's default on a CPU and {ACCELERATOR_STEPS} on an accelerator",
    )
    return parser


def key_seconds(preset: str, cache: Path, sections=None) -> dict:
    """``{section: {"keys": [...], "shapes": n, "seconds": s, "configs_s": s}}``: the run key of every config of
    each section's figures at ``preset`` (all sections, or those named in ``sections``), given through the key cache
    file ``cache``, with the program shapes lowered in this process for them and the seconds it took; ``configs_s``:
    the seconds making the configs took before (their checks and budgets), which every build pays, keyed or not."""
    cache = programs.KeyCache(cache)
    out = {}
    for name in sections or catalog.SECTIONS:
        sec, start = catalog.SECTIONS[name], time.perf_counter()
        configs = [c for f in sec.figures(preset) for c in sec.configs(f, preset)]
        lowered, made = len(programs._PROGRAMS), time.perf_counter()
        keys = [cache.key(sec, c) for c in configs]
        shapes, seconds = len(programs._PROGRAMS) - lowered, time.perf_counter() - made
        out[name] = {"keys": keys, "shapes": shapes, "seconds": seconds, "configs_s": made - start}
    return out


def key_process(preset: str, cache: Path) -> dict:
    """:func:`key_seconds` in a fresh process (its own empty caches of lowered programs and fingerprints)."""
    code = "import json, sys; from compgen import bench; print(json.dumps(bench.key_seconds(sys.argv[1], sys.argv[2])))"
    out = subprocess.run([sys.executable, "-c", code, preset, str(cache)], capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError((out.stderr.strip().splitlines() or [f"exit status {out.returncode}"])[-1])
    return json.loads(out.stdout.strip().splitlines()[-1])


def key_table(cold: dict, cached: dict) -> str:
    """The markdown table of two :func:`key_seconds` passes, per section and in all; a section whose keys differ
    between them is said in its row."""
    rows = [
        "| section | configs | program shapes | keys cold (s) | keys cached (s) | making the configs (s) |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    total = lambda p, field: sum(row[field] for row in p.values())  # noqa: E731
    for name, c in [*cold.items(), ("all", None)]:
        cells = (
            (sum(len(r["keys"]) for r in cold.values()), total(cold, "shapes"), total(cold, "seconds"))
            if c is None
            else (len(c["keys"]), c["shapes"], c["seconds"])
        )
        cached_s = total(cached, "seconds") if c is None else cached[name]["seconds"]
        configs_s = total(cached, "configs_s") if c is None else cached[name]["configs_s"]
        same = "" if c is None or cached[name]["keys"] == c["keys"] else " (keys differ!)"
        rows.append(f"| {name}{same} | {cells[0]} | {cells[1]} | {cells[2]:.1f} | {cached_s:.2f} | {configs_s:.1f} |")
    return "\n".join(rows)


def _keys_command(preset: str) -> int:
    """``--keys``: the two passes of :func:`key_seconds`, each in its own process, as a table."""
    with tempfile.TemporaryDirectory() as folder:
        cache = Path(folder) / "keys.json"
        cold = key_process(preset, cache)
        cached = key_process(preset, cache)
    print(f"run keys of the book at preset {preset!r} (JAX {programs.versions()['jax']}, {os.cpu_count()} cores)")
    print(key_table(cold, cached))
    differ = [n for n in cold if cached[n]["keys"] != cold[n]["keys"]]
    return 1 if differ else 0


def _folder_problem(option: str, path: Path, may_be_new: bool = False) -> str | None:
    """What is wrong with folder ``path`` given as ``option``: a file, or (unless ``may_be_new``) nothing there."""
    if path.exists() and not path.is_dir():
        return f"{option} {path} is a file, not a folder"
    if not path.exists() and not may_be_new:
        return f"{option} {path}: no such folder"
    return None


def argument_problem(args) -> str | None:
    """What makes the command line ``args`` check or run nothing it asks for, in words, or ``None``: a ``--steps``
    below 1, an ``--only`` that names no case, ``--check-budget`` or ``--store`` without ``--book``, a ``--book`` or
    store folder that is not there, a ``--records`` that is a file or (unless ``--record`` writes there) not there."""
    if args.steps is not None and args.steps < 1:
        return f"--steps must be a whole number >= 1 (outer steps in a timed chunk), got {args.steps}"
    if args.only and not any(part in name for name in steptimes.CASES for part in args.only.split("|")):
        return f"--only {args.only!r} names no case (python -m compgen.bench --help lists them under --case)"
    if not args.book and (args.check_budget or args.store):
        option = "--check-budget" if args.check_budget else "--store"
        return f"{option} reads an executed book: give --book DIR (`make execute` executes one into book/)"
    records = Path(args.records or steptimes.RECORDS)
    found = _folder_problem("--records", records, may_be_new=args.record or not args.records)
    if found or not args.book:
        return found
    store = Path(args.store or storage.results_root())
    return _folder_problem("--book", Path(args.book)) or _folder_problem(
        "--store" if args.store else "the results store (--store, default $COMPGEN_RESULTS)", store
    )


def main(argv=None):
    command = parser()
    args = command.parse_args(argv)
    try:
        problem = argument_problem(args)
        if problem:
            command.error(problem)
        args.records = Path(args.records or steptimes.RECORDS)
        if args.profile:
            print(profile_case(args.profile, args.steps))
            return 0
        if args.keys:
            return _keys_command(args.keys)
        if args.book:
            return _book_command(args)
        if args.case:
            print(json.dumps(run_case(args.case, args.steps)))
            return 0
        return _table_command(args, argv)
    except params.ParameterError as error:  # a damaged record, store entry or notebook, a bad environment variable
        command.error(str(error))


def _book_command(args) -> int:
    """``--book``: where the executed book's time went; with ``--record`` its record, with ``--check-budget`` the
    verdict (exit 1 when exceeded)."""
    runs = booktime.stored_runs(Path(args.store or storage.results_root()))
    rows = booktime.book_time(Path(args.book), runs)
    if not rows:
        message = f"no notebook executed by papermill in {args.book} (make execute)"
        if args.check_budget:
            raise params.ParameterError(f"--check-budget: nothing to check, {message}")
        print(message)
        return 0
    print(booktime.book_time_table(rows))
    print(
        "\nProcess minutes add up the worker processes, which train side by side (one per core), so they can "
        "exceed the training cells' wall minutes. Compilation includes loading programs from JAX's cache."
    )
    exceeded, not_measured = booktime.budget_problems(rows)
    if args.record:
        if not_measured:
            print(f"record: not written, not every chapter was measured ({not_measured[0]})")
        else:
            path = args.records / "book_time.json"
            code = catalog.code_key(), programs.versions()
            dataclasses.replace(booktime.book_time_record(rows, runs, code), note=args.note or None).save(path)
            print(f"record: {path}")
    if args.check_budget:  # exceeded: exit 1; not measured (runs loaded from the store): said, exit 0
        for problem in exceeded + not_measured:
            print(f"budget: {problem}")
        verdict = "EXCEEDED" if exceeded else "not measured" if not_measured else "every chapter within it"
        print(f"budget: {verdict}")
        return 1 if exceeded else 0
    return 0


def _table_command(args, argv) -> int:
    """The cases' table (those of ``--only``), beside the records; with ``--record`` this run's step-time record."""
    records = steptimes.step_records(args.records)
    kind = device_kind()
    print(
        f"tasks sharded: {os.cpu_count()} host devices, allocator "
        f"{tcmalloc() or 'glibc (install libtcmalloc-minimal4 for tcmalloc)'}; every paper case with glibc's "
        f"{allocator.HUGE_PAGES}"
    )
    header = table_header(kind, records)
    print(f"device: {kind}")
    print(header)
    print("|" + "|".join("-" * (len(c)) for c in header.split("|")[1:-1]) + "|")
    measured = {}
    for name in selected(args.only, kind):
        r = case_process(name, args.steps)
        if isinstance(r, dict):
            measured[name] = r
        print(table_row(name, r, kind, records) if isinstance(r, dict) else f"| {name:56s} | failed: {r} |", flush=True)
    print(table_notes(kind, records))
    if args.record and measured:
        given = list(sys.argv[1:] if argv is None else argv)
        if "--note" in given:  # the note is said once, after the command
            del given[given.index("--note") : given.index("--note") + 2]
        record = step_record(measured, kind, shlex.join(["python", "-m", "compgen.bench", *given]))
        record = dataclasses.replace(record, how=record.how + (f"; {args.note}" if args.note else ""))
        name = f"compgen-{_slug(record.device)}-{record.date}-{steptimes.record_commit(record)}.json"
        path = record.save(args.records / "steps" / name)
        print(f"record: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
