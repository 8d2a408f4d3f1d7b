"""Figures of the hyperteacher chapter (paper §4.1): the splits, Fig. 3B-F, Tables A2-A8 and Fig. A7; their claims are
judged by :mod:`compgen.analysis.hyperteacher`."""

from __future__ import annotations

import numpy as np

from compgen.analysis import hyperteacher as A
from compgen.experiments.fewshot import HNETS, MODEL_LABELS, MODELS
from compgen.figures import (
    SPLIT_GROUPS,
    FigureResult,
    FigureResults,
    accuracy_bars,
    caption,
    eval_curves,
    final,
    joined,
    learners_of,
    mean_std,
    plots,
    size_grid,
    size_heatmap,
)
from compgen.models import label as learner_label
from compgen.runs import Runs
from compgen.tasks import hyperteacher as ht
from compgen.tasks import support

CHANCE = 12.5  # % for 8 classes


def train_accuracy(output, window=100):
    """Query accuracy (%) on the training meta-batches, averaged over the last ``window`` steps: (seeds,)."""
    return 100 * np.asarray(output["steps/accuracy"])[:, -window:].mean(1)


def _caption(runs, cfgs, what):
    cfgs = [c for c in cfgs if c is not None]
    return caption(
        what,
        runs.preset,
        cfgs,
        {c.model: learner_label(c.model) for c in cfgs},
        (
            f"M = {joined(c.n_modules for c in cfgs)}, K = {joined(c.max_hot for c in cfgs)}",
            f"{joined(c.meta_batch for c in cfgs)} tasks/step",
        ),
    )


# --------------------------------------------------------------------------------------------- splits


def splits(runs: Runs) -> FigureResults:
    """The task universe (layer-0 x layer-1 combinations) of each split of Fig. 3B and Fig. 3C/D."""
    b0 = runs.configs("fig3b")[0]
    cd = runs.configs("fig3cd")[0] if runs.configs("fig3cd") else None
    grids = {}
    for split, cfg in (("random", b0), ("non_compositional", b0), ("connected", cd), ("disconnected", cd)):
        if cfg is None:
            continue
        k = cfg.max_hot
        train, ood, _ = ht.task_split(cfg.n_modules, k, split, cfg.frac_ood, cfg.seeds[0])
        s = len(ht.layer_combinations(cfg.n_modules, k))
        grid = np.zeros(s * s, int)
        grid[train], grid[ood] = 1, 2
        grids[f"{split} (M={cfg.n_modules}, K={k}): {len(train)} train / {len(ood)} OOD"] = grid.reshape(s, s)
    items = list(grids.items())
    labels = [support.mask_to_string(m) for m in ht.layer_combinations(b0.n_modules, b0.max_hot)]
    first = plots.task_split_grids(dict(items[:2]), labels)
    second = None
    if len(items) > 2:
        labels_cd = [support.mask_to_string(m) for m in ht.layer_combinations(cd.n_modules, 2)]
        second = plots.task_split_grids(dict(items[2:]), labels_cd)
    seeds = f"seed {b0.seeds[0]}"
    panels = (
        FigureResult(
            first,
            f"Task splits of Fig. 3B at M = {b0.n_modules}, K = {b0.max_hot} (experts numbered "
            f"from 0). Preset {runs.preset}, {seeds}.",
        ),
        FigureResult(
            second,
            f"Connected and disconnected support of Fig. 3C/D at M = {cd.n_modules}, K = 2. "
            f"Preset {runs.preset}, {seeds}.",
        )
        if second is not None
        else None,
    )
    return FigureResults(p for p in panels if p is not None)


# --------------------------------------------------------------------------------------------- Fig. 3B


def fig3b(runs: Runs) -> FigureResult:
    """Fig. 3B: OOD accuracy of the four learners under compositional and non-compositional support."""
    cfgs = runs.configs("fig3b")
    models = learners_of(runs, "fig3b")
    splits_ = ("random", "non_compositional")
    values = [
        [A.accuracy(c, runs.output(c)) for s in splits_ for c in [runs.one("fig3b", model=m, split=s)]] for m in models
    ]
    fig = accuracy_bars(SPLIT_GROUPS, [learner_label(m) for m in models], values, CHANCE)
    cell = (cfgs[0].n_modules, cfgs[0].max_hot)
    paper_cell = cell if cell in A.PAPER_TABLES else (8, 2)
    lines = [
        "| model | outer steps | OOD acc., compositional | OOD acc., non-compositional | test acc., compositional | "
        f"paper OOD, Table {A.PAPER_TABLE_NAMES[paper_cell]} (M={paper_cell[0]}, K={paper_cell[1]}) |",
        "|---|---|---|---|---|---|",
    ]
    for m, (comp, noncomp) in zip(models, values):
        c = runs.one("fig3b", model=m, split="random")
        lines.append(
            f"| {learner_label(m)} | {c.outer_steps:,} | {mean_std(comp, 1)} | {mean_std(noncomp, 1)} | "
            f"{mean_std(A.accuracy(c, runs.output(c), 'test'), 1)} | "
            f"{A.PAPER_TABLES[paper_cell]['ood'].get(m, '–')} |"
        )
    return FigureResult(
        fig,
        _caption(
            runs,
            cfgs,
            "Fig. 3B: OOD accuracy under compositional and non-compositional "
            "support; bars are seed means, dots single seeds, chance 12.5 %",
        ),
        "\n".join(lines),
        A.CHAPTER.shown_at(runs, "fig3b"),
    )


