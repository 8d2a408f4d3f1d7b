"""tools/gpu_lease.py rehearsed on the CPU: a lease advances the ledger from committed state into $OUT, the next
lease resumes from that $OUT, and a choice that does not compile in time gives way to the next."""

import json
import subprocess
import sys
from pathlib import Path

from compgen import ledger
from compgen.tasks import support

ROOT = Path(__file__).resolve().parents[2]
TOOL = ROOT / "tools" / "gpu_lease.py"


def _lease(*args, timeout=300):
    done = subprocess.run(
        [sys.executable, str(TOOL), "--cpu", *map(str, args)], capture_output=True, text=True, timeout=timeout, cwd=ROOT
    )
    return done.returncode, done.stdout + done.stderr


def _ledger(path):
    col = next(c for c in support.TABLE_A9 if c.column == 1)
    work = ledger.Work(
        "fig2c",
        "teacher_student",
        "fig2c",
        "paper",
        ({"masks": col.spec, "distribution": col.distribution},),
        ("column 1",),
    )
    path.write_text(ledger.dumps_ledger([work]))
    return path


def test_a_lease_resumes_from_the_previous_leases_out(tmp_path):
    book_ledger = _ledger(tmp_path / "ledger.json")
    first, second = tmp_path / "out1", tmp_path / "out2"
    rc, text = _lease(
        "--ledger", book_ledger, "--state", tmp_path / "committed", "--out", first, "--chunk", 10, "--work-budget", 0
    )
    assert rc == 0, text
    assert "[ledger fig2c] out of time" in text
    assert ledger.read_progress(first / "paper" / "fig2c").steps_done == 10
    rc, text = _lease("--ledger", book_ledger, "--state", first / "paper", "--out", second, "--chunk", 10)
    assert rc == 0, text
    progress = ledger.read_progress(second / "paper" / "fig2c")
    assert progress.complete and [lease["steps"] for lease in progress.leases] == [[0, 10], [10, 40]]
    lease = json.loads((second / "lease.json").read_text())
    assert [s["step"] for s in lease["steps"]] == ["state", "device", "ledger fig2c"]
    assert "fig2c: complete, 40 of 40 steps over 2 lease(s)" in (second / "summary.md").read_text()
    assert "backend cpu" in (second / "device.txt").read_text()


def test_a_choice_that_does_not_compile_in_time_gives_way_and_all_failing_is_reported(tmp_path):
    rc, text = _lease(
        "--ledger",
        _ledger(tmp_path / "ledger.json"),
        "--state",
        tmp_path / "none",
        "--out",
        tmp_path / "out",
        "--compile-bound",
        0.5,
        "--choices",
        '[{"fused_inner": false}, {}]',
    )
    assert rc == 1, text
    assert text.count("[ledger fig2c] no compile within 0.5 s") == 2
    assert ledger.read_progress(tmp_path / "out" / "paper" / "fig2c") is None


def test_bad_arguments_are_refused_in_one_line(tmp_path):
    rc, text = _lease("--budget", 5, "--reserve", 10, "--out", tmp_path)
    assert rc == 2 and "--budget must exceed --reserve" in text
