"""The claims of the compositional-preferences chapter (paper §4.2), judged from its runs: Fig. 4C, Fig. 4B and
Fig. A8, and the comparison any learner in the hypernetworks' place is judged by (:mod:`compgen.analysis.compare`)."""

from __future__ import annotations

import numpy as np

from compgen.analysis import claims as C
from compgen.analysis.chapter import Chapter, Twin, model_cell, modules_hot_cell, steps_cell, support_cell
from compgen.analysis.values import final, size_grid, versus_monolithic
from compgen.experiments.fewshot import HNETS, MODEL_LABELS
from compgen.models import label as learner_label
from compgen.runs import Runs

SECTION = "preferences"
RELATIVE = 0.10  # a claimed difference in loss must reach 10 % of the compared-to loss
OVER_MONOLITHIC = C.Lead(RELATIVE, higher=False, relative=True, digits=3, unit="")  # Fig. 4C: OOD loss

FIG4C_LEAD = C.ClaimSpec(
    SECTION,
    "Fig. 4C",
    "{model}: lower OOD loss than ANIL and MAML under compositional support",
    f"OOD loss ≥ {RELATIVE:.0%} below the better of ANIL/MAML, equal outer steps and tasks",
    paper="qualitative",
    anchor="#fig4c",
    id="fig4c-lead/{learner}",
    reads=("fig4c",),
)
FIG4C_NONCOMP = C.ClaimSpec(
    SECTION,
    "Fig. 4C",
    "{model}: holding out a module raises the OOD loss",
    f"non-compositional OOD loss ≥ {RELATIVE:.0%} above the compositional one",
    paper="qualitative",
    anchor="#fig4c",
    id="fig4c-noncompositional/{learner}",
    reads=("fig4c",),
)
FIG4B = C.ClaimSpec(
    SECTION,
    "Fig. 4B",
    "{model}: disconnected support gives a clearly higher OOD loss than connected support",
    f"disconnected OOD loss ≥ {RELATIVE:.0%} above connected",
    paper="qualitative",
    anchor="#fig4b",
    id="fig4b/{learner}",
    reads=("fig4b",),
)
FIGA8 = C.ClaimSpec(
    SECTION,
    "Fig. A8",
    "{model}: overparameterisation does no harm",
    f"the largest student's OOD loss is not {RELATIVE:.0%} above the smallest's",
    paper="no degradation",
    anchor="#figa8",
    on="means",
    id="figa8/{learner}",
    reads=("figa8",),
)


def loss(cfg, output, set_name="ood"):
    """The loss on evaluation set ``set_name`` at the last evaluation, per seed: (seeds,)."""
    return final(output, "loss", cfg.eval_set_names().index(set_name))


def per_seed(runs, figure, model, split, set_name="ood"):
    """``(config, loss per seed)`` of ``model`` on ``split`` in ``figure``, or ``None`` where it is not stored."""
    cfg = runs.one(figure, model=model, split=split)
    return None if cfg is None or runs.output(cfg) is None else (cfg, loss(cfg, runs.output(cfg), set_name))


def fig4c_claims(runs: Runs, learners=HNETS):
    found = []
    for m in learners:
        versus = versus_monolithic(runs, "fig4c", m, loss, higher=False)
        check_c = check_n = None
        ours_c = ours_n = "–"
        seeds = () if versus is None else versus.seeds
        if versus is not None and "random" in versus.mono:
            comp, best = versus.hnet["random"], versus.mono["random"]
            check_c, ours_c = OVER_MONOLITHIC.check(comp, best)
        if versus is not None and "non_compositional" in versus.hnet:
            comp, noncomp = versus.hnet["random"], versus.hnet["non_compositional"]
            check_n = C.paired(noncomp, comp, RELATIVE, relative=True)
            ours_n = (
                f"{noncomp.mean():.3f} vs {comp.mean():.3f} ({noncomp.mean() / comp.mean():.2f}x): "
                f"{C.describe_difference(check_n, digits=3)}"
            )
        found.append(FIG4C_LEAD.judge(check_c, ours_c, seeds, pooled=runs.pooled, model=learner_label(m), learner=m))
        found.append(FIG4C_NONCOMP.judge(check_n, ours_n, seeds, pooled=runs.pooled, model=learner_label(m), learner=m))
    return found


def fig4b_claims(runs: Runs):
    found = []
    for m in HNETS:
        if not runs.configs("fig4b", model=m):
            continue  # the preset does not run this model in Fig. 4B
        conn, disc = per_seed(runs, "fig4b", m, "connected"), per_seed(runs, "fig4b", m, "disconnected")
        check, ours, seeds = None, "–", ()
        if conn is not None and disc is not None:
            check = C.paired(disc[1], conn[1], RELATIVE, relative=True)
            ours = f"{disc[1].mean():.3f} vs {conn[1].mean():.3f}: {C.describe_difference(check, digits=3)}"
            seeds = conn[0].seeds
        found.append(FIG4B.judge(check, ours, seeds, pooled=runs.pooled, model=MODEL_LABELS[m], learner=m))
    return found


def figa8_claims(runs: Runs):
    found = []
    for m in HNETS:
        cfgs, hidden, templates, grid = size_grid(runs, "figa8", m, loss, best=min)
        if not cfgs or len(cfgs) < len(runs.configs("figa8", model=m)):  # a sweep with cells missing: not judged
            continue
        smallest, largest = grid[0, 0], grid[-1, -1]
        check = C.lower(np.array([largest]), np.array([smallest * (1 + RELATIVE)]))
        ours = (
            f"{largest:.3f} ({hidden[-1]} wide, T={templates[-1]}) vs {smallest:.3f} ({hidden[0]} wide, "
            f"T={templates[0]})"
        )
        found.append(FIGA8.judge(check, ours, cfgs[0].seeds, pooled=runs.pooled, model=MODEL_LABELS[m], learner=m))
    return found


def claims(runs: Runs) -> list:
    """Every claim of the chapter, computed from ``runs`` (stored runs may be missing: "not run")."""
    return [*fig4c_claims(runs), *fig4b_claims(runs), *figa8_claims(runs)]


# The reference's preference world is the paper's 7x7 layout with a full-grid observation and one query demonstration
# per evaluation task (tools/twin_grid_worlds.md gives the reading of both codes).
TWIN_WORLD = dict(layout="paper", observation="grid", eval_shots_query=1)

CHAPTER = Chapter(
    SECTION,
    "Compositional preferences (§4.2)",
    claims,
    (FIG4C_LEAD, FIG4C_NONCOMP, FIG4B, FIGA8),
    comparisons={"fig4c": fig4c_claims},  # any learner in the hypernetworks' place (compgen.analysis.compare)
    twin=Twin(
        figures=("fig4c", "fig4b", "figa8"),
        rows={
            "model": model_cell,
            "support": support_cell,
            "M, K": modules_hot_cell,
            "hidden": lambda f: str(f["hidden"]),
            "steps × tasks": steps_cell,
        },
        headlines={"OOD loss": ("loss", "ood", 1)},
        matched={"quick": {f: TWIN_WORLD for f in ("fig4b", "fig4c", "figa8")}},
    ),
)
