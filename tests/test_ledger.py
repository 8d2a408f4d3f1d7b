"""The paper-scale ledger: a work continued over leases from committed files equals one uninterrupted run."""

import dataclasses
import math
import shutil

import numpy as np
import pytest

from compgen import ledger, params, recordfile, storage
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


def test_three_leases_resumed_from_committed_files_equal_one_uninterrupted_run(tmp_path):
    """Leases of one chunk, one chunk and the rest, each starting from a copy of what the previous one left (as a
    commit would carry it), end with the same progress and the same training state, bit for bit (tolerance 0: the
    same compiled chunk on the same device), as one uninterrupted run."""
    work, quiet = _work(), lambda line: None
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
    for name in states[0]:
        np.testing.assert_array_equal(states[0][name], states[1][name], err_msg=name)
    assert recordfile.read(lease_dirs[-1] / "progress.json", "paper_run") == leased.to_dict()
    assert "complete, 40 of 40 steps over 3 lease(s)" in ledger.status(work, lease_dirs[-1])
    assert ledger.next_unfinished([work], tmp_path / "nowhere") == [work]


def test_a_state_made_by_other_code_starts_again_and_a_resumed_chunk_must_fit(tmp_path):
    work = _work((1,))
    with pytest.raises(ledger.OutOfTime):
        ledger.advance(work, tmp_path, 0.0, preset="smoke", chunk=10, log=lambda line: None)
    with pytest.raises(params.ParameterError, match="chunk must divide the 10 steps fig2c has done"):
        ledger.advance(work, tmp_path, preset="smoke", chunk=20, log=lambda line: None)
    record = ledger.read_progress(tmp_path)
    dataclasses.replace(record, code_fingerprint="older").save(tmp_path / "progress.json")
    lines = []
    again = ledger.advance(work, tmp_path, preset="smoke", chunk=20, log=lines.append)
    assert any("made by other code or configs" in line and "starting again" in line for line in lines)
    assert [lease["steps"] for lease in again.leases] == [[0, 40]]


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
