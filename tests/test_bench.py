"""The bench: the comparison with the authors' figures (paper cases have one, plain and split), and where an
executed book's time went."""

import json
import re
import time

import numpy as np
import pytest

from compgen import bench, booktime, catalog, params, programs, recordfile, steptimes
from compgen import records as records_
from compgen.figures import running

H100 = "NVIDIA H100 80GB HBM3"  # jax.devices()[0].device_kind of the authors' GPU
CASE = "hyperteacher anil paper (M=4, K=2)"


def _record(who, device, date, rows, gemm=None, code="x@abcdef1"):
    return records_.Steps(
        who=who, device=device, date=date, code=code, how=f"{who} on {device}", gemm_gflops=gemm, rows=rows
    )


@pytest.fixture
def records():
    """Step-time records as the bench reads them: the authors' on a CPU and an H100, two of ours on the H100."""
    return [
        _record(
            "authors", "cpu", "2026-01-01", {"hyperteacher anil": {"s_per_step": 10.0, "peak_gb": 8.0}}, [300, 400]
        ),
        _record("authors", "H100", "2026-01-02", {"hyperteacher anil": {"s_per_step": 0.04, "peak_gb": 2.0}}),
        _record("compgen", H100, "2026-01-02", {CASE: {"s_per_step": 0.5, "peak_gb": None}}, code="c@1111111"),
        _record("compgen", H100, "2026-01-03", {CASE: {"s_per_step": 0.02, "peak_gb": None}}, code="c@2222222"),
    ]


def test_the_committed_records_are_the_authors_at_paper_cases_and_ours():
    """Every row of the authors' records belongs to a paper case (plain and sharded); ours name cases."""
    found = steptimes.step_records()
    assert {r.who for r in found} == {"authors", "compgen"}
    by_key = {steptimes.figure_key(name) for name in steptimes.CASES}
    for record in found:
        assert record.device and record.date and record.code and record.how and record.rows
        if record.who == "authors":
            assert set(record.rows) <= by_key, record.rows.keys() - by_key
        else:
            assert set(record.rows) <= set(steptimes.CASES)
    cpu = steptimes.on_device(found, "authors", "cpu")
    with_figures = {name for name in steptimes.CASES if steptimes.authors(name, "cpu", found)}
    assert with_figures and all(steptimes.CASES[name][1] == "paper" for name in with_figures)  # the paper's configs
    assert len({n for n in with_figures if not n.endswith(steptimes.SHARD_SUFFIX)}) == len(cpu.rows)


def test_the_ratio_reads_as_authors_over_ours_on_a_machine_as_fast_as_theirs(records):
    cells = bench._authors_cells(CASE, 5.0, gemm_gflops=350, records=records)
    assert "10.00 (8.0 GB)" in cells and "2.00×" in cells
    assert "–" in bench._authors_cells("hyperteacher maml quick", 1.0, gemm_gflops=350, records=records)
    slower = bench._authors_cells(CASE, 5.0, gemm_gflops=100, records=records)
    assert "10.00 (8.0 GB)" in slower and "×" not in slower and "GEMM ≠" in slower
    cpu, margin = records[0], steptimes.COMPARABLE
    assert steptimes.comparable(300 * (1 - margin) + 1, cpu) and steptimes.comparable(400 * (1 + margin) - 1, cpu)
    assert not steptimes.comparable(300 * (1 - margin) - 1, cpu) and not steptimes.comparable(
        400 * (1 + margin) + 1, cpu
    )


def test_a_run_prints_the_records_taken_on_its_kind_of_device(records):
    """A CPU run prints the authors' CPU figures, an H100 run their H100 figures and our newest H100 reading."""
    on_cpu = bench._authors_cells(CASE, 5.0, 350, kind="cpu", records=records)
    assert "10.00 (8.0 GB)" in on_cpu and "0.0400" not in on_cpu and "0.0200" not in on_cpu
    on_h100 = bench._authors_cells(CASE, 0.01, gemm_gflops=1.0, kind=H100, records=records)  # GEMM does not matter
    assert "0.0400 (2.0 GB)" in on_h100 and "4.00×" in on_h100 and "0.0200" in on_h100 and "0.5000" not in on_h100
    assert "2222222" not in bench.table_header("cpu", records) and "2222222" in bench.table_header(H100, records)
    assert "peak RSS GB" in bench.table_header("cpu", records) and "peak dev GB" in bench.table_header(H100, records)
    assert steptimes.earlier("teacher_student paper, 1 run", H100, records) is None
    assert steptimes.earlier(CASE, "cpu", records) is None
    assert "–" in bench._authors_cells(CASE, 1.0, 1.0, kind="NVIDIA A100-SXM4-40GB", records=records)


