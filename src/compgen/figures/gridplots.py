"""Pictures of the compositional-goals grid world (paper §4.3, App. C.4): mazes, instances, paths and goal splits.

Cells are numbered ``row * grid + col`` as in :mod:`compgen.tasks.goals` (grid 11 in the paper's world; a
panel takes its grid from the walls :func:`draw_maze` drew on it); a cell is drawn at
``x = col, y = row`` with row 0 at the top. Each function returns a matplotlib Figure (or draws on the
axes it is given).
"""

from __future__ import annotations

import textwrap

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.colors import ListedColormap

from compgen.figures.plots import figure_title, subplots
from compgen.tasks import goals as gl

OBJECT_COLOURS = ("#e41a1c", "#377eb8", "#4daf4a", "#984ea3", "#ff7f00")  # one per object type
OBJECT_MARKERS = ("o", "s", "^", "D", "P")
WALL_CMAP = ListedColormap(["#ffffff", "#404040"])
PATH_COLOURS = {"optimal": "#1b9e77", "learner": "#d95f02", "demonstration": "#7570b3"}
SPLIT_COLOURS = {"train": "#4d9221", "ood": "#c51b7d"}


def _xy(cells, ax=None):
    rows, cols = np.divmod(np.asarray(cells), getattr(ax, "_goals_grid", gl.GRID))
    return cols, rows


def draw_maze(ax, walls, quadrants=True, title=None):
    """Walls (grid, grid) bool in grey; the quadrant boundaries (rows/cols 0-5 | 6-10 at grid 11) dashed."""
    size = np.shape(walls)[0]
    ax._goals_grid = size  # the cell numbering of this panel
    ax.imshow(
        np.asarray(walls, int),
        cmap=WALL_CMAP,
        vmin=0,
        vmax=1,
        origin="upper",
        extent=(-0.5, size - 0.5, size - 0.5, -0.5),
    )
    if quadrants:
        edge = (size + 1) // 2 - 0.5
        ax.axhline(edge, color="#2b8cbe", lw=0.8, ls="--")
        ax.axvline(edge, color="#2b8cbe", lw=0.8, ls="--")
    ax.set_xticks([])
    ax.set_yticks([])
    ax.set_xlim(-0.5, size - 0.5)
    ax.set_ylim(size - 0.5, -0.5)
    if title:
        ax.set_title(title, fontsize=8)


def draw_objects(ax, instance, goal_ring=True, agent=True):
    """The 5 objects (colour and marker by type; the goal object, index 0, ringed) and the agent (★)."""
    cells, types = np.asarray(instance["objects"]), np.asarray(instance["types"])
    for i, (cell, kind) in enumerate(zip(cells, types)):
        x, y = _xy(cell, ax)
        jitter = 0.18 * (np.sum(cells[:i] == cell))  # objects may share a cell
        ax.scatter(
            x + jitter,
            y - jitter,
            s=70,
            marker=OBJECT_MARKERS[kind],
            color=OBJECT_COLOURS[kind],
            edgecolors="k",
            linewidths=0.6,
            zorder=4,
        )
        if i == 0 and goal_ring:
            ax.scatter(x, y, s=260, facecolors="none", edgecolors="k", linewidths=1.4, zorder=3)
    if agent:
        x, y = _xy(instance["agent"], ax)
        ax.scatter(x, y, s=140, marker="*", color="gold", edgecolors="k", linewidths=0.8, zorder=5)


def draw_path(ax, cells, colour, label=None, offset=0.0, lw=2.0):
    """A path through cell centres (shifted by ``offset`` cells so two paths stay visible), ending in a dot."""
    x, y = _xy(cells, ax)
    x, y = x + offset, y + offset
    ax.plot(x, y, "-", color=colour, lw=lw, alpha=0.85, label=label, zorder=2, solid_capstyle="round")
    ax.scatter(x[-1], y[-1], s=18, color=colour, zorder=2)