# --------------------------------------------------------------------------------------------- Fig. 3C/D


def fig3cd(runs: Runs) -> FigureResult:
    """Fig. 3C/D: R² of decoding the task code from the hypernetworks' adapted embeddings, per support."""
    values = A.r2_values(runs)
    splits_ = ("random", "non_compositional", "connected", "disconnected")
    b, cd = runs.configs("fig3b")[0], (runs.configs("fig3cd") or runs.configs("fig3b"))[0]
    groups = [
        f"compositional\n(M={b.n_modules}, K={b.max_hot})",
        f"non-compositional\n(M={b.n_modules}, K={b.max_hot})",
        f"connected\n(M={cd.n_modules}, K={cd.max_hot})",
        f"disconnected\n(M={cd.n_modules}, K={cd.max_hot})",
    ]
    series = [m for m in HNETS if any(values.get((m, s)) is not None for s in splits_)]
    data = [
        [values[(m, s)][1] if values.get((m, s)) is not None else np.array([np.nan]) for s in splits_] for m in series
    ]
    low = min(-0.5, np.nanmin(np.concatenate([np.ravel(v) for row in data for v in row])) - 0.05)
    fig = plots.grouped_bars(
        groups,
        [MODEL_LABELS[m] for m in series],
        data,
        "R² of decoding z on OOD tasks",
        ylim=(low, 1.05),
        reference=0.0,
    )
    lines = ["| hypernetwork | " + " | ".join(g.replace("\n", " ") for g in groups) + " |", "|---|" + "---|" * 4]
    for m, row in zip(series, data):
        lines.append(
            f"| {MODEL_LABELS[m]} | "
            + " | ".join("not run at this preset" if np.isnan(v).all() else mean_std(v, 2) for v in row)
            + " |"
        )
    cfgs = [c for (c, _) in (v for v in values.values() if v is not None)]
    return FigureResult(
        fig,
        _caption(
            runs,
            cfgs,
            "Fig. 3C/D: R² of a ridge decoder from the adapted embeddings to "
            "the task code, fitted on in-distribution tasks and scored on OOD "
            "tasks (pooled over the 2M code entries)",
        ),
        "\n".join(lines),
        A.CHAPTER.shown_at(runs, "fig3cd"),
    )


def fig3cd_diagnosis(runs: Runs) -> FigureResult:
    """What Fig. 3C/D's runs reach, per support (a table): train, test and OOD accuracy, the test − OOD gap, and
    the R² of the task code on the in-distribution tasks the decoder is fitted on beside its R² on OOD tasks."""
    lines = [
        "| hypernetwork | support | train acc. (%) | test acc. (%) | OOD acc. (%) | test − OOD (points) | "
        "R² test | R² OOD |",
        "|---|---|---|---|---|---|---|---|",
    ]
    cfgs = [c for c in runs.configs("fig3cd") if runs.output(c) is not None]
    for cfg in cfgs:
        out = runs.output(cfg)
        test, ood = A.accuracy(cfg, out, "test"), A.accuracy(cfg, out, "ood")
        cells = (train_accuracy(out), test, ood, test - ood)
        lines.append(
            f"| {MODEL_LABELS[cfg.model]} | {cfg.split} | "
            + " | ".join(mean_std(v, 1) for v in cells)
            + f" | {mean_std(final(out, 'r2_test_pooled'), 2)} | {mean_std(A.r2(out), 2)} |"
        )
    if not cfgs:
        lines.append("| – | not run at this preset | | | | | | |")
    return FigureResult(
        None,
        _caption(runs, cfgs, "Fig. 3C/D's runs: accuracy and R² of the task code on in-distribution and OOD tasks"),
        "\n".join(lines),
    )


# --------------------------------------------------------------------------------------------- Fig. 3E, Tables A2-A8


