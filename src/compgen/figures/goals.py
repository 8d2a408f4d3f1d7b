"""Figures of the compositional-goals chapter (paper §4.3): the world, the splits, Fig. 4E/F, A9, A10, training
curves and closed-loop imitation; their claims are judged by :mod:`compgen.analysis.goals`."""

from __future__ import annotations

import jax
import numpy as np

from compgen.analysis import goals as A
from compgen.experiments import goals as goals_experiment
from compgen.experiments.fewshot import MODEL_LABELS, MODELS
from compgen.figures import (
    SPLIT_GROUPS,
    SPLITS,
    FigureResult,
    FigureResults,
    Metric,
    accuracy_bars,
    caption,
    gridplots,
    joined,
    learners_of,
    learning_diagnosis,
    mean_std,
    plots,
    size_figures,
)
from compgen.models import label as learner_label
from compgen.runs import Runs
from compgen.tasks import goals as gl

MODEL_COLOURS = dict(zip(MODELS, ("#66c2a5", "#fc8d62", "#8da0cb", "#e78ac3")))


def _caption(runs, cfgs, what):
    cfgs = [c for c in cfgs if c is not None]
    return caption(
        what,
        runs.preset,
        cfgs,
        {c.model: learner_label(c.model) for c in cfgs},
        (
            f"{joined(c.meta_batch for c in cfgs)} tasks/step",
            f"demonstrations padded to {joined(c.demo_length for c in cfgs)} steps",
        ),
    )


# --------------------------------------------------------------------------------------------- the world


def world(runs: Runs) -> FigureResults:
    """The mazes of the first seed and two instances of an OOD goal with their optimal paths."""
    cfg = runs.configs("fig4ef")[0]
    seed, w = cfg.seeds[0], cfg.world
    mazes, tables = gl.make_mazes(seed, world=w), gl.make_tables(seed, world=w)
    first = gridplots.mazes_figure(mazes)
    _, ood = gl.goal_split("random", seed, w)
    goal = gl.goal_table(w)[ood[0]]
    keys = jax.random.split(jax.random.key(seed), 2)
    instances = [jax.device_get(gl.sample_instance(k, tables, goal, w)) for k in keys]
    paths = [np.asarray(gl.optimal_path(tables, inst, goal)) for inst in instances]
    distances = [int(np.asarray(tables["distance"])[goal[2], inst["agent"], inst["objects"][0]]) for inst in instances]
    second = gridplots.instances_figure(
        mazes[goal[2]],
        instances,
        paths,
        distances,
        [f"instance {i + 1}: {d} moves, then interaction {goal[1]}" for i, d in enumerate(distances)],
    )
    _, actions, mask = gl.demonstration(tables, mazes, instances[0], goal, gl.max_demo_length(tables), w)
    demonstrated = ", ".join(w.actions[a] for a in np.asarray(actions)[np.asarray(mask)])
    panels = (
        FigureResult(
            first,
            f"The {len(mazes)} mazes of seed {seed} ({w.grid}x{w.grid} cells; walls grey, quadrant boundaries "
            f"dashed); the "
            f"longest demonstration in them takes {gl.max_demo_length(tables)} steps. Preset "
            f"{runs.preset}, seed {seed}.",
        ),
        FigureResult(
            second,
            f"Goal {tuple(int(v) for v in goal)}, {gl.describe_goal(goal, w)} (an OOD goal of the "
            f"random split): two instances with their optimal paths (green). Preset {runs.preset}, "
            f"seed {seed}.",
            notes=f"Demonstrated actions of instance 1: {demonstrated}.",
        ),
    )
    return FigureResults(panels)


def splits(runs: Runs) -> FigureResult:
    cfg = runs.configs("fig4ef")[0]
    seed, w = cfg.seeds[0], cfg.world
    fig = gridplots.goal_split_figure(
        {
            f"random (seed {seed})": gl.goal_split("random", seed, w),
            "non-compositional": gl.goal_split("non_compositional", seed, w),
        },
        world=w,
    )
    return FigureResult(
        fig,
        f"Training (green) and OOD (magenta) goals: rows are quadrant and interaction, columns "
        f"maze and object type. Random: every value of every factor appears in training. "
        f"Non-compositional: the bottom-right quadrant (q3) never does. Preset {runs.preset}, "
        f"seed {seed}.",
    )


