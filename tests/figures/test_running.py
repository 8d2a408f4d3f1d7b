"""The appendix "Running it yourself": its tables and verdicts follow the records they are drawn from."""

import dataclasses
import json
import re

import pytest

from compgen import catalog, recordfile, records, steptimes
from compgen.figures import running


def _chapter(name, minutes, gemm=250.0, runs=2):
    row = {"chapter": name, "wall": 60.0 * minutes + 30, "training_cells": 60.0 * minutes, "runs": runs, "gemm": gemm}
    return {**row, "compile": 5.0, "setup": 0.0, "train": 50.0 * minutes, "evaluate": 1.0, "preset": "quick"}


def _run(chapter, section, model, compile_s, **config):
    config = {"model": model, "seeds": [1, 2, 3], **config}
    return {
        "key": f"{section}-{model}-{compile_s}",
        "section": section,
        "chapter": chapter,
        "config": config,
        "compile": compile_s,
        "setup": 0.0,
        "train": 100.0,
        "evaluate": 10.0,
        "gemm": 250.0,
        "commit": "abc",
    }


def _book(*chapters, runs=()):
    return records.BookTime(
        record="book_time",
        date="2026-11-28",
        code="compgen@0123456789",
        preset="quick",
        cores=2,
        chapters=chapters,
        runs=runs,
    )


def test_the_budget_verdict_is_chosen_by_the_record():
    within = _book(_chapter("a", 10.0), _chapter("b", 19.0), _chapter("results", 1.0, runs=0))
    assert running.budget_verdict(within).startswith("**Within the budget**")
    assert "29.0 minutes of training in all" in running.budget_verdict(within)
    # 12 minutes read on a machine twice as fast as the budget's are 24 at its 250 GFLOP/s
    above = _book(_chapter("a", 12.0, gemm=500.0))
    verdict = running.budget_verdict(above)
    assert verdict.startswith("**Above the budget**") and "a: 24.0 min" in verdict
    assert running.budget_verdict(_book(_chapter("a", 1.0, runs=0))).startswith("Not measured")
    result = running.book_cost(within)
    assert result.figure is not None and "0123456" in result.caption and "| a | " in result.table
    assert running.budget_verdict(within) in result.notes
    assert "No build has been recorded" in running.book_cost(None).notes


def test_compile_times_lists_the_longest_first_with_what_sets_each_run_apart():
    runs = [
        _run("goals", "goals", "anil", 10.0, split="random", hidden=32),
        _run("goals", "goals", "anil", 40.0, split="connected", hidden=32),
        _run("goals", "goals", "maml", 20.0, split="random", hidden=32),
    ]
    result = running.compile_times(_book(_chapter("goals", 5.0), runs=runs), top=2)
    rows = result.table.splitlines()[2:]
    assert len(rows) == 2 and "| 40.0 |" in rows[0] and "| 20.0 |" in rows[1]
    assert "split=connected" in rows[0] and "hidden" not in rows[0]  # hidden is the same in both ANIL runs
    assert "| – |" in rows[1]  # MAML's only run: nothing sets it apart
    assert "The 2 longest compilations among the 3 runs" in result.caption


H100 = "NVIDIA H100 80GB HBM3"
PLAIN, SHARDED = "hyperteacher anil paper (M=4, K=2)", f"hyperteacher anil paper (M=4, K=2){steptimes.SHARD_SUFFIX}"


def _steps(who, device, rows, gemm=None, date="2026-01-01"):
    return records.Steps(
        who=who, device=device, date=date, code=f"{who}@1234567", how=f"{who} how", gemm_gflops=gemm, rows=rows
    )