@pytest.mark.parametrize("kind", ["cpu", H100])
def test_the_table_prints_each_device_its_own_rows_and_records_the_run(monkeypatch, capsys, tmp_path, records, kind):
    gpu = kind == H100
    for i, record in enumerate(records):
        record.save(tmp_path / "steps" / f"{i}.json")
    result = {"runs": 1, "chunk_steps": 100 if gpu else 2, "s_per_step": 0.02 if gpu else 1.0, "compile_s": 30.0}
    result.update(gflops=100.0, peak_rss_gb=3.0, peak_device_gb=5.0 if gpu else None, device_kind=kind)
    result.update(gemm_gflops=350.0, batched_gemm_gflops=100.0)
    monkeypatch.setattr(bench, "device_kind", lambda: kind)
    monkeypatch.setattr(bench, "case_process", lambda name, cap: dict(result, cap=cap))
    bench.main(["--only", CASE, "--records", str(tmp_path), "--record", "--note", "an idle machine"])
    out = capsys.readouterr().out
    (row,) = [line for line in out.splitlines() if line.startswith(f"| {CASE} ")]
    cells = [cell.strip() for cell in row.split("|")[1:-1]]
    assert cells[2] == ("100" if gpu else "2")  # the chunk
    assert cells[6] == ("5.00" if gpu else "3.00")  # the device's peak, else the process's
    assert ("0.0400 (2.0 GB)" in cells, "10.00 (8.0 GB)" in cells) == (gpu, not gpu)
    assert ("0.0200" in cells) == gpu and ("authors on H100" in out) == gpu and ("authors on cpu" in out) == (not gpu)
    written = [r for r in steptimes.step_records(tmp_path) if r.who == "compgen" and r.rows.get(CASE, {}).get("runs")]
    (mine,) = written
    assert mine.rows[CASE]["s_per_step"] == result["s_per_step"] and mine.device == ("cpu" if gpu is False else kind)
    assert mine.rows[CASE]["peak_gb"] == (5.0 if gpu else 3.0) and (mine.gemm_gflops is None) == gpu
    assert steptimes.earlier(CASE, kind, steptimes.step_records(tmp_path))[1]["s_per_step"] == result["s_per_step"]
    assert mine.how.endswith("; an idle machine") and "--note" not in mine.how
    assert f"--only '{CASE}' --records" in mine.how  # the command as a shell reads it


def test_the_timed_chunk_is_the_runners_up_to_a_cap():
    """The bench times the chunk :func:`compgen.runner.run_steps` runs (eval_every outer steps, or the whole run if
    shorter), at most the cap; every case's chunk on a CPU is a loop, not one step."""
    from compgen import catalog, runner
    from compgen.section import make_config

    cfg = make_config(catalog.get("teacher_student"), "smoke")
    first = []
    runner.run_steps(
        lambda s, n: (first.append(n), (s, {}))[1], None, cfg.outer_steps, cfg.eval_every, runner.Hooks(log=str)
    )
    assert bench.chunk_steps(cfg, 10**6) == first[0] == cfg.eval_every < cfg.outer_steps
    assert bench.chunk_steps(cfg, 5) == min(cfg.eval_every, 5) == 5
    short = make_config(catalog.get("teacher_student"), "smoke", outer_steps=7, eval_every=7)
    assert bench.chunk_steps(short, 10**6) == 7
    for name, (section, preset, model, overrides, cap, _) in steptimes.CASES.items():
        model = "hnet_linear" if model == "tasks" else model  # task generation samples the tasks of this config
        case_cfg = make_config(catalog.get(section), preset, model, **overrides)
        assert bench.default_cap(name, "cpu") == cap and bench.default_cap(name, "gpu") == bench.ACCELERATOR_STEPS
        assert bench.chunk_steps(case_cfg, cap) == min(case_cfg.eval_every, cap) >= 2, name


