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

``--profile`` runs one chunk of a case under JAX's profiler and groups the thunks XLA's CPU runtime executed by
kind (:func:`op_profile`): how many per outer step and how long they took, so a step far below the GEMM rate shows
whether its time goes to matrix products or to the many small operations around them. Tracing slows the step (the
table gives both times), small thunks most.

The records under ``book/records/`` are what the book's appendix ("Running it yourself",
:mod:`compgen.figures.running`) draws: the authors' step times and ours per device (:func:`step_records`; a run prints
those taken on its kind of device beside its rows) and the last measured build (:func:`book_time_record`).

``--book`` reads the executed notebooks (papermill records each cell's duration) and the results store: the runs a
chapter trained are those stored while it executed, and each run records its seconds of compilation, set-up,
training and evaluation (:func:`compgen.runner.train`).
"""

from __future__ import annotations

import argparse
import ctypes.util
import datetime
import json
import os
import resource
import shlex
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from compgen import allocator, fingerprint, params, recordfile, results, storage, timing

SHARD_SUFFIX = ", tasks sharded"  # cases run with the meta-batch sharded over one host device per core
CASES = {
    # name: (section, preset, model (None: the section has no models), overrides, the timed chunk's cap on a CPU
    # (chunk_steps), timed chunks)
    "teacher_student paper, 1 run": ("teacher_student", "paper", None, {"seeds": (100,)}, 2, 3),
    f"teacher_student paper, 1 run{SHARD_SUFFIX}": ("teacher_student", "paper", None, {"seeds": (100,)}, 2, 3),
    "teacher_student quick, 1 run": ("teacher_student", "quick", None, {"seeds": (100,)}, 50, 5),
    "teacher_student quick, 3 seeds": ("teacher_student", "quick", None, {}, 20, 3),
}
# The hyperteacher at the configuration of the reference timings (M = 4, K = 2, 128 tasks, 256 + 256 shots)
# and at quick, one seed, for each model.
_HT_PAPER = {"n_modules": 4, "max_hot": 2, "seeds": (2020,)}
# A paper chunk has 2 outer steps on a CPU (a real loop: XLA removes a loop of one step), timed twice but MAML's
# (the slowest step, about 10 s in the hyperteacher), timed once: `make bench` takes about a minute longer than with
# the one-step chunks it timed before.
_PAPER_REPEATS = {"hnet_linear": 2, "hnet_deepmlp": 2, "anil": 2, "maml": 1}
for _model in ("hnet_linear", "hnet_deepmlp", "anil", "maml"):
    _case_args = ("hyperteacher", "paper", _model, _HT_PAPER, 2, _PAPER_REPEATS[_model])
    CASES[f"hyperteacher {_model} paper (M=4, K=2)"] = _case_args
    CASES[f"hyperteacher {_model} paper (M=4, K=2){SHARD_SUFFIX}"] = _case_args
for _model in ("hnet_linear", "hnet_deepmlp", "anil", "maml"):
    CASES[f"hyperteacher {_model} quick"] = ("hyperteacher", "quick", _model, {"seeds": (2020,)}, 20, 3)
# The grid worlds: task generation alone (one meta-batch of tasks with their demonstrations), and one outer step
# per model at the paper configuration and at quick, one seed.
for _section in ("preferences", "goals"):
    for _preset in ("paper", "quick"):
        CASES[f"{_section} task generation, {_preset}"] = (_section, _preset, "tasks", {"seeds": (2020,)}, 5, 5)
    for _model in ("hnet_linear", "hnet_deepmlp", "anil", "maml"):
        CASES[f"{_section} {_model} paper"] = (_section, "paper", _model, {"seeds": (2020,)}, 2, _PAPER_REPEATS[_model])
    for _model in ("hnet_linear", "anil"):
        CASES[f"{_section} {_model} paper{SHARD_SUFFIX}"] = (_section, "paper", _model, {"seeds": (2020,)}, 2, 2)
    for _model in ("hnet_linear", "hnet_deepmlp", "anil", "maml"):
        CASES[f"{_section} {_model} quick"] = (_section, "quick", _model, {"seeds": (2020,)}, 20, 3)
# Step times taken elsewhere (the authors' code on the same machines, our earlier readings) are data records under
# RECORDS/steps/, one file per code, device and session (:func:`step_records`); a run prints those taken on its kind of
# device beside its own rows and, with --record, writes its own. The book's appendix page draws them.
RECORDS = Path("book/records")  # relative to the repository root, where `make bench` runs
COMPARABLE = 0.15  # a CPU ratio is printed only where this run's GEMM is within 15 % of the record's (their spread)
ACCELERATOR_STEPS = 100  # the timed chunk's default cap on a GPU or TPU, where a paper step takes milliseconds


def step_records(folder=None) -> list[dict]:
    """The step-time records under ``folder``/steps (default :data:`RECORDS`), oldest first. A record is one code's
    figures on one device in one session: ``who`` ("authors" or "compgen"), ``device`` (a text that the device kind
    of a run on that device contains, case aside: "cpu", "H100"), ``date``, ``code`` (repository@commit), ``how``
    (how it was measured, in words), ``gemm_gflops`` (on a CPU the ``[low, high]`` GEMM readings of that session,
    else ``None``) and ``rows``: ``{key: {"s_per_step", "peak_gb", ...}}``, keyed by the bench's case name (ours) or
    by "section model" (:func:`figure_key`, the authors'); ours also ``code_fingerprint`` (:func:`code_fingerprint`).
    A damaged record is a one-line :class:`compgen.recordfile.RecordError`."""
    return recordfile.read_folder(Path(RECORDS if folder is None else folder) / "steps", "steps")


def code_fingerprint() -> str:
    """The fingerprint of the code the bench and a book build time: the runner and every section
    (:mod:`compgen.fingerprint`), which our step-time and book-time records carry."""
    return fingerprint.of_modules(fingerprint.closure("compgen.runner") + fingerprint.closure("compgen.catalog"))


def on_device(records: list, who: str, kind: str):
    """The newest of ``records`` (:func:`step_records`) by ``who`` taken on a device of kind ``kind``
    (``jax.devices()[0].device_kind``: "cpu" on any CPU), else ``None``."""
    found = [r for r in records if r["who"] == who and r["device"].lower() in kind.lower()]
    return found[-1] if found else None


def chunk_steps(cfg, cap: int) -> int:
    """Outer steps in the bench's timed chunk: those of the runner's chunk (``cfg.eval_every``, or the whole run if
    it is shorter; :func:`compgen.runner.run_steps`), at most ``cap``."""
    return min(cfg.eval_every, cfg.outer_steps, cap)


def default_cap(name: str, backend: str) -> int:
    """The cap on case ``name``'s chunk without ``--steps``: its own on a CPU, :data:`ACCELERATOR_STEPS` elsewhere."""
    return CASES[name][4] if backend == "cpu" else ACCELERATOR_STEPS


def _time_chunks(program, runs, steps, repeats):
    """Compile a chunk of ``steps`` outer steps, run it once untimed (the first execution also pays for touching
    its memory for the first time), then ``repeats`` times: (median s/step, compile s, the compiled chunk, the state
    after the last run)."""
    import jax
    import numpy as np

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

    section_name, preset, model, overrides, _, repeats = CASES[name]
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
    env = allocator.environment() if CASES[name][1] == "paper" else dict(os.environ)
    if name.endswith(SHARD_SUFFIX):
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

    section_name, preset, model, overrides, _, repeats = CASES[name]
    cap = cap or default_cap(name, jax.default_backend())
    with devices.shard_tasks() if name.endswith(SHARD_SUFFIX) else contextlib.nullcontext():
        result = _case(section_name, preset, model, overrides, cap, repeats)
    result["peak_rss_gb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6
    result["peak_device_gb"] = peak_device_gb(jax.devices()[0])
    result["device_kind"] = jax.devices()[0].device_kind
    result["gemm_gflops"] = timing.gemm_gflops()
    result["batched_gemm_gflops"] = _batched_gemm_gflops()
    return result


def figure_key(name):
    """Case ``name``'s key in the authors' records ("section model", or the section without models), or ``None`` if
    it is not at the paper configuration (plain, or sharded as ``compgen-cli`` trains a paper run)."""
    section, preset, model = CASES[name][:3]
    return " ".join(filter(None, (section, model))) if preset == "paper" else None


def authors(name, kind="cpu", records=None):
    """The authors' record on a device of kind ``kind`` and their row for the paper-configuration case ``name``
    (``s_per_step``, ``peak_gb``), else ``None``."""
    record = on_device(step_records() if records is None else records, "authors", kind)
    row = None if record is None else record["rows"].get(figure_key(name))
    return None if row is None else (record, row)


def earlier(name, kind, records=None):
    """Our newest record on a device of kind ``kind`` and its row for case ``name``, else ``None``."""
    record = on_device(step_records() if records is None else records, "compgen", kind)
    row = None if record is None else record["rows"].get(name)
    return None if row is None else (record, row)


def comparable(gemm_gflops, record) -> bool:
    """Whether a run whose GEMM read ``gemm_gflops`` ran on a machine as fast as the one of the CPU ``record``, whose
    GEMM read ``record["gemm_gflops"]`` (low, high) while its figures were taken."""
    low, high = record["gemm_gflops"]
    return low * (1 - COMPARABLE) <= gemm_gflops <= high * (1 + COMPARABLE)


def _seconds(s):
    return f"{s:.2f}" if s >= 0.1 else f"{s:.4f}"


def _authors_cells(name, s_per_step, gemm_gflops, kind="cpu", records=None):
    """The authors' figure on this kind of device and the ratio authors ÷ ours, and where we have a record on this
    kind of device (:func:`earlier`) its reading. An accelerator's kind names its chip; a CPU's does not, so on a CPU
    the ratio is left out where this machine's GEMM differs from that of the authors' record."""
    records = step_records() if records is None else records
    found = authors(name, kind, records)
    if found is None:
        cells = f"{'–':>24s} | {'–':>14s}"
    else:
        record, row = found
        same = "cpu" not in kind.lower() or comparable(gemm_gflops, record)
        ratio = f"{row['s_per_step'] / s_per_step:13.2f}×" if same else f"{'– (GEMM ≠)':>14s}"
        theirs = f"{_seconds(row['s_per_step'])} ({row['peak_gb']:.1f} GB)"
        cells = f"{theirs:>24s} | {ratio}"
    if on_device(records, "compgen", kind) is not None:
        reading = earlier(name, kind, records)
        cells += f" | {_seconds(reading[1]['s_per_step']) if reading else '–':>29s}"
    return cells


def step_record(measured: dict, kind: str, command: str) -> dict:
    """This run's step-time record (:func:`step_records`): ``measured`` is ``{case name: run_case's result}``."""
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
    return recordfile.stamp(record, code_fingerprint())


def write_record(record: dict, path: Path) -> None:
    """Write ``record`` as indented JSON at ``path`` (its folder made)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=1, default=str) + "\n")


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in text.lower()).strip("-")


def record_commit(record) -> str:
    """The short commit of the code a record measured (its ``code``, ``repository@commit``)."""
    return record["code"].rpartition("@")[2][:7]


def table_header(kind, records=None):
    """The table's header on a device of kind ``kind``: the peak memory column is the device's on an accelerator,
    and a column of our last recorded reading is added where there is one (:func:`earlier`)."""
    peak = "peak RSS GB" if "cpu" in kind.lower() else "peak dev GB"
    header = (
        f"| {'case':56s} | runs | chunk | s/outer step | s/run-step | compile s | {peak} | GFLOP/s | GEMM GFLOP/s "
        "| batched GEMM GFLOP/s | authors s/step (peak GB) | authors ÷ ours |"
    )
    found = on_device(step_records() if records is None else records, "compgen", kind)
    if found is not None:
        header += f" ours at {record_commit(found)} ({found['date']}) |"
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
    records = step_records() if records is None else records
    found = on_device(records, "authors", kind)
    if found is None:
        notes = f"\nNo figures of the authors' code were taken on a {kind}."
    else:
        notes = f"\nThe authors' figures ({found['code']}, {found['date']}): {found['how']}."
        if "cpu" in kind.lower():
            notes += (
                " A ratio against them is exact only between figures taken in one session on one machine, so it is "
                f"printed only where this run's GEMM column reads within {COMPARABLE:.0%} of theirs ('– (GEMM ≠)' "
                "elsewhere)."
            )
    ours = on_device(records, "compgen", kind)
    if ours is not None:
        notes += f" The last column is our reading at {record_commit(ours)} ({ours['date']}): {ours['how']}."
    return notes + f" Records: {RECORDS}/steps/."


RUN_PARTS = ("compile", "setup", "train", "evaluate")  # where a run's seconds go (compgen.runner.train)
BUDGET_GEMM = 250.0  # GFLOP/s: the slow 2-core machine the quick book's time budget is stated for (README)


def _utc(text: str) -> datetime.datetime:
    """An ISO time (papermill's are naive UTC, the store's carry +00:00) as a naive UTC datetime."""
    moment = datetime.datetime.fromisoformat(text)
    return moment.astimezone(datetime.timezone.utc).replace(tzinfo=None) if moment.tzinfo else moment


def _json(path: Path, what: str) -> dict:
    """The JSON object in ``path``, or a one-line :class:`compgen.params.ParameterError` naming it as ``what``."""
    try:
        found = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise params.ParameterError(f"{path}: cannot read {what} ({type(e).__name__})") from None
    if not isinstance(found, dict):
        raise params.ParameterError(f"{path}: {what} must hold a JSON object, not {type(found).__name__}")
    return found


def stored_runs(store: Path) -> list[dict]:
    """Every run of ``store`` that recorded when it was stored: ``key`` (its file's stem), ``section``, ``config``,
    ``date`` (naive UTC), ``commit``, ``gemm`` (GFLOP/s or ``None``) and its seconds per part of :data:`RUN_PARTS`."""
    runs = []
    for sidecar in sorted(Path(store).glob("*/*.json")):
        entry = _json(sidecar, "a results-store entry (`compgen-cli store` lists the store)")
        provenance = entry.get("provenance", {})
        if "date" in provenance:
            run = {"key": sidecar.stem, "section": sidecar.parent.name, "config": entry.get("config", {})}
            run.update(date=_utc(provenance["date"]), commit=provenance.get("git_commit"))
            run["gemm"] = provenance.get("gemm_gflops")
            run.update({part: provenance.get("seconds", {}).get(part, 0.0) for part in RUN_PARTS})
            runs.append(run)
    return runs


TRAINING_CALLS = ("notebook.train(", "compare.compare(")  # what a chapter's training cells call


def book_time(notebooks: Path, stored: list[dict]) -> list[dict]:
    """Per executed notebook of ``notebooks`` (papermill's metadata): ``chapter``, its ``wall`` seconds, the seconds
    of its cells that train (call one of :data:`TRAINING_CALLS`: ``training_cells``), the ``trained`` runs of ``stored``
    (:func:`stored_runs`) stored while it executed (their keys) and their number ``runs``, their process seconds per
    part of :data:`RUN_PARTS` (summed over the worker processes, which run in parallel) and ``gemm``, the mean GEMM
    reading (GFLOP/s, :func:`compgen.timing.gemm_gflops`) they recorded (NaN if none did). A run stored without its
    parts counts in ``runs`` only."""
    rows = []
    for path in sorted(Path(notebooks).glob("*.ipynb")):
        notebook = _json(path, "an executed notebook (run `make execute` again)")
        run = notebook.get("metadata", {}).get("papermill", {})
        if not run.get("start_time") or not run.get("end_time"):
            continue
        start, end = _utc(run["start_time"]), _utc(run["end_time"])
        mine = [r for r in stored if start <= r["date"] <= end]
        training = sum(
            cell.get("metadata", {}).get("papermill", {}).get("duration") or 0.0
            for cell in notebook["cells"]
            if cell["cell_type"] == "code" and any(call in "".join(cell["source"]) for call in TRAINING_CALLS)
        )
        row = {"chapter": path.stem, "wall": (end - start).total_seconds(), "training_cells": training}
        row["trained"], row["runs"] = [r["key"] for r in mine], len(mine)
        row.update({part: sum(r[part] for r in mine) for part in RUN_PARTS})
        readings = [r["gemm"] for r in mine if r["gemm"]]
        row["gemm"] = float(np.mean(readings)) if readings else float("nan")
        row["preset"] = run.get("parameters", {}).get("preset")
        row["start"], row["end"] = start.isoformat(), end.isoformat()
        rows.append(row)
    return rows


def book_time_record(rows: list[dict], runs: list[dict]) -> dict:
    """A book-time record (``RECORDS/book_time.json``, the appendix page's): the chapters' :func:`book_time` ``rows``
    and each run a chapter trained (:func:`stored_runs`, with its ``chapter``), the commit most of them were trained
    at, the date the build ended and the preset."""
    by_key = {r["key"]: r for r in runs}
    chapters = [
        {**by_key[key], "chapter": row["chapter"], "date": by_key[key]["date"].isoformat()}
        for row in rows
        for key in row["trained"]
    ]
    commits = [r["commit"] for r in chapters if r["commit"]]
    record = {
        "record": "book_time",
        "date": max((row["end"] for row in rows), default="")[:10],
        "code": f"compgen@{max(set(commits), key=commits.count) if commits else 'unknown'}",
        "preset": next((row["preset"] for row in rows if row["preset"]), None),
        "cores": os.cpu_count(),
        "chapters": [
            {k: (None if isinstance(v, float) and not np.isfinite(v) else v) for k, v in row.items()} for row in rows
        ],
        "runs": chapters,
    }
    return recordfile.stamp(record, code_fingerprint())


def at_budget_machine(seconds: float, gemm: float) -> float:
    """``seconds`` measured on a machine whose GEMM read ``gemm`` GFLOP/s, scaled to one reading
    :data:`BUDGET_GEMM` (NaN without a reading, unless no time was measured)."""
    return seconds * gemm / BUDGET_GEMM if seconds else 0.0


BUDGET_MINUTES = {"chapter": 20.0, "book": 60.0}  # the quick book's training, at BUDGET_GEMM (README, book/running.py)


def budget_problems(rows: list[dict]) -> tuple[list[str], list[str]]:
    """The quick book's time budget against :func:`book_time` ``rows``: ``(exceeded, not_measured)``, one message
    each. Each chapter's training cells, scaled to a machine whose GEMM reads :data:`BUDGET_GEMM` GFLOP/s
    (:func:`at_budget_machine`), must be within ``BUDGET_MINUTES["chapter"]`` and their sum within
    ``BUDGET_MINUTES["book"]``; a page without training cells costs nothing. A chapter whose runs were all loaded
    from the store (none trained while it executed), or that recorded no GEMM reading, cannot be measured: the check
    needs a build from an empty store (``COMPGEN_RESULTS`` pointing to a new folder)."""
    exceeded, not_measured, total = [], [], 0.0
    for row in rows:
        if row["chapter"] == "results" or not row["training_cells"]:  # a page that trains nothing costs nothing
            continue
        if not row["runs"]:
            not_measured.append(f"{row['chapter']}: not measured: no run was trained while it executed (empty store)")
            continue
        if not np.isfinite(row["gemm"]):
            not_measured.append(f"{row['chapter']}: not measured: its runs recorded no GEMM reading to scale by")
            continue
        minutes = at_budget_machine(row["training_cells"], row["gemm"]) / 60
        total += minutes
        if not minutes <= BUDGET_MINUTES["chapter"]:
            exceeded.append(
                f"{row['chapter']}: {minutes:.1f} min of training at {BUDGET_GEMM:.0f} GFLOP/s, "
                f"above the chapter budget of {BUDGET_MINUTES['chapter']:.0f}"
            )
    if not total <= BUDGET_MINUTES["book"]:
        exceeded.append(
            f"the book: {total:.1f} min of training at {BUDGET_GEMM:.0f} GFLOP/s, above the budget of "
            f"{BUDGET_MINUTES['book']:.0f}"
        )
    return exceeded, not_measured


def book_time_table(rows: list[dict]) -> str:
    """:func:`book_time` as two markdown tables (minutes), each with a total row: the budget's (wall and training-cell
    minutes, each chapter's training-cell minutes scaled to a machine whose GEMM reads :data:`BUDGET_GEMM` GFLOP/s,
    :func:`at_budget_machine`), then where the runs' process minutes went (:data:`RUN_PARTS`)."""
    total = {k: sum(r[k] for r in rows) for k in ("wall", "training_cells", "runs", *RUN_PARTS)}
    total["scaled"] = sum(at_budget_machine(r["training_cells"], r.get("gemm", np.nan)) for r in rows)
    readings = [r["gemm"] for r in rows if np.isfinite(r.get("gemm", np.nan))]
    total["gemm"] = float(np.mean(readings)) if readings else float("nan")
    budget = [
        f"| chapter | wall min | training cells min | GEMM GFLOP/s | training min at {BUDGET_GEMM:.0f} GFLOP/s "
        "| rest of the notebook min |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    process = [
        "| chapter | runs trained | compile | set-up | train | evaluate | compile share |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in [*rows, {"chapter": "total", **total}]:
        gemm = r.get("gemm", np.nan)
        scaled = r.get("scaled", at_budget_machine(r["training_cells"], gemm))
        budget.append(
            f"| {r['chapter']} | {r['wall'] / 60:.1f} | {r['training_cells'] / 60:.1f} "
            f"| {f'{gemm:.0f}' if np.isfinite(gemm) else '–'} "
            f"| {scaled / 60:.1f} | {(r['wall'] - r['training_cells']) / 60:.1f} |"
        )
        spent = sum(r[p] for p in RUN_PARTS)
        share = f"{100 * r['compile'] / spent:.0f} %" if spent else "–"
        parts = " | ".join(f"{r[p] / 60:.1f}" for p in RUN_PARTS)
        process.append(f"| {r['chapter']} | {r['runs']} | {parts} | {share} |")
    between = "\n\nThe runs' process minutes, by what they spent them on:\n\n"
    return "\n".join(budget) + between + "\n".join(process)


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
    return [n for n in CASES if any(p in n for p in parts) and (kind == "cpu" or not n.endswith(SHARD_SUFFIX))]


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
    parser.add_argument("--case", choices=sorted(CASES), help="run one case and print JSON")
    parser.add_argument(
        "--only", default="", help="run the cases whose name contains this text (or one of several, separated by |)"
    )
    parser.add_argument("--book", metavar="DIR", help="where the executed notebooks of DIR spent their time")
    parser.add_argument("--store", metavar="DIR", help="results store for --book (default: $COMPGEN_RESULTS)")
    parser.add_argument(
        "--check-budget",
        action="store_true",
        help="with --book: exit 1 unless every chapter's training is within the quick book's budget "
        f"({BUDGET_MINUTES['chapter']:.0f} min per chapter, {BUDGET_MINUTES['book']:.0f} in all, at "
        f"{BUDGET_GEMM:.0f} GFLOP/s)",
    )
    parser.add_argument(
        "--record",
        action="store_true",
        help="write what was measured as a record under --records: the cases' step times (steps/), or with --book "
        "the book's time (book_time.json; only a build whose every chapter was measured)",
    )
    parser.add_argument("--records", metavar="DIR", help=f"the records (default {RECORDS})")
    parser.add_argument("--note", default="", help="with --record: what a reader of the record should know of the run")
    parser.add_argument("--profile", choices=sorted(CASES), metavar="CASE", help="one case's XLA thunks, by kind")
    parser.add_argument(
        "--steps",
        type=int,
        help=f"at most this many outer steps in a timed chunk, which is otherwise the runner's (eval_every) up to "
        f"the case's default on a CPU and {ACCELERATOR_STEPS} on an accelerator",
    )
    return parser


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
    if args.only and not any(part in name for name in CASES for part in args.only.split("|")):
        return f"--only {args.only!r} names no case (python -m compgen.bench --help lists them under --case)"
    if not args.book and (args.check_budget or args.store):
        option = "--check-budget" if args.check_budget else "--store"
        return f"{option} reads an executed book: give --book DIR (`make execute` executes one into book/)"
    records = Path(args.records or RECORDS)
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
        args.records = Path(args.records or RECORDS)
        if args.profile:
            print(profile_case(args.profile, args.steps))
            return 0
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
    runs = stored_runs(Path(args.store or storage.results_root()))
    rows = book_time(Path(args.book), runs)
    if not rows:
        message = f"no notebook executed by papermill in {args.book} (make execute)"
        if args.check_budget:
            raise params.ParameterError(f"--check-budget: nothing to check, {message}")
        print(message)
        return 0
    print(book_time_table(rows))
    print(
        "\nProcess minutes add up the worker processes, which train side by side (one per core), so they can "
        "exceed the training cells' wall minutes. Compilation includes loading programs from JAX's cache."
    )
    exceeded, not_measured = budget_problems(rows)
    if args.record:
        if not_measured:
            print(f"record: not written, not every chapter was measured ({not_measured[0]})")
        else:
            path = args.records / "book_time.json"
            write_record({**book_time_record(rows, runs), "note": args.note}, path)
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
    records = step_records(args.records)
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
        record["how"] += f"; {args.note}" if args.note else ""
        name = f"compgen-{_slug(record['device'])}-{record['date']}-{record_commit(record)}.json"
        path = args.records / "steps" / name
        write_record(record, path)
        print(f"record: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
