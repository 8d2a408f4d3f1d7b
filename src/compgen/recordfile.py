"""One checked reader for the JSON records the book draws, and their staleness by code key.

A record is a JSON object written by a tool or the bench; its kind is declared once, as a class of
:mod:`compgen.records` (what it is, the command that rewrites it, its version, its migrations and, in its fields, the
shape of each). :func:`read` returns a record of a given kind, or raises :class:`RecordError`, one line naming the
file, what is wrong and that command, for a record that is unreadable, empty, truncated, not an object, of another
kind, of a version its kind cannot bring up to date (a record without ``schema`` is version 1), of the wrong shape
(:func:`problem`), or holding an impossible value (a negative time, count or number of minutes). The book stops on
such a record rather than draw a page from it: every record it reads is committed, so a damaged one is a bug to fix;
a missing record is absent, with the note its page gives.

Writers add ``kind``, ``schema`` (the kind's current version) and the key of what the code that produced the record
computes (:mod:`compgen.programs`), with the library versions it was computed under; :func:`code_state` compares it
with the current code's, so a record made by other code, or by code it does not name, is never shown as current.
"""

from __future__ import annotations

import json
import math
import re

from compgen import params, storage

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
CODE_VERSIONS = ("map", ("none or", "text"))  # the libraries' versions a code key was computed under
# The shapes of the rows below a record's top level, which the kinds' fields (compgen.records) are made of.
RUN_SECONDS = {"compile": "time", "setup": "time", "train": "time", "evaluate": "time"}
STEP_ROW = {
    "s_per_step": "positive",
    "peak_gb?": ("none or", "time"),
    "runs?": "positive count",
    "chunk_steps?": "positive count",
    "compile_s?": "time",
    "gemm_gflops?": ("none or", "time"),
}
SERIAL = {"per_step": "count", "loops": "count", "runs": "count"}  # hlo_count's summary of one count
STEP_COUNTS = {"inner_steps": "positive count", "ops": SERIAL, "fusions": SERIAL}


# ----------------------------------------------------------------------------------------------- reading
# A record's ``kind`` is its class in compgen.records, which declares it once: KIND (the name files carry), NAME (what
# it is), COMMAND (what rewrites it), VERSION (what its writers write), MIGRATIONS ({version: the step from a record at
# that version to the next}) and shape() (its fields' shapes). This module reads through it and imports none of them.


def error(path, kind, what: str) -> RecordError:
    """The one-line error of a ``kind`` record at ``path``: what is wrong and the command that rewrites it."""
    return RecordError(f"{path}: {kind.NAME} {what}; rewrite it with `{kind.COMMAND}`")


def migrate(record: dict, path, kind) -> dict:
    """``record`` (at its ``schema``, 1 where it names none) brought to the current version of its ``kind`` by the
    kind's migrations, or a :class:`RecordError` naming the version it cannot read."""
    found, current = record.get("schema", 1), kind.VERSION
    if not (_is_int(found) and found >= 1):
        raise error(path, kind, f"has schema {params._short(found, 40)}, not a whole number >= 1")
    if found > current:
        raise error(path, kind, f"has schema {found}, written by a newer compgen (this one reads up to {current})")
    while found < current:
        step = kind.MIGRATIONS.get(found)
        if step is None:
            raise error(path, kind, f"has schema {found}, older than any this compgen can bring up to {current}")
        record, found = {**step(dict(record)), "schema": found + 1}, found + 1
    return record


def parse(text: str, path, kind):
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


def check(record, path, kind) -> dict:
    """``record`` (the parsed file ``path`` of a ``kind`` record), checked: the kind it names (a file written before
    records named theirs names none), its version, brought up to date (:func:`migrate`), and the shape of its fields;
    else a :class:`RecordError`."""
    if not isinstance(record, dict):
        raise error(path, kind, f"holds {type(record).__name__} {params._short(record, 40)}, not a JSON object")
    named = record.get("kind", kind.KIND)
    if kind.FORMER_KIND and "schema" not in record:  # version 1 held its FORMER_KIND in ``kind``: migrated below
        named = kind.KIND
    if named != kind.KIND:
        raise error(path, kind, f"names the kind {params._short(named, 40)}, not {kind.KIND!r}")
    record = migrate(record, path, kind)
    found = problem(record, kind.shape())
    if found:
        raise error(path, kind, f"is damaged: {found}")
    return record


def read_text(path, kind) -> str:
    """The text of the ``kind`` record at ``path`` (a regular file of bounded size), or a :class:`RecordError`."""
    try:
        return storage.read_text(path)
    except (OSError, UnicodeDecodeError) as e:
        why = e.strerror if isinstance(e, OSError) else "not UTF-8 text"
        raise error(path, kind, f"cannot be read ({why})") from None


def read(path, kind, deep=None) -> dict:
    """The ``kind`` record at ``path``, checked (:func:`check`); ``deep(record)`` may check more and raise a
    :class:`ValueError` (or :class:`KeyError`, :class:`TypeError`) saying what is wrong, which becomes the same
    one-line :class:`RecordError`."""
    record = check(parse(read_text(path, kind), path, kind), path, kind)
    if deep is not None:
        try:
            deep(record)
        except RecordError:
            raise
        except (ValueError, KeyError, TypeError) as e:
            raise error(path, kind, f"is damaged: {e}") from None
    return record


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
