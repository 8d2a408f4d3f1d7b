"""Figures and claims of the in-context chapter (beyond the paper): three in-context learners beside the paper's
four models on the hyperteacher tasks and on the compositional-goals world."""

from __future__ import annotations

import numpy as np

from compgen import models
from compgen.analysis import claims as C
from compgen.experiments import incontext as icl
from compgen.experiments.fewshot import HNETS, MODEL_LABELS, MODELS
from compgen.figures import (
    SPLIT_GROUPS,
    SPLITS,
    FigureResult,
    accuracy_bars,
    caption,
    final,
    joined,
    mean_std,
    plots,
)
from compgen.notebook import Runs

SECTION = "incontext"
LABELS = {**MODEL_LABELS, **icl.MODEL_LABELS}
LEARNERS = icl.LEARNERS
LEAD = 5.0
WORLDS = {
    "hyperteacher": ("comparison", "fig3b", "accuracy", 12.5, "chance"),
    "goals": ("goals", "fig4ef", "acc", 100 / 6, "uniform guess (1 of 6 actions)"),
}
BOTTLENECK = C.ClaimSpec(  # {environment}: a key of WORLDS, {figure}: its figure
    SECTION,
    "in-context ({environment})",
    "the bottlenecked in-context learner (task code + hypernetwork) generalises to new combinations better than "
    "the plain transformer (Kobayashi et al. 2024; not a claim of the paper)",
    f"OOD accuracy ≥ {LEAD:g} points above the transformer's under compositional support",
    anchor="#incontext-{figure}",
)


def _pool(runs: Runs, paper: Runs, environment):
    """{(model, split): (config, output)} of the in-context learners and the paper's models on one world."""
    figure, paper_figure, *_ = WORLDS[environment]
    out = {}
    for source, fig_name in ((runs, figure), (paper, paper_figure)):
        if source is None:
            continue
        for c in source.configs(fig_name):
            if source.output(c) is not None:
                out[(c.model, c.split)] = (c, source.output(c))
    return out


def _accuracy(cfg, output, environment, set_name="ood"):
    return final(output, WORLDS[environment][2], cfg.eval_set_names().index(set_name), 100)


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


def _claims(runs: Runs, environment):
    pool = _pool(runs, None, environment)
    check, ours, seeds = None, "–", ()
    if ("bottleneck", "random") in pool and ("transformer", "random") in pool:
        (cb, ob), (ct, ot) = pool[("bottleneck", "random")], pool[("transformer", "random")]
        b, t = _accuracy(cb, ob, environment), _accuracy(ct, ot, environment)
        check = C.paired(b, t, LEAD)
        seeds = cb.seeds
        ours = f"{b.mean():.1f} vs {t.mean():.1f} %: {C.describe_difference(check, ' pts', 1)}"
    return [
        BOTTLENECK.judge(check, ours, seeds, pooled=runs.pooled, environment=environment, figure=WORLDS[environment][0])
    ]


def comparison(runs: Runs, paper: Runs, environment="hyperteacher") -> FigureResult:
    """OOD accuracy of the in-context learners beside the paper's four models, both splits, one world."""
    pool = _pool(runs, paper, environment)
    order = [m for m in (*MODELS, *LEARNERS) if (m, "random") in pool]
    values = [[_accuracy(*pool[(m, s)], environment) for s in SPLITS] for m in order]
    _, _, _, chance, chance_label = WORLDS[environment]
    fig = accuracy_bars(SPLIT_GROUPS, [LABELS[m] for m in order], values, chance, chance_label)
    lines = [
        "| model | task inference | parameters | outer steps | test acc. (compositional) | OOD acc. (compositional) "
        "| gap | OOD acc. (non-comp.) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for m, (comp, noncomp) in zip(order, values):
        c, out = pool[(m, "random")]
        test = _accuracy(c, out, environment, "test")
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
        _claims(runs, environment),
    )


def decodability(runs: Runs, paper: Runs, environment="hyperteacher") -> FigureResult:
    """R² of decoding the task latent from each learner's task representation (fit on test, scored on OOD)."""
    pool = _pool(runs, paper, environment)
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
    figure, _, key, chance, _ = WORLDS[environment]
    cfgs = [c for c in runs.configs(figure) if runs.output(c) is not None]
    data = {}
    for c in cfgs:
        out, names = runs.output(c), c.eval_set_names()
        data[f"{LABELS[c.model]}, {c.split.replace('_', '-')}"] = (
            out["eval_steps"],
            {s: 100 * np.asarray(out[f"eval/{key}"])[:, :, names.index(s)] for s in ("test", "ood")},
        )
    fig = plots.accuracy_curves(data, chance=chance)
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


def claims(runs: Runs) -> list:
    return [*_claims(runs, "hyperteacher"), *_claims(runs, "goals")]
