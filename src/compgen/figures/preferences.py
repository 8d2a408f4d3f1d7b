"""Figures and claims of the preferences chapter (paper §4.2): the world, the splits, Fig. 4B, 4C, A8, curves."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from compgen.analysis import claims as C
from compgen.experiments.fewshot import HNETS, MODEL_LABELS, MODELS
from compgen.experiments.preferences import is_paper_world, world_label
from compgen.figures import (
    SPLIT_GROUPS,
    FigureResult,
    FigureResults,
    caption,
    final,
    joined,
    learning_diagnosis,
    mean_std,
    plots,
    size_figures,
    size_grid,
    versus_monolithic,
)
from compgen.models import label as learner_label
from compgen.notebook import Runs
from compgen.tasks import preferences as pf
from compgen.tasks import support

SECTION = "preferences"
RELATIVE = 0.10  # a claimed difference in loss must reach 10 % of the compared-to loss

FIG4C_LEAD = C.ClaimSpec(
    SECTION,
    "Fig. 4C",
    "{model}: lower OOD loss than ANIL and MAML under compositional support",
    f"OOD loss ≥ {RELATIVE:.0%} below the better of ANIL/MAML, equal outer steps and tasks",
    paper="qualitative",
    anchor="#fig4c",
)
FIG4C_NONCOMP = C.ClaimSpec(
    SECTION,
    "Fig. 4C",
    "{model}: holding out a module raises the OOD loss",
    f"non-compositional OOD loss ≥ {RELATIVE:.0%} above the compositional one",
    paper="qualitative",
    anchor="#fig4c",
)
FIG4B = C.ClaimSpec(
    SECTION,
    "Fig. 4B",
    "{model}: disconnected support gives a clearly higher OOD loss than connected support",
    f"disconnected OOD loss ≥ {RELATIVE:.0%} above connected",
    paper="qualitative",
    anchor="#fig4b",
)
FIGA8 = C.ClaimSpec(
    SECTION,
    "Fig. A8",
    "{model}: overparameterisation does no harm",
    f"the largest student's OOD loss is not {RELATIVE:.0%} above the smallest's",
    paper="no degradation",
    anchor="#figa8",
    on="means",
)


CLAIM_SPECS = (FIG4C_LEAD, FIG4C_NONCOMP, FIG4B, FIGA8)


def criteria() -> str:
    """Markdown: the chapter's claims and the criterion each is judged by (the same at every preset)."""
    lines = ["| figure | the paper's claim | criterion |", "|---|---|---|"]
    for spec in CLAIM_SPECS:
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


def loss(cfg, output, set_name="ood"):
    """The loss on evaluation set ``set_name`` at the last evaluation, per seed: (seeds,)."""
    return final(output, "loss", cfg.eval_set_names().index(set_name))


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
    preferences = pf.preferences_of(templates, latents[-1])
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
    _, q, mask, actions, _ = max(demos, key=lambda d: int(d[2].sum()))
    table = (
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
            table,
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


def _per_seed(runs, figure, model, split, set_name="ood"):
    cfg = runs.one(figure, model=model, split=split)
    return None if cfg is None or runs.output(cfg) is None else (cfg, loss(cfg, runs.output(cfg), set_name))


def _fig4c_claims(runs: Runs, learners=HNETS):
    found = []
    for m in learners:
        versus = versus_monolithic(runs, "fig4c", m, loss, higher=False)
        check_c = check_n = None
        ours_c = ours_n = "–"
        seeds = () if versus is None else versus.seeds
        if versus is not None and "random" in versus.mono:
            comp, best = versus.hnet["random"], versus.mono["random"]
            check_c = C.lower(comp, best, RELATIVE, relative=True)
            ours_c = f"{comp.mean():.3f} vs {best.mean():.3f}: {C.describe_difference(check_c, digits=3)}"
        if versus is not None and "non_compositional" in versus.hnet:
            comp, noncomp = versus.hnet["random"], versus.hnet["non_compositional"]
            check_n = C.paired(noncomp, comp, RELATIVE, relative=True)
            ours_n = (
                f"{noncomp.mean():.3f} vs {comp.mean():.3f} ({noncomp.mean() / comp.mean():.2f}x): "
                f"{C.describe_difference(check_n, digits=3)}"
            )
        found.append(FIG4C_LEAD.judge(check_c, ours_c, seeds, pooled=runs.pooled, model=learner_label(m)))
        found.append(FIG4C_NONCOMP.judge(check_n, ours_n, seeds, pooled=runs.pooled, model=learner_label(m)))
    return found


def fig4c(runs: Runs) -> FigureResult:
    """Fig. 4C: OOD loss of the four learners under compositional and non-compositional support."""
    cfgs = runs.configs("fig4c")
    models = [m for m in MODELS if runs.one("fig4c", model=m) is not None]
    splits_ = ("random", "non_compositional")
    values = [[_per_seed(runs, "fig4c", m, s)[1] for s in splits_] for m in models]
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
            f"{mean_std(loss(c, runs.output(c), 'test'))} |"
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
        _fig4c_claims(runs),
        notes="Each seed draws its own preference modules, which set the scale of the rewards, so the "
        "claims compare the models seed by seed.",
    )