# 8 s against our faster 2 s: 4x where both were timed in one session; never divided across sessions
@pytest.mark.parametrize("our_date, ratio", [("2026-11-25", "4.0×"), ("2026-11-28", "– (two sessions)")])
def test_step_times_compare_like_with_like(our_date, ratio):
    """The ratio uses our faster variant, and only where both codes were timed in one session on one machine."""
    taken = [
        _steps("authors", "cpu", {"hyperteacher anil": {"s_per_step": 8.0, "peak_gb": 8.6}}, date="2026-11-25"),
        _steps(
            "compgen",
            "cpu",
            {PLAIN: {"s_per_step": 4.0, "peak_gb": 1.0}, SHARDED: {"s_per_step": 2.0, "peak_gb": 1.2}},
            date=our_date,
        ),
        _steps("authors", "H100", {"hyperteacher anil": {"s_per_step": 0.05, "peak_gb": 8.2}}),
    ]
    result = running.step_times(taken)
    cpu_row, gpu_row = result.table.splitlines()[2:]
    assert cpu_row.startswith("| cpu | hyperteacher, ANIL | 8 (8.6 GB) | 4 (1.0 GB) | 2 (1.2 GB) |")
    assert cpu_row.endswith(f"| {ratio} |")
    assert gpu_row == "| H100 | hyperteacher, ANIL | 0.05 (8.2 GB) | – | – | – |"  # no record of ours on it
    assert "**Ours on H100**: no record yet." in result.notes and len(result.figure.axes) == 2


def test_the_committed_records_draw():
    """The page's own records: every one of them draws (the book's build would fail otherwise), each figure with a
    caption naming its preset and seeds (as tools/check_book.py asks of every figure)."""
    steps = running.step_times(steptimes.step_records())
    assert steps.figure is not None and "preset" in steps.caption and "seed" in steps.caption
    checks = running.gpu_records(steptimes.RECORDS)
    assert checks and all(r.device and r.date and r.code and r.jax and r.flax and r.steps for r in checks)
    table = running.gpu_checks(checks).table
    assert all(r.device in table for r in checks)
    record = running.load(steptimes.RECORDS / "book_time.json")
    if record is not None:
        cost = running.book_cost(record)
        assert cost.figure is not None and "preset" in cost.caption and "seeds" in cost.caption
        assert running.compile_times(record).table


def test_the_paper_cost_counts_the_figures_configs_and_uses_our_step_time():
    from compgen import catalog, section

    record = _steps("compgen", H100, {"teacher_student paper, 1 run": {"s_per_step": 0.01, "runs": 1}}, date="2026-02")
    table = running.paper_cost([record]).table
    (row,) = [line for line in table.splitlines() if line.startswith("| teacher_student | fig2c |")]
    configs = section.figure_configs(catalog.get("teacher_student"), "fig2c", "paper")
    hours = sum(c.outer_steps * len(c.seeds) * 0.01 for c in configs) / 3600
    cells = [c.strip() for c in row.split("|")[1:-1]]
    assert cells[2:4] == [str(len(configs)), str(sum(len(c.seeds) for c in configs))]
    assert cells[-1] == f"{hours:,.1f}"
    (row,) = [line for line in table.splitlines() if line.startswith("| hyperteacher | fig3b |")]
    assert row.endswith("| – |")  # no hyperteacher case in the record


# ------------------------------------------------------------------------------ damaged records, and stale ones


@pytest.mark.parametrize(
    "what, text, expected",
    [
        ("truncated", '{"record": "book_time", "chapters": [', "is not valid JSON"),
        ("empty", "", "is empty"),
        ("a list", "[]", "holds list"),
        ("negative minutes", None, r"chapters\[0\]\.wall must be a number >= 0, got -221490"),
        ("future", "schema", "written by a newer compgen"),
    ],
)
def test_a_damaged_book_time_record_stops_the_appendix_in_one_line_naming_it(what, text, expected, tmp_path):
    """The appendix reads the committed record: a damaged one is a bug to fix, said in one line with the command
    that rewrites it, never drawn (negative minutes once read "Within the budget ... −3692 minutes")."""
    record = _book(_chapter("a", -3692.0))
    text = {
        None: json.dumps(record.to_dict()),
        "schema": json.dumps({**_book(_chapter("a", 1.0)).to_dict(), "schema": 9}),
    }.get(text, text)
    path = tmp_path / "book_time.json"
    path.write_text(text)
    with pytest.raises(recordfile.RecordError) as error:
        running.load(path)
    message = str(error.value)
    assert message.startswith(f"{path}: book-time record") and re.search(expected, message) and "\n" not in message
    assert "python -m compgen.bench --book book --store <store> --record" in message
    assert running.load(tmp_path / "none.json") is None  # no record: the page's note (NO_BUILD)


