"""Figures and claims of the hyperteacher chapter (paper §4.1): the splits, Fig. 3B-F, Tables A2-A8 and Fig. A7."""

from __future__ import annotations

import numpy as np

from compgen.analysis import claims as C
from compgen.experiments.fewshot import HNETS, MODEL_LABELS, MODELS
from compgen.figures import (
    SPLIT_GROUPS,
    SPLITS,
    FigureResult,
    FigureResults,
    accuracy_bars,
    caption,
    final,
    joined,
    learners_of,
    mean_std,
    on_seeds,
    paper_numbers,
    plots,
    size_grid,
    size_heatmap,
    versus_monolithic,
)
from compgen.models import label as learner_label
from compgen.notebook import Runs
from compgen.tasks import hyperteacher as ht
from compgen.tasks import support

SECTION = "hyperteacher"
CHANCE = 12.5  # % for 8 classes
LEAD = 5.0  # accuracy points a claimed lead must reach
R2_MARGIN = 0.1

# Tables A2-A8 of the paper (App. B.2), accuracy in %: {(M, K): {row: {model: accuracy}}} and their names.
_PAPER = paper_numbers(SECTION)
PAPER_TABLES = {
    (t["M"], t["K"]): {row: dict(zip(_PAPER["columns"], values)) for row, values in t["accuracy"].items()}
    for t in _PAPER["tables"].values()
}
PAPER_TABLE_NAMES = {(t["M"], t["K"]): name for name, t in _PAPER["tables"].items()}
PAPER_FIG3B = PAPER_TABLES[(8, 2)]["ood"]  # the paper's Fig. 3B setting (Table A6)

FIG3B_LEAD = C.ClaimSpec(
    SECTION,
    "Fig. 3B",
    "{model}: higher OOD accuracy than ANIL and MAML under compositional support",
    f"OOD accuracy ≥ {LEAD:g} points above the better of ANIL/MAML, equal outer steps and tasks",
    paper="{hnet:.1f} vs {mono:.1f} % (A6)",
    anchor="#fig3b",
)
FIG3B_NONCOMP = C.ClaimSpec(
    SECTION,
    "Fig. 3B",
    "{model}: loses that lead (falls below ANIL/MAML) under non-compositional support",
    f"the lead over the better of ANIL/MAML falls by ≥ {LEAD:g} points and is ≤ 0 under non-compositional support",
    paper="hnets below ANIL/MAML",
    anchor="#fig3b",
)
FIG3CD = C.ClaimSpec(  # {support}: "compositional than under non-compositional" or "connected than under ..."
    SECTION,
    "Fig. 3C/D",
    "{model}: the task code is linearly decodable from the embeddings, more under {support} support",
    f"R² (OOD) ≥ {R2_MARGIN} higher",
    paper="R² near 1 vs reduced",
    anchor="#fig3cd",
)
FIG3E = C.ClaimSpec(
    SECTION,
    "Fig. 3E",
    "{model}: fails to generalise with one expert per layer (K = 1, not connected) and generalises for K > 1",
    f"test − OOD gap ≥ {2 * LEAD:g} points larger at K = 1 than at the largest K",
    paper="M=4: OOD 20 % at K=1 vs 89 % at K=4 (A2, A4)",
    anchor="#fig3e",
)


def accuracy(cfg, output, set_name="ood"):
    """Accuracy (%) at the last evaluation on one evaluation set, one value per seed: (seeds,)."""
    return final(output, "accuracy", cfg.eval_set_names().index(set_name), 100)


def train_accuracy(output, window=100):
    """Query accuracy (%) on the training meta-batches, averaged over the last ``window`` steps: (seeds,)."""
    return 100 * np.asarray(output["steps/accuracy"])[:, -window:].mean(1)


def r2(output):
    """Pooled R² of decoding the task code from the adapted fast parameters (fit on test, scored on OOD)."""
    return final(output, "r2_ood_pooled")


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