# --------------------------------------------------------------------------------------------- Fig. 4E/F, A9


def fig4ef(runs: Runs) -> FigureResult:
    """Fig. 4E/F: OOD step accuracy under the random (compositional) and non-compositional split."""
    values = A.metric_values(runs)
    models = [m for m in learners_of(runs, "fig4ef") if values[(m, "random")] is not None]
    fig = accuracy_bars(
        ["Fig. 4E: compositional (random)", "Fig. 4F: non-compositional"],
        [learner_label(m) for m in models],
        [[values[(m, s)][1] for s in SPLITS] for m in models],
    )
    lines = [
        "| model | outer steps | OOD acc., random | OOD acc., non-compositional | drop | test acc., random |",
        "|---|---|---|---|---|---|",
    ]
    for m in models:
        (c, comp), (_, noncomp) = values[(m, "random")], values[(m, "non_compositional")]
        lines.append(
            f"| {learner_label(m)} | {c.outer_steps:,} | {mean_std(comp, 1)} | {mean_std(noncomp, 1)} | "
            f"{np.mean(comp) - np.mean(noncomp):.1f} | {mean_std(A.metric(c, runs.output(c), 'acc', 'test'), 1)} |"
        )
    return FigureResult(
        fig,
        _caption(
            runs,
            runs.configs("fig4ef"),
            "Fig. 4E/F: OOD step accuracy (the query step "
            "accuracy after adapting on one demonstration of a "
            "held-out goal)",
        ),
        "Accuracy in % (mean ± std over seeds); *drop* = random − non-compositional OOD accuracy.\n\n"
        + "\n".join(lines),
        A.CHAPTER.shown_at(runs, "fig4ef"),
    )


def figa9(runs: Runs) -> FigureResult:
    """Fig. A9: the fraction of OOD episodes whose every step is predicted optimally."""
    values = A.metric_values(runs, "acc_all")
    models = [m for m in MODELS if values[(m, "random")] is not None]
    top = max(np.max(values[(m, s)][1]) for m in models for s in SPLITS)
    fig = plots.grouped_bars(
        SPLIT_GROUPS,
        [MODEL_LABELS[m] for m in models],
        [[values[(m, s)][1] for s in SPLITS] for m in models],
        "optimal OOD episodes (%)",
        ylim=(0, max(5.0, 1.15 * top)),
    )
    lines = ["| model | random | non-compositional |", "|---|---|---|"]
    lines += [
        f"| {MODEL_LABELS[m]} | {mean_std(values[(m, 'random')][1], 1)} | "
        f"{mean_std(values[(m, 'non_compositional')][1], 1)} |"
        for m in models
    ]
    return FigureResult(
        fig,
        _caption(
            runs,
            runs.configs("fig4ef"),
            "Fig. A9: fraction of OOD episodes (%) in which every step is predicted optimally",
        ),
        "\n".join(lines),
        A.CHAPTER.shown_at(runs, "figa9"),
    )


# --------------------------------------------------------------------------------------------- Fig. A10


def figa10(runs: Runs) -> FigureResults:
    return size_figures(
        runs,
        "figa10",
        A.metric,
        "OOD accuracy (%)",
        lambda m, cfgs: _caption(
            runs, cfgs, f"Fig. A10: OOD accuracy of the {MODEL_LABELS[m]}, random split, best outer lr per cell"
        ),
        A.CHAPTER.shown_at(runs, "figa10"),
    )


# --------------------------------------------------------------------------------------------- curves, imitation


