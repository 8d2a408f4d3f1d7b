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


COMMITTED = sorted([*ROOT.glob("book/search/*.json"), *ROOT.glob("book/records/**/*.json")])


@pytest.mark.parametrize("path", COMMITTED, ids=[str(p.relative_to(ROOT)) for p in COMMITTED])
def test_every_committed_record_names_its_kind_and_is_what_saving_it_writes(path, tmp_path):
    """Loaded by the kind it names (records.load) and saved again, each committed record comes back byte for byte:
    the records were written by this layer, at their kind's current version, and it keeps every field it reads."""
    record = records.load(path)
    written = json.loads(path.read_text())
    assert (written["kind"], written["schema"]) == (record.KIND, record.VERSION)
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
    monkeypatch.setattr(records.SeedSet, "VERSION", 3)
    message = _one_line(path)
    assert "has schema 2, older than any this compgen can bring up to 3" in message
    assert "rewrite it with `COMPGEN_RESULTS=<store> python tools/second_set.py" in message

    def step(record):  # version 2 -> 3: a made-up change, doubling the wall seconds
        return {**record, "wall_s": {k: 2 * v for k, v in record["wall_s"].items()}}

    monkeypatch.setattr(records.SeedSet, "MIGRATIONS", {**records.SeedSet.MIGRATIONS, 2: step})
    loaded = records.SeedSet.load(path)
    assert loaded.wall_s == {"goals": 10.0} and loaded.to_dict()["schema"] == 3
    path.write_text(json.dumps({**SECOND_SET, "schema": 4}))
    assert "has schema 4, written by a newer compgen (this one reads up to 3)" in _one_line(path)


def test_a_record_saved_and_loaded_is_the_same_record(tmp_path):
    record = records.SeedSet.from_dict(SECOND_SET)
    again = records.SeedSet.load(record.save(tmp_path / "deep" / "set.json"))
    assert again == record and json.loads((tmp_path / "deep" / "set.json").read_text())["schema"] == 2
    assert records.SeedSet.load_if_there(tmp_path / "none.json") is None


def test_each_kind_is_declared_once_by_its_class_and_every_field_has_a_shape():
    for kind, cls in records.KINDS.items():
        assert cls.KIND == kind and cls.NAME and cls.COMMAND and cls.VERSION >= 1
        assert all(version < cls.VERSION for version in cls.MIGRATIONS), kind
        assert {name.rstrip("?") for name in cls.shape()} == {f.name for f in dataclasses.fields(cls)}, kind


def test_a_new_kind_is_one_class_that_the_reader_checks_by_its_fields(tmp_path, monkeypatch):
    @dataclasses.dataclass(frozen=True, kw_only=True)
    class Tally(records.Record):
        KIND = "tally"
        NAME = "tally record"
        COMMAND = "python make_tally.py"
        TUPLES = ("counts",)

        counts: tuple = records.shaped(["count"])
        note: str | None = records.shaped(("none or", "text"), default=None)

    monkeypatch.setitem(records.KINDS, "tally", Tally)
    path = Tally(counts=(1, 2)).save(tmp_path / "tally.json")
    assert json.loads(path.read_text()) == {"kind": "tally", "schema": 1, "counts": [1, 2]}
    assert records.load(path) == Tally(counts=(1, 2))
    path.write_text(json.dumps({"kind": "tally", "counts": [1, -2]}))
    assert _one_line(path, Tally).endswith("is damaged: counts[1] must be a whole number >= 0 and < 2**63, got -2; "
                                           "rewrite it with `python make_tally.py`")  # fmt: skip


def test_load_reads_the_kind_a_file_names_and_refuses_a_file_of_another_or_none(tmp_path):
    path = records.SeedSet.from_dict(SECOND_SET).save(tmp_path / "set.json")
    assert isinstance(records.load(path), records.SeedSet)
    assert "names the kind 'second_set', not 'twin'" in _one_line(path, records.Twin)
    for text, what in ((json.dumps(SECOND_SET), "names no kind"), ('{"kind": "tallies"}', "names the kind 'tallies'")):
        path.write_text(text)
        with pytest.raises(recordfile.RecordError, match=f"set.json: {what}, not one of .*'second_set'"):
            records.load(path)
    path.write_text(json.dumps({**SECOND_SET, "schema": 2}))  # written before records named their kind: still read
    assert records.SeedSet.load(path) == records.SeedSet.from_dict(SECOND_SET)


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
    assert json.loads(loaded.save(path).read_text())["schema"] == records.Twin.VERSION == 3


def test_a_written_record_carries_its_kind_and_schema_first_and_its_code_key():
    written = records.Ledger(work=({"a": 1},)).to_dict()
    assert written == {"kind": "ledger", "schema": 1, "work": [{"a": 1}]}  # ``about`` at its default: out
    steps = records.Steps(who="compgen", device="cpu", date="d", code="c@1", how="h", gemm_gflops=None, rows={})
    stamped = dataclasses.replace(steps, code_key="f00", code_versions={"jax": "1"})
    assert list(stamped.to_dict())[:2] == ["kind", "schema"] and stamped.to_dict()["code_key"] == "f00"
    assert stamped.computed_by() == ("f00", {"jax": "1"}) and steps.computed_by() == (None, None)