def object_legend(fig, loc="lower center", ncol=8):
    """One legend entry per object type, plus the agent and the ring that marks the goal object."""
    handles = [
        plt.Line2D([], [], ls="", marker=m, color=c, markeredgecolor="k", label=f"object type {t}")
        for t, (m, c) in enumerate(zip(OBJECT_MARKERS, OBJECT_COLOURS))
    ]
    handles.append(
        plt.Line2D([], [], ls="", marker="*", color="gold", markeredgecolor="k", markersize=11, label="agent (start)")
    )
    handles.append(
        plt.Line2D(
            [], [], ls="", marker="o", markerfacecolor="none", markeredgecolor="k", markersize=11, label="goal object"
        )
    )
    fig.legend(handles=handles, loc=loc, ncol=ncol, fontsize=7, frameon=False)


def mazes_figure(mazes, title=""):
    """The run's mazes side by side, quadrant boundaries dashed."""
    mazes = np.asarray(mazes)
    fig, axes = subplots(1, len(mazes), figsize=(2.1 * len(mazes), 2.5))
    for i, (ax, walls) in enumerate(zip(np.atleast_1d(axes), mazes)):
        draw_maze(ax, walls, title=f"maze {i}")
    figure_title(fig, title)
    fig.tight_layout()
    return fig


def _trim(cells, distance):
    return np.asarray(cells)[: int(distance) + 1]


def _trim_rollout(cells):
    """Drop the repeated cells at the end of a rollout (the agent staying put)."""
    cells = np.asarray(cells)
    last = len(cells) - 1
    while last > 0 and cells[last] == cells[last - 1]:
        last -= 1
    return cells[: last + 1]


def instances_figure(walls, instances, paths, distances, titles, title=""):
    """Instances of one goal in its maze, each with its optimal path: lists over instances."""
    fig, axes = subplots(1, len(instances), figsize=(3.0 * len(instances), 3.5), squeeze=False)
    for ax, instance, path, d, title in zip(axes[0], instances, paths, distances, titles):
        draw_maze(ax, walls, title=textwrap.fill(title, 40))
        draw_path(ax, _trim(path, d), PATH_COLOURS["optimal"])
        draw_objects(ax, instance)
    object_legend(fig, ncol=4)
    figure_title(fig, title)
    fig.tight_layout(rect=(0, 0.12, 1, 1))
    return fig


def imitation_figure(walls, rollouts, titles, title=""):
    """Learners imitating from one demonstration: per panel the support demonstration (left-most panel),
    then for each learner the new instance with the optimal path and the learner's closed-loop path.

    ``rollouts``: list of dicts of one goal from :func:`compgen.experiments.goals.imitate` (index the goal
    axis away first; the first one's first support demonstration is drawn); ``titles``: one per rollout.
    """
    first = rollouts[0]
    fig, axes = subplots(1, len(rollouts) + 1, figsize=(3.0 * (len(rollouts) + 1), 3.7), squeeze=False)
    support = {k: np.asarray(v)[0] for k, v in first["support_instances"].items()}
    support_cells = np.asarray(first["support_cells"])[0]
    d_support = int(np.asarray(first["support_distance"])[0])
    draw_maze(axes[0][0], walls, title="support: the one demonstration")
    draw_path(axes[0][0], _trim(support_cells, d_support), PATH_COLOURS["demonstration"], "demonstration")
    draw_objects(axes[0][0], support)
    for ax, out, title in zip(axes[0][1:], rollouts, titles):
        instance = {k: np.asarray(v) for k, v in out["instance"].items()}
        verdict = "reached the goal and interacted" if bool(out["success"]) else "failed"
        draw_maze(ax, walls, title=textwrap.fill(f"{title}: {verdict}", 40))
        draw_path(ax, _trim(out["optimal_cells"], out["distance"]), PATH_COLOURS["optimal"], "optimal path", -0.12)
        draw_path(ax, _trim_rollout(out["cells"]), PATH_COLOURS["learner"], "learner's path", 0.12, lw=1.6)
        draw_objects(ax, instance)
    handles = [plt.Line2D([], [], color=PATH_COLOURS[k], lw=2, label=k) for k in ("demonstration", "optimal")]
    handles.append(plt.Line2D([], [], color=PATH_COLOURS["learner"], lw=2, label="learner (greedy, closed loop)"))
    fig.legend(handles=handles, loc="lower right", fontsize=7, frameon=False, ncol=3)
    object_legend(fig, loc="lower left", ncol=4)
    figure_title(fig, title)
    fig.tight_layout(rect=(0, 0.13, 1, 1))
    return fig