def _fig3b_claims(runs: Runs, learners=HNETS):
    found = []
    for m in learners:
        versus = versus_monolithic(runs, "fig3b", m, accuracy)
        check_c = check_n = None
        ours_c = ours_n = "–"
        seeds = ()
        if versus is not None and len(versus.hnet) == len(versus.mono) == len(SPLITS):
            seeds, hnet, mono = versus.seeds, versus.hnet, versus.mono
            check_c = C.paired(hnet["random"], mono["random"], LEAD)
            ours_c = (
                f"{hnet['random'].mean():.1f} vs {mono['random'].mean():.1f} %: "
                f"{C.describe_difference(check_c, ' pts', 1)}"
            )
            lead = {s: hnet[s] - mono[s] for s in SPLITS}
            check_n = C.paired(
                lead["random"], lead["non_compositional"], LEAD, level_ok=bool(lead["non_compositional"].mean() <= 0)
            )
            ours_n = (
                f"lead {lead['random'].mean():+.1f} → {lead['non_compositional'].mean():+.1f} pts: "
                f"{C.describe_difference(check_n, ' pts', 1)}"
            )
        paper = (
            dict(hnet=PAPER_FIG3B[m], mono=max(PAPER_FIG3B["anil"], PAPER_FIG3B["maml"])) if m in PAPER_FIG3B else {}
        )
        found.append(FIG3B_LEAD.judge(check_c, ours_c, seeds, pooled=runs.pooled, model=learner_label(m), **paper))
        found.append(FIG3B_NONCOMP.judge(check_n, ours_n, seeds, pooled=runs.pooled, model=learner_label(m)))
    return found


def fig3b(runs: Runs) -> FigureResult:
    """Fig. 3B: OOD accuracy of the four learners under compositional and non-compositional support."""
    cfgs = runs.configs("fig3b")
    models = learners_of(runs, "fig3b")
    splits_ = ("random", "non_compositional")
    values = [
        [accuracy(c, runs.output(c)) for s in splits_ for c in [runs.one("fig3b", model=m, split=s)]] for m in models
    ]
    fig = accuracy_bars(SPLIT_GROUPS, [learner_label(m) for m in models], values, CHANCE)
    cell = (cfgs[0].n_modules, cfgs[0].max_hot)
    paper_cell = cell if cell in PAPER_TABLES else (8, 2)
    lines = [
        "| model | outer steps | OOD acc., compositional | OOD acc., non-compositional | test acc., compositional | "
        f"paper OOD, Table {PAPER_TABLE_NAMES[paper_cell]} (M={paper_cell[0]}, K={paper_cell[1]}) |",
        "|---|---|---|---|---|---|",
    ]
    for m, (comp, noncomp) in zip(models, values):
        c = runs.one("fig3b", model=m, split="random")
        lines.append(
            f"| {learner_label(m)} | {c.outer_steps:,} | {mean_std(comp, 1)} | {mean_std(noncomp, 1)} | "
            f"{mean_std(accuracy(c, runs.output(c), 'test'), 1)} | "
            f"{PAPER_TABLES[paper_cell]['ood'].get(m, '–')} |"
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
        _fig3b_claims(runs),
    )


# --------------------------------------------------------------------------------------------- Fig. 3C/D


def _r2_values(runs: Runs, learners=HNETS):
    """{(model, split): (config, final pooled R² per seed) or None (not stored)} over Fig. 3B's and Fig. 3C/D's
    runs of ``learners``; a pair the preset does not run is absent."""
    out = {}
    for m in learners:
        for figure, names in (("fig3b", ("random", "non_compositional")), ("fig3cd", ("connected", "disconnected"))):
            for s in names:
                c = runs.one(figure, model=m, split=s)
                if c is not None:
                    out[(m, s)] = None if runs.output(c) is None else (c, r2(runs.output(c)))
    return out


def _fig3cd_claims(runs: Runs, values, learners=HNETS):
    found = []
    for m in learners:
        for first, second, what in (
            ("random", "non_compositional", "compositional than under non-compositional"),
            ("connected", "disconnected", "connected than under disconnected"),
        ):
            if (m, first) not in values or (m, second) not in values:
                continue  # the preset does not run this comparison
            check, ours, seeds = None, "–", ()
            if values[(m, first)] is not None and values[(m, second)] is not None:
                (ca, a), (cb, b) = values[(m, first)], values[(m, second)]
                seeds = tuple(s for s in ca.seeds if s in cb.seeds)
                a, b = on_seeds(ca, a, seeds), on_seeds(cb, b, seeds)
                check = C.paired(a, b, R2_MARGIN)
                means = [f"{v.mean():.2f}" if np.isfinite(v).all() else "n/a" for v in (a, b)]  # NaN: undefined
                ours = f"{means[0]} vs {means[1]}: {C.describe_difference(check)}"
            found.append(FIG3CD.judge(check, ours, seeds, pooled=runs.pooled, model=learner_label(m), support=what))
    return found


