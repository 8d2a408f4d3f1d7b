"""Drawing helpers the figures share. Each takes plain arrays and returns a matplotlib Figure.

Figures are built without pyplot's figure manager (:func:`subplots`), so a notebook shows a figure once, where
:func:`compgen.figures.show_figure` puts it, and are at most as wide as the book's text column
(:data:`COLUMN_WIDTH` inches at 100 px per inch); captions are text beside the figure, not in it.
"""

from __future__ import annotations

import textwrap

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

COLUMN_WIDTH = 7.2  # inches


def subplots(nrows=1, ncols=1, figsize=(COLUMN_WIDTH, 3.6), layout=None, **kwargs):
    """``(figure, axes)`` of a figure no wider than the text column and no narrower than half of it."""
    width = min(max(figsize[0], COLUMN_WIDTH / 2), COLUMN_WIDTH)
    fig = Figure(figsize=(width, figsize[1]), layout=layout)
    return fig, fig.subplots(nrows, ncols, **kwargs)


def figure_title(fig, title, size=9):
    if title:
        fig.suptitle(textwrap.fill(title, 100), fontsize=size)


CONNECTED_COLOURS = {True: "#1b7837", False: "#c2a5cf"}


def _seed_dots(ax, x, values, colour="k", spread=0.12):
    """One dot per seed at ``x``, spread evenly over ``x ± spread``."""
    jitter = np.linspace(-spread, spread, len(values)) if len(values) > 1 else [0.0]
    ax.scatter(np.asarray(x) + np.asarray(jitter), values, s=12, color=colour, zorder=3, linewidths=0)


def fig2c_alignment(labels, distributions, connected, alignment, title=""):
    """Fig. 2C: final module alignment per task distribution.

    labels, distributions, connected: one entry per Table A9 column; alignment (columns, seeds).
    Bars are seed means, dots single seeds; colour marks connected support.
    """
    alignment = np.asarray(alignment)
    fig, ax = subplots(figsize=(8.5, 3.8))
    x = np.arange(len(labels))
    ax.bar(x, alignment.mean(1), color=[CONNECTED_COLOURS[c] for c in connected], edgecolor="k", linewidth=0.6)
    for i in x:
        _seed_dots(ax, i, alignment[i])
    ax.set_xticks(x, [textwrap.fill(lab, 16) + f"\n({dist})" for lab, dist in zip(labels, distributions)], fontsize=7)
    ax.set_ylabel("module alignment A (1 = linear identification)")
    ax.set_ylim(0, 1.05)
    ax.axhline(1.0, color="grey", lw=0.6, ls=":")
    handles = [plt.Rectangle((0, 0), 1, 1, color=CONNECTED_COLOURS[c], ec="k") for c in (True, False)]
    ax.legend(handles, ["connected support", "disconnected support"], loc="lower right", fontsize=8)
    if title:
        ax.set_title(title, fontsize=9)
    fig.tight_layout()
    return fig


def alignment_so_far(eval_steps, columns, total_steps, reference=1.0, reference_label="", title=""):
    """Module alignment over outer steps of a run in progress, a panel per task distribution, the x axis to
    ``total_steps`` so that the part not trained yet shows as empty.

    columns: ``[(label, distribution, connected, alignment (seeds, evals))]``; a line per column (seed mean) over
    thin lines per seed; ``reference``: the paper's value, dashed.
    """
    distributions = list(dict.fromkeys(d for _, d, _, _ in columns))
    fig, axes = subplots(1, len(distributions), figsize=(COLUMN_WIDTH, 3.4), squeeze=False)
    for ax, distribution in zip(axes[0], distributions):
        for label, d, connected, values in columns:
            if d != distribution:
                continue
            values = np.asarray(values, float)
            colour = CONNECTED_COLOURS[connected]
            ax.plot(eval_steps, values.T, color=colour, lw=0.5, alpha=0.6)
            ax.plot(eval_steps, values.mean(0), "-o", ms=2.5, color=colour, lw=1.4, label=textwrap.fill(label, 28))
        ax.axhline(reference, color="k", lw=0.8, ls="--", label=reference_label or None)
        ax.set_xlim(0, total_steps)
        ax.set_ylim(0, 1.05)
        ax.xaxis.set_major_locator(plt.MaxNLocator(4))
        ax.xaxis.set_major_formatter(lambda x, _: f"{x / 1000:g}k" if total_steps >= 10000 else f"{x:g}")
        ax.set_xlabel("outer step")
        ax.set_title(f"{distribution} tasks", fontsize=9)
        ax.legend(fontsize=6, loc="lower right")
    axes[0][0].set_ylabel("module alignment A")
    figure_title(fig, title)
    fig.tight_layout()
    return fig


