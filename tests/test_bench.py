"""The bench: the comparison with the authors' figures (paper cases have one, plain and split), and where an
executed book's time went."""

import json

import pytest

from compgen import bench


def test_authors_figures_belong_to_paper_cases_plain_and_split():
    with_figures = {name for name in bench.CASES if bench.authors(name)}
    assert "hyperteacher hnet_linear paper (M=4, K=2)" in with_figures
    assert "goals anil paper" in with_figures and "preferences hnet_linear paper" in with_figures
    assert f"goals anil paper{bench.SPLIT_SUFFIX}" in with_figures  # compgen's default at paper sizes
    assert not any("quick" in name or name.startswith("teacher_student") for name in with_figures)
    plain = {name for name in with_figures if not name.endswith(bench.SPLIT_SUFFIX)}
    assert len(plain) == len(bench.AUTHORS)  # every figure of the authors has its plain-process case


def test_the_ratio_reads_as_authors_over_ours_on_a_machine_as_fast_as_theirs():
    seconds, memory = bench.AUTHORS["hyperteacher maml"]
    low, high = bench.AUTHORS_GEMM
    cells = bench._authors_cells("hyperteacher maml paper (M=4, K=2)", seconds / 2, gemm_gflops=(low + high) / 2)
    assert f"{seconds:.2f} ({memory:.1f} GB)" in cells and "2.00×" in cells
    assert "–" in bench._authors_cells("hyperteacher maml quick", 1.0, gemm_gflops=low)
    slower = bench._authors_cells("hyperteacher maml paper (M=4, K=2)", seconds / 2, gemm_gflops=low / 2)
    assert f"{seconds:.2f} ({memory:.1f} GB)" in slower and "×" not in slower and "GEMM ≠" in slower
    margin = bench.COMPARABLE
    assert bench.comparable(low * (1 - margin) + 1) and bench.comparable(high * (1 + margin) - 1)
    assert not bench.comparable(low * (1 - margin) - 1) and not bench.comparable(high * (1 + margin) + 1)


def test_paper_cases_run_with_huge_pages_and_a_split_case_with_host_devices(monkeypatch):
    monkeypatch.delenv("GLIBC_TUNABLES", raising=False)
    assert "GLIBC_TUNABLES" not in bench.case_environment("hyperteacher maml quick")
    plain = bench.case_environment("hyperteacher maml paper (M=4, K=2)")
    split = bench.case_environment(f"hyperteacher maml paper (M=4, K=2){bench.SPLIT_SUFFIX}")
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


def _stored_run(folder, name, date, **seconds):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.json").write_text(json.dumps({"provenance": {"date": date, "seconds": seconds}}))


def test_book_time_gives_each_chapter_the_runs_stored_while_it_executed(tmp_path):
    book, store = tmp_path / "book", tmp_path / "store"
    book.mkdir()
    _notebook(
        book / "a.ipynb",
        "2026-11-24T10:00:00",
        "2026-11-24T10:10:00",
        [("import x", 2.0), ('runs = figures.train("a", preset)', 400.0), ("figures.show(...)", 60.0)],
    )
    _notebook(book / "b.ipynb", "2026-11-24T10:10:05", "2026-11-24T10:12:05", [("print(1)", 1.0)])
    (book / "unexecuted.ipynb").write_text(json.dumps({"metadata": {}, "cells": []}))
    _stored_run(store / "a", "r1", "2026-11-24T10:03:00+00:00", compile=30.0, setup=1.0, train=200.0, evaluate=9.0)
    _stored_run(store / "a", "r2", "2026-11-24T11:05:00+01:00", compile=10.0, setup=1.0, train=100.0, evaluate=1.0)
    _stored_run(store / "a", "old", "2026-11-23T10:05:00+00:00", compile=99.0, setup=9.0, train=999.0, evaluate=9.0)
    _stored_run(store / "other", "r3", "2026-11-24T10:11:00+00:00")  # no parts recorded
    rows = {r["chapter"]: r for r in bench.book_time(book, store)}
    assert set(rows) == {"a", "b"}
    assert rows["a"]["wall"] == 600 and rows["a"]["training_cells"] == 400 and rows["a"]["runs"] == 2
    assert (rows["a"]["compile"], rows["a"]["train"], rows["a"]["evaluate"]) == (40.0, 300.0, 10.0)
    assert rows["b"]["runs"] == 1 and rows["b"]["compile"] == 0.0
    table = bench.book_time_table(list(rows.values()))
    assert "| a | 10.0 | 6.7 | 2 | 0.7 / 0.0 / 5.0 / 0.2 | 11 % | 3.3 |" in table
    assert table.splitlines()[-1].startswith("| total | 12.0 | 6.7 | 3 |")


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
