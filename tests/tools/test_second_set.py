"""The second-set record: ``--chapters`` recomputes some chapters and keeps the others, each with its commit."""

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from compgen.figures import claims as C
from compgen.figures import glance

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("second_set", ROOT / "tools" / "second_set.py")
second_set = importlib.util.module_from_spec(spec)
sys.modules["second_set"] = second_set
spec.loader.exec_module(second_set)


def _old_record(path):
    """A record as the tool wrote it before per-chapter commits: every claim holds, one commit."""
    found = glance.claims("smoke")
    record = {
        "preset": "smoke",
        "seeds": [31],
        "commit": "0123456789abcdef",
        "fingerprints": {name: "old" for name in glance.CHAPTERS},
        "wall_s": {name: 1.0 for name in glance.CHAPTERS},
        "claims": [
            {"section": c.section, "figure": c.figure, "claim": c.claim, "verdict": C.HOLDS, "ours": "+1"}
            for group in found.values()
            for c in group
        ],
    }
    path.write_text(json.dumps(record))
    return record


def test_chapters_recomputes_only_those_and_keeps_the_rest(store, tmp_path, monkeypatch):
    path = tmp_path / "second.json"
    old = _old_record(path)
    monkeypatch.setattr(second_set.results, "_git_commit", lambda: "fedcba9876543210")
    assert second_set.main(["--preset", "smoke", "--seeds", "31", "--out", str(path), "--no-train",
                            "--chapters", "teacher_student"]) == 0  # fmt: skip
    new = json.loads(path.read_text())
    verdicts = {(c["section"], c["claim"]): c["verdict"] for c in new["claims"]}
    assert len(new["claims"]) == len(old["claims"])
    assert {v for (s, _), v in verdicts.items() if s == "teacher_student"} == {C.NOT_RUN}  # the empty store
    assert {v for (s, _), v in verdicts.items() if s != "teacher_student"} == {C.HOLDS}  # kept
    assert [c["section"] for c in new["claims"]] == [c["section"] for c in old["claims"]]  # chapters stay in order
    assert new["commits"]["teacher_student"] == "fedcba9876543210" and new["commits"]["goals"] == "0123456789abcdef"
    assert new["fingerprints"]["teacher_student"] == glance.code_fingerprints()["teacher_student"]
    assert new["fingerprints"]["goals"] == "old"
    assert new["wall_s"] == old["wall_s"]  # --no-train keeps the time of the training that stored the runs
    found = glance.claims("smoke")
    text = glance._second_set_summary(found, new, glance._second_set_matches(found, new))
    assert "commits `fedcba987654` (Teacher and student (§3.3)); `0123456789ab` (The hyperteacher" in text


def test_chapters_refuses_a_record_of_other_seeds(store, tmp_path):
    path = tmp_path / "second.json"
    _old_record(path)
    with pytest.raises(SystemExit, match="seeds"):
        second_set.main(["--preset", "smoke", "--seeds", "32", "--out", str(path), "--no-train",
                         "--chapters", "goals"])  # fmt: skip
