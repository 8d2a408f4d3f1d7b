"""Every claim on one axis: a forest plot of where each claim's mean difference stands against its criterion.

One row per claim: its position in units of its criterion (:meth:`compgen.analysis.claims.Check.standing`: 0 no
difference, 1 the criterion) with two standard errors either side, coloured by its category
(:func:`compgen.analysis.claims.category`), and a small mark per seed set. Drawn as HTML, one small inline SVG per
row, so that the claims' wording wraps like text at any width: beside the axis on a wide page, above it on a phone.
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass

from compgen.analysis import claims as C

AXIS = (-2.0, 4.5)  # the drawn range in criterion units; a position beyond is drawn at the edge with its value
TICKS = (-2, -1, 0, 1, 2, 3, 4)
COLOURS = {C.HOLDS_CLEARLY: "#1a7f37", C.AT_CRITERION: "#9a6700", C.FAILS_CLEARLY: "#cf222e", C.NOT_RUN: "#6e7781"}
SET_MARKS = ("○", "□", "△", "◇")  # a seed set's mark, in the order the sets are given


@dataclass(frozen=True)
class Row:
    """One claim's row: ``claim`` places and colours it (pooled over the seed sets where there are several),
    ``sets`` are ``(label, Claim or None)`` per seed set, each drawn as a small mark; ``link`` its figure's page."""

    claim: C.Claim
    sets: tuple = ()
    link: str = ""


STYLE = """<style>
.forest { font-size: 0.85em; margin: 0.6em 0 1.4em; }
.forest-row { display: grid; grid-template-columns: minmax(0, 9fr) minmax(0, 8fr) minmax(0, 3fr);
  column-gap: 0.8em; align-items: center; border-top: 1px solid #eaeef2; padding: 0.1em 0; }
.forest-row.forest-head { border-top: none; color: #57606a; }
.forest-group { font-weight: bold; margin-top: 0.6em; }
.forest svg { display: block; width: 100%; height: 26px; overflow: visible; }
.forest .forest-axis svg { height: 30px; }
.forest-verdict { font-weight: bold; }
.forest-legend { color: #57606a; margin-bottom: 0.3em; }
@media (max-width: 700px) {
  .forest-row { grid-template-columns: minmax(0, 2fr) minmax(0, 1fr); }
  .forest-row > svg, .forest-row > .forest-axis { grid-column: 1 / -1; grid-row: 2; }
}
</style>"""


def _x(value: float) -> float:
    """The per cent of the bar's width at which ``value`` (criterion units) is drawn, clipped to the axis."""
    lo, hi = AXIS
    return 100 * (min(max(value, lo), hi) - lo) / (hi - lo)


def _guides() -> str:
    return (
        f'<line x1="{_x(0)}%" x2="{_x(0)}%" y1="0" y2="100%" stroke="#8c959f" stroke-dasharray="3 3"/>'
        f'<line x1="{_x(1)}%" x2="{_x(1)}%" y1="0" y2="100%" stroke="#24292f" stroke-width="1.5"/>'
    )


def _beyond(value: float, y: int, colour: str) -> str:
    """An arrow at the axis' edge with the value, for a position outside :data:`AXIS`; "" inside."""
    lo, hi = AXIS
    if lo <= value <= hi:
        return ""
    right = value > hi
    anchor, arrow, dx = ("end", f"{value:.1f} →", -8) if right else ("start", f"← {value:.1f}", 8)
    x = _x(hi) if right else _x(lo)
    return f'<text x="{x}%" dx="{dx}" y="{y + 4}" text-anchor="{anchor}" font-size="11" fill="{colour}">{arrow}</text>'


def _describe(claim: C.Claim, label: str) -> str:
    standing = claim.details.get("standing")
    if claim.verdict == C.NOT_RUN or standing is None or not math.isfinite(standing.position):
        return f"{label}: {C.verdict_words(claim)}"
    spread = "" if standing.low == standing.high else f" (interval {standing.low:.2f} to {standing.high:.2f})"
    return f"{label}: {standing.position:.2f}{spread}, {C.verdict_words(claim)}"