def test_a_smoke_case_times_a_chunk_of_the_runners_length():
    import jax
    import numpy as np

    section, cfg, runs, program = bench._program("teacher_student", "smoke", None, {"seeds": (100,)})
    steps = bench.chunk_steps(cfg, 10**6)
    s_per_step, compile_s, compiled, state = bench._time_chunks(program, runs, steps, repeats=1)
    assert s_per_step > 0 and compile_s > 0
    _, metrics = compiled(runs, state)
    assert {np.shape(m)[0] for m in jax.tree.leaves(metrics)} == {steps}
    result = bench._case("teacher_student", "smoke", None, {"seeds": (100,)}, 5, 1)
    assert result["chunk_steps"] == 5 and result["runs"] == 1


def test_paper_cases_run_with_huge_pages_and_a_split_case_with_host_devices(monkeypatch):
    monkeypatch.delenv("GLIBC_TUNABLES", raising=False)
    assert "GLIBC_TUNABLES" not in bench.case_environment("hyperteacher maml quick")
    plain = bench.case_environment("hyperteacher maml paper (M=4, K=2)")
    split = bench.case_environment(f"hyperteacher maml paper (M=4, K=2){steptimes.SHARD_SUFFIX}")
    assert "glibc.malloc.hugetlb=1" in plain["GLIBC_TUNABLES"] and "glibc.malloc.hugetlb=1" in split["GLIBC_TUNABLES"]
    assert "host_platform_device_count" in split["XLA_FLAGS"]
    assert "host_platform_device_count" not in plain.get("XLA_FLAGS", "")


def _notebook(path, start, end, cells):
    """An executed notebook as papermill leaves it: run times in the metadata, a duration per cell."""
    path.write_text(
        json.dumps(
            {
                "metadata": {"papermill": {"start_time": start, "end_time": end}},
                "cells": [
                    {"cell_type": "code", "source": [source], "metadata": {"papermill": {"duration": seconds}}}
                    for source, seconds in cells
                ],
            }
        )
    )


def _stored_run(folder, name, date, gemm=None, **seconds):
    folder.mkdir(parents=True, exist_ok=True)
    provenance = {"date": date, "wall_time_s": 1.0, "device": "cpu:cpu", "git_commit": "c0ffee", "seconds": seconds}
    provenance |= {"gemm_gflops": gemm} if gemm else {}
    run = records_.StoredRun(section=folder.name, config={}, key=name, provenance=provenance)
    (folder / f"{name}.json").write_text(run.text())


def test_a_chapter_that_compares_a_learner_of_its_own_trains_in_its_compare_cells(tmp_path):
    _notebook(tmp_path / "c.ipynb", "2026-11-23T09:00:00", "2026-11-23T09:05:00", [("compare.compare(m)", 90.0)])
    assert booktime.book_time(tmp_path, [])[0]["training_cells"] == 90.0


def test_book_time_gives_each_chapter_the_runs_stored_while_it_executed(tmp_path):
    book, store = tmp_path / "book", tmp_path / "store"
    book.mkdir()
    _notebook(
        book / "a.ipynb",
        "2026-11-24T10:00:00",
        "2026-11-24T10:10:00",
        [("import x", 2.0), ('runs = notebook.train("a", preset)', 400.0), ("figures.show(...)", 60.0)],
    )
    _notebook(book / "b.ipynb", "2026-11-24T10:10:05", "2026-11-24T10:12:05", [("print(1)", 1.0)])
    (book / "unexecuted.ipynb").write_text(json.dumps({"metadata": {}, "cells": []}))
    _stored_run(
        store / "a", "r1", "2026-11-24T10:03:00+00:00", 400.0, compile=30.0, setup=1.0, train=200.0, evaluate=9.0
    )
    _stored_run(
        store / "a", "r2", "2026-11-24T11:05:00+01:00", 600.0, compile=10.0, setup=1.0, train=100.0, evaluate=1.0
    )
    _stored_run(store / "a", "old", "2026-11-23T10:05:00+00:00", compile=99.0, setup=9.0, train=999.0, evaluate=9.0)
    _stored_run(store / "other", "r3", "2026-11-24T10:11:00+00:00")  # no parts recorded
    rows = {r["chapter"]: r for r in booktime.book_time(book, booktime.stored_runs(store))}
    assert set(rows) == {"a", "b"}
    assert rows["a"]["wall"] == 600 and rows["a"]["training_cells"] == 400 and rows["a"]["runs"] == 2
    assert (rows["a"]["compile"], rows["a"]["train"], rows["a"]["evaluate"]) == (40.0, 300.0, 10.0)
    assert rows["b"]["runs"] == 1 and rows["b"]["compile"] == 0.0
    assert rows["a"]["gemm"] == 500.0 and np.isnan(rows["b"]["gemm"])  # the runs' mean reading; none recorded in b
    table = booktime.book_time_table(list(rows.values()))
    # a's 6.7 training minutes on a machine reading 500 GFLOP/s take twice as long on one reading 250
    assert "| a | 10.0 | 6.7 | 500 | 13.3 | 3.3 |" in table and "| a | 2 | 0.7 | 0.0 | 5.0 | 0.2 | 11 % |" in table
    assert "| total | 12.0 | 6.7 | 500 | 13.3 | 5.3 |" in table
    assert table.splitlines()[-1] == "| total | 3 | 0.7 | 0.0 | 5.0 | 0.2 | 11 % |"


