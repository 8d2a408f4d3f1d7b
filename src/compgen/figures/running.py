"""The appendix "Running it yourself": what the quick book costs, where its compilation goes, our outer step against
the authors' code, and what was checked on a GPU, each drawn from a record under ``book/records/`` when the book is
built (never typed into the page).

- ``book_time.json``: where a quick build from an empty results store spent its time, per chapter and per run
  (:func:`compgen.booktime.book_time_record`; ``python -m compgen.bench --book book --record``);
- ``steps/*.json``: seconds per outer step of one code on one device in one session, ours or the authors'
  (:func:`compgen.steptimes.step_records`; ``python -m compgen.bench --record`` writes ours);
- ``gpu/*.json``: the steps ``tools/gpu_check.sh`` ran on a GPU machine, their status and seconds, with the device,
  the versions and what they found.

Each is read by :mod:`compgen.recordfile`: a damaged record stops the page with one line naming it and the command
that rewrites it (the records are committed: a damaged one is a bug to fix); a missing ``book_time.json`` is a note.
A record of ours made by other code than this build's (:func:`compgen.catalog.code_key`), or naming none, says
so beside what it draws (:func:`code_note`).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from compgen import booktime, catalog, programs, recordfile, steptimes
from compgen.experiments.fewshot import MODEL_LABELS
from compgen.figures import FigureResult, plots
from compgen.records import BookTime, Choices, Gpu, OpCounts, Steps, load_folder

NO_BUILD = (
    "No build has been recorded yet (`book/records/book_time.json`): execute the book from an empty results store, "
    "then `python -m compgen.bench --book book --store <that store> --record`."
)
SERIES_COLOURS = {"authors": "#bdbdbd", "ours": "#1b9e77", "ours, tasks sharded": "#7570b3"}


def load(path) -> BookTime | None:
    """The book-time record at ``path`` (checked, :meth:`compgen.records.Record.load`), or ``None`` where there is
    none."""
    return BookTime.load_if_there(path)


def gpu_records(folder) -> list:
    """The GPU-check records (:class:`compgen.records.Gpu`) under ``folder``/gpu, each checked, oldest first."""
    return load_folder(Gpu, Path(folder, "gpu"))


CODE_STATES = {
    recordfile.STALE: "code changed since",
    recordfile.NOT_RECORDED: "code not recorded",
    recordfile.OTHER_VERSIONS: "code key of other library versions",
}


def code_state(record) -> str:
    """Whether ``record`` was made by this build's code (:func:`compgen.catalog.code_key`): one of
    :data:`compgen.recordfile.CURRENT`, ``STALE``, ``NOT_RECORDED``, ``OTHER_VERSIONS``."""
    key, versions = record.computed_by()
    return recordfile.code_state(key, catalog.code_key(), versions, programs.versions())


def code_note(record) -> str:
    """A sentence saying that ``record`` shows other code than this build's, or that it names none ("" if current)."""
    state = code_state(record)
    if state == recordfile.STALE:
        return "The timed code has changed since this record was made: its figures are the older code's."
    if state in (recordfile.NOT_RECORDED, recordfile.OTHER_VERSIONS):
        return "The record names no code key comparable here, so whether the timed code changed since cannot be told."
    return ""


# --------------------------------------------------------------------------------------------- the quick book's time


def _chapters(record) -> list[dict]:
    """The record's chapters as :func:`compgen.booktime.book_time` rows (a missing GEMM reading as NaN), each with the
    record's preset."""
    return [
        {**row, "gemm": np.nan if row["gemm"] is None else row["gemm"], "preset": record.preset}
        for row in record.chapters
    ]


def budget_verdict(record) -> str:
    """One sentence: whether the recorded build is within the quick book's budget
    (:func:`compgen.booktime.budget_problems`)."""
    rows = _chapters(record)
    exceeded, not_measured = booktime.budget_problems(rows)
    total = sum(booktime.at_budget_machine(r["training_cells"], r["gemm"]) for r in rows if r["chapter"] != "results")
    budget = (
        f"{booktime.BUDGET_MINUTES['chapter']:.0f} minutes per chapter and {booktime.BUDGET_MINUTES['book']:.0f} in all"
    )
    if exceeded:
        return f"**Above the budget** of {budget}: " + "; ".join(exceeded) + "."
    if not_measured:
        return f"Not measured against the budget of {budget}: " + "; ".join(not_measured) + "."
    return (
        f"**Within the budget** of {budget}: {total / 60:.1f} minutes of training in all at "
        f"{booktime.BUDGET_GEMM:.0f} GFLOP/s."
    )


