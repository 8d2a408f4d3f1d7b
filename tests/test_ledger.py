"""The paper-scale ledger: a work continued over leases from committed files equals one uninterrupted run."""

import dataclasses
import math
import shutil

import numpy as np
import pytest

from compgen import ledger, params, recordfile, records, storage
from compgen.tasks import support

ROOT = ledger.Path(__file__).resolve().parents[1]
COLUMNS = {c.column: c for c in support.TABLE_A9}


def _work(columns=(1, 2)):
    pick = [{"masks": COLUMNS[n].spec, "distribution": COLUMNS[n].distribution} for n in columns]
    return ledger.Work("fig2c", "teacher_student", "fig2c", "paper", tuple(pick), tuple(f"column {n}" for n in columns))


def test_the_committed_ledger_is_fig2c_first_at_the_papers_configuration_one_program_per_work():
    works = ledger.read(ROOT / "book" / "records" / "ledger.json")
    first = works[0].configs()
    assert works[0].name == "fig2c" and works[0].preset == "paper"
    assert [(c.masks, c.distribution) for c in first] == [
        (COLUMNS[n].spec, COLUMNS[n].distribution) for n in (1, 2, 3, 5)
    ]
    assert {c.seeds for c in first} == {(100, 101, 102)} and {c.outer_steps for c in first} == {60000}
    for work in works:
        assert len(work.configs()) == len(work.labels)  # each selection names one config, all of one shape


def test_three_leases_resumed_from_committed_files_equal_one_uninterrupted_run(tmp_path, monkeypatch):
    """Leases of one chunk, one chunk and the rest, each starting from a copy of what the previous one left (as a
    commit would carry it), end with the same progress and the same training state, bit for bit (tolerance 0: the
    same compiled chunk on the same device), as one uninterrupted run."""
    work, quiet = _work(), lambda line: None
    monkeypatch.setattr(ledger, "PRUNE_COMPLETE", False)  # the final states, compared below
    lease_dirs = [tmp_path / f"lease{i}" for i in range(3)]
    for i, (folder, budget) in enumerate(zip(lease_dirs, (0.0, 0.0, math.inf))):
        if i:
            shutil.copytree(lease_dirs[i - 1], folder)  # the committed state of the previous lease
        if budget == 0:
            with pytest.raises(ledger.OutOfTime, match=f"at {10 * (i + 1)} of 40 steps"):
                ledger.advance(work, folder, budget, preset="smoke", chunk=10, log=quiet)
        else:
            leased = ledger.advance(work, folder, budget, preset="smoke", chunk=10, log=quiet)
    whole = ledger.advance(work, tmp_path / "whole", preset="smoke", chunk=10, log=quiet)
    assert [lease["steps"] for lease in leased.leases] == [[0, 10], [10, 20], [20, 40]]
    assert leased.complete and leased.steps_done == 40 and ledger.staleness(leased) == []
    assert dataclasses.replace(leased, leases=()) == dataclasses.replace(whole, leases=())
    states = [storage.read_arrays(next(f.glob("step-*.ckpt"))) for f in (lease_dirs[-1], tmp_path / "whole")]
    assert states[0].keys() == states[1].keys()
    for name in set(states[0]) - {"extra"}:  # "extra" holds the leases, which differ
        np.testing.assert_array_equal(states[0][name], states[1][name], err_msg=name)
    assert recordfile.read(lease_dirs[-1] / "progress.json", records.PaperRun) == leased.to_dict()
    assert "complete, 40 of 40 steps over 3 lease(s)" in ledger.status(work, lease_dirs[-1])
    assert ledger.next_unfinished([work], tmp_path / "nowhere") == [work]


def _quiet(line):
    pass