def _row(chapter, minutes, gemm=250.0, runs=3):
    return {"chapter": chapter, "training_cells": 60.0 * minutes, "gemm": gemm, "runs": runs}


def test_the_budget_check_scales_each_chapter_to_the_budget_machine_and_needs_trained_runs(capsys, tmp_path):
    assert booktime.budget_problems([_row("a", 19.0), _row("b", 20.0), _row("results", 99.0, runs=0)]) == ([], [])
    # 12 minutes on a machine twice as fast are 24 at the budget's 250 GFLOP/s
    (problem,), _ = booktime.budget_problems([_row("a", 12.0, gemm=500.0)])
    assert problem.startswith("a: 24.0 min of training at 250 GFLOP/s, above the chapter budget of 20")
    four = [_row(name, 16.0) for name in "abcd"]  # 64 minutes in all
    exceeded, _ = booktime.budget_problems(four)
    assert exceeded == ["the book: 64.0 min of training at 250 GFLOP/s, above the budget of 60"]
    exceeded, (problem,) = booktime.budget_problems([_row("a", 1.0, runs=0)])
    assert exceeded == [] and "not measured" in problem
    assert booktime.budget_problems([_row("theory", 0.0, runs=0, gemm=float("nan"))]) == ([], [])  # trains nothing
    exceeded, (problem,) = booktime.budget_problems([_row("a", 1.0, gemm=float("nan"))])
    assert exceeded == [] and "no GEMM reading" in problem
    book = tmp_path / "book"
    book.mkdir()
    (tmp_path / "store").mkdir()  # an empty store: nothing was trained while the book executed
    _notebook(book / "a.ipynb", "2026-11-24T10:00:00", "2026-11-24T10:10:00", [("notebook.train(x)", 60.0)])
    args = ["--book", str(book), "--store", str(tmp_path / "store"), "--check-budget"]
    assert bench.main(args) == 0 and "budget: a: not measured" in capsys.readouterr().out  # said, not failed
    _notebook(book / "a.ipynb", "2026-11-24T10:00:00", "2026-11-24T10:30:00", [("notebook.train(x)", 1500.0)])
    _stored_run(tmp_path / "store" / "a", "r1", "2026-11-24T10:03:00+00:00", 250.0, compile=1.0, train=1499.0)
    assert bench.main(args) == 1 and "above the chapter budget" in capsys.readouterr().out  # 25 minutes


def test_a_book_at_another_preset_is_not_judged_against_the_quick_budget_and_a_bad_date_is_one_line(tmp_path):
    exceeded, (problem,) = booktime.budget_problems([{**_row("a", 99.0), "preset": "paper"}])
    assert exceeded == [] and "executed at preset paper: the budget is the quick book's" in problem
    _stored_run(tmp_path / "a", "r1", "yesterday")
    with pytest.raises(params.ParameterError, match=r"r1.json: its date 'yesterday' is not an ISO time"):
        booktime.stored_runs(tmp_path)


