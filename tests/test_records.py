"""The typed records: every committed record loads as its kind and is exactly what saving it writes; seed sets are
tuples; a field the kind does not hold, a record a writer would get wrong, or an old version without a migration is
refused in one line naming the file and the command that rewrites it; a migration brings an old record up to date."""

import dataclasses
import json
from pathlib import Path

import pytest

from compgen import recordfile, records

ROOT = Path(__file__).resolve().parents[1]
ENTRY = {"figures": ["fig2c"], "config": {"seeds": [31]}, "finals": {"eval/alignment": [0.5]}}
SECOND_SET = {"preset": "quick", "seeds": [31], "keys": {"goals": "abc"}, "runs": {"goals": [ENTRY]}}


def _kind(path: Path) -> str:
    folder, name = path.parent.name, path.stem
    if folder in ("steps", "gpu"):
        return folder
    if name in ("book_time", "ledger", "op_counts", "choices"):
        return name
    if name == "progress":
        return "paper_run"
    if name.endswith("_set"):  # second_set, third_set: the seed sets of compgen.figures.glance.SEED_SETS
        return "second_set"
    return "twin" if name.startswith("twin_") else "search"


COMMITTED = sorted([*ROOT.glob("book/search/*.json"), *ROOT.glob("book/records/**/*.json")])


@pytest.mark.parametrize("path", COMMITTED, ids=[str(p.relative_to(ROOT)) for p in COMMITTED])
def test_every_committed_record_is_what_saving_its_typed_record_writes(path, tmp_path):
    """Loaded as its kind and saved again, each committed record comes back byte for byte: the records were written by
    this layer, and it keeps every field it reads."""
    kind = _kind(path)
    record = records.KINDS[kind].load(path)
    assert recordfile.read(path, kind)["schema"] == recordfile.version(kind)
    assert record.save(tmp_path / path.name).read_text() == path.read_text()


def test_seed_sets_are_tuples_and_records_are_frozen():
    twin = records.Twin.load(ROOT / "book" / "search" / "twin_teacher_student.json")
    assert all(isinstance(s, tuple) for s in twin.seed_sets)
    seed_set = records.SeedSet.from_dict(SECOND_SET)
    assert seed_set.seeds == (31,) and seed_set.runs["goals"][0].seeds == (31,)
    with pytest.raises(dataclasses.FrozenInstanceError):
        seed_set.preset = "paper"


def _one_line(path, kind=records.SeedSet) -> str:
    with pytest.raises(recordfile.RecordError) as error:
        kind.load(path)
    message = str(error.value)
    assert message.startswith(f"{path}: ") and "\n" not in message
    return message


def test_a_field_the_kind_does_not_hold_is_one_line_naming_it_and_the_command(tmp_path):
    path = tmp_path / "second_set.json"
    path.write_text(json.dumps({**SECOND_SET, "claims": []}))  # verdicts, as records once stored them
    message = _one_line(path)
    assert "has field(s) ['claims'] that a second_set record does not hold" in message
    assert "tools/second_set.py --preset quick --seeds 31 32 33" in message


def test_a_seed_set_whose_entries_ran_on_other_seeds_is_one_line(tmp_path):
    path = tmp_path / "second_set.json"
    entry = SECOND_SET["runs"]["goals"][0]
    other = {**entry, "config": {**entry["config"], "seeds": [32]}}
    path.write_text(json.dumps({**SECOND_SET, "runs": {"goals": [other]}}))
    assert "a goals entry was run on seeds [32], not the set's [31]" in _one_line(path)


def test_a_writer_cannot_write_a_record_the_book_refuses(tmp_path):
    path = tmp_path / "set.json"
    bad = records.SeedSet(preset="quick", seeds=(31,), wall_s={"goals": -1.0})
    with pytest.raises(recordfile.RecordError, match="wall_s\\['goals'\\] must be a number >= 0"):
        bad.save(path)
    assert not path.exists()


def test_an_old_record_loads_through_its_migration_and_without_one_is_refused(monkeypatch, tmp_path):
    path = tmp_path / "second_set.json"
    path.write_text(json.dumps({**SECOND_SET, "schema": 2, "wall_s": {"goals": 5.0}}))
    monkeypatch.setitem(recordfile.VERSIONS, "second_set", 3)
    message = _one_line(path)
    assert "has schema 2, older than any this compgen can bring up to 3" in message
    assert "rewrite it with `COMPGEN_RESULTS=<store> python tools/second_set.py" in message

    def step(record):  # version 2 -> 3: a made-up change, doubling the wall seconds
        return {**record, "wall_s": {k: 2 * v for k, v in record["wall_s"].items()}}

    monkeypatch.setitem(recordfile.MIGRATIONS, ("second_set", 2), step)
    loaded = records.SeedSet.load(path)
    assert loaded.wall_s == {"goals": 10.0} and loaded.to_dict()["schema"] == 3
    path.write_text(json.dumps({**SECOND_SET, "schema": 4}))
    assert "has schema 4, written by a newer compgen (this one reads up to 3)" in _one_line(path)


def test_a_record_saved_and_loaded_is_the_same_record(tmp_path):
    record = records.SeedSet.from_dict(SECOND_SET)
    again = records.SeedSet.load(record.save(tmp_path / "deep" / "set.json"))
    assert again == record and json.loads((tmp_path / "deep" / "set.json").read_text())["schema"] == 2
    assert records.SeedSet.load_if_there(tmp_path / "none.json") is None


def test_every_kind_of_the_reader_has_its_typed_record():
    assert set(records.KINDS) == set(recordfile.KINDS) == set(recordfile.VERSIONS)
    assert all(cls.KIND == kind for kind, cls in records.KINDS.items())


def test_a_twin_record_of_version_1_loads_with_our_numbers_raw_under_metric_names(tmp_path):
    """Version 1 kept our matched-world numbers under the tables' labels and units; read now, they are raw under
    metric names, and the tables show the same numbers as before."""
    from compgen.figures import twin

    shown = {"OOD acc. %": [80.0, 70.0], "optimal OOD episodes %": [50.0, 40.0]}
    row = {"row": {"figure": "fig4ef"}, "seeds": [1, 2], "values": shown}
    old = {"chapter": "goals", "preset": "quick", "reference": {"commit": "c"}, "seed_sets": [[1, 2]], "runs": {}}
    path = tmp_path / "twin_goals.json"
    path.write_text(json.dumps({**old, "ours_matched_rows": [row]}))  # no schema: version 1
    loaded = records.Twin.load(path)
    assert loaded.ours_matched_rows[0]["values"] == {"ood/acc": [0.8, 0.7], "ood/acc_all": [0.5, 0.4]}
    assert {k: list(v) for k, v in twin.shown("goals", loaded.ours_matched_rows[0]["values"]).items()} == shown
    assert json.loads(loaded.save(path).read_text())["schema"] == recordfile.version("twin") == 3


def test_a_written_record_carries_the_schema_first_and_its_code_key():
    written = records.Ledger(work=({"a": 1},)).to_dict()
    assert written == {"schema": recordfile.version("ledger"), "work": [{"a": 1}]}  # ``about`` at its default: out
    steps = records.Steps(who="compgen", device="cpu", date="d", code="c@1", how="h", gemm_gflops=None, rows={})
    stamped = dataclasses.replace(steps, code_key="f00", code_versions={"jax": "1"})
    assert list(stamped.to_dict())[0] == "schema" and stamped.to_dict()["code_key"] == "f00"
    assert stamped.computed_by() == ("f00", {"jax": "1"}) and steps.computed_by() == (None, None)
