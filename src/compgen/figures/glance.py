"""The results-at-a-glance page: every claim of the paper that the book tests, with our verdict, from the store.

:func:`claims` reads each chapter's runs at a preset from the results store (nothing is trained) and computes
the chapter's claims with the same functions its figures use; a claim whose runs are not stored is "not run".
:func:`page` adds, when given the record of ``tools/second_set.py``, the verdicts of the same claims on a second
seed set that the book neither tunes on nor shows.
"""

from __future__ import annotations

import datetime
import json
from pathlib import Path

from compgen import claims as C
from compgen import experiments, results
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


def claims(preset="quick", seeds=None, chapters=None) -> dict:
    """{section: [Claim]} computed from the stored runs of every chapter (or of ``chapters``) at ``preset``."""
    return {
        name: module.claims(stored(name, preset, seeds))
        for name, module in CHAPTERS.items()
        if chapters is None or name in chapters
    }


def load_second_set(path, preset) -> dict | None:
    """The second-seed-set record at ``path`` (written by ``tools/second_set.py``) if it exists and was computed
    at ``preset``, else ``None``."""
    path = Path(path)
    if not path.exists():
        return None
    record = json.loads(path.read_text())
    return record if record.get("preset") == preset else None


def code_fingerprints() -> dict:
    """{section: the fingerprint of its training code}, as the results store keys its runs."""
    return {name: results.code_fingerprint(experiments.get(name).code) for name in CHAPTERS}


def _second_set_matches(found: dict, record: dict) -> dict:
    """{section: [the record's entry for each claim of ``found``, or ``None``]}."""
    by_key = {(c["section"], c["figure"], c["claim"]): c for c in record["claims"]}
    return {name: [by_key.get((c.section, c.figure, c.claim)) for c in group] for name, group in found.items()}


def _second_set_cell(entry) -> str:
    if entry is None:
        return "– not recorded"
    if entry["verdict"] == C.NOT_RUN:
        return C.MARKS[C.NOT_RUN]
    return f"{C.MARKS[entry['verdict']].removesuffix(' at this preset')}: {entry['ours']}"


def _second_set_summary(found: dict, record: dict, matches: dict) -> str:
    seeds = ", ".join(map(str, record["seeds"]))
    pairs = [(c, entry) for name, group in found.items() for c, entry in zip(group, matches[name])]
    holds = sum(c.verdict == C.HOLDS for c, _ in pairs)
    both = sum(c.verdict == C.HOLDS and entry is not None and entry["verdict"] == C.HOLDS for c, entry in pairs)
    current = code_fingerprints()
    changed = [TITLES[name] for name, code in record.get("fingerprints", {}).items() if current.get(name, code) != code]
    stale = (
        f" The training code of {', '.join(changed)} has changed since that record was computed, so its column shows "
        "the older code's runs."
        if changed
        else ""
    )
    return (
        f"The column **seeds {seeds}** repeats every claim on a second seed set that the book neither tunes on nor "
        f"shows (computed by `tools/second_set.py` at {_commits(record)}, same preset): of the "
        f"{holds} claims that hold on the book's seeds, **{both} also hold there**. Each cell gives the verdict "
        f"and then the same numbers as the *ours* column.{stale}"
    )


def _commits(record: dict) -> str:
    """Where a second-set record was computed: "commit `abc`", or per chapter when its chapters differ."""
    commits = record.get("commits") or {name: record["commit"] for name in record.get("fingerprints", CHAPTERS)}
    by_commit = {}
    for name, commit in commits.items():
        by_commit.setdefault(commit[:12], []).append(TITLES.get(name, name))
    if len(by_commit) == 1:
        return f"commit `{next(iter(by_commit))}`"
    return "commits " + "; ".join(f"`{c}` ({', '.join(names)})" for c, names in by_commit.items())


def page(preset="quick", seeds=None, second_set=None) -> str:
    """The page's markdown: how it was built, the counts of verdicts, and one table per chapter; with
    ``second_set`` (the path of a record of ``tools/second_set.py`` at ``preset``), a column of the verdicts on
    that record's seeds."""
    found = claims(preset, seeds)
    every = [c for group in found.values() for c in group]
    counts = {v: sum(c.verdict == v for c in every) for v in (C.HOLDS, C.NOT_REPRODUCED, C.NOT_RUN)}
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
    parts = [
        f"Built on {date} from commit `{results._git_commit()[:12]}` at preset **`{preset}`**, from the runs in the "
        f"results store. Of {len(every)} claims, **{counts[C.HOLDS]} hold**, {counts[C.NOT_REPRODUCED]} are not "
        f"reproduced at this preset and {counts[C.NOT_RUN]} {'was' if counts[C.NOT_RUN] == 1 else 'were'} not run."
    ]
    record = load_second_set(second_set, preset) if second_set else None
    matches = _second_set_matches(found, record) if record else None
    if record:
        parts.append(_second_set_summary(found, record, matches))
    title = f"seeds {', '.join(map(str, record['seeds']))}" if record else None
    for name, group in found.items():
        extra = (title, [_second_set_cell(e) for e in matches[name]]) if record else None
        parts.append(f"**{TITLES[name]}**\n\n" + C.markdown_table(group, extra=extra))
    return "\n\n".join(parts)