def test_a_measured_book_is_recorded_with_each_run_in_its_chapter(capsys, tmp_path):
    book, store, records = tmp_path / "book", tmp_path / "store", tmp_path / "records"
    book.mkdir()
    args = ["--book", str(book), "--store", str(store), "--record", "--records", str(records)]
    _notebook(book / "a.ipynb", "2026-11-24T10:00:00", "2026-11-24T10:30:00", [("notebook.train(x)", 600.0)])
    _notebook(book / "b.ipynb", "2026-11-24T10:30:05", "2026-11-24T10:40:00", [("notebook.train(x)", 60.0)])
    _stored_run(store / "s", "r1", "2026-11-24T10:03:00+00:00", 250.0, compile=50.0, train=500.0)
    assert bench.main(args) == 0 and "not written" in capsys.readouterr().out  # b trained nothing
    assert not (records / "book_time.json").exists()
    _stored_run(store / "t", "r2", "2026-11-24T10:35:00+00:00", 250.0, compile=5.0, train=50.0)
    assert bench.main(args) == 0
    record = json.loads((records / "book_time.json").read_text())
    assert [(r["key"], r["section"], r["chapter"], r["compile"]) for r in record["runs"]] == [
        ("r1", "s", "a", 50.0),
        ("r2", "t", "b", 5.0),
    ]
    assert [c["chapter"] for c in record["chapters"]] == ["a", "b"] and record["date"] == "2026-11-24"
    assert record["schema"] == records_.BookTime.VERSION
    assert record["code_key"] == catalog.code_key() and record["code_versions"] == programs.versions()
    assert running.load(records / "book_time.json").to_dict() == record  # the appendix reads what the bench wrote


def test_a_step_record_carries_its_schema_and_the_code_it_timed():
    result = {"s_per_step": 0.5, "peak_rss_gb": 1.0, "peak_device_gb": None, "compile_s": 2.0, "runs": 1}
    record = bench.step_record({CASE: {**result, "chunk_steps": 2, "gemm_gflops": 200.0}}, "cpu", "python -m x")
    written = record.to_dict()
    assert written["schema"] == records_.Steps.VERSION and record.computed_by()[0] == catalog.code_key()
    assert recordfile.problem(written, records_.Steps.shape()) is None  # as the book reads it


# --------------------------------------------------------------------------- the command line: one line, exit 2
# (what, the command line, what its one line must say); words in capitals are made by _inputs in the test's folder
BAD_COMMANDS = [
    ("budget without a book", ["--check-budget"], "--check-budget reads an executed book: give --book DIR"),
    ("store without a book", ["--store", "STORE"], "--store reads an executed book"),
    ("book missing", ["--book", "NOPE", "--store", "STORE", "--check-budget"], r"--book \S+/nope: no such folder"),
    ("book a file", ["--book", "FILE", "--store", "STORE", "--check-budget"], r"--book \S+/afile is a file"),
    ("store missing", ["--book", "BOOK", "--store", "NOPE", "--check-budget"], r"--store \S+/nope: no such folder"),
    ("default store missing", ["--book", "BOOK", "--check-budget"], r"the results store .*: no such folder"),
    ("nothing executed", ["--book", "EMPTY", "--store", "STORE", "--check-budget"], "nothing to check, no notebook"),
    ("records missing", ["--records", "NOPE"], r"--records \S+/nope: no such folder"),
    ("records a file", ["--book", "BOOK", "--store", "STORE", "--record", "--records", "FILE"], "is a file"),
    ("steps -5", ["--steps", "-5"], "--steps must be a whole number >= 1 .*, got -5"),
    ("steps 0", ["--book", "BOOK", "--store", "STORE", "--steps", "0"], "--steps must be a whole number >= 1"),
    ("steps abc", ["--steps", "abc"], "argument --steps: invalid int value: 'abc'"),
    ("only nothing", ["--only", "no such case"], "--only 'no such case' names no case"),
    ("truncated step record", ["--records", "TRUNCATED"], r"x\.json: step-time record is not valid JSON"),
    ("negative step time", ["--records", "NEGATIVE"], r"rows\['c'\]\.s_per_step must be a number > 0, got -31\.1"),
    ("future step record", ["--records", "FUTURE"], "has schema 7, written by a newer compgen"),
    ("damaged store entry", ["--book", "BOOK", "--store", "BADSTORE", "--check-budget"], "run's description is not"),
    (
        "damaged notebook",
        ["--book", "BADBOOK", "--store", "STORE", "--check-budget"],
        "cannot read an executed notebook",
    ),
]