# --------------------------------------------------------------------------------------------- Fig. 4B


def _fig4b_claims(runs: Runs):
    found = []
    for m in HNETS:
        if not runs.configs("fig4b", model=m):
            continue  # the preset does not run this model in Fig. 4B
        conn, disc = _per_seed(runs, "fig4b", m, "connected"), _per_seed(runs, "fig4b", m, "disconnected")
        check, ours, seeds = None, "–", ()
        if conn is not None and disc is not None:
            check = C.paired(disc[1], conn[1], RELATIVE, relative=True)
            ours = f"{disc[1].mean():.3f} vs {conn[1].mean():.3f}: {C.describe_difference(check, digits=3)}"
            seeds = conn[0].seeds
        found.append(FIG4B.judge(check, ours, seeds, pooled=runs.pooled, model=MODEL_LABELS[m]))
    return found


def fig4b(runs: Runs) -> FigureResult:
    """Fig. 4B: OOD loss of the hypernetworks trained on connected or disconnected module pairs (K = 2)."""
    cfgs = runs.configs("fig4b")
    models = [m for m in HNETS if runs.one("fig4b", model=m) is not None]
    values = [[_per_seed(runs, "fig4b", m, s)[1] for s in ("connected", "disconnected")] for m in models]
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
        _fig4b_claims(runs),
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
            table = learning_diagnosis(runs, "fig4b", "loss", "loss", digits=3, row="split", test_set="test", model=m)
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
                + " | ".join(f"{loss(c, runs.output(c), f'ood_{k}').mean():.3f}" for k in ks)
                + " |"
            )
    return "OOD loss on tasks with $k$ modules, compositional support (mean over seeds):\n\n" + "\n".join(lines)


def _figa8_claims(runs: Runs):
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
        found.append(FIGA8.judge(check, ours, cfgs[0].seeds, pooled=runs.pooled, model=MODEL_LABELS[m]))
    return found


def figa8(runs: Runs) -> FigureResults:
    """Fig. A8: OOD loss of the hypernetworks over width and number of modules T (best outer lr per cell)."""
    return size_figures(
        runs,
        "figa8",
        loss,
        "OOD loss",
        lambda m, cfgs: _caption(
            runs,
            cfgs,
            f"Fig. A8: OOD loss of the {MODEL_LABELS[m]} over its width and number of modules (best outer lr per cell)",
        ),
        _figa8_claims(runs),
        best=min,
        fmt="{:.3f}",
    )


def curves(runs: Runs) -> FigureResult:
    """Test and OOD loss during training of the Fig. 4C runs, mean over seeds, range shaded."""
    cfgs = runs.configs("fig4c")
    data = {}
    for c in cfgs:
        out, names = runs.output(c), c.eval_set_names()
        data[f"{MODEL_LABELS[c.model]}, {c.split.replace('_', '-')}"] = (
            out["eval_steps"],
            {s: np.asarray(out["eval/loss"])[:, :, names.index(s)] for s in ("test", "ood")},
        )
    fig = plots.accuracy_curves(data, quantity="loss", ylabel="loss (½ squared error)", log_y=True)
    return FigureResult(
        fig, _caption(runs, cfgs, "Test and OOD loss during training, mean over seeds with the seed range shaded")
    )


def diagnosis(runs: Runs, split="random") -> FigureResult:
    """What Fig. 4C's learners did over training under ``split`` (a table, :func:`compgen.figures.learning_diagnosis`):
    OOD loss at every evaluation, the inner loop's support loss, and the R² of the task's preference weights
    decoded from the adapted fast parameters."""
    cfgs = [c for c in runs.configs("fig4c", split=split) if runs.output(c) is not None]
    table = learning_diagnosis(runs, "fig4c", "loss", "loss", digits=3, split=split)
    return FigureResult(None, _caption(runs, cfgs, f"Fig. 4C's learners over training, {split} split"), table)


def claims(runs: Runs) -> list:
    return [*_fig4c_claims(runs), *_fig4b_claims(runs), *_figa8_claims(runs)]


# figure -> (the figures whose runs its claims read, claims(runs, learners), the figure): any learner in the
# hypernetworks' place (compgen.figures.compare)
COMPARISONS = {"fig4c": (("fig4c",), _fig4c_claims, fig4c)}
