"""The book's chapters: :data:`CHAPTERS`, each a :class:`compgen.analysis.chapter.Chapter` declared once in its
analysis module; the runs of a chapter on a recorded seed set; and its claims judged on every seed set and pooled."""

from __future__ import annotations

import dataclasses

from compgen import records
from compgen.analysis import claims as C
from compgen.analysis import finals, goals, hyperteacher, incontext, preferences, teacher_student
from compgen.notebook import stored

CHAPTERS = {m.CHAPTER.name: m.CHAPTER for m in (teacher_student, hyperteacher, preferences, goals, incontext)}
SEED_SETS = ("search/second_set.json", "search/third_set.json")  # the recorded further seed sets, from book/


def get(name: str):
    """The :class:`compgen.analysis.chapter.Chapter` called ``name`` (one of :data:`CHAPTERS`)."""
    if name not in CHAPTERS:
        from compgen.params import ParameterError

        raise ParameterError(f"chapter must be one of {tuple(CHAPTERS)}, got {name!r}")
    return CHAPTERS[name]


def twinned() -> dict:
    """``{name: Chapter}`` of the chapters whose claims are tested with the authors' code (a ``twin``)."""
    return {name: c for name, c in CHAPTERS.items() if c.twin is not None}


def set_runs(record: records.SeedSet | None, name: str):
    """The chapter's runs on a recorded seed set, from the record's final numbers (``None`` without a record or
    without that chapter in it); a config the record lacks (the preset changed since) is not run."""
    if record is None or name not in record.runs:
        return None
    return finals.runs_from_entries(name, record.preset, record.seeds, record.runs[name])


def claims(preset="quick", seeds=None, chapters=None) -> dict:
    """{section: [Claim]} computed from the stored runs of every chapter (or of ``chapters``) at ``preset``."""
    return {
        name: chapter.claims(stored(name, preset, seeds))
        for name, chapter in CHAPTERS.items()
        if chapters is None or name in chapters
    }


def judged_sets(name: str, runs, seed_sets=()) -> dict:
    """The chapter's claims per seed set of ours, judged now: ``{"<book's seeds>": [Claim], "<a recorded set>":
    [Claim], ..., "pooled": [Claim]}``: a set per record of ``seed_sets`` (records of :func:`load_seed_sets`) that
    holds the chapter and shares no seed with the sets before it, and ``"pooled"`` over all of them under the pooled
    rule, where there is at least one."""
    chapter = CHAPTERS[name]
    found, taken = {records.seed_set_name(runs.seeds): chapter.claims(runs)}, [runs]
    for record in [seed_sets] if isinstance(seed_sets, records.SeedSet) else seed_sets:
        other = set_runs(record, name)
        if other is not None and not set(other.seeds) & {s for r in taken for s in r.seeds}:
            found[records.seed_set_name(other.seeds)] = chapter.claims(other)
            taken.append(other)
    if len(taken) > 1:
        found["pooled"] = chapter.claims(finals.pool(*taken))
    return found


def row_claims(found: dict, book: str) -> list:
    """Each claim of the book's seeds as the page counts and draws it: pooled over every seed set where there are
    several (a claim the pooling could not judge is not run), else on the book's seeds."""
    if "pooled" not in found:
        return list(found[book])
    return [C.find(found["pooled"], c) or dataclasses.replace(c, verdict=C.NOT_RUN) for c in found[book]]
