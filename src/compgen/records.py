"""The records the book reads, typed: one frozen dataclass per kind, the one declaration of that kind.

A kind's class holds all there is to know about it: ``KIND`` (the name every file of it carries in ``kind``),
``NAME`` (what it is), ``COMMAND`` (what rewrites it), ``VERSION`` (what its writers write, in ``schema``),
``MIGRATIONS`` (``{version: the step from a record at that version to the next}``; ``FORMER_KIND`` where version 1
held another field in ``kind``) and its fields, each declared with
:func:`shaped`: the shape the checked reader enforces (:func:`compgen.recordfile.problem`). A field with a default may
be absent from a file. A new kind is one class here and its writer.

``Kind.load(path)`` reads the file with :func:`compgen.recordfile.read`, which refuses a damaged record, one of
another kind, or one of a version it cannot bring up to date, in one line naming the file and the command; the
dataclass then refuses a field it does not know, so a record holds exactly its declared fields. :func:`load` reads any
record by the kind its file names. ``record.save(path)`` writes it atomically at the kind's current version, each
optional field at its default left out. Seed sets are tuples, named by :func:`seed_set_name`. Whether a record shows
what the current code computes is one check, :func:`compgen.recordfile.code_state`, on the code key it names (its
``computed_by()``: the key and the library versions it was computed under, :mod:`compgen.programs`; per chapter for
a seed set; a search names one per entry).

The top level of every record is typed; the rows below it (a twin run, a search entry, a step-time row) stay JSON
objects of the shapes their fields declare, read by the one module that draws them.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from compgen import legacy, recordfile, storage
from compgen.recordfile import CODE_VERSIONS, SEEDS

Seeds = tuple  # a seed set: tuple[int, ...]
TEXT, MAYBE_TEXT = "text", ("none or", "text")


def seed_set_name(seeds) -> str:
    """A seed set as the text that keys it wherever claims are judged per seed set: ``"31,32,33"``."""
    return ",".join(map(str, seeds))


def shaped(shape, *, required: bool = False, **default):
    """A record's field of ``shape`` (:func:`compgen.recordfile.problem`'s shapes), its ``default`` or
    ``default_factory`` as :func:`dataclasses.field` takes them: a field with a default may be absent from a file
    unless ``required``."""
    return dataclasses.field(metadata={"shape": shape, "required": required}, **default)


def _plain(value):
    """``value`` as JSON-ready data: dataclasses as objects, tuples as lists."""
    if dataclasses.is_dataclass(value):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _has_default(field: dataclasses.Field) -> bool:
    return field.default is not dataclasses.MISSING or field.default_factory is not dataclasses.MISSING


def _default(field: dataclasses.Field):
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return field.default


def _optional(field: dataclasses.Field) -> bool:
    """Whether ``field`` may be absent from a file: it has a default and is not marked required."""
    return _has_default(field) and not field.metadata.get("required")


@dataclasses.dataclass(frozen=True, kw_only=True)
class Record:
    """What every kind shares: ``about``, a sentence on what the record is (optional)."""

    KIND: ClassVar[str]
    NAME: ClassVar[str]
    COMMAND: ClassVar[str]
    VERSION: ClassVar[int] = 1
    MIGRATIONS: ClassVar[Mapping] = {}
    FORMER_KIND: ClassVar[str | None] = None  # the field a version-1 file held in ``kind`` (its migration moves it)
    TUPLES: ClassVar[tuple] = ()  # fields held as tuples (a seed set, a list of rows)

    about: str | None = shaped(MAYBE_TEXT, default=None)

    def __post_init__(self):
        for name in self.TUPLES:
            object.__setattr__(self, name, tuple(getattr(self, name)))

    @classmethod
    def shape(cls) -> dict:
        """The shape of the kind's files, from its fields: ``{name: shape}``, ``name?`` for a field that may be
        absent."""
        return {f.name + "?" * _optional(f): f.metadata["shape"] for f in dataclasses.fields(cls)}

    @classmethod
    def from_dict(cls, data: Mapping):
        """The record of ``data`` (a checked record's JSON object at the current version); a :class:`ValueError`
        names a field this class does not know."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known - {"kind", "schema"})
        if unknown:
            raise ValueError(f"has field(s) {unknown} that a {cls.KIND} record does not hold")
        return cls(**{k: v for k, v in data.items() if k not in ("kind", "schema")})

    def to_dict(self) -> dict:
        """The record as its JSON object: ``kind`` and ``schema`` (the kind's current version) first, each optional
        field at its default left out."""
        out = {"kind": self.KIND, "schema": self.VERSION}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if not _optional(f) or value != _default(f):
                out[f.name] = _plain(value)
        return out

    @classmethod
    def load(cls, path, deep=None):
        """The record at ``path``: read, checked and brought to the current version by :func:`compgen.recordfile.read`
        (``deep`` as there), or a one-line :class:`compgen.recordfile.RecordError`."""
        return cls._built(recordfile.read(path, cls, deep), path)

    @classmethod
    def of(cls, data, where):
        """The record of ``data`` (a JSON object read from ``where`` other than as a file of its own, at any version
        the kind reads), checked and brought up to date, or a one-line :class:`compgen.recordfile.RecordError`."""
        return cls._built(recordfile.check(data, where, cls), where)

    @classmethod
    def _built(cls, data: Mapping, where):
        try:
            return cls.from_dict(data)
        except (ValueError, TypeError) as e:
            raise recordfile.error(where, cls, str(e)) from None

    @classmethod
    def load_if_there(cls, path, deep=None):
        """:meth:`load`, or ``None`` where ``path`` does not exist."""
        return cls.load(path, deep) if Path(path).exists() else None

    def save(self, path) -> Path:
        """Write the record to ``path`` atomically (:func:`compgen.recordfile.dumps`), its folder made, having checked
        it as the book reads it (:func:`compgen.recordfile.check`: a writer cannot write a record the book refuses);
        returns the path."""
        path, data = Path(path), self.to_dict()
        recordfile.check(data, path, type(self))
        path.parent.mkdir(parents=True, exist_ok=True)
        storage.write_atomic(path, recordfile.dumps(data).encode())
        return path


def load(path, deep=None) -> Record:
    """The record at ``path``, of the kind its file names (:data:`KINDS`), loaded by that kind (:meth:`Record.load`);
    a file naming no kind or an unknown one is a one-line :class:`compgen.recordfile.RecordError`."""
    try:
        named = json.loads(storage.read_text(path)).get("kind")
    except (OSError, ValueError, AttributeError):
        named = None
    if named not in KINDS:
        what = "names no kind" if named is None else f"names the kind {named!r}"
        raise recordfile.RecordError(f"{path}: {what}, not one of {sorted(KINDS)}; load it as its kind's class")
    return KINDS[named].load(path, deep)


def write(kind: str, data: Mapping, path) -> Record:
    """The ``kind`` record of ``data`` (a writer's JSON object; its ``kind`` and ``schema`` ignored) saved to ``path``
    (:meth:`Record.save`)."""
    record = KINDS[kind].from_dict(data)
    record.save(path)
    return record


def load_folder(kind: type, folder) -> list:
    """Every ``kind`` record (``*.json``) in ``folder``, oldest first by ``date``; none where there is no folder."""
    return sorted((kind.load(p) for p in sorted(Path(folder).glob("*.json"))), key=lambda r: r.date)


# ----------------------------------------------------------------------------------------------- migrations
# Records that named their code by source fingerprint name it by the key that code computes (compgen.legacy.key:
# None for a fingerprint that was not the last).


def _keyed(record: dict, section: str | None) -> dict:
    """A record carrying the source fingerprint of ``section``'s code (``None``: every section's) carrying the key of
    what that code computes instead."""
    out = {k: v for k, v in record.items() if k != "code_fingerprint"}
    return out | {"code_key": legacy.key(section, record.get("code_fingerprint")), "code_versions": legacy.VERSIONS}


# ----------------------------------------------------------------------------------------------- the runs of seed sets


@dataclasses.dataclass(frozen=True)
class Entry:
    """One config of a chapter on a seed set: the figures that read it, its config's fields (``seeds`` among them) and
    its final evaluation per seed, ``{"eval/<metric>": nested lists}`` (:func:`compgen.analysis.finals.entries`)."""

    figures: tuple
    config: Mapping
    finals: Mapping

    def __post_init__(self):
        object.__setattr__(self, "figures", tuple(self.figures))

    @property
    def seeds(self) -> Seeds:
        return tuple(self.config["seeds"])


ENTRY = {"figures": ["text"], "config": {"seeds": SEEDS}, "finals": ("map", "numbers")}


def _seed_set_keyed(record: dict) -> dict:
    out = {k: v for k, v in record.items() if k != "fingerprints"}
    keys = {ch: legacy.key(ch, fp) for ch, fp in record.get("fingerprints", {}).items()}
    return out | {"keys": {ch: k for ch, k in keys.items() if k}, "code_versions": legacy.VERSIONS}


@dataclasses.dataclass(frozen=True, kw_only=True)
class SeedSet(Record):
    """Every chapter's runs on a seed set the book neither tunes on nor shows (``tools/second_set.py``): per chapter
    its entries, the commit and the key of the code they were computed by and the wall seconds they took."""

    KIND: ClassVar[str] = "second_set"
    NAME: ClassVar[str] = "second-seed-set record"
    COMMAND: ClassVar[str] = "COMPGEN_RESULTS=<store> python tools/second_set.py --preset quick --seeds 31 32 33"
    VERSION: ClassVar[int] = 2
    MIGRATIONS: ClassVar[Mapping] = {1: _seed_set_keyed}
    TUPLES: ClassVar[tuple] = ("seeds",)

    preset: str = shaped(TEXT)
    seeds: Seeds = shaped(SEEDS)
    runs: Mapping = shaped(("map", [ENTRY]), required=True, default_factory=dict)  # chapter: tuple[Entry, ...]
    commits: Mapping = shaped(("map", TEXT), default_factory=dict)
    keys: Mapping = shaped(("map", TEXT), default_factory=dict)  # chapter: compgen.section.Section.code_key
    code_versions: Mapping | None = shaped(("none or", CODE_VERSIONS), default=None)
    wall_s: Mapping = shaped(("map", "time"), default_factory=dict)

    def __post_init__(self):
        super().__post_init__()
        runs = {n: tuple(e if isinstance(e, Entry) else Entry(**e) for e in es) for n, es in self.runs.items()}
        object.__setattr__(self, "runs", runs)
        for chapter, entries in runs.items():
            for e in entries:
                if e.seeds != self.seeds:
                    raise ValueError(
                        f"a {chapter} entry was run on seeds {list(e.seeds)}, not the set's {list(self.seeds)}"
                    )

    def computed_by(self, chapter: str) -> tuple:
        """``(key, versions)`` of the code that computed ``chapter``'s runs (``(None, ...)`` where it names none)."""
        return self.keys.get(chapter), self.code_versions


# ----------------------------------------------------------------------------------------------- the other kinds


class FromCode:
    """A record naming the key of the code that made it, ``code_key`` (``None``: it names none), computed under the
    library versions ``code_versions``."""

    def computed_by(self) -> tuple:
        return self.code_key, self.code_versions


def _code_key():
    return shaped(MAYBE_TEXT, default=None)


def _code_versions():
    return shaped(("none or", CODE_VERSIONS), default=None)


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


TWIN_RUN = {
    "seed": "seed",
    "final": "object",
    "row": "object",
    "wall_s": "time",
    "translation": {"unmatched": [("pair", TEXT)]},
}


@dataclasses.dataclass(frozen=True, kw_only=True)
class Twin(FromCode, Record):
    """Our chapter and the authors' code at the same configs (``tools/twin.py``): the authors' runs by run key, each
    with its config row and final numbers, and ours at the matched world per seed set."""

    KIND: ClassVar[str] = "twin"
    NAME: ClassVar[str] = "twin record"
    COMMAND: ClassVar[str] = "make twin REFERENCE=<checkout> CHAPTER=<chapter> (tools/twin.py)"
    VERSION: ClassVar[int] = 3
    MIGRATIONS: ClassVar[Mapping] = {1: _twin_raw_values, 2: lambda r: _keyed(r, r.get("chapter"))}
    TUPLES: ClassVar[tuple] = ("ours_matched_rows",)

    chapter: str = shaped(TEXT)
    preset: str = shaped(TEXT)
    reference: Mapping = shaped({"commit": TEXT, "repository?": TEXT})
    seed_sets: tuple = shaped([SEEDS])
    runs: Mapping = shaped(("map", TWIN_RUN))
    made_by: str | None = shaped(MAYBE_TEXT, default=None)
    matched_world: Mapping | None = shaped(("none or", "object"), default=None)
    not_expressible: Mapping | None = shaped(("none or", "object"), default=None)
    ours_matched_rows: tuple = shaped([{"row": "object", "seeds": SEEDS, "values": ("map", "numbers")}], default=())
    code_key: str | None = _code_key()
    code_versions: Mapping | None = _code_versions()

    def __post_init__(self):
        super().__post_init__()
        object.__setattr__(self, "seed_sets", tuple(tuple(s) for s in self.seed_sets))


def _search_keyed(record: dict) -> dict:
    rows = [
        {k: v for k, v in _keyed(r, record.get("section")).items() if k != "code_versions"} for r in record["records"]
    ]
    return {**record, "records": rows, "code_versions": legacy.VERSIONS}


SEARCH_ENTRY = {
    "regime": TEXT,
    "world": "object",
    "budget": "object",
    "seeds": SEEDS,
    "values": ["number"],
    "cpu_s?": "time",
    "code_key?": MAYBE_TEXT,
}


@dataclasses.dataclass(frozen=True, kw_only=True)
class Search(Record):
    """A search's runs as numbers (``tools/search_from_store.py``): per entry its regime, world, budget, seeds and the
    metric per seed, with the key of the code that ran it."""

    KIND: ClassVar[str] = "search"
    NAME: ClassVar[str] = "search record"
    COMMAND: ClassVar[str] = "tools/search_from_store.py <section> <figure> --seeds ... --regime ..."
    VERSION: ClassVar[int] = 2
    MIGRATIONS: ClassVar[Mapping] = {1: _search_keyed}
    TUPLES: ClassVar[tuple] = ("records",)

    metric: str = shaped(TEXT)
    records: tuple = shaped([SEARCH_ENTRY])
    section: str | None = shaped(MAYBE_TEXT, default=None)
    source: str | None = shaped(MAYBE_TEXT, default=None)
    baselines: Any = shaped("any", default=None)
    code_versions: Mapping | None = _code_versions()  # the library versions of every entry's code_key


@dataclasses.dataclass(frozen=True, kw_only=True)
class BookTime(FromCode, Record):
    """How long building the book took, per chapter and per run (``python -m compgen.bench --book``)."""

    KIND: ClassVar[str] = "book_time"
    NAME: ClassVar[str] = "book-time record"
    COMMAND: ClassVar[str] = "python -m compgen.bench --book book --store <store> --record"
    VERSION: ClassVar[int] = 2
    MIGRATIONS: ClassVar[Mapping] = {1: lambda r: _keyed(r, None)}
    TUPLES: ClassVar[tuple] = ("chapters", "runs")

    date: str = shaped(TEXT)
    code: str = shaped(TEXT)
    preset: str | None = shaped(MAYBE_TEXT)
    cores: int = shaped("positive count")
    chapters: tuple = shaped(
        [
            {"chapter": TEXT, "wall": "time", "training_cells": "time", "runs": "count", "gemm": ("none or", "time")}
            | recordfile.RUN_SECONDS
        ]
    )
    runs: tuple = shaped([{"section": TEXT, "chapter": TEXT, "config": "object"} | recordfile.RUN_SECONDS])
    record: str | None = shaped(MAYBE_TEXT, default=None)
    note: str | None = shaped(MAYBE_TEXT, default=None)
    code_key: str | None = _code_key()
    code_versions: Mapping | None = _code_versions()


@dataclasses.dataclass(frozen=True, kw_only=True)
class Steps(FromCode, Record):
    """Seconds per outer step of every case on one device, ours or the authors' (``python -m compgen.bench``)."""

    KIND: ClassVar[str] = "steps"
    NAME: ClassVar[str] = "step-time record"
    COMMAND: ClassVar[str] = "python -m compgen.bench --record"
    VERSION: ClassVar[int] = 2
    MIGRATIONS: ClassVar[Mapping] = {1: lambda r: _keyed(r, None) if r.get("who") != "authors" else r}

    who: str = shaped(("one of", ("authors", "compgen")))
    device: str = shaped(TEXT)
    date: str = shaped(TEXT)
    code: str = shaped(TEXT)
    how: str = shaped(TEXT)
    gemm_gflops: tuple | None = shaped(("none or", ("pair", "positive")))
    rows: Mapping = shaped(("map", recordfile.STEP_ROW))
    session: Any = shaped("any", default=None)
    code_key: str | None = _code_key()
    code_versions: Mapping | None = _code_versions()

    def __post_init__(self):
        super().__post_init__()
        if self.gemm_gflops is not None:
            object.__setattr__(self, "gemm_gflops", tuple(self.gemm_gflops))


@dataclasses.dataclass(frozen=True, kw_only=True)
class Gpu(FromCode, Record):
    """What each step of a GPU check found (``tools/gpu_check.sh``)."""

    KIND: ClassVar[str] = "gpu"
    NAME: ClassVar[str] = "GPU-check record"
    COMMAND: ClassVar[str] = "tools/gpu_check.sh"
    VERSION: ClassVar[int] = 2
    MIGRATIONS: ClassVar[Mapping] = {1: lambda r: _keyed(r, None)}
    TUPLES: ClassVar[tuple] = ("steps",)

    device: str = shaped(TEXT)
    date: str = shaped(TEXT)
    code: str = shaped(TEXT)
    jax: str = shaped(TEXT)
    flax: str = shaped(TEXT)
    steps: tuple = shaped([{"step": TEXT, "status": TEXT, "seconds?": ("none or", "time"), "found?": TEXT}])
    how: str | None = shaped(MAYBE_TEXT, default=None)
    code_key: str | None = _code_key()
    code_versions: Mapping | None = _code_versions()


def _op_counts_keyed(record: dict) -> dict:
    cases = {}
    for name, case in record.get("cases", {}).items():
        ours = case.get("ours")
        cases[name] = {**case, "ours": _keyed(ours, name.split(" ")[0]) if isinstance(ours, dict) else ours}
    return {**record, "cases": cases}


@dataclasses.dataclass(frozen=True, kw_only=True)
class OpCounts(Record):
    """The serial work of one step, ours and the authors', per case (``tools/op_counts.py``)."""

    KIND: ClassVar[str] = "op_counts"
    NAME: ClassVar[str] = "serial-work record"
    COMMAND: ClassVar[str] = (
        "python tools/op_counts.py --reference <checkout> --twin-python .venv-twin/bin/python --record"
    )
    VERSION: ClassVar[int] = 2
    MIGRATIONS: ClassVar[Mapping] = {1: _op_counts_keyed}

    date: str = shaped(TEXT)
    jax: str = shaped(TEXT)
    reference: Mapping = shaped({"repository": TEXT, "commit": MAYBE_TEXT})
    cases: Mapping = shaped(
        (
            "map",
            {
                "ours": recordfile.STEP_COUNTS | {"code_key": MAYBE_TEXT},
                "theirs": ("none or", recordfile.STEP_COUNTS),
            },
        )
    )
    how: str | None = shaped(MAYBE_TEXT, default=None)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Choices(Record):
    """The device choices made, each with the measurement that decided it."""

    KIND: ClassVar[str] = "choices"
    NAME: ClassVar[str] = "device-choice record"
    COMMAND: ClassVar[str] = "an edit of book/records/choices.json, with the measurement"
    TUPLES: ClassVar[tuple] = ("choices",)

    choices: tuple = shaped([{"choice": TEXT, "date": TEXT, "machine": TEXT, "how": TEXT, "found": TEXT}])
    what: str | None = shaped(MAYBE_TEXT, default=None)


WORK = {
    "name": TEXT,
    "section": TEXT,
    "figure": TEXT,
    "preset": TEXT,
    "select": ["object"],
    "labels": [TEXT],
    "why?": TEXT,
    "estimate_s?": ("none or", "time"),
}


@dataclasses.dataclass(frozen=True, kw_only=True)
class Ledger(Record):
    """The paper-scale work in order (:class:`compgen.ledger.Work` as objects)."""

    KIND: ClassVar[str] = "ledger"
    NAME: ClassVar[str] = "paper-scale ledger"
    COMMAND: ClassVar[str] = "an edit of book/records/ledger.json (compgen.ledger.Work)"
    TUPLES: ClassVar[tuple] = ("work",)

    work: tuple = shaped([WORK])


PAPER_CONFIG = {
    "label": TEXT,
    "select": "object",
    "seeds": SEEDS,
    "config": "object",
    "eval": ("map", "numbers"),
    "train_loss": "numbers",
}
LEASE_OF_WORK = {
    "date": TEXT,
    "device": TEXT,
    "jax_version": TEXT,
    "steps": ("pair", "count"),
    "knobs": "object",
    "chunk": "positive count",
    "seconds": ("map", "time"),
}


@dataclasses.dataclass(frozen=True, kw_only=True)
class PaperRun(Record):
    """Where one paper-scale work stands (``tools/gpu_lease.py``): its configs' evaluations so far and its leases."""

    KIND: ClassVar[str] = "paper_run"
    NAME: ClassVar[str] = "paper-scale run's progress"
    COMMAND: ClassVar[str] = "python tools/gpu_lease.py (on a GPU; --cpu rehearses)"
    TUPLES: ClassVar[tuple] = ("eval_steps", "configs", "leases")

    work: str = shaped(TEXT)
    section: str = shaped(TEXT)
    figure: str = shaped(TEXT)
    preset: str = shaped(TEXT)
    outer_steps: int = shaped("positive count")
    eval_every: int = shaped("positive count")
    steps_done: int = shaped("count")
    complete: bool = shaped(("one of", (True, False)))
    eval_steps: tuple = shaped(["count"])
    configs: tuple = shaped([PAPER_CONFIG])
    diverged: Mapping = shaped(("map", TEXT))
    leases: tuple = shaped([LEASE_OF_WORK])
    identity: Mapping | None = shaped(("none or", {"work": TEXT, "preset": TEXT, "configs": TEXT}), default=None)
    # compgen.ledger.code_of: the key of what its configs compute, and the versions
    code: Mapping | None = shaped(("none or", {"key": TEXT, "versions": CODE_VERSIONS}), default=None)
    # the source fingerprint of its section's code when it was written
    code_fingerprint: str | None = shaped(MAYBE_TEXT, default=None)

    def __post_init__(self):
        super().__post_init__()
        if self.steps_done > self.outer_steps:
            raise ValueError(f"steps_done {self.steps_done:,} is past outer_steps {self.outer_steps:,}")
        if self.complete != (self.steps_done == self.outer_steps):
            raise ValueError(f"complete is {self.complete} at {self.steps_done:,} of {self.outer_steps:,} steps")
        if any(s > self.steps_done for s in self.eval_steps):
            raise ValueError(
                f"an evaluation step in {list(self.eval_steps)[-3:]} is past steps_done {self.steps_done:,}"
            )
        if self.identity is not None and (self.identity.get("work"), self.identity.get("preset")) != (
            self.work,
            self.preset,
        ):
            raise ValueError(f"its identity {dict(self.identity)} is not of work {self.work!r} at {self.preset!r}")


@dataclasses.dataclass(frozen=True, kw_only=True)
class Lease(Record):
    """What one lease of a device did (``tools/gpu_lease.py``, ``$OUT/lease.json``): its steps with their seconds and
    where each work of its ledger stood at the end."""

    KIND: ClassVar[str] = "lease"
    NAME: ClassVar[str] = "lease's account"
    COMMAND: ClassVar[str] = "python tools/gpu_lease.py (each lease writes its own)"
    TUPLES: ClassVar[tuple] = ("steps", "ledger")

    date: str = shaped(TEXT)
    machine: str = shaped(("one of", ("gpu", "cpu")))  # the budgets' kind: a GPU lease or a CPU one
    budget_s: float = shaped("positive")
    steps: tuple = shaped([{"step": TEXT, "status": TEXT, "seconds": "time"}])
    ledger: tuple = shaped([TEXT])


PROVENANCE = {  # where and how a stored run was computed (compgen.results.provenance)
    "date": TEXT,
    "wall_time_s": "time",
    "device": TEXT,
    "git_commit": TEXT,
    "git_commit_from?": TEXT,
    "compgen_version?": TEXT,
    "code_fingerprint?": MAYBE_TEXT,
    "jax_version?": TEXT,
    "matmul_precision?": TEXT,
    "host?": TEXT,
    "gemm_gflops?": ("none or", "time"),
    "seconds?": ("map", "time"),
    "knobs?": "object",
}


def _section_out_of_kind(record: dict) -> dict:
    """Version 1 of a stored run's description named its section in ``kind``."""
    return {**record, "kind": StoredRun.KIND, "section": record.get("kind")}


@dataclasses.dataclass(frozen=True, kw_only=True)
class StoredRun(Record):
    """The description of one run in the results store (:mod:`compgen.results`): the ``<key>.json`` beside its entry,
    and the same object inside the entry (``__meta__``), which is what is believed."""

    KIND: ClassVar[str] = "run"
    NAME: ClassVar[str] = "stored run's description"
    COMMAND: ClassVar[str] = "compgen-cli store (rebuilds it from its entry, or moves a damaged entry aside)"
    VERSION: ClassVar[int] = 2
    MIGRATIONS: ClassVar[Mapping] = {1: _section_out_of_kind}
    FORMER_KIND: ClassVar[str | None] = "section"

    section: str = shaped(TEXT)
    config: Mapping = shaped("object")  # compgen.results.config_dict
    key: str | None = shaped(MAYBE_TEXT, default=None)  # compgen.programs.run_key; none before runs were keyed so
    legacy_key: str | None = shaped(MAYBE_TEXT, default=None)  # the name it had then, for a run moved under its key
    provenance: Mapping = shaped(PROVENANCE)

    def text(self) -> str:
        """The description as the store writes it."""
        return recordfile.dumps(self.to_dict())


KINDS = {
    cls.KIND: cls
    for cls in (SeedSet, Twin, Search, BookTime, Steps, Gpu, OpCounts, Choices, Ledger, PaperRun, Lease, StoredRun)
}