def book_cost(record) -> FigureResult:
    """The recorded quick build (``book_time.json``): each chapter's training minutes scaled to the budget's
    machine against the chapter budget (figure), the whole table (:func:`compgen.booktime.book_time_table`) and the
    budget's verdict."""
    if record is None:
        return FigureResult(notes=NO_BUILD)
    rows = _chapters(record)
    chapters = [r for r in rows if r["chapter"] != "results"]
    minutes = [booktime.at_budget_machine(r["training_cells"], r["gemm"]) / 60 for r in chapters]
    fig, ax = plots.subplots(figsize=(plots.COLUMN_WIDTH, 3.2))
    ax.bar([r["chapter"] for r in chapters], minutes, color=SERIES_COLOURS["ours"], edgecolor="k", linewidth=0.6)
    limit = booktime.BUDGET_MINUTES["chapter"]
    ax.axhline(limit, color="grey", ls="--", lw=0.8, label=f"budget per chapter ({limit:.0f} min)")
    ax.set_ylabel(f"training minutes at {booktime.BUDGET_GEMM:.0f} GFLOP/s")
    ax.set_ylim(0, max(limit, *minutes) * 1.15)
    ax.tick_params(axis="x", labelsize=8)
    ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    caption = (
        f"The quick book's training per chapter: the wall minutes of the cells that train, on a machine whose 1024² "
        f"float32 GEMM read the runs' own reading, scaled to one that reads {booktime.BUDGET_GEMM:.0f} GFLOP/s. "
        "A build "
        f"from an empty results store at preset `{record.preset}` with its seeds, commit "
        f"{steptimes.record_commit(record)}, on {record.cores} cores, ended {record.date} "
        "(`book/records/book_time.json`)." + (f" {record.note}" if record.note else "")
    )
    notes = (
        "Process minutes add up the worker processes, which train side by side (one per core), so they can exceed "
        "the training cells' wall minutes; compilation includes loading programs from JAX's cache. "
        + budget_verdict(record)
        + (f" {code_note(record)}" if code_note(record) else "")
    )
    return FigureResult(figure=fig, caption=caption, table=booktime.book_time_table(rows), notes=notes)


def _apart(run, runs) -> str:
    """The config fields in which ``run`` differs from the other runs of its section and model (seeds aside)."""
    siblings = [
        r for r in runs if r["section"] == run["section"] and r["config"].get("model") == run["config"].get("model")
    ]
    fields = [
        k
        for k, v in run["config"].items()
        if k != "seeds" and any(json.dumps(s["config"].get(k)) != json.dumps(v) for s in siblings)
    ]
    return ", ".join(f"{k}={run['config'][k]}" for k in fields[:3]) or "–"


def compile_times(record, top=10) -> FigureResult:
    """The ``top`` longest compilations of the recorded quick build, one row per run (a config, its seeds vmapped):
    its chapter, learner, what sets it apart from the section's other runs of that learner, compile and process
    seconds."""
    if record is None:
        return FigureResult(notes=NO_BUILD)
    runs = sorted(record.runs, key=lambda r: -r["compile"])
    process = sum(r[p] for r in runs for p in booktime.RUN_PARTS)
    compiled = sum(r["compile"] for r in runs)
    lines = [
        "| chapter | learner | what sets the run apart | compile s | train + evaluate s | compile share |",
        "|---|---|---|---:|---:|---:|",
    ]
    for r in runs[:top]:
        model = MODEL_LABELS.get(r["config"].get("model"), r["config"].get("model") or "–")
        rest = r["train"] + r["evaluate"]
        share = r["compile"] / max(r["compile"] + rest + r["setup"], 1e-9)
        lines.append(
            f"| {r['chapter']} | {model} | {_apart(r, runs)} | {r['compile']:.1f} | {rest:.1f} | {share:.0%} |"
        )
    caption = (
        f"The {min(top, len(runs))} longest compilations among the {len(runs)} runs of the recorded quick build "
        f"(commit {steptimes.record_commit(record)}, {record.date}): process seconds per run; compilation took "
        f"{compiled / 60:.1f} of the runs' {process / 60:.1f} process minutes ({compiled / max(process, 1e-9):.0%})."
    )
    return FigureResult(caption=caption, table="\n".join(lines))