def test_a_damaged_gpu_or_step_record_stops_the_appendix_in_one_line_naming_it(tmp_path):
    (tmp_path / "gpu").mkdir()
    (tmp_path / "gpu" / "x.json").write_text(json.dumps({"device": "H200", "date": "d", "code": "c", "steps": []}))
    with pytest.raises(recordfile.RecordError, match=r"gpu/x\.json: GPU-check record is damaged: the record has no"):
        running.gpu_records(tmp_path)
    (tmp_path / "steps").mkdir()
    negative = _steps("compgen", "cpu", {PLAIN: {"s_per_step": -31.1}}, gemm=[1.0, 2.0])
    (tmp_path / "steps" / "y.json").write_text(json.dumps(negative.to_dict()))
    with pytest.raises(recordfile.RecordError, match=r"s_per_step must be a number > 0, got -31\.1; rewrite it with"):
        steptimes.step_records(tmp_path)


def test_a_record_of_other_code_or_naming_none_says_so():
    current = catalog.code_key()
    record = _book(_chapter("a", 1.0))
    assert "names no code key comparable here" in running.book_cost(record).notes
    assert "has changed since" in running.book_cost(dataclasses.replace(record, code_key="0ld")).notes
    notes = running.book_cost(dataclasses.replace(record, code_key=current)).notes
    assert "code key" not in notes and "changed since" not in notes
    elsewhere = dataclasses.replace(record, code_key=current, code_versions={"jax": "9"})
    assert "names no code key comparable here" in running.book_cost(elsewhere).notes
    step = {"step": "device", "status": "ok", "seconds": 5}
    gpu = records.Gpu(device="H200", date="d", code="compgen@abcdef9", jax="j", flax="f", steps=[step])
    changed, same = (dataclasses.replace(gpu, code_key=f) for f in ("0ld", current))
    table = running.gpu_checks([gpu, changed, same]).table
    assert "| abcdef9 (code not recorded) |" in table and "| abcdef9 (code changed since) |" in table
    assert "| abcdef9 |" in table
    authors = _steps("authors", "cpu", {"hyperteacher anil": {"s_per_step": 8.0, "peak_gb": 8.6}}, gemm=[300.0, 400.0])
    ours = _steps("compgen", "cpu", {PLAIN: {"s_per_step": 4.0, "peak_gb": 1.0}}, gemm=[350.0, 350.0])
    assert "names no code key comparable here" in running.step_times([authors, ours]).notes


def test_the_ledger_table_shows_each_work_where_it_stands(tmp_path, paper_record):
    import json as _json

    from compgen import ledger as _ledger

    works = _ledger.read(running.Path(__file__).resolve().parents[2] / "book" / "records" / "ledger.json")[:2]
    (tmp_path / "ledger.json").write_text(_ledger.dumps_ledger(works))
    (tmp_path / "paper" / "fig2c").mkdir(parents=True)
    (tmp_path / "paper" / "fig2c" / "progress.json").write_text(
        _json.dumps(paper_record([0.9] * 3, [0.5] * 3, steps_done=7000).to_dict())
    )
    table = running.ledger_table(tmp_path / "ledger.json", tmp_path / "paper").table
    assert "| fig2c | fig2c | 4 × 3 | 7,000 of 60,000 | 1 | NVIDIA H100 80GB HBM3 | 0.08 | in progress |" in table
    assert "| fig2c-rest | fig2c | 3 × 3 | 0 of 60,000 | 0 | – | – | not started |" in table
