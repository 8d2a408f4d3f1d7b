"""One checked reader for the JSON records the book draws, and their staleness by code fingerprint.

A record is a JSON object written by a tool or the bench (:data:`KINDS`: what each kind is, the command that rewrites
it and the shape of the fields the book reads). :func:`read` returns it, or raises :class:`RecordError`, one line
naming the file, what is wrong and that command, for a record that is unreadable, empty, truncated, not an object,
of a version its kind's reader cannot bring up to date (a record without ``schema`` is version 1; :data:`VERSIONS`
holds each kind's current version and :data:`MIGRATIONS` the explicit steps from an older one), of the wrong shape,
or holding an impossible value (a negative time, count or number of minutes). The book stops on such a record rather
than draw a page from it: every record it reads is committed, so a damaged one is a bug to fix; a missing record is
absent, with the note its page gives.

The typed records (:mod:`compgen.records`) read and write through this module. Writers add ``schema`` (the kind's
current version) and the key of what the code that produced the record computes (:mod:`compgen.programs`), with the
library versions it was computed under; :func:`code_state` compares it with the current code's, so a record made by
other code, or by code it does not name, is never shown as current. Records that carried a source fingerprint
instead migrate to the key it stood for (:mod:`compgen.legacy`).
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

from compgen import legacy, params, storage

CURRENT, STALE, NOT_RECORDED = "current", "stale", "code not recorded"  # code_state's answers
OTHER_VERSIONS = "other library versions"


class RecordError(params.ParameterError):
    """A record the book cannot draw: one line naming its file, what is wrong and the command that rewrites it."""


# ----------------------------------------------------------------------------------------------- shapes
# A shape is a scalar word (SCALARS), {field: shape} for an object (a field ending in "?" may be absent), [shape] for
# a list of such items, ("map", shape) for an object whose every value has that shape, ("none or", shape), ("pair",
# shape) for a list of two, or ("one of", (values)).
def _is_int(value) -> bool:
    return params._is_int(value)


def _is_number(value) -> bool:
    return params._is_number(value) and math.isfinite(value)


def _numbers(value) -> bool:
    """A number, NaN or null (a metric undefined for a seed), or a list of such, nested."""
    if isinstance(value, list):
        return all(map(_numbers, value))
    return value is None or params._is_number(value)


MAX_COUNT = 2**63  # a count is a whole number below this (an int64): a step, a run, a number of cores
SCALARS = {
    "text": ("a text", lambda v: isinstance(v, str)),
    "count": ("a whole number >= 0 and < 2**63", lambda v: _is_int(v) and 0 <= v < MAX_COUNT),
    "positive count": ("a whole number >= 1 and < 2**63", lambda v: _is_int(v) and 1 <= v < MAX_COUNT),
    "seed": ("a seed, a whole number >= 0 and < 2**32", lambda v: _is_int(v) and 0 <= v < params.SEED_LIMIT),
    "time": ("a number >= 0", lambda v: _is_number(v) and v >= 0),
    "positive": ("a number > 0", lambda v: _is_number(v) and v > 0),
    "number": ("a finite number", _is_number),
    "numbers": ("numbers (lists of numbers, nested)", _numbers),
    "object": ("an object", lambda v: isinstance(v, dict)),
    "any": ("anything", lambda v: True),
}


def _describe(shape) -> str:
    if isinstance(shape, str):
        return SCALARS[shape][0]
    if isinstance(shape, dict):
        return "an object"
    if isinstance(shape, list):
        return "a list"
    kind, inner = shape
    if kind == "none or":
        return f"null or {_describe(inner)}"
    if kind == "pair":
        return f"a list of two, each {_describe(inner)}"
    return "an object" if kind == "map" else f"one of {list(inner)}"


def problem(value, shape, where="the record") -> str | None:
    """What is wrong with ``value`` against ``shape`` (see the comment above), naming where, or ``None``."""
    wrong = lambda: f"{where} must be {_describe(shape)}, got {params._short(value, 60)}"  # noqa: E731
    if isinstance(shape, str):
        return None if SCALARS[shape][1](value) else wrong()
    if isinstance(shape, dict):
        if not isinstance(value, dict):
            return wrong()
        for name, inner in shape.items():
            key = name.rstrip("?")
            if key not in value:
                if not name.endswith("?"):
                    return f"{where} has no {key!r}"
                continue
            found = problem(value[key], inner, f"{key}" if where == "the record" else f"{where}.{key}")
            if found:
                return found
        return None
    if isinstance(shape, list):
        if not isinstance(value, list):
            return wrong()
        return next(filter(None, (problem(v, shape[0], f"{where}[{i}]") for i, v in enumerate(value))), None)
    kind, inner = shape
    if kind == "none or":
        return None if value is None else problem(value, inner, where)
    if kind == "one of":
        return None if value in inner else wrong()
    if not (isinstance(value, dict) if kind == "map" else isinstance(value, list) and len(value) == 2):
        return wrong()
    items = value.items() if kind == "map" else enumerate(value)
    return next(filter(None, (problem(v, inner, f"{where}[{k!r}]") for k, v in items)), None)


SEEDS = ["seed"]
_RUN_SECONDS = {"compile": "time", "setup": "time", "train": "time", "evaluate": "time"}
BOOK_TIME = {
    "date": "text",
    "code": "text",
    "preset": ("none or", "text"),
    "cores": "positive count",
    "chapters": [
        {"chapter": "text", "wall": "time", "training_cells": "time", "runs": "count", "gemm": ("none or", "time")}
        | _RUN_SECONDS
    ],
    "runs": [{"section": "text", "chapter": "text", "config": "object"} | _RUN_SECONDS],
}
STEP_ROW = {
    "s_per_step": "positive",
    "peak_gb?": ("none or", "time"),
    "runs?": "positive count",
    "chunk_steps?": "positive count",
    "compile_s?": "time",
    "gemm_gflops?": ("none or", "time"),
}
STEPS = {
    "who": ("one of", ("authors", "compgen")),
    "device": "text",
    "date": "text",
    "code": "text",
    "how": "text",
    "gemm_gflops": ("none or", ("pair", "positive")),
    "rows": ("map", STEP_ROW),
}
GPU = {
    "device": "text",
    "date": "text",
    "code": "text",
    "jax": "text",
    "flax": "text",
    "steps": [{"step": "text", "status": "text", "seconds?": ("none or", "time"), "found?": "text"}],
}
CODE_VERSIONS = ("map", ("none or", "text"))  # the libraries' versions a code key was computed under
SECOND_SET = {
    "preset": "text",
    "seeds": SEEDS,
    "commits?": ("map", "text"),
    "keys?": ("map", "text"),
    "code_versions?": CODE_VERSIONS,
    "wall_s?": ("map", "time"),
    "runs": ("map", [{"figures": ["text"], "config": {"seeds": SEEDS}, "finals": ("map", "numbers")}]),
}
TWIN = {
    "chapter": "text",
    "preset": "text",
    "reference": {"commit": "text", "repository?": "text"},
    "seed_sets": [SEEDS],
    "matched_world?": "object",
    "not_expressible?": "object",
    "runs": (
        "map",
        {
            "seed": "seed",
            "final": "object",
            "row": "object",
            "wall_s": "time",
            "translation": {"unmatched": [("pair", "text")]},
        },
    ),
    "ours_matched_rows?": [{"row": "object", "seeds": SEEDS, "values": ("map", "numbers")}],
}
SEARCH = {
    "metric": "text",
    "code_versions?": CODE_VERSIONS,
    "section?": "text",
    "records": [
        {
            "regime": "text",
            "world": "object",
            "budget": "object",
            "seeds": SEEDS,
            "values": ["number"],
            "cpu_s?": "time",
            "code_key?": ("none or", "text"),
        }
    ],
}
LEDGER = {
    "work": [
        {
            "name": "text",
            "section": "text",
            "figure": "text",
            "preset": "text",
            "select": ["object"],
            "labels": ["text"],
            "why?": "text",
            "estimate_s?": ("none or", "time"),
        }
    ]
}
PAPER_RUN = {
    "work": "text",
    "section": "text",
    "figure": "text",
    "preset": "text",
    "outer_steps": "positive count",
    "eval_every": "positive count",
    "steps_done": "count",
    "complete": ("one of", (True, False)),
    "eval_steps": ["count"],
    "configs": [
        {
            "label": "text",
            "select": "object",
            "seeds": SEEDS,
            "config": "object",
            "eval": ("map", "numbers"),
            "train_loss": "numbers",
        }
    ],
    "diverged": ("map", "text"),
    "leases": [
        {
            "date": "text",
            "device": "text",
            "jax_version": "text",
            "steps": ("pair", "count"),
            "knobs": "object",
            "chunk": "positive count",
            "seconds": ("map", "time"),
        }
    ],
    "identity?": {"work": "text", "preset": "text", "configs": "text"},
    "code?": {"key": "text", "versions": ("map", ("none or", "text"))},
}

CHOICES = {"choices": [{"choice": "text", "date": "text", "machine": "text", "how": "text", "found": "text"}]}

_SERIAL = {"per_step": "count", "loops": "count", "runs": "count"}  # hlo_count's summary of one count
_STEP_COUNTS = {"inner_steps": "positive count", "ops": _SERIAL, "fusions": _SERIAL}
OP_COUNTS = {
    "date": "text",
    "jax": "text",
    "reference": {"repository": "text", "commit": ("none or", "text")},
    "cases": (
        "map",
        {"ours": _STEP_COUNTS | {"code_key": ("none or", "text")}, "theirs": ("none or", _STEP_COUNTS)},
    ),
}

# kind: (what it is, the command that rewrites it, its shape)
KINDS = {
    "second_set": (
        "second-seed-set record",
        "COMPGEN_RESULTS=<store> python tools/second_set.py --preset quick --seeds 31 32 33",
        SECOND_SET,
    ),
    "twin": ("twin record", "make twin REFERENCE=<checkout> CHAPTER=<chapter> (tools/twin.py)", TWIN),
    "book_time": ("book-time record", "python -m compgen.bench --book book --store <store> --record", BOOK_TIME),
    "steps": ("step-time record", "python -m compgen.bench --record", STEPS),
    "op_counts": (
        "serial-work record",
        "python tools/op_counts.py --reference <checkout> --twin-python .venv-twin/bin/python --record",
        OP_COUNTS,
    ),
    "gpu": ("GPU-check record", "tools/gpu_check.sh", GPU),
    "search": ("search record", "tools/search_from_store.py <section> <figure> --seeds ... --regime ...", SEARCH),
    "choices": ("device-choice record", "an edit of book/records/choices.json, with the measurement", CHOICES),
    "ledger": ("paper-scale ledger", "an edit of book/records/ledger.json (compgen.ledger.Work)", LEDGER),
    "paper_run": ("paper-scale run's progress", "python tools/gpu_lease.py (on a GPU; --cpu rehearses)", PAPER_RUN),
}


# Each kind's current version: what its writers write. A record of an older version loads only through the steps of
# MIGRATIONS, (kind, version) -> a function from the record at that version to the record at the next; one that no
# step brings up to date, or of a newer version, is refused in one line.
VERSIONS = {kind: 1 for kind in KINDS} | {
    "twin": 3,
    "second_set": 2,
    "search": 2,
    "book_time": 2,
    "steps": 2,
    "gpu": 2,
    "op_counts": 2,
}

# Version 1 of a twin record kept our numbers at the matched world under the twin tables' labels, in their units;
# version 2 keeps them raw under "<evaluation set>/<metric>" (or the metric), as the authors' runs keep theirs.
_TWIN_V1_LABELS = {  # chapter: {label: (name, the label's scale)}
    "teacher_student": {"alignment": ("alignment", 1)},
    "hyperteacher": {"OOD acc. %": ("ood/accuracy", 100), "R²": ("r2_ood_pooled", 1)},
    "preferences": {"OOD loss": ("ood/loss", 1)},
    "goals": {"OOD acc. %": ("ood/acc", 100), "optimal OOD episodes %": ("ood/acc_all", 100)},
}


def _twin_raw_values(record: dict) -> dict:
    """A twin record of version 1 at version 2: each row of ours keeps its values raw under metric names."""
    labels = _TWIN_V1_LABELS.get(record.get("chapter"), {})

    def raw(values: dict) -> dict:
        return {labels[k][0]: [v / labels[k][1] for v in vs] if k in labels else vs for k, vs in values.items()}

    rows = [{**row, "values": raw(row.get("values", {}))} for row in record.get("ours_matched_rows", [])]
    return {**record, **({"ours_matched_rows": rows} if "ours_matched_rows" in record else {})}


def _keyed(record: dict, section: str | None) -> dict:
    """A record carrying the source fingerprint of ``section``'s code (``None``: every section's) carrying the key of
    what that code computes instead (:func:`compgen.legacy.key`: ``None`` for a fingerprint that was not the last)."""
    out = {k: v for k, v in record.items() if k != "code_fingerprint"}
    return out | {"code_key": legacy.key(section, record.get("code_fingerprint")), "code_versions": legacy.VERSIONS}


def _seed_set_keyed(record: dict) -> dict:
    out = {k: v for k, v in record.items() if k != "fingerprints"}
    keys = {ch: legacy.key(ch, fp) for ch, fp in record.get("fingerprints", {}).items()}
    return out | {"keys": {ch: k for ch, k in keys.items() if k}, "code_versions": legacy.VERSIONS}


def _search_keyed(record: dict) -> dict:
    rows = [
        {k: v for k, v in _keyed(r, record.get("section")).items() if k != "code_versions"} for r in record["records"]
    ]
    return {**record, "records": rows, "code_versions": legacy.VERSIONS}


def _op_counts_keyed(record: dict) -> dict:
    cases = {}
    for name, case in record.get("cases", {}).items():
        ours = case.get("ours")
        cases[name] = {**case, "ours": _keyed(ours, name.split(" ")[0]) if isinstance(ours, dict) else ours}
    return {**record, "cases": cases}


# Each kind that named its code by source fingerprint names it by key from these versions on (compgen.legacy).
MIGRATIONS: dict = {
    ("twin", 1): _twin_raw_values,
    ("twin", 2): lambda r: _keyed(r, r.get("chapter")),
    ("second_set", 1): _seed_set_keyed,
    ("search", 1): _search_keyed,
    ("book_time", 1): lambda r: _keyed(r, None),
    ("steps", 1): lambda r: _keyed(r, None) if r.get("who") != "authors" else r,
    ("gpu", 1): lambda r: _keyed(r, None),
    ("op_counts", 1): _op_counts_keyed,
}


def version(kind: str) -> int:
    """The current version of ``kind`` records: what :meth:`compgen.records.Record.save` writes."""
    return VERSIONS[kind]


def migrate(record: dict, path, kind: str) -> dict:
    """``record`` (at its ``schema``, 1 where it names none) brought to the current version of its ``kind`` by the
    steps of :data:`MIGRATIONS`, or a :class:`RecordError` naming the version it cannot read."""
    found, current = record.get("schema", 1), version(kind)
    if not (_is_int(found) and found >= 1):
        raise error(path, kind, f"has schema {params._short(found, 40)}, not a whole number >= 1")
    if found > current:
        raise error(path, kind, f"has schema {found}, written by a newer compgen (this one reads up to {current})")
    while found < current:
        step = MIGRATIONS.get((kind, found))
        if step is None:
            raise error(path, kind, f"has schema {found}, older than any this compgen can bring up to {current}")
        record, found = {**step(dict(record)), "schema": found + 1}, found + 1
    return record


# ----------------------------------------------------------------------------------------------- reading


def error(path, kind: str, what: str) -> RecordError:
    """The one-line error of a ``kind`` record at ``path``: what is wrong and the command that rewrites it."""
    name, command, _ = KINDS[kind]
    return RecordError(f"{path}: {name} {what}; rewrite it with `{command}`")


def parse(text: str, path, kind: str):
    """The JSON value of ``text`` (the file ``path`` of a ``kind`` record), or a :class:`RecordError`."""
    if not text.strip():
        raise error(path, kind, "is empty")
    try:
        return json.loads(text, object_pairs_hook=_unique_keys)
    except DuplicateKey as e:
        raise error(path, kind, f"is damaged: an object holds the key {e.args[0]!r} twice") from None
    except (json.JSONDecodeError, RecursionError) as e:
        where = f" at line {e.lineno} column {e.colno}" if isinstance(e, json.JSONDecodeError) else ""
        raise error(path, kind, f"is not valid JSON (truncated or damaged{where})") from None


class DuplicateKey(ValueError):
    """A JSON object naming a key twice: which value the record means cannot be told."""


def _unique_keys(pairs) -> dict:
    found = {}
    for key, value in pairs:
        if key in found:
            raise DuplicateKey(key)
        found[key] = value
    return found


def check(record, path, kind: str) -> dict:
    """``record`` (the parsed file ``path`` of a ``kind`` record), checked: its version, brought up to date
    (:func:`migrate`), and the shape of the fields the book reads; else a :class:`RecordError`."""
    if not isinstance(record, dict):
        raise error(path, kind, f"holds {type(record).__name__} {params._short(record, 40)}, not a JSON object")
    record = migrate(record, path, kind)
    found = problem(record, KINDS[kind][2])
    if found:
        raise error(path, kind, f"is damaged: {found}")
    return record


def read(path, kind: str, deep=None) -> dict:
    """The ``kind`` record (:data:`KINDS`) at ``path``, checked (:func:`check`); ``deep(record)`` may check more and
    raise a :class:`ValueError` (or :class:`KeyError`, :class:`TypeError`) saying what is wrong, which becomes the
    same one-line :class:`RecordError`."""
    try:
        text = storage.read_text(path)
    except (OSError, UnicodeDecodeError) as e:
        why = e.strerror if isinstance(e, OSError) else "not UTF-8 text"
        raise error(path, kind, f"cannot be read ({why})") from None
    record = check(parse(text, path, kind), path, kind)
    if deep is not None:
        try:
            deep(record)
        except RecordError:
            raise
        except (ValueError, KeyError, TypeError) as e:
            raise error(path, kind, f"is damaged: {e}") from None
    return record


def read_if_there(path, kind: str, deep=None) -> dict | None:
    """:func:`read`, or ``None`` where ``path`` does not exist."""
    return read(path, kind, deep) if Path(path).exists() else None


# ----------------------------------------------------------------------------------------------- writing


def dumps(record) -> str:
    """``record`` as indented JSON with every list of numbers (or of such lists) on one line: a record that reads
    and diffs by config, not by number."""
    text = json.dumps(record, indent=1, ensure_ascii=False)
    flat = re.compile(r"\[\s*((?:[-\w.+]+|\[[^\[\]\n]*\])(?:,\s*(?:[-\w.+]+|\[[^\[\]\n]*\]))*)\s*\]")
    while True:
        joined = flat.sub(lambda m: "[" + ", ".join(x.strip() for x in _top_level(m.group(1))) + "]", text)
        if joined == text:
            return text + "\n"
        text = joined


def _top_level(items: str) -> list:
    """The comma-separated items of ``items``, splitting only outside brackets."""
    out, depth, current = [], 0, ""
    for char in items:
        depth += char == "["
        depth -= char == "]"
        if char == "," and depth == 0:
            out.append(current)
            current = ""
        else:
            current += char
    return out + [current]


# ----------------------------------------------------------------------------------------------- staleness


def code_state(recorded: str | None, current: str, recorded_versions=None, current_versions=None) -> str:
    """:data:`CURRENT` where the code key ``recorded`` in a record is the ``current`` code's, :data:`STALE` where it
    differs, :data:`NOT_RECORDED` where the record names none, and :data:`OTHER_VERSIONS` where it was computed under
    other library versions than ``current`` (``recorded_versions`` and ``current_versions``, where given), so that
    the two keys cannot be compared (:mod:`compgen.programs`: a key is a program as one JAX lowers it)."""
    if not recorded:
        return NOT_RECORDED
    if recorded_versions is not None and current_versions is not None and dict(recorded_versions) != current_versions:
        return OTHER_VERSIONS
    return CURRENT if recorded == current else STALE


def stale(recorded: str | None, current: str, recorded_versions=None, current_versions=None) -> str:
    """Why a record naming the code key ``recorded`` may not show what the code of key ``current`` computes, as words
    ("" where it is current; :func:`code_state`)."""
    state = code_state(recorded, current, recorded_versions, current_versions)
    if state == CURRENT:
        return ""
    if state == STALE:
        return f"made by other code (key {recorded}, this code's {current})"
    if state == OTHER_VERSIONS:
        jax = (recorded_versions or {}).get("jax")
        return f"its code key was computed under other library versions (jax {jax}), so it cannot be compared here"
    return "it names no code key, so whether the code changed since cannot be told"
