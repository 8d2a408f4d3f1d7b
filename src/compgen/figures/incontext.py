"""Figures of the in-context chapter (beyond the paper): three in-context learners beside the paper's four models on
the hyperteacher tasks and on the compositional-goals world; their claims are judged by
:mod:`compgen.analysis.incontext`."""

from __future__ import annotations

import numpy as np

from compgen import models
from compgen.analysis import incontext as A
from compgen.experiments import incontext as icl
from compgen.experiments.fewshot import HNETS, MODEL_LABELS, MODELS
from compgen.figures import (
    SPLIT_GROUPS,
    SPLITS,
    FigureResult,
    accuracy_bars,
    caption,
    eval_curves,
    final,
    joined,
    mean_std,
    plots,
)
from compgen.runs import Runs

LABELS = {**MODEL_LABELS, **icl.MODEL_LABELS}
LEARNERS = icl.LEARNERS


def _caption(runs, cfgs, what, environment):
    cfgs = [c for c in cfgs if c is not None]
    if environment == "goals":
        details = (
            "goals world",
            f"{joined(c.meta_batch for c in cfgs)} tasks/step",
            f"demonstrations padded to {joined(c.demo_length for c in cfgs)} steps",
        )
    else:
        details = (
            f"M = {joined(c.n_modules for c in cfgs)}, K = {joined(c.max_hot for c in cfgs)}",
            f"{joined(c.meta_batch for c in cfgs)} tasks/step",
        )
    return caption(what, runs.preset, cfgs, LABELS, details)


def comparison(runs: Runs, paper: Runs, environment="hyperteacher") -> FigureResult:
    """OOD accuracy of the in-context learners beside the paper's four models, both splits, one world."""
    pool = A.runs_by_learner(runs, paper, environment)
    order = [m for m in (*MODELS, *LEARNERS) if (m, "random") in pool]
    values = [[A.accuracy(*pool[(m, s)], environment) for s in SPLITS] for m in order]
    _, _, _, chance, chance_label = A.WORLDS[environment]
    fig = accuracy_bars(SPLIT_GROUPS, [LABELS[m] for m in order], values, chance, chance_label)
    lines = [
        "| model | task inference | parameters | outer steps | test acc. (compositional) | OOD acc. (compositional) "
        "| gap | OOD acc. (non-comp.) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for m, (comp, noncomp) in zip(order, values):
        c, out = pool[(m, "random")]
        test = A.accuracy(c, out, environment, "test")
        lines.append(
            f"| {LABELS[m]} | {'in context' if m in LEARNERS else 'inner loop'} | {models.param_count(c):,} | "
            f"{c.outer_steps:,} | {mean_std(test, 1)} | {mean_std(comp, 1)} | {mean_std(test - comp, 1)} | "
            f"{mean_std(noncomp, 1)} |"
        )
    cfgs = [pool[k][0] for k in pool]
    return FigureResult(
        fig,
        _caption(
            runs,
            cfgs,
            f"OOD accuracy of inner-loop and in-context learners on the "
            f"{environment} tasks; bars are seed means, dots single seeds",
            environment,
        ),
        "Accuracy in % (mean ± std over seeds); *gap* = test − OOD under compositional support.\n\n" + "\n".join(lines),
        A.CHAPTER.shown_at(runs, f"incontext-{A.WORLDS[environment][0]}"),
    )


def decodability(runs: Runs, paper: Runs, environment="hyperteacher") -> FigureResult:
    """R² of decoding the task latent from each learner's task representation (fit on test, scored on OOD)."""
    pool = A.runs_by_learner(runs, paper, environment)
    order = [m for m in (*HNETS, *LEARNERS) if (m, "random") in pool and "eval/r2_ood_pooled" in pool[(m, "random")][1]]
    values = [[final(pool[(m, s)][1], "r2_ood_pooled") for s in SPLITS] for m in order]
    defined = [x for row in values for v in row for x in np.ravel(v) if np.isfinite(x)]  # NaN: R² undefined
    low = min(-0.5, min(defined, default=0.0) - 0.05)
    fig = plots.grouped_bars(
        ["compositional", "non-compositional"],
        [LABELS[m] for m in order],
        values,
        "R² of decoding the latent on OOD tasks",
        ylim=(low, 1.05),
        reference=0.0,
    )
    c0 = next(pool[(m, "random")][0] for m in LEARNERS if (m, "random") in pool)
    dims = {
        "hnet_linear": "adapted embeddings + bias",
        "hnet_deepmlp": "adapted embeddings",
        "kv_memory": f"mean key and value ({2 * c0.d_model})",
        "transformer": f"mean support token ({c0.d_model})",
        "bottleneck": f"task code ({c0.code_dim})",
    }
    lines = [
        "| model | representation | R² OOD, compositional | R² OOD, non-compositional | R² test (fit), compositional |",
        "|---|---|---|---|---|",
    ]
    for m, (comp, noncomp) in zip(order, values):
        fit = final(pool[(m, "random")][1], "r2_test_pooled")
        lines.append(f"| {LABELS[m]} | {dims[m]} | {mean_std(comp, 2)} | {mean_std(noncomp, 2)} | {mean_std(fit, 2)} |")
    cfgs = [pool[(m, s)][0] for m in order for s in SPLITS]
    return FigureResult(
        fig,
        _caption(
            runs,
            cfgs,
            f"Linear decodability of the task latent on the {environment} tasks "
            "(ridge decoder fitted on in-distribution tasks, R² on OOD tasks, "
            "pooled over the latent's entries)",
            environment,
        ),
        "\n".join(lines),
    )


def curves(runs: Runs, environment="hyperteacher") -> FigureResult:
    """Test and OOD accuracy of the in-context learners during training."""
    figure, _, key, chance, _ = A.WORLDS[environment]
    cfgs = [c for c in runs.configs(figure) if runs.output(c) is not None]
    fig = plots.accuracy_curves(eval_curves(runs, cfgs, key, LABELS, 100), chance=chance)
    return FigureResult(
        fig,
        _caption(
            runs,
            cfgs,
            "Test and OOD accuracy of the in-context learners during training, "
            "mean over seeds with the seed range shaded",
            environment,
        ),
    )
