"""The records the book reads, typed: one frozen dataclass per kind, loaded and saved through one checked reader.

Each class names its kind (:data:`compgen.recordfile.KINDS`: what it is, the command that rewrites it and the shape of
its fields). ``Kind.load(path)`` reads the file with :func:`compgen.recordfile.read`, which refuses a damaged record, or
one of a version it cannot bring up to date, in one line naming the file and that command, and brings an older
version up through the kind's migrations (:data:`compgen.recordfile.MIGRATIONS`); the dataclass then refuses a field
it does not know, so a record holds exactly its declared fields. ``record.save(path)`` writes it atomically at the
kind's current version (:func:`compgen.recordfile.version`), each field at its default left out. Seed sets are
tuples, named by :func:`seed_set_name`. Whether a record shows what the current code computes is one check,
:func:`compgen.recordfile.code_state`, on the code key it names (its ``computed_by()``: the key and the library
versions it was computed under, :mod:`compgen.programs`; per chapter for a seed set; a search names one per entry).

The top level of every record is typed; the rows below it (a twin run, a search entry, a step-time row) stay JSON
objects of the shapes :mod:`compgen.recordfile` checks, read by the one module that draws them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from compgen import recordfile, storage

Seeds = tuple  # a seed set: tuple[int, ...]


def seed_set_name(seeds) -> str:
    """A seed set as the text that keys it wherever claims are judged per seed set: ``"31,32,33"``."""
    return ",".join(map(str, seeds))


def _plain(value):
    """``value`` as JSON-ready data: dataclasses as objects, tuples as lists."""
    if dataclasses.is_dataclass(value):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _default(field: dataclasses.Field):
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return field.default


@dataclasses.dataclass(frozen=True, kw_only=True)
class Record:
    """What every kind shares: ``about``, a sentence on what the record is (optional)."""

    KIND: ClassVar[str]
    TUPLES: ClassVar[tuple] = ()  # fields held as tuples (a seed set, a list of rows)

    about: str | None = None

    def __post_init__(self):
        for name in self.TUPLES:
            object.__setattr__(self, name, tuple(getattr(self, name)))

    @classmethod
    def from_dict(cls, data: Mapping):
        """The record of ``data`` (a checked record's JSON object at the current version); a :class:`ValueError`
        names a field this class does not know."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known - {"schema"})
        if unknown:
            raise ValueError(f"has field(s) {unknown} that a {cls.KIND} record does not hold")
        return cls(**{k: v for k, v in data.items() if k != "schema"})

    def to_dict(self) -> dict:
        """The record as its JSON object: ``schema`` (the kind's current version) first, each field at its default
        left out."""
        out = {"schema": recordfile.version(self.KIND)}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING or value != _default(f):
                out[f.name] = _plain(value)
        return out

    @classmethod
    def load(cls, path, deep=None):
        """The record at ``path``: read, checked and brought to the current version by :func:`compgen.recordfile.read`
        (``deep`` as there), or a one-line :class:`compgen.recordfile.RecordError`."""
        data = recordfile.read(path, cls.KIND, deep)
        try:
            return cls.from_dict(data)
        except (ValueError, TypeError) as e:
            raise recordfile.error(path, cls.KIND, str(e)) from None

    @classmethod
    def load_if_there(cls, path, deep=None):
        """:meth:`load`, or ``None`` where ``path`` does not exist."""
        return cls.load(path, deep) if Path(path).exists() else None

    def save(self, path) -> Path:
        """Write the record to ``path`` atomically (:func:`compgen.recordfile.dumps`), its folder made, having checked
        it as the book reads it (:func:`compgen.recordfile.check`: a writer cannot write a record the book refuses);
        returns the path."""
        path, data = Path(path), self.to_dict()
        recordfile.check(data, path, self.KIND)
        path.parent.mkdir(parents=True, exist_ok=True)
        storage.write_atomic(path, recordfile.dumps(data).encode())
        return path


def write(kind: str, data: Mapping, path) -> Record:
    """The ``kind`` record of ``data`` (a writer's JSON object; its ``schema`` ignored) saved to ``path``
    (:meth:`Record.save`)."""
    record = KINDS[kind].from_dict(data)
    record.save(path)
    return record


def load_folder(kind: type, folder) -> list:
    """Every ``kind`` record (``*.json``) in ``folder``, oldest first by ``date``; none where there is no folder."""
    return sorted((kind.load(p) for p in sorted(Path(folder).glob("*.json"))), key=lambda r: r.date)


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


@dataclasses.dataclass(frozen=True, kw_only=True)
class SeedSet(Record):
    """Every chapter's runs on a seed set the book neither tunes on nor shows (``tools/second_set.py``): per chapter
    its entries, the commit and training-code fingerprint they were computed at and the wall seconds they took."""

    KIND: ClassVar[str] = "second_set"
    TUPLES: ClassVar[tuple] = ("seeds",)

    preset: str
    seeds: Seeds
    runs: Mapping = dataclasses.field(default_factory=dict)  # chapter: tuple[Entry, ...]
    commits: Mapping = dataclasses.field(default_factory=dict)
    keys: Mapping = dataclasses.field(default_factory=dict)  # chapter: compgen.section.Section.code_key
    code_versions: Mapping | None = None
    wall_s: Mapping = dataclasses.field(default_factory=dict)

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


@dataclasses.dataclass(frozen=True, kw_only=True)
class Twin(FromCode, Record):
    """Our chapter and the authors' code at the same configs (``tools/twin.py``): the authors' runs by run key, each
    with its config row and final numbers, and ours at the matched world per seed set."""

    KIND: ClassVar[str] = "twin"
    TUPLES: ClassVar[tuple] = ("ours_matched_rows",)

    chapter: str
    preset: str
    reference: Mapping
    seed_sets: tuple
    runs: Mapping
    made_by: str | None = None
    matched_world: Mapping | None = None
    not_expressible: Mapping | None = None
    ours_matched_rows: tuple = ()
    code_key: str | None = None
    code_versions: Mapping | None = None

    def __post_init__(self):
        super().__post_init__()
        object.__setattr__(self, "seed_sets", tuple(tuple(s) for s in self.seed_sets))


@dataclasses.dataclass(frozen=True, kw_only=True)
class Search(Record):
    """A search's runs as numbers (``tools/search_from_store.py``): per entry its regime, world, budget, seeds and the
    metric per seed, with the fingerprint of the code that ran it."""

    KIND: ClassVar[str] = "search"
    TUPLES: ClassVar[tuple] = ("records",)

    metric: str
    records: tuple
    section: str | None = None
    source: str | None = None
    baselines: Any = None
    code_versions: Mapping | None = None  # the library versions of every entry's code_key


@dataclasses.dataclass(frozen=True, kw_only=True)
class BookTime(FromCode, Record):
    """How long building the book took, per chapter and per run (``python -m compgen.bench --book``)."""

    KIND: ClassVar[str] = "book_time"
    TUPLES: ClassVar[tuple] = ("chapters", "runs")

    date: str
    code: str
    preset: str | None
    cores: int
    chapters: tuple
    runs: tuple
    record: str | None = None
    note: str | None = None
    code_key: str | None = None
    code_versions: Mapping | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class Steps(FromCode, Record):
    """Seconds per outer step of every case on one device, ours or the authors' (``python -m compgen.bench``)."""

    KIND: ClassVar[str] = "steps"

    who: str
    device: str
    date: str
    code: str
    how: str
    gemm_gflops: tuple | None
    rows: Mapping
    session: Any = None
    code_key: str | None = None
    code_versions: Mapping | None = None

    def __post_init__(self):
        super().__post_init__()
        if self.gemm_gflops is not None:
            object.__setattr__(self, "gemm_gflops", tuple(self.gemm_gflops))


@dataclasses.dataclass(frozen=True, kw_only=True)
class Gpu(FromCode, Record):
    """What each step of a GPU check found (``tools/gpu_check.sh``)."""

    KIND: ClassVar[str] = "gpu"
    TUPLES: ClassVar[tuple] = ("steps",)

    device: str
    date: str
    code: str
    jax: str
    flax: str
    steps: tuple
    how: str | None = None
    code_key: str | None = None
    code_versions: Mapping | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class OpCounts(Record):
    """The serial work of one step, ours and the authors', per case (``tools/op_counts.py``)."""

    KIND: ClassVar[str] = "op_counts"

    date: str
    jax: str
    reference: Mapping
    cases: Mapping
    how: str | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class Choices(Record):
    """The device choices made, each with the measurement that decided it."""

    KIND: ClassVar[str] = "choices"
    TUPLES: ClassVar[tuple] = ("choices",)

    choices: tuple
    what: str | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class Ledger(Record):
    """The paper-scale work in order (:class:`compgen.ledger.Work` as objects)."""

    KIND: ClassVar[str] = "ledger"
    TUPLES: ClassVar[tuple] = ("work",)

    work: tuple


@dataclasses.dataclass(frozen=True, kw_only=True)
class PaperRun(Record):
    """Where one paper-scale work stands (``tools/gpu_lease.py``): its configs' evaluations so far and its leases."""

    KIND: ClassVar[str] = "paper_run"
    TUPLES: ClassVar[tuple] = ("eval_steps", "configs", "leases")

    work: str
    section: str
    figure: str
    preset: str
    outer_steps: int
    eval_every: int
    steps_done: int
    complete: bool
    eval_steps: tuple
    configs: tuple
    diverged: Mapping
    leases: tuple
    identity: Mapping | None = None
    code: Mapping | None = None  # compgen.ledger.code_of: the key of what its configs compute, and the versions
    code_fingerprint: str | None = None  # the source fingerprint of its section's code when it was written

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


KINDS = {cls.KIND: cls for cls in (SeedSet, Twin, Search, BookTime, Steps, Gpu, OpCounts, Choices, Ledger, PaperRun)}
