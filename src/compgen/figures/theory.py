"""Figures of the theory chapter (paper §3.1-3.2, App. A.3): support graphs of Table A9 and the counterexamples of
:mod:`compgen.analysis.counterexamples`, built exactly (nothing is trained).

:func:`constructions` builds every student at a preset; the figure functions draw them. The presets only change
how the losses are measured: test inputs per task, and how hard Adam searches for the best latent of a student
on out-of-distribution tasks.
"""

from __future__ import annotations

import time

import jax
import matplotlib.pyplot as plt
import numpy as np

from compgen import params
from compgen.analysis import counterexamples as ce
from compgen.figures import FigureResult, plots
from compgen.section import Preset
from compgen.tasks import support
from compgen.tasks.teacher import apply_teacher, generated_weight

PRESETS = {
    "smoke": Preset(
        "seconds; checks that everything runs",
        common=dict(num_inputs=256, fit_inputs=128, fit_steps=50, restarts=0, num_tasks=4, lookup_max_k=2),
    ),
    "quick": Preset(
        "seconds on a CPU; the measurements of the book",
        common=dict(num_inputs=1024, fit_inputs=256, fit_steps=200, restarts=1, num_tasks=12, lookup_max_k=2),
    ),
    "paper": Preset(
        "more inputs, tasks and restarts of the latent search",
        common=dict(num_inputs=4096, fit_inputs=256, fit_steps=300, restarts=3, num_tasks=32, lookup_max_k=3),
    ),
}
COMPONENT_COLOURS = plt.get_cmap("tab10").colors
FLOOR = 1e-16  # exact zeros are drawn at this height on the log axis


def constructions(preset="quick", seed=0) -> dict:
    """Every student of the chapter at ``preset`` from ``key(seed)``: ``{"identified", "two", "perm", "lookup",
    "settings", "preset", "seed", "seconds"}``."""
    if preset not in PRESETS:
        raise params.ParameterError(f"preset must be one of {tuple(PRESETS)}, got {preset!r}")
    seed = params.check_int("seed", seed, ge=0)
    settings = dict(PRESETS[preset].common)
    fit = ce.Fit(**{k: settings[k] for k in ("num_inputs", "fit_inputs", "fit_steps", "restarts")})
    key_two, key_perm, key_lookup, key_ident = jax.random.split(jax.random.key(seed), 4)
    start = time.time()
    lookup_masks = support.table_a9(1).masks
    out = {
        "identified": ce.linearly_identified_student(
            key_ident, num_tasks=settings["num_tasks"], num_inputs=settings["num_inputs"]
        ),
        "two": ce.disconnected_two_modules(key_two, num_tasks=settings["num_tasks"], fit=fit),
        "perm": ce.disconnected_permutation(
            key_perm, masks=support.table_a9(5).spec, num_tasks=settings["num_tasks"], fit=fit
        ),
        "lookup": ce.overparameterised_lookup(
            key_lookup,
            masks=lookup_masks,
            ood_masks=ce.default_ood_masks(lookup_masks, max_k=settings["lookup_max_k"]),
            fit=fit,
        ),
    }
    out.update(settings=settings, preset=preset, seed=seed, seconds=time.time() - start)
    return out


def _note(built) -> str:
    return f"Preset {built['preset']}, seed {built['seed']}."


def _result(built, fig, text, table="") -> FigureResult:
    """``fig`` captioned by ``text`` and the preset and seed it was built at."""
    return FigureResult(fig, f"{text} {_note(built)}", table)


def settings_text(built) -> str:
    s = built["settings"]
    return (
        f"**Preset `{built['preset']}`, seed {built['seed']}** ({PRESETS[built['preset']].description}). Nothing "
        f"in this chapter is trained: {s['num_inputs']} test inputs per task; for out-of-distribution tasks the "
        f"best student latent $\\hat z$ is searched by {s['fit_steps']} Adam steps on {s['fit_inputs']} inputs "
        f"from the naive guess and from {s['restarts']} random starts."
    )


# --------------------------------------------------------------------------------------------- support graphs