def _bar(row: Row, pooled_label: str) -> str:
    """The row's SVG: guides at 0 and 1, the claim's interval and point, a mark per seed set below."""
    claim, colour = row.claim, COLOURS[C.category(row.claim)]
    described = [_describe(claim, pooled_label)] + [_describe(c, label) for label, c in row.sets if c is not None]
    parts = [_guides()]
    standing = claim.details.get("standing")
    if claim.verdict != C.NOT_RUN and standing is not None and math.isfinite(standing.position):
        if standing.high > standing.low:
            parts.append(
                f'<line x1="{_x(standing.low)}%" x2="{_x(standing.high)}%" y1="9" y2="9" stroke="{colour}" '
                'stroke-width="2.5"/>'
            )
        parts.append(f'<circle cx="{_x(standing.position)}%" cy="9" r="5" fill="{colour}"/>')
        parts.append(_beyond(standing.position, 9, colour))
        for i, (_, c) in enumerate(row.sets):
            s = c.details.get("standing") if c is not None and c.verdict != C.NOT_RUN else None
            if s is not None and math.isfinite(s.position):
                mark = SET_MARKS[i % len(SET_MARKS)]
                parts.append(
                    f'<text x="{_x(s.position)}%" y="23" text-anchor="middle" font-size="10" '
                    f'fill="#57606a">{mark}</text>'
                )
    else:
        parts.append(f'<text x="{_x(1)}%" dx="6" y="13" font-size="11" fill="{colour}">not run</text>')
    text = html.escape("; ".join(described))
    return f'<svg role="img" aria-label="{text}"><title>{text}</title>{"".join(parts)}</svg>'


def _axis() -> str:
    ticks = "".join(
        f'<line x1="{_x(t)}%" x2="{_x(t)}%" y1="20" y2="26" stroke="#57606a"/>'
        f'<text x="{_x(t)}%" y="15" text-anchor="middle" font-size="11" fill="#57606a">{t}</text>'
        for t in TICKS
    )
    return f'<div class="forest-axis"><svg aria-hidden="true">{ticks}</svg></div>'


def _label(row: Row) -> str:
    claim = row.claim
    figure = html.escape(claim.figure)
    if row.link:
        figure = f'<a href="{html.escape(row.link)}">{figure}</a>'
    return f"<div>{figure} · {html.escape(claim.claim, quote=False)}</div>"


def legend(set_labels, pooled_label: str) -> str:
    """What the plot's marks and colours mean, in words."""
    text = lambda words: html.escape(words, quote=False)
    marks = ", ".join(f"{SET_MARKS[i % len(SET_MARKS)]} {text(label)}" for i, label in enumerate(set_labels))
    colours = ", ".join(
        f'<span style="color: {COLOURS[k]}; font-weight: bold">●</span> {k}' for k in C.CATEGORIES if k != C.NOT_RUN
    )
    return (
        f'<div class="forest-legend">Each claim\'s mean difference in units of its criterion (0 no difference, '
        f"1 the criterion, the solid line; a claim without a margin has its level at 1): ● {text(pooled_label)} "
        f"with two standard errors either side; {marks}. {colours}.</div>"
    )


def plot(groups, set_labels=(), pooled_label="the book's seeds", alt="") -> str:
    """The forest plot as one HTML block (no blank line, so that markdown keeps it whole): ``groups`` are
    ``(title, [Row])`` in order, ``set_labels`` the seed sets' labels in the order of each row's ``sets``,
    ``pooled_label`` what the big point and its interval are, ``alt`` the plot in one sentence for screen readers."""
    body = [legend(set_labels, pooled_label)]
    body.append(f'<div class="forest-row forest-head"><div>claim</div>{_axis()}<div>verdict</div></div>')
    for title, rows in groups:
        if not rows:
            continue
        body.append(f'<div class="forest-group">{html.escape(title, quote=False)}</div>')
        for row in rows:
            colour = COLOURS[C.category(row.claim)]
            verdict = f'<div class="forest-verdict" style="color: {colour}">{C.verdict_words(row.claim)}</div>'
            body.append(f'<div class="forest-row">{_label(row)}{_bar(row, pooled_label)}{verdict}</div>')
    return f'{STYLE}<div class="forest" role="figure" aria-label="{html.escape(alt)}">{"".join(body)}</div>'