def _leased(work, folder, steps, chunk=10):
    """Advance ``work`` in ``folder`` by ``steps`` (a budget of 0: one chunk at a time)."""
    for _ in range(steps // chunk):
        with pytest.raises(ledger.OutOfTime):
            ledger.advance(work, folder, 0.0, preset="smoke", chunk=chunk, log=_quiet)


def test_a_state_made_by_other_code_is_refused_and_fresh_sets_it_aside(tmp_path):
    work = _work((1,))
    _leased(work, tmp_path, 10)
    with pytest.raises(params.ParameterError, match="chunk must divide the 10 steps fig2c has done"):
        ledger.advance(work, tmp_path, preset="smoke", chunk=20, log=_quiet)
    record = ledger.read_progress(tmp_path)
    other = {**record.code, "key": "0123456789abcdef"}
    dataclasses.replace(record, code=other).save(tmp_path / "progress.json")
    with pytest.raises(
        params.ParameterError, match=r"progress.json: was made by code that computes other programs.*--fresh"
    ):
        ledger.advance(work, tmp_path, preset="smoke", chunk=20, log=_quiet)
    again = ledger.advance(work, tmp_path, preset="smoke", chunk=20, log=_quiet, fresh=True)
    assert [lease["steps"] for lease in again.leases] == [[0, 40]]
    aside = list(tmp_path.glob("set-aside-*"))
    assert len(aside) == 1 and {p.name for p in aside[0].iterdir()} == {"progress.json", "step-0000000010.ckpt"}


def test_stray_files_named_like_checkpoints_never_cost_the_real_one(tmp_path):
    """A hand-made backup ``step-30.ckpt`` and garbage under a checkpoint's exact name of a later step are left alone:
    the real checkpoint is neither deleted nor passed over, and the work resumes from it."""
    work = _work((1,))
    _leased(work, tmp_path, 10)
    real = tmp_path / "step-0000000010.ckpt"
    (tmp_path / "step-30.ckpt").write_bytes(real.read_bytes())
    (tmp_path / "step-0000000035.ckpt").write_bytes(b"garbage")
    lines = []
    with pytest.raises(ledger.OutOfTime, match="at 20 of 40"):
        ledger.advance(work, tmp_path, 0.0, preset="smoke", chunk=10, log=lines.append)
    assert any("ignoring step-0000000035.ckpt" in line for line in lines)
    assert (tmp_path / "step-30.ckpt").exists() and (tmp_path / "step-0000000035.ckpt").exists()
    assert (tmp_path / "step-0000000020.ckpt").exists() and not real.exists()
    assert ledger.read_progress(tmp_path).steps_done == 20


def test_a_kill_between_the_checkpoint_and_the_progress_loses_nothing(tmp_path):
    """The progress is written after every chunk; a kill after a chunk's checkpoint and before its progress leaves
    the progress one chunk behind, which ``status`` tells; the next lease resumes from the checkpoint, keeps the
    killed lease's device and seconds, and ends equal to an uninterrupted run."""
    work = _work((1,))

    class Killed(BaseException):
        pass

    def kill_after_second_checkpoint(line):
        if "[checkpoint] saved step 20 " in line:
            raise Killed

    with pytest.raises(Killed):
        ledger.advance(work, tmp_path / "a", preset="smoke", chunk=10, log=kill_after_second_checkpoint)
    assert ledger.read_progress(tmp_path / "a").steps_done == 10
    assert "in progress, 10 of 40 steps over 1 lease(s)" in ledger.status(work, tmp_path / "a")
    resumed = ledger.advance(work, tmp_path / "a", preset="smoke", chunk=10, log=_quiet)
    whole = ledger.advance(work, tmp_path / "b", preset="smoke", chunk=10, log=_quiet)
    assert [lease["steps"] for lease in resumed.leases] == [[0, 20], [20, 40]]
    assert resumed.leases[0]["device"] == "cpu" and resumed.leases[0]["seconds"]["wall"] > 0
    assert dataclasses.replace(resumed, leases=()) == dataclasses.replace(whole, leases=())


def test_a_progress_without_its_checkpoint_and_a_foreign_checkpoint_are_refused(tmp_path):
    work, other = _work((1,)), dataclasses.replace(_work((1,)), name="other")
    _leased(work, tmp_path / "w", 10)
    (tmp_path / "w" / "step-0000000010.ckpt").unlink()
    with pytest.raises(params.ParameterError, match=r"w/progress.json: says 10 steps are done, but no checkpoint"):
        ledger.advance(work, tmp_path / "w", preset="smoke", chunk=10, log=_quiet)
    _leased(other, tmp_path / "o", 10)
    (tmp_path / "o" / "progress.json").unlink()
    (tmp_path / "o" / "step-0000000010.ckpt").replace(tmp_path / "w" / "step-0000000010.ckpt")
    (tmp_path / "w" / "progress.json").unlink()
    with pytest.raises(params.ParameterError, match=r"step-0000000010.ckpt: is the state of .*work other.*not of"):
        ledger.advance(work, tmp_path / "w", preset="smoke", chunk=10, log=_quiet)


def test_a_progress_record_that_contradicts_itself_is_refused(tmp_path):
    work = _work((1,))
    _leased(work, tmp_path, 10)
    record = ledger.read_progress(tmp_path)
    (tmp_path / "p.json").write_text(recordfile.dumps(record.to_dict() | {"complete": True}))
    with pytest.raises(recordfile.RecordError, match="complete is True at 10 of 40 steps"):
        records.PaperRun.load(tmp_path / "p.json")
    foreign = record.to_dict() | {"identity": {**record.identity, "work": "another"}}
    (tmp_path / "p.json").write_text(recordfile.dumps(foreign))
    with pytest.raises(recordfile.RecordError, match="identity"):
        records.PaperRun.load(tmp_path / "p.json")


def test_bad_works_and_chunks_are_one_line_errors():
    with pytest.raises(params.ParameterError, match="chunk must divide eval_every"):
        ledger.chunk_for(20, 7)
    assert ledger.chunk_for(1000) == 100 and ledger.chunk_for(20) == 20
    nowhere = ledger.Work("w", "teacher_student", "fig2c", "paper", ({"masks": "0;1"},), ("x",))
    with pytest.raises(params.ParameterError, match=r"names 0 configs of fig2c at paper, not one"):
        nowhere.configs()
    mixed = ledger.Work(
        "w", "teacher_student", "table_a1", "paper", ({"hidden_factor": 4}, {"hidden_factor": 8}), ("a", "b")
    )
    with pytest.raises(params.ParameterError, match="names 8 configs"):
        mixed.configs()
    picks = tuple({"hidden_factor": h, "module_factor": h, "weight_decay": 0.0} for h in (4, 8))
    with pytest.raises(params.ParameterError, match="its configs differ in shape; split it"):
        ledger.Work("w", "teacher_student", "table_a1", "paper", picks, ("a", "b")).configs()


def test_a_complete_work_keeps_its_progress_and_not_its_checkpoints(tmp_path):
    work = _work((1,))
    record = ledger.advance(work, tmp_path, preset="smoke", chunk=10, log=_quiet)
    assert record.complete and not list(tmp_path.glob("step-*.ckpt"))
    assert ledger.read_progress(tmp_path) == record and "complete, 40 of 40" in ledger.status(work, tmp_path)
    again = ledger.advance(work, tmp_path, preset="smoke", chunk=10, log=_quiet)  # nothing left to train
    assert again == record


def test_what_is_left_is_the_unfinished_share_of_each_estimate_at_the_pace_of_the_complete_works(fake_bridge):
    """A work complete in 1 s against an estimate of 0.5 s (pace 2), one half trained (estimate 100 s) and one not
    started (30 s): 50 + 30 s left by the estimates, 160 s at that pace."""
    folder, work = fake_bridge.folder, fake_bridge.work
    total = fake_bridge(0)
    fake_bridge(total // 2)
    (folder / "half").mkdir()
    shutil.copy(folder / work.name / ledger.PROGRESS, folder / "half" / ledger.PROGRESS)
    fake_bridge(total)
    works = [
        dataclasses.replace(work, estimate_s=0.5),
        dataclasses.replace(work, name="half", estimate_s=100.0),
        dataclasses.replace(work, name="fresh", estimate_s=30.0),
    ]
    assert ledger.forecast(works, folder) == {"works": 2, "estimated_s": 80.0, "pace": 2.0, "paced_s": 160.0}
    assert ledger.forecast(works[1:], folder)["pace"] is None