def draw_support_graph(ax, masks, title):
    """Task families on a circle; edges where masks share a module; colour = connected component."""
    adjacency = support.support_graph(masks)
    k = len(masks)
    angles = np.pi / 2 - 2 * np.pi * np.arange(k) / k
    xy = np.stack([np.cos(angles), np.sin(angles)], 1)
    for i, j in zip(*np.nonzero(np.triu(adjacency))):
        ax.plot(*xy[[i, j]].T, color="0.6", lw=0.9, zorder=1)
    colour = np.zeros(k, int)
    for c, component in enumerate(support.connected_components(masks)):
        colour[list(component)] = c
    for i in range(k):
        ax.scatter(*xy[i], s=260, color=COMPONENT_COLOURS[colour[i] % 10], edgecolor="k", lw=0.6, zorder=2)
        ax.text(
            *xy[i],
            support.mask_to_string(masks[i]),
            ha="center",
            va="center",
            fontsize=6.5,
            fontweight="bold",
            zorder=3,
        )
    ax.set_title(title, fontsize=7.5)
    ax.set_xlim(-1.3, 1.3)
    ax.set_ylim(-1.3, 1.3)
    ax.set_aspect("equal")
    ax.axis("off")


def support_graphs(built) -> FigureResult:
    """The support graph of every Table A9 distribution, with our connectivity verdict beside the paper's."""
    fig, axes = plots.subplots(2, 4, figsize=(plots.COLUMN_WIDTH, 4.4))
    rows = []
    word = lambda flag: "connected" if flag else "disconnected"
    for ax, col in zip(axes.flat, support.TABLE_A9):
        masks = col.masks
        connected = support.is_connected(masks)
        agrees = connected == col.connected
        draw_support_graph(
            ax,
            masks,
            f"{col.column}: {col.name}\n({col.distribution}) paper: {word(col.connected)}\n"
            f"ours: {word(connected)} {'✓' if agrees else '✗'}",
        )
        rows.append(
            f"| {col.column} | {col.name} | {col.distribution} | `{col.spec}` | {len(masks)} | "
            f"{'yes' if support.is_compositional(masks, col.n_modules) else 'no'} | "
            f"{len(support.connected_components(masks))} | {word(connected)} | {word(col.connected)} | "
            f"{'✓' if agrees else '✗'} |"
        )
    legend = axes.flat[-1]
    legend.axis("off")
    legend.text(
        0.0,
        0.5,
        "node = task family\n(its active modules)\n\nedge = the two families\nshare a module\n\n"
        "colour = connected\ncomponent",
        fontsize=7.5,
        va="center",
        transform=legend.transAxes,
    )
    fig.tight_layout()
    table = (
        "| column | name | distribution | masks | # families | compositional | # components | ours | paper | "
        "agree |\n|---|---|---|---|---|---|---|---|---|---|\n" + "\n".join(rows)
    )
    return _result(
        built,
        fig,
        "Support graphs of the task distributions of Table A9 (M = 6 modules): a node is a task family, an edge "
        "joins families that share a module, colours mark connected components.",
        table,
    )


# --------------------------------------------------------------------------------------------- counterexamples


def identified(built) -> str:
    ident = built["identified"]
    return (
        f"Identified student (M̂ = 6, ĥ = 16; cond(F) = {ident['condition_number']:.1f}): maximum training loss "
        f"{ident['train_loss'].max():.1e}, maximum OOD loss {ident['ood_loss'].max():.1e}; the targets have "
        f"½·mean y² ≈ {ident['ood_target_power'].mean():.1e}. {_note(built)}"
    )


def two_modules(built) -> FigureResult:
    """Teacher and student outputs along a circle through input space, on the two training families and on a
    task that combines them."""
    two, seed = built["two"], built["seed"]
    n_in = two["teacher"]["modules"].shape[1]
    basis = np.linalg.qr(np.asarray(jax.random.normal(jax.random.key(seed + 1), (n_in, 2))))[0]
    phi = np.linspace(0, 2 * np.pi, 400)
    circle = np.sqrt(n_in) * (np.cos(phi)[:, None] * basis[:, 0] + np.sin(phi)[:, None] * basis[:, 1])
    panels = [
        ("training task, family {0}", two["train_latents"][0], None),
        ("training task, family {1}", two["train_latents"][1], None),
        ("OOD task, family {0, 1}", two["ood_latents"][0], two["ood_latents_student_fitted"][0]),
    ]
    fig, axes = plots.subplots(1, 3, figsize=(plots.COLUMN_WIDTH, 2.6), sharey=True)
    for ax, (title, z, z_fit) in zip(axes, panels):
        ax.plot(phi, apply_teacher(two["teacher"], z, circle)[:, 0], color="k", lw=2, label="teacher")
        ax.plot(
            phi, apply_teacher(two["student"], z, circle)[:, 0], color="C1", ls="--", lw=1.6, label="student, ẑ = z"
        )
        if z_fit is not None:
            ax.plot(
                phi,
                apply_teacher(two["student"], z_fit, circle)[:, 0],
                color="C0",
                ls=":",
                lw=1.8,
                label="student, best ẑ (Adam)",
            )
        ax.set_title(f"{title}\nz = ({z[0]:.2f}, {z[1]:.2f})", fontsize=8)
        ax.set_xlabel("input angle φ (rad)")
    axes[0].set_ylabel("network output y")
    axes[-1].legend(fontsize=7, loc="upper right")
    fig.tight_layout()
    return _result(
        built,
        fig,
        "Disconnected support with two modules: teacher and student outputs on inputs "
        "x(φ) = √n (cos φ u + sin φ v) for a random orthonormal pair u, v.",
    )