def fig2d_overparameterisation(factors, alignment_by_distribution, teacher_hidden, n_modules, title=""):
    """Fig. 2D: final alignment over the student's (hidden, module) factors, per distribution.

    factors: list of (f_h, f_M); alignment_by_distribution: {name: (len(factors), seeds)}.
    A full grid is drawn as one heatmap per distribution, anything else as lines over the list.
    """
    hs, ms = sorted({f for f, _ in factors}), sorted({m for _, m in factors})
    full_grid = len(hs) > 1 and len(ms) > 1 and len(factors) == len(hs) * len(ms)
    names = list(alignment_by_distribution)
    if full_grid:
        fig, axes = subplots(1, len(names), figsize=(4.2 * len(names), 3.6), squeeze=False)
        for ax, name in zip(axes[0], names):
            grid = np.full((len(hs), len(ms)), np.nan)
            for (fh, fm), values in zip(factors, np.asarray(alignment_by_distribution[name])):
                grid[hs.index(fh), ms.index(fm)] = values.mean()
            image = ax.imshow(grid, vmin=0, vmax=1, cmap="viridis", origin="lower")
            ax.set_xticks(range(len(ms)), [f"{m}×" for m in ms])
            ax.set_yticks(range(len(hs)), [f"{h}×" for h in hs])
            ax.set_xlabel(f"module factor M̂/M (M = {n_modules})")
            ax.set_ylabel(f"hidden factor ĥ/h (h = {teacher_hidden})")
            ax.set_title(name)
            for (i, j), value in np.ndenumerate(grid):
                ax.text(j, i, f"{value:.2f}", ha="center", va="center", fontsize=7, color="w")
        fig.colorbar(image, ax=axes[0].tolist(), label="module alignment A")
    else:
        fig, ax = subplots(figsize=(6, 3.6))
        x = np.arange(len(factors))
        for name, colour in zip(names, ("#b2182b", "#2166ac")):
            values = np.asarray(alignment_by_distribution[name])
            ax.plot(x, values.mean(1), "-o", color=colour, label=name)
            for i in x:
                _seed_dots(ax, i, values[i], colour)
        ax.set_xticks(
            x, [f"ĥ={teacher_hidden * fh}, M̂={n_modules * fm}\n({fh}×, {fm}×)" for fh, fm in factors], fontsize=8
        )
        ax.set_xlabel("student size (hidden units, modules) and factor over the teacher")
        ax.set_ylabel("module alignment A")
        ax.set_ylim(0, 1.05)
        ax.legend(fontsize=8)
    figure_title(fig, title)
    fig.tight_layout()
    return fig


