"""The one checked reader of the book's records: every damaged, impossible or newer record is one line naming its
file, what is wrong and the command that rewrites it; the committed records load; staleness is by the key of what the
code computes."""

import json
import re
import time

import pytest

from compgen import params, recordfile, records

KIND = records.KINDS  # kind: its class, the one declaration of it

STEPS = {
    "who": "compgen",
    "device": "cpu",
    "date": "2026-01-01",
    "code": "compgen@abc",
    "how": "timed",
    "gemm_gflops": [100.0, 120.0],
    "rows": {"case": {"s_per_step": 0.5, "peak_gb": 1.0, "runs": 1}},
}
CHAPTER = {"chapter": "goals", "wall": 60.0, "training_cells": 50.0, "runs": 2, "gemm": 250.0}
SECONDS = {"compile": 1.0, "setup": 0.0, "train": 4.0, "evaluate": 1.0}
BOOK_TIME = {
    "date": "2026-01-01",
    "code": "compgen@abc",
    "preset": "quick",
    "cores": 2,
    "chapters": [{**CHAPTER, **SECONDS}],
    "runs": [{"section": "goals", "chapter": "goals", "config": {}, **SECONDS}],
}
GPU = {
    "device": "H200",
    "date": "2026-01-01",
    "code": "compgen@abc",
    "jax": "0.1",
    "flax": "0.1",
    "steps": [{"step": "device", "status": "ok", "seconds": 5, "found": ""}],
}
ENTRY = {"figures": ["fig2c"], "config": {"seeds": [31]}, "finals": {"eval/alignment": [0.5]}}
SECOND_SET = {"preset": "quick", "seeds": [31], "keys": {"goals": "abc"}, "runs": {"goals": [ENTRY]}}
RUN = {"seed": 31, "final": {}, "row": {}, "wall_s": 5.0, "translation": {"unmatched": [["x", "why"]]}}
TWIN = {
    "chapter": "goals",
    "preset": "quick",
    "reference": {"commit": "c0ffee"},
    "seed_sets": [[31]],
    "runs": {"k": RUN},
}
SEARCH = {"metric": "ood acc", "records": [{"regime": "a", "world": {}, "budget": {}, "seeds": [1], "values": [0.5]}]}


def _with(record, path, value):
    """``record`` with the field at ``path`` (keys and indices) set to ``value`` (a copy)."""
    record = json.loads(json.dumps(record))
    *parents, last = path
    target = record
    for key in parents:
        target = target[key]
    target[last] = value
    return record


