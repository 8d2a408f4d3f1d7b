"""Verdicts as the book shows them: a mark per verdict and a markdown table of claims
(:mod:`compgen.analysis.claims` judges them)."""

from __future__ import annotations

from compgen.analysis.claims import AT_CRITERION, HOLDS, NOT_REPRODUCED, NOT_RUN, category

MARKS = {HOLDS: "✅ holds", NOT_REPRODUCED: "❌ not reproduced at this preset", NOT_RUN: "– not run"}


def mark(claim) -> str:
    """The claim's verdict mark, with ", at the criterion" where its interval reaches both sides of the criterion
    (:func:`compgen.analysis.claims.category`), as the results page words it."""
    return MARKS[claim.verdict] + (", at the criterion" if category(claim) == AT_CRITERION else "")


def markdown_table(claims, link=True, extra=None) -> str:
    """A markdown table of claims: figure, verdict, claim, paper, ours, criterion, seeds (the verdict second, so a
    table wider than the page shows it without scrolling). ``extra`` (``(title, cells)``, a cell per claim) adds a
    column after the verdict."""
    extra_title, cells = extra if extra else (None, None)
    extra_head, extra_rule = (f" {extra_title} |", "---|") if extra else ("", "")
    lines = [
        f"| figure | verdict |{extra_head} the paper's claim | paper | ours | criterion | seeds |",
        f"|---|---|{extra_rule}---|---|---|---|---|",
    ]
    for i, c in enumerate(claims):
        figure = f"[{c.figure}]({c.anchor})" if link and c.anchor else c.figure
        seeds = ", ".join(map(str, c.seeds)) or "–"
        column = f" {cells[i]} |" if extra else ""
        lines.append(f"| {figure} | {mark(c)} |{column} {c.claim} | {c.paper} | {c.ours} | {c.criterion} | {seeds} |")
    return "\n".join(lines)