def table_rows(cfg, output):
    """{row: (seeds,) accuracy in %} for the rows of Tables A2-A8."""
    rows = {"train": train_accuracy(output)}
    rows.update({name: A.accuracy(cfg, output, name) for name in cfg.eval_set_names() if name != "valid"})
    return rows


def accuracy_table(configs, outputs) -> str:
    """A markdown table in the layout of Tables A2-A8: ours (mean ± std over seeds) beside the paper's."""
    by_model = {c.model: (c, o) for c, o in zip(configs, outputs)}
    cfg = configs[0]
    paper = A.PAPER_TABLES.get((cfg.n_modules, cfg.max_hot), {})
    order = [m for m in MODELS if m in by_model]
    lines = [
        "| accuracy (%) | " + " | ".join(f"{MODEL_LABELS[m]} (ours) | paper" for m in order) + " |",
        "|---|" + "---|---|" * len(order),
    ]
    for row in table_rows(*by_model[order[0]]):
        label = {"train": "Train", "test": "Test", "ood": "OOD"}.get(row, f"OOD (K={row[4:]})")
        cells = []
        for m in order:
            values = table_rows(*by_model[m])[row]
            ours = "n/a" if np.all(np.isnan(values)) else mean_std(values, 1)
            theirs = paper.get(row)
            cells.append(f"{ours} | {theirs[m]:.1f}" if theirs else f"{ours} | –")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def fig3e(runs: Runs) -> FigureResult:
    """Fig. 3E: OOD accuracy over (M, K) for the preset's models, with Tables A2-A8 laid out as the paper's."""
    cfgs = [c for c in runs.configs("fig3e") if runs.output(c) is not None]
    models = list(dict.fromkeys(c.model for c in cfgs))
    cells = list(dict.fromkeys((c.n_modules, c.max_hot) for c in cfgs))
    values = [
        [
            A.accuracy(c, runs.output(c))
            for cell in cells
            for c in cfgs
            if c.model == model and (c.n_modules, c.max_hot) == cell
        ]
        for model in models
    ]
    fig = accuracy_bars([f"M={m}, K={k}" for m, k in cells], [MODEL_LABELS[m] for m in models], values, CHANCE)
    tables = []
    for cell in cells:
        group = [c for c in cfgs if (c.n_modules, c.max_hot) == cell]
        tables.append(
            f"**M = {cell[0]}, K = {cell[1]}** (paper Table {A.PAPER_TABLE_NAMES.get(cell, '–')})\n\n"
            + accuracy_table(group, [runs.output(c) for c in group])
        )
    return FigureResult(
        fig,
        _caption(
            runs,
            cfgs,
            "Fig. 3E: OOD accuracy over the number of experts M and of active experts per layer K, random split",
        ),
        "\n\n".join(tables),
        A.CHAPTER.shown_at(runs, "fig3e"),
    )


# --------------------------------------------------------------------------------------------- Fig. 3F


def fig3f(runs: Runs) -> FigureResults:
    """Fig. 3F: OOD accuracy over the student's hidden width and T/M (best outer lr per cell), per hypernetwork."""
    found = []
    for model in HNETS:
        cfgs, hidden, ratios, grid = size_grid(runs, "fig3f", model, A.accuracy, across="templates_per_module")
        if not cfgs:
            continue
        down = f"student hidden width (teacher {cfgs[0].teacher_hidden})"
        fig = size_heatmap(grid, hidden, ratios, "OOD accuracy (%)", across="modules per expert T/M", down=down)
        found.append(
            FigureResult(
                fig,
                _caption(
                    runs,
                    cfgs,
                    f"Fig. 3F: OOD accuracy of the {MODEL_LABELS[model]} over "
                    "its hidden width and modules per expert (best outer "
                    "learning rate per cell)",
                ),
            )
        )
    return FigureResults(found)


# --------------------------------------------------------------------------------------------- Fig. A7


def curves(runs: Runs) -> FigureResult:
    """Fig. A7: test and OOD accuracy during training of the Fig. 3B runs, mean over seeds, range shaded."""
    cfgs = runs.configs("fig3b")
    fig = plots.accuracy_curves(eval_curves(runs, cfgs, "accuracy", MODEL_LABELS, 100), chance=CHANCE)
    return FigureResult(
        fig,
        _caption(
            runs, cfgs, "Fig. A7: test and OOD accuracy during training, mean over seeds with the seed range shaded"
        ),
    )


# figure -> the figure a comparison of another learner draws (compgen.figures.compare)
COMPARISON_FIGURES = {"fig3b": fig3b, "fig3cd": fig3cd}
