"""The results-at-a-glance page: every claim of the paper that the book tests, with our verdict, from the store.

:func:`claims` reads each chapter's runs at a preset from the results store (nothing is trained) and computes
the chapter's claims with the same functions its figures use; a claim whose runs are not stored is "not run".
"""

from __future__ import annotations

import datetime

from compgen import claims as C
from compgen import results
from compgen.figures import goals, hyperteacher, incontext, preferences, stored, teacher_student

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


def claims(preset="quick", seeds=None) -> dict:
    """{section: [Claim]} computed from the stored runs of every chapter at ``preset``."""
    return {name: module.claims(stored(name, preset, seeds)) for name, module in CHAPTERS.items()}


def page(preset="quick", seeds=None) -> str:
    """The page's markdown: how it was built, the counts of verdicts, and one table per chapter."""
    found = claims(preset, seeds)
    every = [c for group in found.values() for c in group]
    counts = {v: sum(c.verdict == v for c in every) for v in (C.HOLDS, C.NOT_REPRODUCED, C.NOT_RUN)}
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
    parts = [
        f"Built on {date} from commit `{results._git_commit()[:12]}` at preset **`{preset}`**, from the runs in the "
        f"results store. Of {len(every)} claims, **{counts[C.HOLDS]} hold**, {counts[C.NOT_REPRODUCED]} are not "
        f"reproduced at this preset and {counts[C.NOT_RUN]} were not run."
    ]
    for name, group in found.items():
        parts.append(f"**{TITLES[name]}**\n\n" + C.markdown_table(group))
    return "\n\n".join(parts)
