"""Where each claim appears: a chapter's claims that do not hold clearly at quick, along the scale bridge.

:func:`where_claims_appear` draws, for each such claim of a chapter (:func:`compgen.analysis.scale.unresolved`), its
effect in units of its criterion (the forest plot's axis: 0 no effect, 1 the criterion) against the fraction of the
paper's training compute on a log axis: a mark per seed, the mean with two standard errors, the criterion as a line,
the paper's own value at 1.0 where the paper reports one, the claim judged on the authors' code where it was run at
a point (an open square), and the fitted trend carried past the last point as a dashed, labelled extrapolation, never
as a result. :func:`path_table` words where each claim stands
(:func:`compgen.analysis.scale.words`). Computing lives in :mod:`compgen.analysis.scale`; this module draws.
"""

from __future__ import annotations

import math

import numpy as np

from compgen import bridge, catalog
from compgen.analysis import claims as C
from compgen.analysis import scale
from compgen.figures import FigureResult, plots

COLOURS = {C.HOLDS_CLEARLY: "#1b7837", C.AT_CRITERION: "#b8860b", C.FAILS_CLEARLY: "#b2182b", C.NOT_RUN: "#888888"}


def _panel(ax, title: str, points, paper_position=None, authors=()) -> None:
    """One claim's path on ``ax``: its judged points, the points still to come, the extrapolation, the paper and the
    authors' code at the points where it ran (``authors``)."""
    ax.axhline(1, color="k", lw=0.9)
    ax.axhline(0, color="grey", lw=0.7, ls="--")
    ax.set_xscale("log")
    _judged_points(ax, [p for p in points if p.judged])
    for p in points:
        if not p.judged and p.state != "complete":
            ax.axvline(p.fraction, color="grey", lw=0.6, ls=":")
            ax.annotate(p.label, (p.fraction, 0.9), xycoords=("data", "axes fraction"), xytext=(2, 0),
                        textcoords="offset points", fontsize=6, ha="left", va="top", color="grey")  # fmt: skip
    _extrapolation(ax, points)
    _authors_points(ax, authors)
    if paper_position is not None:
        ax.plot([1.0], [paper_position], "*", ms=11, color="#2166ac", label="the paper")
    if paper_position is not None or authors:
        ax.legend(fontsize=7, loc="lower right")
    ax.set_xlim(min([p.fraction for p in points] + [1.0]) / 2, 2.0)
    ax.margins(y=0.12)
    ax.set_title(title, fontsize=8)
    ax.set_xlabel("fraction of the paper's training compute (FLOPs)", fontsize=8)
    ax.tick_params(labelsize=7)


def _judged_points(ax, judged) -> None:
    """A dot per seed, the mean with two standard errors coloured by category, and a line through the means."""
    for p in judged:
        colour = COLOURS[C.category(scale._as_claim(p))]
        if p.positions:
            ax.plot([p.fraction] * len(p.positions), p.positions, "o", ms=3, color=colour, alpha=0.45, mec="none")
        s = p.standing
        ax.errorbar(p.fraction, s.position, yerr=[[s.position - s.low], [s.high - s.position]], fmt="D", ms=5,
                    color=colour, capsize=3, lw=1.2)  # fmt: skip
        ax.annotate(p.label, (p.fraction, s.high), textcoords="offset points", xytext=(0, 4), ha="center", fontsize=7)
    if judged:
        ax.plot([p.fraction for p in judged], [p.standing.position for p in judged], color="k", lw=0.6, alpha=0.5)


AUTHORS_OFFSET = 1.25  # the authors' point drawn this factor right of ours at the same multiple, so both show


def _authors_points(ax, authors) -> None:
    """The claim on the authors' code: an open square with two standard errors per point, coloured by category."""
    if authors:  # the legend's mark in black: the colour is the point's category
        ax.plot([], [], "s", ms=6, mfc="white", color="k", label="the authors' code")
    for p in authors:
        colour = COLOURS[C.category(scale._as_claim(p))]
        at = p.fraction * AUTHORS_OFFSET
        if p.positions:
            ax.plot([at] * len(p.positions), p.positions, "s", ms=3, mfc="none", color=colour, alpha=0.6)
        s = p.standing
        ax.errorbar(at, s.position, yerr=[[s.position - s.low], [s.high - s.position]], fmt="s", ms=6, mfc="white",
                    color=colour, capsize=3, lw=1.0)  # fmt: skip


def _extrapolation(ax, points) -> None:
    """The fitted trend carried from the last judged point to the criterion, dashed and labelled, where it rises
    (:func:`compgen.analysis.scale.crossing`) and reaches it before the paper's compute."""
    reach = scale.crossing(points)
    if reach is None:
        return
    last = [p for p in points if p.judged][-1]
    at = last.fraction * reach / last.multiple
    if at <= 1:
        ax.plot([last.fraction, at], [last.standing.position, 1], color="#555555", ls="--", lw=1)
        ax.annotate(f"extrapolated: ×{reach:,.0f}", (at, 1), textcoords="offset points", xytext=(-4, -10),
                    ha="right", fontsize=7, color="#555555")  # fmt: skip


def where_claims_appear(name: str, paths: dict, preset: str, seeds: tuple) -> FigureResult:
    """The chapter's figure of its claims along the bridge: ``paths`` is ``{claim id: ClaimPath}``
    (:func:`compgen.analysis.scale.chapter_paths`); ``preset`` and ``seeds`` name the ×1 point's runs."""
    if not paths:
        return FigureResult(
            notes="Every claim of this chapter holds clearly at quick: no point of the bridge is needed."
        )
    n = len(paths)
    cols = min(n, 2)
    rows = math.ceil(n / cols)
    fig, axes = plots.subplots(rows, cols, figsize=(3.6 * cols, 2.9 * rows), squeeze=False)
    for ax, path in zip(axes.flat, paths.values()):
        _panel(ax, _short(path.claim.claim), path.points, path.paper_position, path.authors)
    for ax in list(axes.flat)[n:]:
        ax.set_visible(False)
    for ax in axes[:, 0]:
        ax.set_ylabel("effect in units of the criterion", fontsize=8)
    fig.tight_layout()
    return FigureResult(figure=fig, caption=caption(name, paths, preset, seeds), table=path_table(paths))


