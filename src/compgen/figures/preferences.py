"""Figures of the preferences chapter (paper §4.2): the world, the splits, Fig. 4B, 4C, A8, curves; their claims are
judged by :mod:`compgen.analysis.preferences`."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from compgen.analysis import preferences as A
from compgen.experiments.fewshot import HNETS, MODEL_LABELS, MODELS
from compgen.experiments.preferences import is_paper_world, world_label
from compgen.figures import (
    SPLIT_GROUPS,
    FigureResult,
    FigureResults,
    Metric,
    caption,
    eval_curves,
    joined,
    learning_diagnosis,
    mean_std,
    plots,
    size_figures,
)
from compgen.runs import Runs
from compgen.tasks import preferences as pf
from compgen.tasks import support


def criteria() -> str:
    """Markdown: the chapter's claims and the criterion each is judged by (the same at every preset)."""
    lines = ["| figure | the paper's claim | criterion |", "|---|---|---|"]
    for spec in A.CHAPTER.specs:
        lines.append(f"| {spec.figure} | {spec.claim.format(model='each hypernetwork')} | {spec.criterion} |")
    return "\n".join(lines)


def world_summary(runs: Runs) -> str:
    """Markdown: the world of the runs' configs in words, beside the paper's."""
    cfgs = [c for figure in runs.figures.values() for c in figure]
    worlds = sorted({world_label(c) for c in cfgs})
    paper = world_label(type(cfgs[0])())
    if worlds == [paper]:
        return f"**World of these runs**: the paper's ({paper})."
    return f"**World of these runs**: {'; '.join(worlds)}. The paper's: {paper}."


LOSS = Metric("loss", "loss", digits=3)  # the loss as the diagnosis tables show it


def _caption(runs, cfgs, what):
    cfgs = [c for c in cfgs if c is not None]
    return caption(
        what,
        runs.preset,
        cfgs,
        MODEL_LABELS,
        (
            f"K = {joined(c.max_hot for c in cfgs)}",
            f"{joined(c.meta_batch for c in cfgs)} tasks/step",
            f"{joined(c.shots_support for c in cfgs)} + {joined(c.shots_query for c in cfgs)} demonstrations",
            *sorted(
                {
                    f"{c.world.grid}x{c.world.grid} world, {c.n_objects} objects, M = {c.n_modules}"
                    for c in cfgs
                    if not is_paper_world(c)
                }
            ),
        ),
    )


# --------------------------------------------------------------------------------------------- the world


def _demonstrations(w, preferences):
    """Greedy demonstrations of ``preferences`` in four layouts of world ``w``, drawn side by side: (figure,
    [demonstration per layout] as :func:`compgen.tasks.preferences.demonstration` returns them)."""
    keys = jax.random.split(jax.random.key(1), 4)
    fig, axes = plots.subplots(1, 4, figsize=(plots.COLUMN_WIDTH, 2.3))
    demos = []
    for ax, key in zip(axes, keys):
        instance = pf.sample_instance(key, w)
        demo = pf.demonstration(instance, preferences, world=w)
        demos.append(demo)
        steps = int(demo[2].sum())
        plots.preference_instance(
            ax,
            w.walls,
            w.free_cells,
            instance,
            preferences,
            demo[4][: steps + 1],
            " ".join("■↑→↓←"[int(a)] for a in demo[3][:steps]),
        )
    fig.tight_layout()
    return fig, demos


def _action_values_table(w, demos) -> str:
    """Markdown: the action values along the longest of ``demos`` and the action taken at each step."""
    _, q, mask, actions, _ = max(demos, key=lambda d: int(d[2].sum()))
    return (
        f"Action values $Q_{{{w.backups}}}(s_t, \\cdot)$ along the longest of these demonstrations (the learners' "
        "regression targets):\n\n| step | "
        + " | ".join(pf.ACTIONS)
        + " | taken |\n|---|"
        + "---|" * 6
        + "\n"
        + "\n".join(
            f"| {t} | " + " | ".join(f"{v:.2f}" for v in q[t]) + f" | {pf.ACTIONS[int(actions[t])]} |"
            for t in range(int(mask.sum()))
        )
    )