# (what, kind, the file's text, what the one line must say besides the file and the command)
BAD_RECORDS = [
    ("empty", "second_set", "", "is empty"),
    ("blanks only", "twin", "  \n", "is empty"),
    ("truncated", "book_time", json.dumps(BOOK_TIME)[:50], "is not valid JSON .*line 1 column"),
    ("a list", "steps", "[1, 2]", "holds list .*not a JSON object"),
    ("a number", "gpu", "3", "holds int 3, not a JSON object"),
    ("future schema", "second_set", json.dumps({**SECOND_SET, "schema": 9}), "schema 9, written by a newer compgen"),
    ("schema text", "twin", json.dumps({**TWIN, "schema": "two"}), "schema 'two', not a whole number"),
    ("runs oops", "second_set", json.dumps({**SECOND_SET, "runs": "oops"}), "runs must be an object, got 'oops'"),
    ("no runs", "second_set", json.dumps({"preset": "quick", "seeds": [31]}), "the record has no 'runs'"),
    ("seeds text", "second_set", json.dumps({**SECOND_SET, "seeds": "31"}), "seeds must be a list"),
    (
        "finals text",
        "second_set",
        json.dumps(_with(SECOND_SET, ["runs", "goals", 0, "finals", "eval/alignment"], "high")),
        r"runs\['goals'\]\[0\]\.finals\['eval/alignment'\] must be numbers",
    ),
    (
        "negative minutes",
        "book_time",
        json.dumps(_with(BOOK_TIME, ["chapters", 0, "training_cells"], -3692 * 60)),
        r"chapters\[0\]\.training_cells must be a number >= 0, got -221520",
    ),
    (
        "negative runs",
        "book_time",
        json.dumps(_with(BOOK_TIME, ["chapters", 0, "runs"], -1)),
        r"runs must be a whole number >= 0 and < 2\*\*63, got -1",
    ),
    ("no cores", "book_time", json.dumps({**BOOK_TIME, "cores": 0}), "cores must be a whole number >= 1"),
    (
        "negative compile",
        "book_time",
        json.dumps(_with(BOOK_TIME, ["runs", 0, "compile"], -1.0)),
        r"runs\[0\]\.compile must be a number >= 0",
    ),
    (
        "negative step time",
        "steps",
        json.dumps(_with(STEPS, ["rows", "case", "s_per_step"], -31.1)),
        r"rows\['case'\]\.s_per_step must be a number > 0, got -31.1",
    ),
    ("zero step time", "steps", json.dumps(_with(STEPS, ["rows", "case", "s_per_step"], 0)), "must be a number > 0"),
    ("NaN step time", "steps", json.dumps(_with(STEPS, ["rows", "case", "s_per_step"], float("nan"))), "got nan"),
    ("runs as true", "steps", json.dumps(_with(STEPS, ["rows", "case", "runs"], True)), "runs must be a whole number"),
    (
        "one GEMM reading",
        "steps",
        json.dumps({**STEPS, "gemm_gflops": [100.0]}),
        "gemm_gflops must be a list of two, each a number > 0",
    ),
    ("who else", "steps", json.dumps({**STEPS, "who": "them"}), "who must be one of"),
    ("rows a list", "steps", json.dumps({**STEPS, "rows": []}), "rows must be an object"),
    ("negative GPU seconds", "gpu", json.dumps(_with(GPU, ["steps", 0, "seconds"], -5)), r"steps\[0\]\.seconds"),
    ("twin runs oops", "twin", json.dumps({**TWIN, "runs": "oops"}), "runs must be an object"),
    (
        "twin negative wall",
        "twin",
        json.dumps(_with(TWIN, ["runs", "k", "wall_s"], -1)),
        "wall_s must be a number >= 0",
    ),
    ("twin negative seed", "twin", json.dumps(_with(TWIN, ["runs", "k", "seed"], -3)), "seed must be a seed, a whole"),
    ("twin huge seed", "twin", json.dumps(_with(TWIN, ["runs", "k", "seed"], 10**30)), r"must be a seed.*< 2\*\*32"),
    (
        "huge count",
        "book_time",
        json.dumps({**BOOK_TIME, "cores": 10**30}),
        r"cores must be a whole number >= 1 and < 2",
    ),
    ("a key twice", "book_time", json.dumps(BOOK_TIME)[:-1] + ', "cores": 3}', "holds the key 'cores' twice"),
    ("twin no reference", "twin", json.dumps({**TWIN, "reference": {}}), "reference has no 'commit'"),
    ("search no metric", "search", json.dumps({"records": []}), "has no 'metric'"),
    ("search values", "search", json.dumps(_with(SEARCH, ["records", 0, "values"], "x")), "values must be a list"),
    ("search cpu", "search", json.dumps(_with(SEARCH, ["records", 0, "cpu_s"], -2)), "cpu_s must be a number >= 0"),
    ("paper run", "paper_run", json.dumps({"work": "w", "section": "s", "outer_steps": -1}), "has no 'figure'"),
    ("ledger", "ledger", json.dumps({"work": [{"name": "w"}]}), r"work\[0\] has no 'section'"),
]


@pytest.mark.parametrize("what, kind, text, expected", BAD_RECORDS, ids=[row[0] for row in BAD_RECORDS])
def test_a_bad_record_is_one_line_naming_its_file_and_the_command_that_rewrites_it(
    what, kind, text, expected, tmp_path
):
    path = tmp_path / f"{kind}.json"
    path.write_text(text)
    start = time.perf_counter()
    with pytest.raises(recordfile.RecordError) as error:
        recordfile.read(path, KIND[kind])
    message = str(error.value)
    assert isinstance(error.value, params.ParameterError) and "\n" not in message and len(message) < 600, message
    assert message.startswith(f"{path}: {KIND[kind].NAME} ") and re.search(expected, message), message
    assert message.endswith(f"rewrite it with `{KIND[kind].COMMAND}`")
    assert error.value._render_traceback_() == [f"RecordError: {message}"]  # one line in a notebook too
    assert time.perf_counter() - start < 30 and path.read_text() == text  # nothing written


