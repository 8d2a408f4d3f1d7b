"""The book's chapters as the analysis reads them: each chapter's claims module, title and whether its claims are the
paper's, and the runs of a chapter on a recorded seed set."""

from __future__ import annotations

from compgen import records
from compgen.analysis import finals, goals, hyperteacher, incontext, preferences, teacher_student

CHAPTERS = {
    "teacher_student": teacher_student,
    "hyperteacher": hyperteacher,
    "preferences": preferences,
    "goals": goals,
    "incontext": incontext,
}
TITLES = {
    "teacher_student": "Teacher and student (§3.3)",
    "hyperteacher": "The hyperteacher (§4.1)",
    "preferences": "Compositional preferences (§4.2)",
    "goals": "Compositional goals (§4.3)",
    "incontext": "In-context learners (beyond the paper)",
}
BEYOND_THE_PAPER = ("incontext",)  # chapters whose claims are not the paper's: drawn and counted apart
SEED_SETS = ("search/second_set.json", "search/third_set.json")  # the recorded further seed sets, from book/


def set_runs(record: records.SeedSet | None, name: str):
    """The chapter's runs on a recorded seed set, from the record's final numbers (``None`` without a record or
    without that chapter in it); a config the record lacks (the preset changed since) is not run."""
    if record is None or name not in record.runs:
        return None
    return finals.runs_from_entries(name, record.preset, record.seeds, record.runs[name])
