"""tools/gpu_lease.py rehearsed on the CPU: a lease advances the ledger from committed state into $OUT, the next
lease resumes from that $OUT, and a choice that does not compile in time gives way to the next."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from compgen import ledger, recordfile
from compgen.tasks import support

ROOT = Path(__file__).resolve().parents[2]
TOOL = ROOT / "tools" / "gpu_lease.py"
sys.path.insert(0, str(ROOT / "tools"))
import gpu_lease  # noqa: E402


def _lease(*args, timeout=300):
    done = subprocess.run(
        [sys.executable, str(TOOL), "--cpu", *map(str, args)], capture_output=True, text=True, timeout=timeout, cwd=ROOT
    )
    return done.returncode, done.stdout + done.stderr


def _ledger(path, columns=(1,)):
    works = []
    for column in columns:
        col = next(c for c in support.TABLE_A9 if c.column == column)
        name = "fig2c" if column == 1 else f"fig2c-{column}"
        select = ({"masks": col.spec, "distribution": col.distribution},)
        works.append(ledger.Work(name, "teacher_student", "fig2c", "paper", select, (f"column {column}",)))
    path.write_text(ledger.dumps_ledger(works))
    return path


def test_a_lease_resumes_from_the_previous_leases_out(tmp_path):
    book_ledger = _ledger(tmp_path / "ledger.json")
    first, second = tmp_path / "out1", tmp_path / "out2"
    rc, text = _lease(
        "--ledger",
        book_ledger,
        "--state",
        tmp_path / "committed",
        "--out",
        first,
        "--chunk",
        10,
        "--work-budget",
        0,
        "--fresh",
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


@pytest.mark.skipif(len(getattr(os, "sched_getaffinity", lambda _: ())(0)) < 2, reason="needs two cores")
def test_a_cpu_lease_of_two_cores_advances_two_works_at_once_each_on_a_core_of_its_own(tmp_path):
    book_ledger = _ledger(tmp_path / "ledger.json", columns=(1, 2))
    rc, text = _lease("--ledger", book_ledger, "--state", tmp_path / "none", "--out", tmp_path / "out", "--chunk", 10,
                      "--cores", 2, "--fresh")  # fmt: skip
    assert rc == 0, text
    last = sorted(os.sched_getaffinity(0))[-2:]
    assert sorted(int(line.rsplit(" ", 1)[1]) for line in text.splitlines() if "[cores] fig2c" in line) == last
    for name in ("fig2c", "fig2c-2"):
        assert ledger.read_progress(tmp_path / "out" / "paper" / name).complete
    steps = {s["step"]: s["status"] for s in json.loads((tmp_path / "out" / "lease.json").read_text())["steps"]}
    assert steps["ledger fig2c"] == steps["ledger fig2c-2"] == "ok"
    lines = (tmp_path / "out" / "lease.log").read_text().splitlines()

    def first(needle):
        return next(i for i, line in enumerate(lines) if needle in line)

    names = ("fig2c", "fig2c-2")  # the second started before the first ended
    assert max(first(f"[cores] {n} ") for n in names) < min(first(f"[ledger {n}] ok") for n in names)


def test_an_error_advancing_a_work_starts_no_other_and_is_raised_once_the_others_end(monkeypatch, tmp_path):
    from types import SimpleNamespace

    started = []

    def advance_work(lease, work, *rest):
        started.append(work)
        if work == "first":
            raise RuntimeError("boom")
        return "ok"

    monkeypatch.setattr(gpu_lease, "advance_work", advance_work)
    lease, args = SimpleNamespace(left=lambda: 1e9), SimpleNamespace(cores=None)
    with pytest.raises(RuntimeError, match="boom"):
        gpu_lease.advance_ledger(lease, ["first", "second"], args, tmp_path, {"reserve": 10, "kind": "cpu"}, {})
    assert started == ["first"]
    assert (
        gpu_lease.advance_ledger(lease, ["second", "third"], args, tmp_path, {"reserve": 10, "kind": "cpu"}, {})
        is False
    )
    assert started == ["first", "second", "third"]


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
        "--fresh",
    )
    assert rc == 1, text
    assert text.count("[ledger fig2c] no compile within 0.5 s") == 2
    assert ledger.read_progress(tmp_path / "out" / "paper" / "fig2c") is None


def test_bad_arguments_are_refused_in_one_line_before_anything_is_copied_or_probed(tmp_path):
    book_ledger, state = _ledger(tmp_path / "ledger.json"), tmp_path / "state"
    state.mkdir()
    base = ("--ledger", book_ledger, "--state", state)
    cases = {
        ("--budget", 5, "--reserve", 10): "--budget (5 s) must exceed --reserve (10 s)",
        ("--budget", "nan"): "--budget must be a finite number > 0, got nan",
        ("--budget", "inf"): "--budget must be a finite number > 0, got inf",
        ("--reserve", -1): "--reserve must be a finite number > 0",
        ("--compile-bound", 0): "--compile-bound must be a finite number > 0",
        ("--work-budget", "-5"): "--work-budget must be a finite number >= 0",
        ("--chunk", 0): "--chunk must be a whole number >= 1, got 0",
        ("--chunk", 7): "chunk must divide eval_every (20), got 7",
        ("--preset", "quik"): "--preset must be one of ('smoke', 'quick', 'paper') or bridge-x<N>, got 'quik'",
        ("--cores", 0): "--cores must be between 1 and",
        ("--choices", "[]"): "--choices must be a list of at least one object",
        ("--state", tmp_path / "nowhere"): "nowhere does not exist (to start every work afresh, pass --fresh)",
    }
    for args, message in cases.items():
        out = tmp_path / f"out{len(message)}"
        rc, text = _lease(*base, "--out", out, *args, timeout=60)
        assert rc == 2 and message in text and len(text.strip().splitlines()) == 1, (args, text)
        assert not (out / "device.txt").exists() and not (out / "paper").exists(), args
    empty = tmp_path / "empty.json"
    empty.write_text(ledger.dumps_ledger([]))
    rc, text = _lease("--ledger", empty, "--state", state, "--out", tmp_path / "o", timeout=60)
    assert rc == 2 and "the ledger lists no work" in text
    nowhere = ledger.Work("w", "teacher_student", "fig2c", "paper", ({"masks": "0;1"},), ("x",))
    (tmp_path / "bad.json").write_text(ledger.dumps_ledger([nowhere]))
    rc, text = _lease("--ledger", tmp_path / "bad.json", "--state", state, "--out", tmp_path / "o", timeout=60)
    assert rc == 2 and "bad.json: ledger work 'w': {'masks': '0;1'} names 0 configs" in text


def test_a_state_holding_a_link_or_a_pipe_is_refused_and_nothing_is_copied(tmp_path):
    book_ledger = _ledger(tmp_path / "ledger.json")
    for name, make in (("link", lambda p: p.symlink_to("/dev/zero")), ("pipe", lambda p: os.mkfifo(p))):
        state = tmp_path / f"state-{name}" / "fig2c"
        state.mkdir(parents=True)
        make(state / "step-0000000010.ckpt")
        out = tmp_path / f"out-{name}"
        rc, text = _lease("--ledger", book_ledger, "--state", state.parent, "--out", out, timeout=60)
        assert rc == 2 and "is not a regular file (a link, pipe or device is never copied)" in text, text
        assert not (out / "paper").exists()


def test_work_names_stay_inside_the_state_folder_and_unknown_fields_are_refused(tmp_path):
    col = next(c for c in support.TABLE_A9 if c.column == 1)
    work = {"name": "../escape", "section": "teacher_student", "figure": "fig2c", "preset": "paper"}
    work |= {"select": [{"masks": col.spec, "distribution": col.distribution}], "labels": ["x"]}
    (tmp_path / "l.json").write_text(json.dumps({"work": [work]}))
    with pytest.raises(recordfile.RecordError, match=r"l.json: .*work name '../escape' is not a folder name"):
        ledger.read(tmp_path / "l.json")
    (tmp_path / "l.json").write_text(json.dumps({"work": [work | {"name": "ok", "budget": 3}]}))
    with pytest.raises(recordfile.RecordError, match=r"l.json: .*work 'ok' has field\(s\) \['budget'\]"):
        ledger.read(tmp_path / "l.json")


def test_a_second_lease_on_the_same_out_is_refused(tmp_path):
    with gpu_lease.held(tmp_path, "--out"):
        rc, text = _lease("--ledger", _ledger(tmp_path / "l.json"), "--out", tmp_path, "--fresh", timeout=60)
    assert rc == 2 and "is held by another lease" in text


def test_a_lease_killed_mid_chunk_resumes_to_the_progress_of_an_uninterrupted_one(tmp_path):
    """SIGKILL to the lease and its child while they train: ``status`` then tells where the work stands (the last
    progress written, never ahead of its checkpoint), and a lease resumed from what the killed one left ends with the
    same progress, evaluations and training losses as one uninterrupted lease."""
    import signal
    import time

    book_ledger = _ledger(tmp_path / "ledger.json")
    work = ledger.read(book_ledger)[0]
    rc, text = _lease("--ledger", book_ledger, "--state", tmp_path / "none", "--out", tmp_path / "whole", "--chunk", 2,
                      "--fresh")  # fmt: skip
    assert rc == 0, text
    command = [sys.executable, str(TOOL), "--cpu", "--ledger", str(book_ledger), "--state", str(tmp_path / "none")]
    command += ["--out", str(tmp_path / "killed"), "--chunk", "2", "--fresh"]
    lease = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             start_new_session=True)  # fmt: skip
    folder = tmp_path / "killed" / "paper" / "fig2c"
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        found = ledger.read_progress(folder) if (folder / "progress.json").exists() else None
        if found is not None and found.steps_done >= 6:
            break
        time.sleep(0.05)
    os.killpg(lease.pid, signal.SIGKILL)
    lease.wait(30)
    killed = ledger.read_progress(folder)
    assert 6 <= killed.steps_done < 40 and killed.leases[-1]["device"] == "cpu"
    assert f"in progress, {killed.steps_done:,} of 40 steps over 1 lease(s)" in ledger.status(work, folder)
    newest = max(int(p.name[5:15]) for p in folder.glob("step-*.ckpt"))
    assert newest >= killed.steps_done
    rc, text = _lease("--ledger", book_ledger, "--state", tmp_path / "killed" / "paper", "--out", tmp_path / "again",
                      "--chunk", 2)  # fmt: skip
    assert rc == 0, text
    resumed = ledger.read_progress(tmp_path / "again" / "paper" / "fig2c")
    whole = ledger.read_progress(tmp_path / "whole" / "paper" / "fig2c")
    assert resumed.complete and resumed.leases[0]["steps"][0] == 0 and len(resumed.leases) == 2
    assert resumed.configs == whole.configs and resumed.eval_steps == whole.eval_steps