# --------------------------------------------------------------------------------------------- against the authors


def _newest_ours(records, device: str):
    """Our newest step-time record on a device whose name contains ``device`` (the authors' record's), or ``None``."""
    ours = [r for r in records if r.who == "compgen" and device.lower() in r.device.lower()]
    return ours[-1] if ours else None


def _ours(record, key: str, sharded: bool):
    """Our row for the paper case of figure key ``key`` (plain or tasks sharded) in ``record``, or ``None``."""
    if record is None:
        return None
    for name in steptimes.CASES:
        if (
            steptimes.figure_key(name) == key
            and name.endswith(steptimes.SHARD_SUFFIX) == sharded
            and name in record.rows
        ):
            return record.rows[name]
    return None


def same_session(authors: Steps, ours: Steps) -> bool:
    """Whether two step-time records were timed in one session on one machine: the same ``session`` where both name
    one, else the same device (the authors' record names its kind: "H100", "cpu") and the same date."""
    if authors.session and ours.session:
        return authors.session == ours.session
    return authors.device.lower() in ours.device.lower() and authors.date == ours.date


def _label(key: str) -> str:
    section, _, model = key.partition(" ")
    return f"{section}, {MODEL_LABELS.get(model, model)}" if model else section


def _gb(row) -> str:
    return "" if row.get("peak_gb") is None else f" ({row['peak_gb']:.1f} GB)"


def _step_panel(ax, device: str, keys: list, series: dict) -> None:
    """One device's panel of :func:`step_times`: a bar per series and case, on a log scale."""
    width = 0.8 / len(series)
    for i, (name, values) in enumerate(series.items()):
        x = np.arange(len(keys)) + (i - (len(series) - 1) / 2) * width
        ax.bar(x, values, width, color=SERIES_COLOURS[name], edgecolor="k", linewidth=0.5, label=name)
    ax.set_yscale("log")
    every = [v for vs in series.values() for v in vs]
    ax.set_ylim(np.nanmin(every) / 2, np.nanmax(every) * 6)  # room above the bars for the legend
    ax.set_xticks(range(len(keys)), [_label(k).replace(", ", "\n") for k in keys], fontsize=6, rotation=90)
    ax.set_title(device, fontsize=9)
    ax.set_ylabel("seconds per outer step")
    ax.legend(fontsize=6, loc="upper left", ncol=len(series))


def _step_row(authors, key: str, plain, split, together: bool) -> str:
    """The table row of :func:`step_times` for case ``key``: the authors' time, ours plain and sharded, and the ratio
    over our faster variant where both were timed in one session (``together``)."""
    row = authors.rows[key]
    fastest = min((o["s_per_step"] for o in (plain, split) if o is not None), default=None)
    if fastest is None:
        ratio = "–"
    elif together:
        ratio = f"{row['s_per_step'] / fastest:.1f}×"
    else:
        ratio = "– (two sessions)"
    cells = [f"{o['s_per_step']:.3g}{_gb(o)}" if o else "–" for o in (plain, split)]
    return (
        f"| {authors.device} | {_label(key)} | {row['s_per_step']:.3g}{_gb(row)} | {cells[0]} | {cells[1]} | {ratio} |"
    )