def permutation(built) -> FigureResult:
    """|cos| between teacher and student hidden units' incoming weights at ẑ = z, per task."""
    perm = built["perm"]
    in_a = int(np.flatnonzero([m[:3].any() for m in perm["train_masks"]])[0])
    in_b = int(np.flatnonzero([m[3:].any() for m in perm["train_masks"]])[0])
    cases = [
        ("training task, triangle {0,1,2}", perm["train_latents"][in_a]),
        ("training task, triangle {3,4,5}", perm["train_latents"][in_b]),
        ("OOD task joining the triangles", perm["ood_latents"][0]),
    ]

    def cosines(w_a, w_b):
        w_a, w_b = w_a / np.linalg.norm(w_a, axis=0), w_b / np.linalg.norm(w_b, axis=0)
        return np.abs(w_a.T @ w_b)

    fig, axes = plots.subplots(1, 3, figsize=(plots.COLUMN_WIDTH, 2.9), layout="constrained")
    ticks = np.arange(0, perm["teacher"]["modules"].shape[2], 4)
    for ax, (title, z) in zip(axes, cases):
        image = ax.imshow(
            cosines(
                np.asarray(generated_weight(perm["teacher"]["modules"], z)),
                np.asarray(generated_weight(perm["student"]["modules"], z)),
            ),
            vmin=0,
            vmax=1,
            cmap="magma",
        )
        ax.set_title(f"{title}\n(active modules {''.join(str(i) for i in np.flatnonzero(z))})", fontsize=8)
        ax.set_xticks(ticks)
        ax.set_yticks(ticks)
        ax.set_xlabel("student hidden unit j")
    axes[0].set_ylabel("teacher hidden unit i")
    fig.colorbar(image, ax=list(axes), shrink=0.85, label="|cos| at ẑ = z")
    return _result(
        built,
        fig,
        "Disconnected support (Table A9, column 5): which student hidden unit plays which teacher "
        "unit, by the |cosine| of their incoming weights at ẑ = z.",
    )


def loss_panel(ax, result, title):
    """Relative loss (loss / ½·mean y²) of every task: training, OOD with naive ẑ, OOD with best ẑ."""
    groups = [
        ("training\n(ẑ written down)", result["train_loss"] / result["train_target_power"]),
        ("OOD\nnaive ẑ", result["ood_relative_loss_naive"]),
        ("OOD\nbest ẑ (Adam)", result["ood_relative_loss_fitted"]),
    ]
    for x, (_label, values) in enumerate(groups):
        values = np.maximum(np.asarray(values, float), FLOOR)
        ax.bar(x, np.median(values), color=["#1b7837", "#d6604d", "#b2182b"][x], alpha=0.75, width=0.6)
        ax.scatter(x + np.linspace(-0.18, 0.18, len(values)), values, s=9, color="k", zorder=3)
    ax.set_xticks(range(len(groups)), [g[0] for g in groups], fontsize=7)
    ax.set_yscale("log")
    ax.set_ylim(FLOOR / 3, 3)
    ax.axhline(FLOOR, color="grey", lw=0.6, ls=":")
    ax.set_ylabel("relative loss L / (½·mean y²)")
    ax.set_title(title, fontsize=8)


def disconnected_losses(built) -> FigureResult:
    fig, axes = plots.subplots(1, 2, figsize=(plots.COLUMN_WIDTH, 3.0), sharey=True)
    loss_panel(axes[0], built["two"], "two modules, two hidden units (App. A.3)")
    loss_panel(axes[1], built["perm"], "M = 6, h = 16, Table A9 column 5")
    fig.tight_layout()
    return _result(
        built,
        fig,
        "Disconnected support: per-task relative loss (bars: median, dots: tasks; exact zeros "
        "drawn on the dotted line at 1e-16), measured on fresh inputs.",
    )


