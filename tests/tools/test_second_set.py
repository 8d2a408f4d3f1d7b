"""The second-set record keeps final numbers, not verdicts; ``--chapters`` records some chapters and keeps the
others, each with its commit."""

import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pytest

from compgen import notebook, records, results
from compgen.figures import glance

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("second_set", ROOT / "tools" / "second_set.py")
second_set = importlib.util.module_from_spec(spec)
sys.modules["second_set"] = second_set
spec.loader.exec_module(second_set)


def _record(path, **extra):
    """A record as the tool writes it, with one entry of its own per chapter."""
    record = {
        "preset": "smoke",
        "seeds": [31],
        "commits": {name: "0123456789abcdef" for name in glance.CHAPTERS},
        "keys": {name: "old" for name in glance.CHAPTERS},
        "schema": records.SeedSet.VERSION,
        "wall_s": {name: 1.0 for name in glance.CHAPTERS},
        "runs": {name: [{"figures": ["x"], "config": {"seeds": [31]}, "finals": {}}] for name in glance.CHAPTERS},
        **extra,
    }
    path.write_text(json.dumps(record))
    return record


def test_chapters_records_only_those_and_keeps_the_rest(store, tmp_path, monkeypatch, fake):
    sec, by_figure = notebook.chapter_configs("teacher_student", "smoke", [31])
    for cfg in dict.fromkeys(c for cs in by_figure.values() for c in cs):  # stored runs of seed 31
        results.Store.default().save(sec, cfg, fake(cfg, {"eval/alignment": np.array([0.5])}), 1.0)
    path = tmp_path / "second.json"
    old = _record(path)
    monkeypatch.setattr(second_set.results, "_git_commit", lambda: "fedcba9876543210")
    assert second_set.main(["--preset", "smoke", "--seeds", "31", "--out", str(path), "--no-train",
                            "--chapters", "teacher_student"]) == 0  # fmt: skip
    new = json.loads(path.read_text())
    assert "claims" not in new and list(new["runs"]) == list(glance.CHAPTERS)  # chapters stay in order
    loaded = glance.load_seed_set(path, "smoke")
    assert new["schema"] == records.SeedSet.VERSION and loaded.to_dict() == new and loaded.seeds == (31,)
    entries = new["runs"]["teacher_student"]
    assert len(entries) == len(set(c for cs in by_figure.values() for c in cs))
    assert all(e["finals"]["eval/alignment"] == [0.5] and e["config"]["seeds"] == [31] for e in entries)
    assert new["runs"]["goals"] == old["runs"]["goals"]  # kept
    assert new["commits"]["teacher_student"] == "fedcba9876543210" and new["commits"]["goals"] == "0123456789abcdef"
    assert new["keys"]["teacher_student"] == glance.code_keys()["teacher_student"]
    assert new["keys"]["goals"] == "old" and new["wall_s"] == old["wall_s"]
    text = glance._seed_sets_summary([loaded], {})
    assert "commits `fedcba987654` (Teacher and student (§3.3)); `0123456789ab` (The hyperteacher" in text
    assert "Compositional goals (§4.3)" in text  # stale: recorded by other code


def _one_line(argv, capsys) -> str:
    """The one line ``second_set.main(argv)`` prints, having returned 2."""
    assert second_set.main(argv) == 2
    message = capsys.readouterr().err.strip()
    assert message.startswith("error: ") and "\n" not in message, message
    return message


UPDATE = ["--preset", "smoke", "--no-train", "--chapters", "goals"]


def test_chapters_refuses_a_record_of_other_seeds_or_of_verdicts(store, tmp_path, capsys):
    path = tmp_path / "second.json"
    _record(path)
    message = _one_line([*UPDATE, "--seeds", "32", "--out", str(path)], capsys)
    assert "it is at preset 'smoke' and seeds [31]; --chapters can only update" in message
    record = _record(path)
    del record["runs"]
    path.write_text(json.dumps({**record, "claims": []}))
    assert "the record has no 'runs'" in _one_line([*UPDATE, "--seeds", "31", "--out", str(path)], capsys)
    missing = tmp_path / "none.json"
    assert "there is none" in _one_line([*UPDATE, "--seeds", "31", "--out", str(missing)], capsys)