def fig3cd(runs: Runs) -> FigureResult:
    """Fig. 3C/D: R² of decoding the task code from the hypernetworks' adapted embeddings, per support."""
    values = _r2_values(runs)
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
        _fig3cd_claims(runs, values),
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
        test, ood = accuracy(cfg, out, "test"), accuracy(cfg, out, "ood")
        cells = (train_accuracy(out), test, ood, test - ood)
        lines.append(
            f"| {MODEL_LABELS[cfg.model]} | {cfg.split} | "
            + " | ".join(mean_std(v, 1) for v in cells)
            + f" | {mean_std(final(out, 'r2_test_pooled'), 2)} | {mean_std(r2(out), 2)} |"
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
    rows.update({name: accuracy(cfg, output, name) for name in cfg.eval_set_names() if name != "valid"})
    return rows


def accuracy_table(configs, outputs) -> str:
    """A markdown table in the layout of Tables A2-A8: ours (mean ± std over seeds) beside the paper's."""
    by_model = {c.model: (c, o) for c, o in zip(configs, outputs)}
    cfg = configs[0]
    paper = PAPER_TABLES.get((cfg.n_modules, cfg.max_hot), {})
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


def _fig3e_claims(runs: Runs):
    found = []
    for m in HNETS:
        if not runs.configs("fig3e", model=m):
            continue  # the preset does not run this model in Fig. 3E
        cfgs = [c for c in runs.configs("fig3e", model=m) if runs.output(c) is not None]
        one = [c for c in cfgs if c.max_hot == 1]
        more = [c for c in cfgs if c.max_hot > 1 and one and c.n_modules == one[0].n_modules]
        check, ours, seeds = None, "–", ()
        if one and more:
            gap = lambda c: accuracy(c, runs.output(c), "test") - accuracy(c, runs.output(c))
            k1, kk = one[0], max(more, key=lambda c: c.max_hot)
            check = C.paired(gap(k1), gap(kk), 2 * LEAD)
            seeds = k1.seeds
            ours = (
                f"test − OOD gap {gap(k1).mean():.1f} (K=1) vs {gap(kk).mean():.1f} pts (K={kk.max_hot}): "
                f"{C.describe_difference(check, ' pts', 1)}"
            )
        found.append(FIG3E.judge(check, ours, seeds, pooled=runs.pooled, model=MODEL_LABELS[m]))
    return found


def fig3e(runs: Runs) -> FigureResult:
    """Fig. 3E: OOD accuracy over (M, K) for the preset's models, with Tables A2-A8 laid out as the paper's."""
    cfgs = [c for c in runs.configs("fig3e") if runs.output(c) is not None]
    models = list(dict.fromkeys(c.model for c in cfgs))
    cells = list(dict.fromkeys((c.n_modules, c.max_hot) for c in cfgs))
    values = [
        [
            accuracy(c, runs.output(c))
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
            f"**M = {cell[0]}, K = {cell[1]}** (paper Table {PAPER_TABLE_NAMES.get(cell, '–')})\n\n"
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
        _fig3e_claims(runs),
    )


# --------------------------------------------------------------------------------------------- Fig. 3F


def fig3f(runs: Runs) -> FigureResults:
    """Fig. 3F: OOD accuracy over the student's hidden width and T/M (best outer lr per cell), per hypernetwork."""
    found = []
    for model in HNETS:
        cfgs, hidden, ratios, grid = size_grid(runs, "fig3f", model, accuracy, across="templates_per_module")
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
    data = {}
    for c in cfgs:
        out, names = runs.output(c), c.eval_set_names()
        data[f"{MODEL_LABELS[c.model]}, {c.split.replace('_', '-')}"] = (
            out["eval_steps"],
            {s: 100 * np.asarray(out["eval/accuracy"])[:, :, names.index(s)] for s in ("test", "ood")},
        )
    fig = plots.accuracy_curves(data, chance=CHANCE)
    return FigureResult(
        fig,
        _caption(
            runs, cfgs, "Fig. A7: test and OOD accuracy during training, mean over seeds with the seed range shaded"
        ),
    )


def claims(runs: Runs) -> list:
    return [*_fig3b_claims(runs), *_fig3cd_claims(runs, _r2_values(runs)), *_fig3e_claims(runs)]


# figure -> (the figures whose runs its claims read, claims(runs, learners), the figure): any learner in the
# hypernetworks' place (compgen.figures.compare)
COMPARISONS = {
    "fig3b": (("fig3b",), _fig3b_claims, fig3b),
    "fig3cd": (
        ("fig3b", "fig3cd"),
        lambda runs, learners: _fig3cd_claims(runs, _r2_values(runs, learners), learners),
        fig3cd,
    ),
}