def test_an_unreadable_or_missing_record(tmp_path):
    (tmp_path / "folder.json").mkdir()
    with pytest.raises(recordfile.RecordError, match=r"folder\.json: GPU-check record cannot be read"):
        recordfile.read(tmp_path / "folder.json", KIND["gpu"])
    (tmp_path / "latin.json").write_bytes(b'{"a": "\xe9"}')
    with pytest.raises(recordfile.RecordError, match="cannot be read"):
        recordfile.read(tmp_path / "latin.json", KIND["gpu"])
    assert records.Twin.load_if_there(tmp_path / "none.json") is None
    assert records.load_folder(records.Steps, tmp_path / "none") == []


def test_a_deeper_check_says_its_problem_in_the_same_line(tmp_path):
    path = tmp_path / "twin.json"
    path.write_text(json.dumps(TWIN))

    def deep(record):
        raise ValueError("chapter 'goals' is not expected here")

    with pytest.raises(recordfile.RecordError, match=r"twin record is damaged: chapter 'goals' is not expected here"):
        recordfile.read(path, KIND["twin"], deep)


@pytest.mark.parametrize(
    "record, kind",
    [(STEPS, "steps"), (BOOK_TIME, "book_time"), (GPU, "gpu"), (SECOND_SET, "second_set"), (TWIN, "twin")],
)
def test_good_records_load_with_or_without_a_schema(record, kind, tmp_path):
    """A record of its kind's current version loads as it is; one naming no schema is version 1 and loads at the
    current version through its kind's migrations."""
    path = tmp_path / "r.json"
    path.write_text(json.dumps({**record, "schema": KIND[kind].VERSION}))
    found = recordfile.read(path, KIND[kind])
    assert {k: v for k, v in found.items() if k != "schema"} == record
    path.write_text(json.dumps(record))
    assert recordfile.read(path, KIND[kind])["schema"] == KIND[kind].VERSION


def test_records_naming_the_last_source_fingerprint_migrate_to_its_key_and_others_to_none(tmp_path):
    """Before runs and records were keyed by their programs they named the source fingerprint of their code: the last
    one becomes the key that code computes (compgen.legacy), any other none (so never current)."""
    from compgen import legacy

    old, key = legacy.LEGACY["goals"]
    path = tmp_path / "r.json"
    v1 = {k: v for k, v in SECOND_SET.items() if k != "keys"} | {"fingerprints": {"goals": old, "hyperteacher": "0ld"}}
    path.write_text(json.dumps(v1))
    found = recordfile.read(path, KIND["second_set"])
    assert found["keys"] == {"goals": key} and found["code_versions"] == legacy.VERSIONS
    path.write_text(json.dumps({**TWIN, "schema": 2, "code_fingerprint": old}))
    assert recordfile.read(path, KIND["twin"])["code_key"] == key
    path.write_text(json.dumps({**STEPS, "code_fingerprint": legacy.CODE[0]}))
    assert recordfile.read(path, KIND["steps"])["code_key"] == legacy.CODE[1]
    path.write_text(json.dumps({**STEPS, "code_fingerprint": "0ld"}))
    assert recordfile.read(path, KIND["steps"])["code_key"] is None


def test_staleness_is_by_code_key_under_the_same_versions_and_a_record_naming_none_is_never_current():
    assert recordfile.code_state("abc", "abc") == recordfile.CURRENT
    assert recordfile.code_state("old", "abc") == recordfile.STALE
    assert recordfile.code_state(None, "abc") == recordfile.NOT_RECORDED == recordfile.code_state("", "abc")
    assert recordfile.code_state("abc", "abc", {"jax": "1"}, {"jax": "2"}) == recordfile.OTHER_VERSIONS
    assert recordfile.code_state("abc", "abc", {"jax": "1"}, {"jax": "1"}) == recordfile.CURRENT
    assert recordfile.stale("abc", "abc") == ""
    assert "key old, this code's abc" in recordfile.stale("old", "abc")
    assert "names no code key" in recordfile.stale(None, "abc")
    assert "other library versions (jax 1)" in recordfile.stale("abc", "abc", {"jax": "1"}, {"jax": "2"})