def goal_split_figure(splits, title="", world=gl.WORLD):
    """The goals as a grid (rows: quadrant × interaction; columns: maze × object type; 8 × 25 in the paper's
    world), one panel per split: ``splits`` = {title: (train ids, ood ids)}."""
    goals = gl.goal_table(world)
    n_int, n_mazes, n_types = world.n_interactions, world.n_mazes, world.n_object_types
    cmap = ListedColormap([SPLIT_COLOURS["train"], SPLIT_COLOURS["ood"]])
    fig, axes = subplots(len(splits), 1, figsize=(8.5, 2.2 * len(splits)), squeeze=False)
    for ax, (name, (train, ood)) in zip(axes[:, 0], splits.items()):
        grid = np.full((gl.N_QUADRANTS * n_int, n_mazes * n_types), np.nan)
        for ids, value in ((train, 0), (ood, 1)):
            q, i, m, o = goals[np.asarray(ids)].T
            grid[q * n_int + i, m * n_types + o] = value
        ax.imshow(grid, cmap=cmap, vmin=0, vmax=1, aspect="auto", interpolation="nearest")
        ax.set_yticks(
            range(grid.shape[0]),
            [f"q{q} ({gl.QUADRANT_NAMES[q]}), i{i}" for q in range(gl.N_QUADRANTS) for i in range(n_int)],
            fontsize=6,
        )
        ax.set_xticks(
            range(grid.shape[1]),
            [f"m{m} o{o}" for m in range(n_mazes) for o in range(n_types)],
            fontsize=5,
            rotation=90,
        )
        for edge in np.arange(1, n_mazes) * n_types - 0.5:
            ax.axvline(edge, color="w", lw=1.2)
        for edge in np.arange(1, gl.N_QUADRANTS) * n_int - 0.5:
            ax.axhline(edge, color="w", lw=1.2)
        ax.set_title(f"{name}: {len(train)} training goals (green), {len(ood)} OOD goals (magenta)", fontsize=8)
    figure_title(fig, title)
    fig.tight_layout()
    return fig


def learning_curves(panels, styles, title="", ylabel="accuracy (%)"):
    """Accuracy over outer steps, one panel per entry of ``panels`` = {title: {label: (steps, (seeds, n) values)}};
    mean over seeds with the seed range shaded. ``styles`` = {label: (colour, linestyle)}; one shared legend."""
    fig, axes = subplots(1, len(panels), figsize=(3.4 * len(panels) + 2.2, 3.3), squeeze=False, sharey=True)
    for ax, (name, curves) in zip(axes[0], panels.items()):
        for label, (steps, values) in curves.items():
            values = np.asarray(values, float)
            colour, style = styles[label]
            ax.plot(steps, values.mean(0), ls=style, color=colour, lw=1.3, label=label)
            ax.fill_between(steps, values.min(0), values.max(0), color=colour, alpha=0.12, lw=0)
        ax.set_xlabel("outer step")
        ax.set_title(name, fontsize=9)
    axes[0][0].set_ylabel(ylabel)
    axes[0][-1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0))
    figure_title(fig, title)
    fig.tight_layout()
    return fig
