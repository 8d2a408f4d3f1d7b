"""A learner compared with the paper's (:func:`compgen.analysis.compare.compare`), as the book shows it: what each
learner costs, the comparison's figure with its claims, a table and a sentence."""

from __future__ import annotations

import dataclasses

from compgen import catalog, models
from compgen.analysis.compare import Comparison
from compgen.figures import FigureResult, goals, hyperteacher, preferences, verdicts
from compgen.section import make_config

# How each comparison is drawn: {section: {figure: draw(runs)}}, from the chapters' figure modules (a test holds that
# it draws every comparison of compgen.analysis.compare.compared()).
FIGURES = {m.A.SECTION: m.COMPARISON_FIGURES for m in (hyperteacher, preferences, goals)}


def cost_table(learner: str, section: str, preset: str, **overrides) -> str:
    """Markdown: the size, meta-parameters and FLOPs per outer step of the paper's learners and of ``learner`` (with
    ``overrides``) at ``preset``, derived from their code (:func:`compgen.models.param_count`, the section's
    ``flops_per_step``)."""
    sec = catalog.get(section)
    rows = [(m, make_config(sec, preset, m)) for m in sec.models]
    rows.append((learner, make_config(sec, preset, learner, **overrides)))
    lines = ["| learner | hidden | meta-parameters | MFLOP per outer step |", "|---|---|---|---|"]
    for model, cfg in rows:
        lines.append(
            f"| {models.label(model)} | {cfg.num_hidden} × {cfg.hidden} | {models.param_count(cfg):,} | "
            f"{sec.flops_per_step(cfg) / 1e6:,.0f} |"
        )
    return "\n".join(lines)


def table(comparison: Comparison) -> str:
    """The learner's claims, then the paper's hypernetworks', as a markdown table (each claim names its learner)."""
    return verdicts.markdown_table([*comparison.claims, *comparison.reference], link=False)


def result(comparison: Comparison) -> FigureResult:
    """The chapter's figure of the comparison's runs (the learner beside the paper's), with the comparison's claims."""
    drawn = FIGURES[comparison.section][comparison.figure](comparison.runs)
    return dataclasses.replace(drawn, claims=[*comparison.claims, *comparison.reference])


def summary(comparison: Comparison) -> str:
    """One sentence: how many of the learner's claims hold, and which, against the paper's hypernetworks'."""
    held = [c for c in comparison.claims if c.holds]
    reference = sum(c.holds for c in comparison.reference)
    which = "; ".join(f"{c.figure}: {c.claim.split(': ', 1)[1]}" for c in held) or "none"
    return (
        f"**{models.label(comparison.learner)}** at `{comparison.preset}`: {len(held)} of {len(comparison.claims)} "
        f"claims hold ({which}); the paper's hypernetworks, on the same runs: {reference} of "
        f"{len(comparison.reference)}."
    )