def curves(runs: Runs) -> FigureResult:
    """Query step accuracy during training: training meta-batches (running mean), test and OOD goals."""
    cfgs = runs.configs("fig4ef")
    panels = {"training meta-batches": {}, "test (training goals)": {}, "OOD goals": {}}
    styles = {}
    for c in cfgs:
        out, label = runs.output(c), f"{MODEL_LABELS[c.model]}, {c.split.replace('_', '-')}"
        styles[label] = (MODEL_COLOURS[c.model], "-" if c.split == "random" else "--")
        train_acc = 100 * np.asarray(out["steps/acc"])
        window = max(1, min(25, train_acc.shape[1] // 5))
        smooth = np.stack([np.convolve(a, np.ones(window) / window, mode="valid") for a in train_acc])
        panels["training meta-batches"][label] = (np.arange(smooth.shape[1]) + window, smooth)
        for title, name in (("test (training goals)", "test"), ("OOD goals", "ood")):
            panels[title][label] = (
                out["eval_steps"],
                100 * np.asarray(out["eval/acc"])[:, :, c.eval_set_names().index(name)],
            )
    fig = gridplots.learning_curves(panels, styles)
    return FigureResult(
        fig,
        _caption(
            runs,
            cfgs,
            "Query step accuracy during training (left: running mean over the "
            "training meta-batches); mean over seeds, range shaded; solid: random "
            "split, dashed: non-compositional",
        ),
    )


def diagnosis(runs: Runs, split="random") -> FigureResult:
    """What Fig. 4E's learners did over training under ``split`` (a table, :func:`compgen.figures.learning_diagnosis`):
    OOD step accuracy at every evaluation, the first step of a demonstration (navigation: every quick start is at
    least 2 steps from the goal object) beside the last (the goal's interaction), the inner loop's support loss,
    and the R² of the goal's factors decoded from the adapted fast parameters."""
    cfgs = [c for c in runs.configs("fig4ef", split=split) if runs.output(c) is not None]
    table = learning_diagnosis(
        runs,
        "fig4ef",
        Metric("acc", "step accuracy (%)", scale=100),
        extra=(("acc_first", "OOD first step, navigation (%)"), ("acc_last", "OOD last step, interaction (%)")),
        split=split,
    )
    return FigureResult(None, _caption(runs, cfgs, f"Fig. 4E's learners over training, {split} split"), table)


def imitation(runs: Runs, n_goals=64) -> FigureResult:
    """Each learner (random split, first seed) adapts on one demonstration of an OOD goal and acts in closed loop."""
    cfgs = [runs.one("fig4ef", model=m, split="random") for m in MODELS]
    cfgs = [c for c in cfgs if c is not None and "final/meta" in runs.output(c)]
    seed, w = cfgs[0].seeds[0], cfgs[0].world
    _, ood = gl.goal_split("random", seed, w)
    ids = ood[np.asarray(jax.random.choice(jax.random.key(seed + 1), len(ood), (n_goals,)))]
    ids[0] = ood[0]
    rollouts, success = {}, {}
    for c in cfgs:
        out = goals_experiment.imitate(
            c, runs.output(c)["final/meta"][0], seed, gl.goal_table(w)[ids], jax.random.key(seed + 2)
        )
        rollouts[c.model] = jax.tree.map(lambda a: a[0], out)
        success[c.model] = 100 * np.mean(out["success"])
    goal = gl.goal_table(w)[ids[0]]
    fig = gridplots.imitation_figure(
        gl.make_mazes(seed, world=w)[goal[2]],
        [rollouts[c.model] for c in cfgs],
        [MODEL_LABELS[c.model] for c in cfgs],
    )
    acc_all = A.metric_values(runs, "acc_all")
    table = (
        "| model | closed-loop success on 64 OOD goals, first seed (%) | optimal OOD episodes, Fig. A9 (%) |\n"
        "|---|---|---|\n"
        + "\n".join(
            f"| {MODEL_LABELS[c.model]} | {success[c.model]:.1f} | {acc_all[(c.model, 'random')][1][0]:.1f} |"
            for c in cfgs
        )
    )
    return FigureResult(
        fig,
        _caption(
            runs,
            cfgs,
            f"Imitating the OOD goal '{gl.describe_goal(goal, w)}' from one "
            f"demonstration: the learner's closed-loop path (orange) beside the "
            f"optimal one (green); first seed's runs",
        ),
        table,
    )


# figure -> the figure a comparison of another learner draws (compgen.figures.compare)
COMPARISON_FIGURES = {"fig4ef": fig4ef}