def training_curves(step_losses, eval_steps, eval_alignment, labels, title="", smooth=50):
    """Training loss (log scale, running mean) and alignment over outer steps, mean over seeds.

    step_losses: {label: (seeds, steps)}; eval_alignment: {label: (seeds, evals)}.
    """
    fig, (ax_loss, ax_align) = subplots(1, 2, figsize=(10, 3.6))
    colours = plt.cm.tab10(np.arange(len(labels)))
    for label, colour in zip(labels, colours):
        loss = np.asarray(step_losses[label]).mean(0)
        window = max(1, min(smooth, len(loss) // 5))
        smoothed = np.convolve(loss, np.ones(window) / window, mode="valid")
        ax_loss.plot(np.arange(len(smoothed)) + window, smoothed, color=colour, label=label, lw=1)
        ax_align.plot(eval_steps, np.asarray(eval_alignment[label]).mean(0), "-o", ms=3, color=colour, lw=1)
    ax_loss.set_yscale("log")
    ax_loss.set_xlabel("outer step")
    ax_loss.set_ylabel("query loss ½·MSE (running mean)")
    ax_align.set_xlabel("outer step")
    ax_align.set_ylabel("module alignment A")
    ax_align.set_ylim(0, 1.05)
    ax_loss.legend(fontsize=6, ncol=2)
    figure_title(fig, title)
    fig.tight_layout()
    return fig


# --------------------------------------------------------------------------------------------- hyperteacher

SPLIT_COLOURS = {"train": "#4d9221", "ood": "#c51b7d", "unused": "#f0f0f0"}


def task_split_grids(
    grids, combination_labels, title="", xlabel="experts of generated layer 1", ylabel="experts of generated layer 0"
):
    """The task universe as an S×S grid (layer-0 combination × layer-1 combination) per split.

    grids: {title: (S, S) array with 1 = training task, 2 = OOD task, 0 = neither}.
    """
    from matplotlib.colors import ListedColormap

    cmap = ListedColormap([SPLIT_COLOURS["unused"], SPLIT_COLOURS["train"], SPLIT_COLOURS["ood"]])
    fig, axes = subplots(1, len(grids), figsize=(3.2 * len(grids), 3.6), squeeze=False)
    size = len(combination_labels)
    for ax, (name, grid) in zip(axes[0], grids.items()):
        ax.imshow(grid, cmap=cmap, vmin=0, vmax=2, interpolation="nearest")
        ticks = np.arange(size) if size <= 12 else np.arange(0, size, max(1, size // 8))
        ax.set_xticks(ticks, [combination_labels[i] for i in ticks], fontsize=6, rotation=90)
        ax.set_yticks(ticks, [combination_labels[i] for i in ticks], fontsize=6)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.set_title(name, fontsize=9)
    handles = [plt.Rectangle((0, 0), 1, 1, color=SPLIT_COLOURS[k], ec="k") for k in ("train", "ood", "unused")]
    fig.legend(handles, ["training task", "OOD task", "in neither"], loc="lower center", ncol=3, fontsize=8)
    figure_title(fig, title)
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    return fig


def grouped_bars(groups, series, values, ylabel, title="", ylim=None, reference=None, reference_label=None):
    """Bars of the seed mean with one dot per seed: ``values[s][g]`` is an array over seeds.

    groups: x-axis categories; series: bars within a group (legend). ``reference`` draws a dashed line.
    """
    fig, ax = subplots(figsize=(1.6 + 1.3 * len(groups) * max(1, len(series)) / 2, 3.6))
    width = 0.8 / len(series)
    colours = plt.cm.Set2(np.arange(len(series)))
    for s, (name, colour) in enumerate(zip(series, colours)):
        for g in range(len(groups)):
            x = g + (s - (len(series) - 1) / 2) * width
            v = np.asarray(values[s][g], float)
            ax.bar(x, np.nanmean(v), width, color=colour, edgecolor="k", linewidth=0.6, label=name if g == 0 else None)
            _seed_dots(ax, x, v, spread=0.3 * width)  # within the bar
    ax.set_xticks(range(len(groups)), groups, fontsize=8)
    ax.set_ylabel(ylabel)
    if ylim is not None:
        ax.set_ylim(*ylim)
    if reference is not None:
        ax.axhline(reference, color="grey", lw=0.8, ls="--", label=reference_label)
    ax.legend(fontsize=7, loc="best")
    if title:
        ax.set_title(title, fontsize=9)
    fig.tight_layout()
    return fig


def heatmap(values, row_labels, col_labels, xlabel, ylabel, colorbar_label, fmt="{:.1f}"):
    """One annotated heatmap: ``values`` (rows, cols), e.g. accuracy over hidden width x T/M; NaN cells show "–"."""
    values = np.asarray(values, float)
    fig, ax = subplots(figsize=(max(5.5, 2.5 + 0.9 * len(col_labels)), max(3.2, 1.6 + 0.6 * len(row_labels))))
    image = ax.imshow(values, cmap="viridis", origin="lower", aspect="auto")
    ax.set_xticks(range(len(col_labels)), col_labels)
    ax.set_yticks(range(len(row_labels)), row_labels)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    for (i, j), value in np.ndenumerate(values):
        ax.text(j, i, "–" if np.isnan(value) else fmt.format(value), ha="center", va="center", fontsize=8, color="w")
    fig.colorbar(image, ax=ax, label=colorbar_label)
    fig.tight_layout()
    return fig


def accuracy_curves(curves, title="", chance=None, quantity="accuracy", ylabel="accuracy (%)", log_y=False):
    """An evaluation metric (accuracy in % by default) over outer steps, mean over seeds with the seed
    range shaded.

    curves: {label: (eval_steps, {set name: (seeds, evals)})}; one panel per set name.
    """
    set_names = list(next(iter(curves.values()))[1])
    fig, axes = subplots(1, len(set_names), figsize=(3.6 * len(set_names), 3.3), squeeze=False, sharey=True)
    colours = plt.cm.tab10(np.arange(len(curves)))
    for ax, name in zip(axes[0], set_names):
        for (label, (steps, sets)), colour in zip(curves.items(), colours):
            values = np.asarray(sets[name])
            ax.plot(steps, values.mean(0), "-", color=colour, lw=1.2, label=label)
            ax.fill_between(steps, values.min(0), values.max(0), color=colour, alpha=0.15, lw=0)
        if chance is not None:
            ax.axhline(chance, color="grey", lw=0.6, ls=":")
        ax.set_xlabel("outer step")
        ax.set_title(f"{name} {quantity}", fontsize=9)
        if log_y:
            ax.set_yscale("log")
    axes[0][0].set_ylabel(ylabel)
    axes[0][-1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0))
    figure_title(fig, title)
    fig.tight_layout()
    return fig


# --------------------------------------------------------------------------------------------- preferences world

PREFERENCE_COLOURS = ("#e41a1c", "#ff7f00", "#ffd92f", "#4daf4a", "#00bcd4", "#377eb8", "#984ea3", "#f781bf")


def preference_instance(ax, walls, free_cells, instance, preferences, path_cells, title=""):
    """Draw one layout of the preferences grid world on ``ax``: walls, the objects in their colours
    (labelled with the task's reward for that colour), the agent's start and its greedy path.

    ``free_cells`` maps free-cell indices to grid indices; ``instance`` holds free-cell indices
    (``agent``, ``cells`` (objects,), ``colours`` (objects,)); ``path_cells`` (steps + 1,) free-cell indices.
    """
    size = walls.shape[0]
    ax.imshow(walls, cmap="Greys", vmin=0, vmax=1.6, origin="upper")
    to_rc = lambda i: divmod(int(free_cells[int(i)]), size)
    for cell, colour in zip(instance["cells"], instance["colours"]):
        r, c = to_rc(cell)
        ax.add_patch(plt.Circle((c, r), 0.33, color=PREFERENCE_COLOURS[int(colour)], ec="k", lw=0.6))
        ax.text(c, r + 0.62, f"{float(preferences[int(colour)]):+.1f}", ha="center", va="center", fontsize=6)
    path = np.array([to_rc(i) for i in path_cells])
    ax.plot(path[:, 1], path[:, 0], "-", color="k", lw=1.2, alpha=0.7)
    r, c = to_rc(instance["agent"])
    ax.plot(c, r, marker="^", color="k", markersize=8)
    r, c = path[-1]
    ax.plot(c, r, marker="s", mfc="none", color="k", markersize=10, mew=1.2)
    ax.set_xticks([])
    ax.set_yticks([])
    ax.set_title(title, fontsize=8)


def preference_templates(templates, task_preferences, title=""):
    """The preference modules (rows of P, M x 8 colours) and the colour preferences of a few tasks."""
    templates, task_preferences = np.asarray(templates), np.asarray(task_preferences)
    fig, axes = subplots(1, 2, figsize=(9, 3.4), gridspec_kw={"width_ratios": [len(templates), len(task_preferences)]})
    limit = np.abs(np.concatenate([templates.ravel(), task_preferences.ravel()])).max()
    for ax, values, ylabel in ((axes[0], templates, "module"), (axes[1], task_preferences, "task")):
        image = ax.imshow(values, cmap="RdBu_r", vmin=-limit, vmax=limit)
        ax.set_xticks(range(values.shape[1]), [""] * values.shape[1])
        for j, colour in enumerate(PREFERENCE_COLOURS[: values.shape[1]]):
            ax.add_patch(plt.Rectangle((j - 0.4, values.shape[0] - 0.35), 0.8, 0.3, color=colour, clip_on=False))
        ax.set_yticks(range(values.shape[0]))
        ax.set_ylabel(ylabel)
        ax.set_xlabel("colour")
    axes[0].set_title("preference modules P (rows)", fontsize=9)
    axes[1].set_title("task preferences Pᵀz", fontsize=9)
    fig.colorbar(image, ax=list(axes), label="reward of a colour", shrink=0.8)
    figure_title(fig, title)
    return fig