def step_times(records) -> FigureResult:
    """Seconds per outer step at the paper's configurations, the authors' code against ours, one panel per device
    the authors' code was measured on (its records, :func:`compgen.steptimes.step_records`), beside our newest record on
    that device: bars on a log scale, and a table with peak memory and the ratio, only where the two were timed in
    one session (:func:`same_session`); figures of different sessions are shown with their dates, never divided."""
    theirs = [r for r in records if r.who == "authors"]
    fig, axes = plots.subplots(1, len(theirs), figsize=(plots.COLUMN_WIDTH, 3.6), squeeze=False)
    lines = [
        "| device | configuration | authors s/step | ours s/step | ours, tasks sharded | authors ÷ ours |",
        "|---|---|---:|---:|---:|---:|",
    ]
    notes = []
    for ax, authors in zip(axes[0], theirs):
        ours = _newest_ours(records, authors.device)
        keys = list(authors.rows)
        plain = [_ours(ours, k, False) for k in keys]
        split = [_ours(ours, k, True) for k in keys]
        series = {"authors": [authors.rows[k]["s_per_step"] for k in keys]}
        series["ours"] = [np.nan if p is None else p["s_per_step"] for p in plain]
        if any(s is not None for s in split):
            series["ours, tasks sharded"] = [np.nan if s is None else s["s_per_step"] for s in split]
        _step_panel(ax, authors.device, keys, series)
        together = ours is not None and same_session(authors, ours)
        lines += [_step_row(authors, k, p, s, together) for k, p, s in zip(keys, plain, split)]
        notes.append(f"**The authors' code on {authors.device}** ({authors.code}, {authors.date}): {authors.how}.")
        if ours is None:
            notes.append(f"**Ours on {authors.device}**: no record yet.")
        else:
            notes.append(
                f"**Ours on {ours.device}** (commit {steptimes.record_commit(ours)}, {ours.date}): {ours.how}."
                + (f" {code_note(ours)}" if code_note(ours) else "")
            )
    fig.tight_layout()
    caption = (
        "Seconds per outer step at the paper's configurations (preset `paper`, one seed per case; the hyperteacher at "
        "M = 4, K = 2), the authors' code "
        "against ours, each device in its own panel (log scale; a missing bar: not measured). The ratio uses our "
        "faster variant and is given only where both codes were timed in one session on one machine; figures of "
        "different sessions are not divided ('two sessions'; their dates in the notes below). Records: "
        "`book/records/steps/`."
    )
    return FigureResult(figure=fig, caption=caption, table="\n".join(lines), notes="\n\n".join(notes))


# --------------------------------------------------------------------------------------------- serial work


NO_OP_COUNTS = (
    "No serial-work record yet (`book/records/op_counts.json`): `python tools/op_counts.py --reference <checkout> "
    "--twin-python .venv-twin/bin/python --record` writes one."
)


def op_counts_record(folder) -> OpCounts | None:
    """The serial-work record under ``folder`` (``op_counts.json``, checked), or ``None`` where there is none."""
    return OpCounts.load_if_there(Path(folder, "op_counts.json"))


def _case_label(case: str) -> str:
    section, _, model = case.partition(" ")
    return _label(case) if model else section.replace("_", "-")