def _inputs(tmp_path) -> dict:
    """The folders and files BAD_COMMANDS names."""
    made = {name: tmp_path / name.lower() for name in ("STORE", "BOOK", "EMPTY", "BADSTORE", "BADBOOK")}
    for folder in made.values():
        folder.mkdir()
    _notebook(made["BOOK"] / "a.ipynb", "2026-11-24T10:00:00", "2026-11-24T10:10:00", [("notebook.train(x)", 6.0)])
    (made["BADBOOK"] / "a.ipynb").write_text('{"metadata": {"papermill"')
    (made["BADSTORE"] / "s").mkdir()
    (made["BADSTORE"] / "s" / "r.json").write_text('{"provenance": ')
    made["FILE"], made["NOPE"] = tmp_path / "afile", tmp_path / "nope"
    made["FILE"].write_text("")
    records = _record("compgen", "cpu", "2026-01-01", {"c": {"s_per_step": -31.1}}, [1.0, 2.0]).to_dict()
    for name, text in (
        ("TRUNCATED", json.dumps(records)[:40]),
        ("NEGATIVE", json.dumps(records)),
        ("FUTURE", json.dumps({**records, "rows": {}, "schema": 7})),
    ):
        made[name] = tmp_path / name.lower()
        (made[name] / "steps").mkdir(parents=True)
        (made[name] / "steps" / "x.json").write_text(text)
    return made


@pytest.mark.parametrize("what, argv, expected", BAD_COMMANDS, ids=[row[0] for row in BAD_COMMANDS])
def test_a_command_line_that_checks_nothing_is_one_line_and_exit_2(what, argv, expected, tmp_path, capsys, monkeypatch):
    """Nothing is timed or trained, nothing written; the line names what is wrong."""
    made = _inputs(tmp_path)
    monkeypatch.setenv("COMPGEN_RESULTS", str(made["NOPE"]))
    for name in ("device_kind", "case_process", "run_case", "profile_case"):
        monkeypatch.setattr(bench, name, lambda *a, **k: pytest.fail("ran a case"))
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    start = time.perf_counter()
    with pytest.raises(SystemExit) as exit_info:
        bench.main([str(made.get(a, a)) for a in argv])
    message = capsys.readouterr().err.strip()
    assert exit_info.value.code == 2 and message.count("\n") == 0, message
    assert re.search(expected, message), message
    assert (
        time.perf_counter() - start < 30 and {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before
    )


def test_op_profile_groups_thunks_by_kind_per_step():
    """Thunks are grouped by HLO kind and divided by the steps; Python spans, the runtime's own spans, end markers
    and non-complete events do not count."""
    events = [
        {"ph": "X", "name": "ynn_fusion.3", "dur": 30.0},
        {"ph": "X", "name": "ynn_fusion.7", "dur": 10.0},
        {"ph": "X", "name": "copy.1", "dur": 1.0},
        {"ph": "X", "name": "copy.2", "dur": 3.0},
        {"ph": "X", "name": "end: copy", "dur": 0.1},
        {"ph": "X", "name": "ThunkExecutor::Execute", "dur": 500.0},
        {"ph": "X", "name": "PjitFunction(jit(chunk))", "dur": 900.0},
        {"ph": "X", "name": "$api.py:123 __call__", "dur": 900.0},
        {"ph": "M", "name": "thread_name"},
    ]
    rows = bench.op_profile(events, steps=2)
    assert [r[0] for r in rows] == ["ynn", "copy"]  # most time first
    kind, per_step, ms_per_step, us_each = rows[0]
    assert per_step == 1.0 and ms_per_step == pytest.approx(0.020) and us_each == pytest.approx(20.0)
    assert rows[1][1:] == (1.0, pytest.approx(0.002), pytest.approx(2.0))
    assert bench.op_kind("wrapped_add.12") == "wrapped" and bench.op_kind("dynamic-slice.4") == "dynamic-slice"


def test_keys_read_back_from_the_cache_are_those_computed_and_lower_nothing(tmp_path, monkeypatch):
    cache = tmp_path / "keys.json"
    cold = bench.key_seconds("smoke", cache, ["teacher_student"])["teacher_student"]
    expected = [programs.run_key(sec, c) for sec in [catalog.SECTIONS["teacher_student"]]
                for f in sec.figures("smoke") for c in sec.configs(f, "smoke")]  # fmt: skip
    assert cold["keys"] == expected and len(expected) > 1

    def lowered(*args):
        raise AssertionError("a cached key was computed again")

    monkeypatch.setattr(programs, "run_key", lowered)
    cached = bench.key_seconds("smoke", cache, ["teacher_student"])
    assert cached["teacher_student"]["keys"] == expected and cached["teacher_student"]["shapes"] == 0
    table = bench.key_table({"teacher_student": cold}, cached)
    assert f"| all | {len(expected)} | {cold['shapes']} | {cold['seconds']:.1f} |" in table and "differ" not in table