def lookup(built) -> FigureResult:
    """The overparameterised look-up student: its modules, its latents for an OOD task, and the per-task losses."""
    result = built["lookup"]
    masks = support.table_a9(1).masks
    k, h = len(masks), result["teacher"]["modules"].shape[2]
    block_norms = np.linalg.norm(result["student"]["modules"], axis=1)  # (K, K h)
    fig, axes = plots.subplots(1, 3, figsize=(plots.COLUMN_WIDTH, 3.2), gridspec_kw={"width_ratios": [1.5, 1.0, 1.2]})
    image = axes[0].imshow(block_norms, aspect="auto", cmap="Greys", interpolation="nearest")
    labels = [support.mask_to_string(m) for m in masks]
    axes[0].set_yticks(range(k), labels, fontsize=6)
    axes[0].set_xticks(np.arange(k) * h + h / 2 - 0.5, range(k), fontsize=6)
    axes[0].set_xlabel(f"hidden units, blocks of h = {h}", fontsize=7)
    axes[0].set_ylabel("student module (training mask)", fontsize=7)
    axes[0].set_title("‖Θ̂_k[:, j]‖", fontsize=8)
    fig.colorbar(image, ax=axes[0], shrink=0.8)
    axes[1].bar(np.arange(k) - 0.2, result["ood_latents_student_naive"][0], width=0.4, color="#d6604d", label="naive")
    axes[1].bar(
        np.arange(k) + 0.2, result["ood_latents_student_fitted"][0], width=0.4, color="#b2182b", label="best (Adam)"
    )
    axes[1].axhline(0, color="k", lw=0.5)
    axes[1].set_xticks(range(k), labels, fontsize=6, rotation=90)
    axes[1].set_ylabel("ẑ_k", fontsize=7)
    axes[1].set_title(f"ẑ for OOD task {support.mask_to_string(result['ood_masks'][0])}", fontsize=8)
    axes[1].legend(fontsize=6)
    loss_panel(axes[2], result, f"K = {k} tasks, M̂ = {k}, ĥ = {k * h}")
    fig.tight_layout()
    return _result(
        built,
        fig,
        "Overparameterised student (Table A9 column 1, discrete): one module and one block of "
        "hidden units per training task (left), its latents for an OOD task (middle) and the "
        "per-task relative loss (right; bars: median, dots: tasks).",
    )


def summary(built) -> str:
    """Markdown: every student's training loss and OOD relative losses."""
    ident, two, perm, look = (built[k] for k in ("identified", "two", "perm", "lookup"))
    k, h = len(support.table_a9(1).masks), look["teacher"]["modules"].shape[2]
    # (max training loss, median OOD relative loss with the naive latent, with the best latent found by Adam)
    losses = lambda r: (
        r["train_loss"].max(),
        np.median(r["ood_relative_loss_naive"]),
        np.median(r["ood_relative_loss_fitted"]),
    )
    identified = (ident["train_loss"].max(), np.median(ident["ood_loss"] / ident["ood_target_power"]), float("nan"))
    rows = [
        ("identified student (Theorem 2; ẑ = F z)", "column 1: compositional, connected", "M̂ = 6, ĥ = 16", *identified),
        ("two modules, swapped units", "{0}, {1}: disconnected", "M̂ = 2, ĥ = 2", *losses(two)),
        ("per-component permutation", "column 5: disconnected", "M̂ = 6, ĥ = 16", *losses(perm)),
        ("one module per task", "column 1: compositional, connected", f"M̂ = {k}, ĥ = {k * h}", *losses(look)),
    ]
    lines = [
        "| student | training support | size | max training loss | OOD relative loss, naive ẑ (median) "
        "| OOD relative loss, best ẑ (median) |",
        "|---|---|---|---|---|---|",
    ]
    for name, sup, size, train, naive, best in rows:
        lines.append(
            f"| {name} | {sup} | {size} | {train:.1e} | {naive:.3g} | {'–' if np.isnan(best) else f'{best:.3f}'} |"
        )
    return (
        "\n".join(lines) + f"\n\nAll constructions exact; losses on {built['settings']['num_inputs']} fresh inputs "
        f"per task. {_note(built)} Built in {built['seconds']:.0f} s."
    )
