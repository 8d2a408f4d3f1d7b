"""What an executed book's time went to, and the quick book's time budget.

:func:`book_time` reads the executed notebooks (papermill records each cell's duration) and the results store (each
run records its seconds of compilation, set-up, training and evaluation, :func:`compgen.runner.train`): the runs a
chapter trained are those stored while it executed. :func:`budget_problems` checks the budget
(:data:`BUDGET_MINUTES` at :data:`BUDGET_GEMM`); ``python -m compgen.bench --book`` prints and records it
(``book/records/book_time.json``), the book's appendix draws it.
"""

from __future__ import annotations

import datetime
import json
import os
from pathlib import Path

import numpy as np

from compgen import params, records, storage

RUN_PARTS = ("compile", "setup", "train", "evaluate")  # where a run's seconds go (compgen.runner.train)
BUDGET_GEMM = 250.0  # GFLOP/s: the slow 2-core machine the quick book's time budget is stated for (README)


def _utc(text: str) -> datetime.datetime:
    """An ISO time (papermill's are naive UTC, the store's carry +00:00) as a naive UTC datetime."""
    moment = datetime.datetime.fromisoformat(text)
    return moment.astimezone(datetime.timezone.utc).replace(tzinfo=None) if moment.tzinfo else moment


def _json(path: Path, what: str) -> dict:
    """The JSON object in ``path``, or a one-line :class:`compgen.params.ParameterError` naming it as ``what``."""
    try:
        found = json.loads(storage.read_text(path))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise params.ParameterError(f"{path}: cannot read {what} ({type(e).__name__})") from None
    if not isinstance(found, dict):
        raise params.ParameterError(f"{path}: {what} must hold a JSON object, not {type(found).__name__}")
    return found


def stored_runs(store: Path) -> list[dict]:
    """Every run of ``store`` (its description, :class:`compgen.records.StoredRun`, which holds when it was stored):
    ``key`` (its file's stem), ``section``, ``config``, ``date`` (naive UTC), ``commit``, ``gemm`` (GFLOP/s or
    ``None``) and its seconds per part of :data:`RUN_PARTS`."""
    runs = []
    for sidecar in sorted(Path(store).glob("*/*.json")):
        described = records.StoredRun.load(sidecar)
        provenance = described.provenance
        run = {"key": sidecar.stem, "section": described.section, "config": described.config}
        try:
            date = _utc(str(provenance["date"]))
        except ValueError:
            raise params.ParameterError(
                f"{sidecar}: its date {params._short(provenance['date'], 40)} is not an ISO time (an entry's "
                "sidecar is rebuilt from its entry by `compgen-cli store`)"
            ) from None
        run.update(date=date, commit=provenance["git_commit"])
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


def book_time_record(rows: list[dict], runs: list[dict], code: tuple = (None, None)) -> records.BookTime:
    """A book-time record (``RECORDS/book_time.json``, the appendix page's): the chapters' :func:`book_time` ``rows``
    and each run a chapter trained (:func:`stored_runs`, with its ``chapter``), the commit most of them were trained
    at, the date the build ended, the preset, and ``code``: the key of the code it timed and the library versions of
    that key (:func:`compgen.catalog.code_key`)."""
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
    return records.BookTime.from_dict({**record, "code_key": code[0], "code_versions": code[1]})


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
    needs a build from an empty store (``COMPGEN_RESULTS`` pointing to a new folder). A build at another preset (a
    row whose ``preset`` is not quick) is not judged against it: not measured, saying so."""
    exceeded, not_measured, total = [], [], 0.0
    presets = sorted({str(row.get("preset") or "quick") for row in rows})
    if presets != ["quick"]:
        return [], [f"the build was executed at preset {', '.join(presets)}: the budget is the quick book's"]
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