def _short(claim: str, width: int = 48) -> str:
    words, lines, line = claim.split(), [], ""
    for word in words:
        if len(line) + len(word) + 1 > width and line:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}".strip()
    return "\n".join([*lines, line][:3])


def caption(name: str, paths: dict, preset: str, seeds: tuple) -> str:
    """What the figure shows, the points' states and what moved between quick and the paper."""
    sec = catalog.SECTIONS[name]
    some = next(iter(paths.values())).points
    states = ", ".join(f"{p.label} {p.state}" for p in some[1:])
    seeds_text = ", ".join(map(str, seeds)) if seeds else "none"
    trained = sorted({s for path in paths.values() for p in path.points[1:] for s in p.seeds})
    trained_text = f"seeds {', '.join(map(str, trained))}" if trained else "the book's seeds"
    authors = sorted({(p.label, p.seeds) for path in paths.values() for p in path.authors})
    authors_text = "".join(
        f" An open square is the claim judged on the authors' code (`run_theory.py` of smonsays/modular-hyperteacher) "
        f"at {label.split(',')[0]}, seeds {', '.join(map(str, s))}, at the nearest world it expresses (drawn just "
        "right of our point)."
        for label, s in authors
    )
    return (
        f"Where each claim of the chapter that does not hold clearly at quick appears along the path from quick to the "
        f"paper's configuration ({sec.name}): its effect in units of its criterion (0 no effect, 1 the criterion, as "
        f"in the forest plot) against the fraction of the paper's training compute; a dot per seed, the mean with two "
        f"standard errors (green: holds clearly, amber: at the criterion, red: clearly not reproduced), the paper's "
        f"own value where it reports one (★), and the fitted trend carried to the criterion as a dashed "
        f"extrapolation, never a result; a dotted line marks a point whose runs are not complete. ×1 is preset "
        f"`{preset}` on seeds {seeds_text}; the bridge's points train {trained_text} ({states}).{authors_text} "
        f"{rules(name)}"
    )


def rules(name: str) -> str:
    """The fields that move along the chapter's path and their rules, in one sentence (:mod:`compgen.bridge`)."""
    sec = catalog.SECTIONS[name]
    moved, held = {}, set()
    for figure in sec.figures("quick"):
        for q in bridge.figure_configs(sec, figure, "quick"):
            for field, rule in bridge.moving(sec, q, bridge.paper_end(sec, q)).items():
                (held.add(field) if rule == "held" else moved.setdefault(rule, set()).add(field))
    parts = [f"{rule}: {', '.join(sorted(fields))}" for rule, fields in sorted(moved.items())]
    why = bridge.HELD.get(name, ((), ""))[1]
    held_text = f"; held at quick's value until the paper's end: {', '.join(sorted(held))}" if held else ""
    return (
        "Between the two ends each field moves with one parameter t, solved per config for its multiple of the quick "
        f"compute ({'; '.join(parts)}{held_text}"
        + (f", because {why}" if why else "")
        + "). A point is the paper's configuration only at 1.0."
    )


def path_table(paths: dict) -> str:
    """A markdown table: each claim, its standing at each point (and on the authors' code where it ran at one), and
    where it stands along the path in words."""
    some = next(iter(paths.values())).points
    authors = sorted({p.label for path in paths.values() for p in path.authors})
    labels = [p.label for p in some] + authors
    head = "| claim | " + " | ".join(labels) + " | along the path |"
    lines = [head, "|---|" + "---:|" * (len(some) + len(authors)) + "---|"]
    for path in paths.values():
        theirs = {p.label: p for p in path.authors}
        cells = [_cell(p) for p in path.points] + [_cell(theirs[a]) if a in theirs else "–" for a in authors]
        lines.append(f"| {path.claim.claim} | {' | '.join(cells)} | {scale.words(path.points)} |")
    return "\n".join(lines)


def _cell(point) -> str:
    if not point.judged:
        return point.state if point.state != "complete" else "–"
    s = point.standing
    mark = "✓" if point.verdict == C.HOLDS else "✗"
    spread = f" ± {(s.high - s.position):.2f}" if np.isfinite(s.high) and s.high > s.position else ""
    return f"{mark} {s.position:.2f}{spread}"


def chapter(
    name: str, runs=None, book: str = ".", folder: str = "records/bridge", twins: str = scale.TWINS
) -> FigureResult:
    """The chapter's figure of where its claims appear (:func:`where_claims_appear`), computed from the committed
    records: the recorded seed sets under ``book`` (which claims do not hold clearly), the bridge's ledger and state
    under ``folder``, the authors' code at bridge points under ``twins``; ×1 on ``runs`` where they are at quick,
    else on the recorded sets pooled."""
    from pathlib import Path

    from compgen import ledger

    sets = scale.load_seed_sets(Path(book))
    ledger_path = Path(folder) / ledger.LEDGER
    works = ledger.read(ledger_path) if ledger_path.exists() else []
    paths = scale.chapter_paths(name, runs, sets, works, folder, twins)
    at_quick = runs is not None and runs.preset == "quick"
    seeds = tuple(runs.seeds) if at_quick else tuple(s for r in sets for s in r.seeds)
    return where_claims_appear(name, paths, "quick", seeds)