def world(runs: Runs) -> FigureResults:
    """The preference modules of the first seed and six training tasks built from them, four greedy
    demonstrations of the last one, and the action values along the longest: (FigureResult, FigureResult, table)."""
    cfg = runs.configs("fig4c")[0]
    seed, w = cfg.seeds[0], cfg.world
    templates = pf.preference_templates(seed, cfg.n_modules, cfg.n_colours)
    train, _, _ = pf.task_split(cfg.n_modules, cfg.max_hot, "random", cfg.frac_ood, seed)
    masks = pf.task_masks(cfg.n_modules, cfg.max_hot)
    shown = train[:: max(1, len(train) // 6)][:6]
    latents = jnp.concatenate(
        [pf.sample_latents(jax.random.fold_in(jax.random.key(0), i), masks[[t]], 1) for i, t in enumerate(shown)]
    )
    first = plots.preference_templates(templates, pf.preferences_of(templates, latents))
    fig, demos = _demonstrations(w, pf.preferences_of(templates, latents[-1]))
    tasks = ", ".join("{" + support.mask_to_string(m) + "}" for m in masks[shown])
    panels = (
        FigureResult(
            first,
            f"Preference modules P of seed {seed} (rows) and the colour preferences Pᵀz of six "
            f"training tasks (modules {tasks}; K ≤ {cfg.max_hot}, Algorithm 1 weights). Preset "
            f"{runs.preset}, seed {seed}.",
        ),
        FigureResult(
            fig,
            f"Greedy demonstrations of the last task in four layouts: each object is labelled with "
            f"the task's reward for its colour, the triangle is the start, the line the path under "
            f"Q ({w.backups} backups), the square where it stops; above each panel the actions (■ = terminate). "
            f"World: {world_label(cfg)}. Preset {runs.preset}, seed {seed}.",
            _action_values_table(w, demos),
        ),
    )
    return FigureResults(panels)


def splits(runs: Runs) -> FigureResult:
    """Module combinations of size ≤ 2 in training and OOD, per split."""
    c4, c4b = runs.configs("fig4c")[0], runs.configs("fig4b")[0]
    seed = c4.seeds[0]
    grids = {}
    for split, cfg in (("random", c4), ("non_compositional", c4), ("connected", c4b), ("disconnected", c4b)):
        train, ood, _ = pf.task_split(cfg.n_modules, cfg.max_hot, split, seed=seed)
        grid = np.zeros((cfg.n_modules, cfg.n_modules), int)
        for ids, value in ((train, 1), (ood, 2)):
            for m in pf.task_masks(cfg.n_modules, cfg.max_hot)[ids]:
                active = np.flatnonzero(m)
                if len(active) <= 2:
                    grid[active[0], active[-1]] = grid[active[-1], active[0]] = value
        grids[f"{split} (K={cfg.max_hot}):\n{len(train)} train / {len(ood)} OOD"] = grid
    fig = plots.task_split_grids(grids, [str(i) for i in range(c4.n_modules)], xlabel="module", ylabel="module")
    return FigureResult(
        fig,
        f"Module combinations of size ≤ 2 in training (green) and OOD (magenta) per split; the "
        f"triples of the K = 3 splits are not drawn. Preset {runs.preset}, seed {seed}.",
    )


# --------------------------------------------------------------------------------------------- Fig. 4C


def fig4c(runs: Runs) -> FigureResult:
    """Fig. 4C: OOD loss of the four learners under compositional and non-compositional support."""
    cfgs = runs.configs("fig4c")
    models = [m for m in MODELS if runs.one("fig4c", model=m) is not None]
    splits_ = ("random", "non_compositional")
    values = [[A.per_seed(runs, "fig4c", m, s)[1] for s in splits_] for m in models]
    fig = plots.grouped_bars(
        SPLIT_GROUPS,
        [MODEL_LABELS[m] for m in models],
        values,
        "OOD loss (½ squared error)",
    )
    lines = [
        "| model | outer steps | OOD loss, compositional | OOD loss, non-compositional | test loss, compositional |",
        "|---|---|---|---|---|",
    ]
    for m, (comp, noncomp) in zip(models, values):
        c = runs.one("fig4c", model=m, split="random")
        lines.append(
            f"| {MODEL_LABELS[m]} | {c.outer_steps:,} | {mean_std(comp)} | {mean_std(noncomp)} | "
            f"{mean_std(A.loss(c, runs.output(c), 'test'))} |"
        )
    return FigureResult(
        fig,
        _caption(
            runs,
            cfgs,
            "Fig. 4C: OOD loss (masked ½ squared error of the predicted action "
            "values on held-out module combinations, after adaptation; lower is "
            "better)",
        ),
        "\n".join(lines),
        A.CHAPTER.shown_at(runs, "fig4c"),
        notes="Each seed draws its own preference modules, which set the scale of the rewards, so the "
        "claims compare the models seed by seed.",
    )


# --------------------------------------------------------------------------------------------- Fig. 4B


def fig4b(runs: Runs) -> FigureResult:
    """Fig. 4B: OOD loss of the hypernetworks trained on connected or disconnected module pairs (K = 2)."""
    cfgs = runs.configs("fig4b")
    models = [m for m in HNETS if runs.one("fig4b", model=m) is not None]
    values = [[A.per_seed(runs, "fig4b", m, s)[1] for s in ("connected", "disconnected")] for m in models]
    fig = plots.grouped_bars(
        ["connected", "disconnected"], [MODEL_LABELS[m] for m in models], values, "OOD loss (½ squared error)"
    )
    c = cfgs[0]
    n_conn = len(pf.task_split(c.n_modules, 2, "connected")[0])
    n_disc = len(pf.task_split(c.n_modules, 2, "disconnected")[0])
    lines = [
        f"| hypernetwork | OOD loss, connected ({n_conn} combinations) | disconnected ({n_disc}) |",
        "|---|---|---|",
    ]
    lines += [f"| {MODEL_LABELS[m]} | {mean_std(a)} | {mean_std(b)} |" for m, (a, b) in zip(models, values)]
    return FigureResult(
        fig,
        _caption(
            runs,
            cfgs,
            "Fig. 4B: OOD loss after training on connected or disconnected "
            "module pairs, evaluated on the pairs in neither",
        ),
        "\n".join(lines),
        A.CHAPTER.shown_at(runs, "fig4b"),
    )


def fig4b_diagnosis(runs: Runs) -> FigureResult:
    """What Fig. 4B's hypernetworks did over training on each support (a table per hypernetwork, one row per
    support; :func:`compgen.figures.learning_diagnosis`): OOD loss at every evaluation, the loss on training
    combinations (test), the inner loop's support loss, and the R² of the preference weights decoded from the
    adapted fast parameters."""
    cfgs = [c for c in runs.configs("fig4b") if runs.output(c) is not None]
    tables = []
    for m in HNETS:
        if any(c.model == m for c in cfgs):
            table = learning_diagnosis(runs, "fig4b", LOSS, row="split", test_set="test", model=m)
            tables.append(f"**{MODEL_LABELS[m]}**\n\n{table}")
    caption = _caption(runs, cfgs, "Fig. 4B's hypernetworks over training, connected and disconnected support")
    return FigureResult(None, caption, "\n\n".join(tables))


# --------------------------------------------------------------------------------------------- more modules, Fig. A8


def more_modules(runs: Runs) -> str:
    """Markdown: OOD loss on tasks combining k > K modules (the auxiliary sets), compositional support."""
    cfg = runs.configs("fig4c")[0]
    ks = pf.ood_k_values(cfg.n_modules, cfg.max_hot)
    lines = ["| model | " + " | ".join(f"k = {k}" for k in ks) + " |", "|---|" + "---|" * len(ks)]
    for m in MODELS:
        c = runs.one("fig4c", model=m, split="random")
        if c is not None:
            lines.append(
                f"| {MODEL_LABELS[m]} | "
                + " | ".join(f"{A.loss(c, runs.output(c), f'ood_{k}').mean():.3f}" for k in ks)
                + " |"
            )
    return "OOD loss on tasks with $k$ modules, compositional support (mean over seeds):\n\n" + "\n".join(lines)


def figa8(runs: Runs) -> FigureResults:
    """Fig. A8: OOD loss of the hypernetworks over width and number of modules T (best outer lr per cell)."""
    return size_figures(
        runs,
        "figa8",
        A.loss,
        "OOD loss",
        lambda m, cfgs: _caption(
            runs,
            cfgs,
            f"Fig. A8: OOD loss of the {MODEL_LABELS[m]} over its width and number of modules (best outer lr per cell)",
        ),
        A.CHAPTER.shown_at(runs, "figa8"),
        best=min,
        fmt="{:.3f}",
    )


def curves(runs: Runs) -> FigureResult:
    """Test and OOD loss during training of the Fig. 4C runs, mean over seeds, range shaded."""
    cfgs = runs.configs("fig4c")
    data = eval_curves(runs, cfgs, "loss", MODEL_LABELS)
    fig = plots.accuracy_curves(data, quantity="loss", ylabel="loss (½ squared error)", log_y=True)
    return FigureResult(
        fig, _caption(runs, cfgs, "Test and OOD loss during training, mean over seeds with the seed range shaded")
    )


def diagnosis(runs: Runs, split="random") -> FigureResult:
    """What Fig. 4C's learners did over training under ``split`` (a table, :func:`compgen.figures.learning_diagnosis`):
    OOD loss at every evaluation, the inner loop's support loss, and the R² of the task's preference weights
    decoded from the adapted fast parameters."""
    cfgs = [c for c in runs.configs("fig4c", split=split) if runs.output(c) is not None]
    table = learning_diagnosis(runs, "fig4c", LOSS, split=split)
    return FigureResult(None, _caption(runs, cfgs, f"Fig. 4C's learners over training, {split} split"), table)


# figure -> the figure a comparison of another learner draws (compgen.figures.compare)
COMPARISON_FIGURES = {"fig4c": fig4c}