@pytest.mark.parametrize(
    "text, expected",
    [
        ('{"preset": "smoke", "seeds": [31], "runs": {', "is not valid JSON"),
        ("", "is empty"),
        ('{"preset": "smoke", "seeds": [31], "runs": "oops"}', "runs must be an object, got 'oops'"),
        ('{"schema": 9, "preset": "smoke", "seeds": [31], "runs": {}}', "written by a newer compgen"),
        ('{"preset": "smoke", "seeds": [31], "runs": {}, "wall_s": {"goals": -5}}', "wall_s['goals'] must be"),
    ],
)
def test_a_damaged_record_to_update_is_one_line_and_kept(text, expected, store, tmp_path, capsys):
    """Nothing is trained and the record is left as it was: a person reads what is wrong and rewrites it."""
    path = tmp_path / "second.json"
    path.write_text(text)
    message = _one_line([*UPDATE, "--seeds", "31", "--out", str(path)], capsys)
    assert f"{path}: second-seed-set record" in message and expected in message and path.read_text() == text


def test_seeds_another_seed_set_holds_are_refused(tmp_path, capsys):
    held = glance.load_seed_set(second_set.DEFAULT, "quick").seeds
    out = str(tmp_path / "third.json")
    message = _one_line(["--preset", "quick", "--seeds", str(held[0]), "99", "--out", out, "--no-train"], capsys)
    assert f"--seeds [{held[0]}] are already in" in message and "second_set.json" in message


def test_bad_inputs_are_refused_in_one_line_before_anything_trains(store, tmp_path, capsys, monkeypatch):
    trained = []
    monkeypatch.setattr(second_set.notebook, "train", lambda *a, **k: trained.append(a))
    out = tmp_path / "set.json"
    base = ["--out", str(out)]
    assert "--preset must be one of" in _one_line(["--preset", "quik", "--seeds", "61", *base], capsys)
    assert "--seeds must be a list of non-negative integers below 2**32" in _one_line(
        ["--seeds", str(2**40), *base], capsys
    )
    assert "--seeds must not repeat a seed" in _one_line(["--seeds", "61", "61", *base], capsys)
    book = _one_line(["--preset", "quick", "--seeds", "2020", "61", *base], capsys)
    assert "--seeds [2020] are the book's own seeds of hyperteacher at quick" in book
    folder = tmp_path / "read-only"
    folder.mkdir()
    real = second_set.os.access
    monkeypatch.setattr(second_set.os, "access", lambda p, mode: False if str(p) == str(folder) else real(p, mode))
    message = _one_line(["--seeds", "61", "--out", str(folder / "set.json")], capsys)
    assert f"--out {folder / 'set.json'} cannot be written: {folder} is not a folder it can write in" in message
    monkeypatch.setattr(second_set.os, "access", real)
    assert "cannot be written (a folder, or read-only)" in _one_line(["--seeds", "61", "--out", str(folder)], capsys)
    empty = _one_line(["--preset", "smoke", "--seeds", "61", "--no-train", *base], capsys)
    assert "--no-train: the results store" in empty and "lacks" in empty and "of teacher_student at smoke" in empty
    assert trained == [] and not out.exists()


def test_seeds_overlapping_the_target_record_are_refused_unless_it_is_the_same_set(store, tmp_path, capsys):
    path = tmp_path / "second.json"
    _record(path)
    message = _one_line(["--preset", "smoke", "--seeds", "31", "32", "--out", str(path), "--no-train"], capsys)
    assert f"--seeds [31] are already in {path}" in message