def serial_work(record) -> FigureResult:
    """What one inner step executes in sequence at the paper's configurations, ours against the authors'
    (``op_counts.json``, ``tools/op_counts.py``): operations of the lowered program and instructions (fusions) of the
    optimised CPU program per inner step, a table with a sentence computed from it; a case whose section's code
    changed since the record says so."""
    if record is None:
        return FigureResult(notes=NO_OP_COUNTS)

    lines = [
        "| configuration | inner steps | ours ops | theirs ops | ours fusions | theirs fusions |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    fewer, more_fusions, changed, runs = [], [], [], []
    for case, found in record.cases.items():
        ours, theirs = found["ours"], found["theirs"]
        cells = [f"{c[k]['per_step']:,}" if c else "–" for k in ("ops", "fusions") for c in (ours, theirs)]
        lines.append(f"| {_case_label(case)} | {ours['inner_steps']} | {' | '.join(cells)} |")
        if theirs:
            fewer.append(ours["ops"]["per_step"] <= theirs["ops"]["per_step"])
            if ours["fusions"]["per_step"] > theirs["fusions"]["per_step"]:
                more_fusions.append(_case_label(case))
            runs.append((ours["ops"]["runs"], theirs["ops"]["runs"]))
        current = programs.section_key(catalog.get(case.split(" ")[0]))
        if recordfile.code_state(ours.get("code_key"), current) != recordfile.CURRENT:
            changed.append(_case_label(case))
    commit = record.reference["commit"]
    caption = (
        "Serial work per inner step at the paper's configurations (preset `paper`, one seed; the hyperteacher at "
        "M = 4, K = 2): the operations of the lowered program and the instructions of the optimised CPU program (a "
        "fusion counts one) that one inner step executes in sequence, summed over the inner loop and, under the "
        "meta-gradient, its transposed loop; a nested loop counts its trip count times its body. Both codes are "
        f"lowered for a CPU with jax {record.jax} and counted by the same code (`tools/hlo_count.py`); the "
        f"authors' at {record.reference['repository']}"
        + (f"@{commit[:7]}" if commit else " (not counted)")
        + f", {record.date} (`book/records/op_counts.json`)."
    )
    notes = []
    if fewer:
        notes.append(
            f"Ours executes at most as many operations per inner step as the authors' in {sum(fewer)} of "
            f"{len(fewer)} configurations (`tests/tools/test_op_counts.py` holds ours to the record)."
        )
    if more_fusions:
        notes.append(
            f"The optimised CPU program of ours runs more instructions per inner step than the authors' in "
            f"{len(more_fusions)} of {len(fewer)} ({'; '.join(more_fusions)}): `tools/op_counts.py` prints the kinds "
            "of instruction that differ most."
        )
    chunked = [(o, t) for o, t in runs if o != t]
    if chunked:
        notes.append(
            "On a CPU ours adapts the meta-batch a chunk of tasks at a time, so per outer step its inner loops run "
            f"{min(o for o, _ in chunked)} to {max(o for o, _ in chunked)} times where the authors' run "
            f"{max(t for _, t in chunked)}: the same work per task, in more, shorter loops."
        )
    if changed:
        notes.append(f"The code of {', '.join(changed)} has changed since the record: its counts are the older code's.")
    return FigureResult(caption=caption, table="\n".join(lines), notes=" ".join(notes))


# --------------------------------------------------------------------------------------------- on a GPU


def gpu_checks(records) -> FigureResult:
    """What each recorded GPU check (``gpu/*.json``) ran: date, device, versions, commit, and per step its status,
    seconds and what it found."""
    lines = [
        "| date | device | jax, flax | commit | step | status | s | what it found |",
        "|---|---|---|---|---|---|---:|---|",
    ]
    for record in records:
        versions = f"{record.jax}, {record.flax}"
        state = CODE_STATES.get(code_state(record))
        commit = steptimes.record_commit(record) + (f" ({state})" if state else "")
        for i, step in enumerate(record.steps):
            first = (record.date, record.device, versions, commit) if i == 0 else ("",) * 4
            seconds = "" if step.get("seconds") is None else f"{step['seconds']:.0f}"
            lines.append(
                f"| {' | '.join(first)} | {step['step']} | {step['status']} | {seconds} | {step.get('found', '')} |"
            )
    caption = (
        "What was checked on a GPU machine, one block per session (`book/records/gpu/`): each step of "
        "`tools/gpu_check.sh` (or, before it existed, of the session's checks), its status, seconds and findings; "
        "beside the commit, whether the code has changed since, or the record does not say."
    )
    return FigureResult(caption=caption, table="\n".join(lines))


def budget_policy() -> str:
    """The quick book's budget in words, from the constants the bench checks it with
    (:data:`compgen.booktime.BUDGET_MINUTES`, :data:`compgen.booktime.BUDGET_GEMM`)."""
    return (
        f"The budget: at most {booktime.BUDGET_MINUTES['chapter']:g} minutes of training per chapter and "
        f"{booktime.BUDGET_MINUTES['book']:g} in all, measured as the wall minutes of the cells that train and scaled "
        f"to a machine whose 1024² float32 matrix product reads {booktime.BUDGET_GEMM:g} GFLOP/s (each run records the "
        "reading of the machine it trained on, `compgen.timing.gemm_gflops`)."
    )


def device_choices(path) -> FigureResult:
    """The measurements behind the device's choices (``records/choices.json``): per choice when, on what, how it was
    measured and what was found."""
    record = Choices.load(path)
    lines = ["| choice | measured | how | found |", "|---|---|---|---|"]
    for c in record.choices:
        lines.append(f"| {c['choice']} | {c['date']}, {c['machine']} | {c['how']} | {c['found']} |")
    caption = (
        "Why the device's choices are what they are: the measurement behind each (`records/choices.json`), named by "
        "the constant or function it set; a choice changes float32 round-off at most, never the science."
    )
    return FigureResult(caption=caption, table="\n".join(lines))


def ledger_table(ledger_path, root) -> FigureResult:
    """The paper-scale ledger as it stands (:mod:`compgen.ledger`): per work in order its figure, configs and seeds,
    steps done of its outer steps, leases, devices and device-hours so far, and whether its state is current."""
    from compgen import ledger

    lines = [
        "| work | figure | configs × seeds | steps done | leases | devices | device-h | state |",
        "|---|---|---:|---:|---:|---|---:|---|",
    ]
    for work in ledger.read(ledger_path):
        configs = work.configs()
        found = ledger.read_progress(Path(root) / work.name)
        size = f"{len(configs)} × {len(configs[0].seeds)}"
        total = configs[0].outer_steps
        if found is None:
            lines.append(f"| {work.name} | {work.figure} | {size} | 0 of {total:,} | 0 | – | – | not started |")
            continue
        where = ledger.standing(found)
        state = where["state"] + (" (stale: the next lease starts it again)" if ledger.staleness(found) else "")
        lines.append(
            f"| {work.name} | {work.figure} | {size} | {found.steps_done:,} of {total:,} | {where['leases']} | "
            f"{where['devices']} | {where['device_hours']:.2f} | {state} |"
        )
    caption = (
        "The paper-scale ledger (`records/ledger.json`), in the order the leases take its works: each work's "
        "configs train as lanes of one program; its state (`records/paper/<work>/`: progress and newest checkpoint) "
        "is what the last lease left, read when this page is built."
    )
    return FigureResult(caption=caption, table="\n".join(lines))


# --------------------------------------------------------------------------------------------- paper configuration


def _measured_s_per_step(record, section_name: str, model) -> float | None:
    """Our recorded seconds per outer step of one seed for a paper config of ``section_name`` and ``model``: the
    plain paper case of that pair (:func:`compgen.steptimes.figure_key`), or ``None``."""
    key = " ".join(filter(None, (section_name, model)))
    row = _ours(record, key, False)
    return None if row is None else row["s_per_step"] / row.get("runs", 1)


def paper_cost(records, device="H100") -> FigureResult:
    """What each figure costs at the paper's configuration, computed from its configs when the page is built: configs,
    runs (configs x seeds), outer steps, the GPU-hours from the analytic FLOPs (:func:`compgen.section.run_days`: at
    a sustained rate plus a floor per step, a lower bound for small, latency-bound runs), and GPU-hours from our
    newest step-time record on ``device`` where it has the figure's section and learner (its paper case's time per
    step and seed, times each config's steps and seeds: configs of another size than the case's are estimated at
    the case's time)."""
    from compgen import section

    ours = _newest_ours(records, device)
    lines = [
        "| chapter | figure | configs | runs | outer steps | GPU-h from FLOPs | GPU-h from our step |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for name, sec in catalog.SECTIONS.items():
        for figure in sec.figures("paper"):
            configs = section.figure_configs(sec, figure, "paper")
            runs = sum(len(c.seeds) for c in configs)
            hours = sum(section.run_days(sec, c) for c in configs) * 24
            measured = [(c, _measured_s_per_step(ours, name, getattr(c, "model", None))) for c in configs]
            known = [c.outer_steps * len(c.seeds) * s for c, s in measured if s is not None]
            timed = "–" if not known else f"{sum(known) / 3600:,.1f}"
            if known and len(known) < len(configs):
                timed += f" ({len(known)}/{len(configs)})"
            steps = sorted({c.outer_steps for c in configs})
            steps = f"{steps[0]:,}" + (f"–{steps[-1]:,}" if len(steps) > 1 else "")
            lines.append(f"| {name} | {figure} | {len(configs)} | {runs} | {steps} | {hours:,.1f} | {timed} |")
    source = "no record of ours" if ours is None else f"our record at {steptimes.record_commit(ours)} ({ours.date})"
    caption = (
        f"The paper's configuration, figure by figure: its configs and runs, computed from the library's configs when "
        f"this page is built; GPU-hours on one {device} from the analytic FLOPs at "
        f"{section.SUSTAINED_FLOPS / 1e12:.0f} TFLOP/s sustained plus {section.STEP_FLOOR_S * 1e6:.0f} µs per step "
        f"(a lower bound where a run is latency-bound) and from the measured step time of the figure's section and "
        f"learner ({source}; k/n: it timed the learners of k of the figure's n configs, whose hours these are)."
    )
    return FigureResult(caption=caption, table="\n".join(lines))
