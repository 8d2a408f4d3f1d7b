"""Figures of the teacher-student chapter (paper §3.3): Fig. 2C, Fig. 2D, Table A1, training curves; their claims
are judged by :mod:`compgen.analysis.teacher_student`."""

from __future__ import annotations

import numpy as np

from compgen import ledger, metrics
from compgen.analysis import teacher_student as A
from compgen.figures import FigureResult, caption, final, mean_std, paper_numbers, plots
from compgen.runs import Runs
from compgen.tasks import support, teacher

SECTION = A.SECTION
# Table A1 of the paper (App. B.1): {weight decay: alignment of four overparameterised discrete students}.
_A1 = paper_numbers(SECTION)["table_a1"]
PAPER_TABLE_A1 = dict(zip(_A1["weight_decay"], map(tuple, _A1["alignment"])))


def _caption(runs: Runs, cfgs, what):
    c = cfgs[0]
    return caption(
        what,
        runs.preset,
        cfgs,
        details=(
            f"{c.meta_batch} tasks/step",
            f"{c.inner_steps} inner steps",
            f"M = {c.n_modules}, n = {c.n_in}, h = {c.teacher_hidden}",
        ),
    )


def fig2c(runs: Runs) -> FigureResult:
    """Fig. 2C: final module alignment per Table A9 column (student factors (2, 2), no weight decay)."""
    columns = A.columns(runs)
    values = [None if runs.output(c) is None else A.final_alignment(runs.output(c)) for _, c in columns]
    present = [(col, v) for (col, _), v in zip(columns, values) if v is not None]
    fig = plots.fig2c_alignment(
        [f"{col.column}: {col.name}" for col, _ in present],
        [col.distribution for col, _ in present],
        [col.connected for col, _ in present],
        np.stack([v for _, v in present]),
    )
    cfgs = [c for _, c in columns if c is not None]
    lines = [
        "| column | masks | distribution | support (paper) | alignment | rel. loss (train) | R² (1…M−1-hot) |",
        "|---|---|---|---|---|---|---|",
    ]
    for (col, cfg), value in zip(columns, values):
        if value is None:
            continue
        out = runs.output(cfg)
        rel = final(out, "relative_loss", 0)
        r2 = np.nanmean(np.asarray(out["eval/r2"])[:, -1, 1:-1], axis=(1, 2))
        lines.append(
            f"| {col.column} | `{col.spec}` | {col.distribution} | "
            f"{'connected' if col.connected else 'disconnected'} | {mean_std(value)} | {mean_std(rel, 4)} | "
            f"{mean_std(r2)} |"
        )
    return FigureResult(
        fig,
        _caption(
            runs,
            cfgs,
            "Fig. 2C: module alignment after training, one student per Table A9 "
            "column (green: connected support); bars are seed means, dots "
            "single seeds",
        ),
        "\n".join(lines),
        A.CHAPTER.shown_at(runs, "fig2c"),
    )


def fig2d(runs: Runs) -> FigureResult:
    """Fig. 2D: final alignment over the student's (hidden, module) factors, discrete and continuous tasks."""
    values = A.fig2d_values(runs)
    cfgs = runs.configs("fig2d")
    base = cfgs[0]
    factors = values[next(iter(values))][0]
    fig = plots.fig2d_overparameterisation(
        factors, {d: v[1] for d, v in values.items()}, base.teacher_hidden, base.n_modules
    )
    lines = [
        "| distribution | " + " | ".join(f"({fh}, {fm})" for fh, fm in factors) + " |",
        "|---|" + "---|" * len(factors),
    ]
    for d, (_, v) in values.items():
        lines.append(f"| {d} | " + " | ".join(mean_std(row) for row in v) + " |")
    return FigureResult(
        fig,
        _caption(
            runs,
            cfgs,
            "Fig. 2D: module alignment against the student's size (hidden "
            "factor, module factor); one-hots + ring pairs, no weight decay",
        ),
        "Module alignment, mean ± std over seeds, per student (hidden factor, module factor):\n\n" + "\n".join(lines),
        A.CHAPTER.shown_at(runs, "fig2d"),
    )


def lookup_reference(masks: str, n_modules: int):
    """``(effective dimensions, non-affine share)`` of the theory chapter's look-up student on the discrete tasks of
    ``masks``: every training task inferred as a latent of its own (a one-hot), each task counted once."""
    z = teacher.discrete_latents(support.parse_masks(masks, n_modules))
    zhat = np.eye(len(z), dtype=np.float32)
    return float(metrics.effective_dimensions(zhat)), float(metrics.nonaffine_share(z, zhat))


def _late_mean(output, key, steps=500):
    """Mean of the per-step ``steps/<key>`` over the last ``steps`` outer steps and the seeds."""
    return float(np.mean(np.asarray(output[f"steps/{key}"])[:, -steps:]))


def _final_or_none(output, key):
    return final(output, key) if f"eval/{key}" in output else None


def students(runs: Runs) -> FigureResult:
    """What the Fig. 2D students' inferred latents do on their training tasks, beside identification and the theory
    chapter's look-up student: alignment, the number of directions in which ẑ differs across tasks and the share
    of its variance that is not an affine function of z."""
    cfgs = [c for c in runs.configs("fig2d") if runs.output(c) is not None]
    lines = [
        "| tasks | student (hidden units, modules) | alignment | directions of ẑ (of z) | not affine in z | "
        "loss at ẑ₀ → after inference |",
        "|---|---|---|---|---|---|",
    ]
    for c in cfgs:
        out = runs.output(c)
        dims, dims_z, share = (
            _final_or_none(out, k) for k in ("latent_dims", "teacher_latent_dims", "latent_nonaffine")
        )
        lines.append(
            f"| {c.distribution} | ({c.student_hidden}, {c.student_modules}) | {mean_std(A.final_alignment(out))} | "
            + (
                f"{mean_std(dims, 2)} ({np.mean(dims_z):.2f}) | {mean_std(share)} | "
                if dims is not None
                else "– | – | "
            )
            + f"{_late_mean(out, 'inner_loss_init'):.2g} → {_late_mean(out, 'inner_loss_final'):.2g} |"
        )
    if cfgs:
        c = cfgs[0]
        n_masks = len(c.mask_array())
        dims, share = lookup_reference(c.masks, c.n_modules)
        lines.append("| discrete | identification, any size | 1 | those of z | 0 | – |")
        lines.append(
            f"| discrete | the [theory chapter](theory)'s look-up student ({n_masks} modules, one per task) | "
            f"low | {dims:.2f} | {share:.3f} | – |"
        )
    return FigureResult(
        None,
        _caption(
            runs,
            cfgs,
            "What the Fig. 2D students infer on their training tasks (mean ± std over seeds at the last evaluation): "
            "module alignment; the number of directions in which the inferred latents ẑ differ across the training "
            "tasks (participation ratio of their covariance; z's own in brackets); the share of ẑ's variance that "
            "no affine function of z explains; the half-MSE of a training task at the fixed initial latent ẑ₀ and "
            "after the inner loop, over the last 500 outer steps",
        ),
        "\n".join(lines),
    )


def table_a1(runs: Runs) -> FigureResult:
    """Table A1: overparameterised discrete students under weight decay, beside the paper's numbers."""
    cfgs, factors, decays, value = A.table_a1_data(runs)
    lines = [
        "| weight decay | "
        + " | ".join(f"ours ({cfgs[0].teacher_hidden * fh}, {cfgs[0].n_modules * fm})" for fh, fm in factors)
        + " | paper (4 columns) |",
        "|---|" + "---|" * (len(factors) + 1),
    ]
    for wd in decays:
        paper_row = PAPER_TABLE_A1.get(wd)
        lines.append(
            f"| {wd:g} | "
            + " | ".join(mean_std(value[(wd, f)]) for f in factors)
            + " | "
            + (" · ".join(f"{v:.4f}" for v in paper_row) if paper_row else "–")
            + " |"
        )
    return FigureResult(
        None,
        _caption(
            runs,
            cfgs,
            "Table A1: final module alignment (mean ± std over seeds) of "
            "overparameterised students (hidden units, modules) on discrete "
            "tasks; the paper's column sizes are unknown",
        ),
        "\n".join(lines),
        A.CHAPTER.shown_at(runs, "table-a1"),
    )


def curves(runs: Runs) -> FigureResult:
    """Training loss and alignment over outer steps of the Fig. 2C students, mean over seeds."""
    columns = [(col, c) for col, c in A.columns(runs) if runs.output(c) is not None]
    labels = [f"{col.column}: {col.name}" for col, _ in columns]
    outs = [runs.output(c) for _, c in columns]
    fig = plots.training_curves(
        {lab: o["steps/loss"] for lab, o in zip(labels, outs)},
        outs[0]["eval_steps"],
        {lab: o["eval/alignment"] for lab, o in zip(labels, outs)},
        labels,
    )
    return FigureResult(
        fig,
        _caption(
            runs,
            [c for _, c in columns],
            "Training loss (running mean) and module alignment of the Fig. 2C students, mean over seeds",
        ),
    )


# --------------------------------------------------------------------------------------------- the paper's scale

PAPER_SCALE_STATE = "records/paper/fig2c"  # the ledger's Fig. 2C work, as the book's notebooks name it
PAPER_REFERENCE = "the paper: about 1 with a connected support"


def paper_scale(record) -> FigureResult:
    """Fig. 2C from the ledger's record of it at the paper's configuration (:mod:`compgen.ledger`), complete or in
    progress: module alignment over the steps trained so far beside the paper's value, the latest alignment per Table
    A9 column, and the claims (:func:`paper_scale_claims`: judged only once the run is complete)."""
    columns = A.paper_columns(record)
    seeds = tuple(record.configs[0]["seeds"])
    done, total = record.steps_done, record.outer_steps
    curves = [
        (f"{col.column}: {col.name}", col.distribution, col.connected, np.asarray(e["eval"]["alignment"], float))
        for col, e in columns
    ]
    fig = plots.alignment_so_far(record.eval_steps, curves, total, 1.0, PAPER_REFERENCE)
    lines = [
        f"| column | masks | distribution | support (paper) | alignment at step {record.eval_steps[-1]:,} | "
        "rel. loss (train) | R² (1…M−1-hot) |",
        "|---|---|---|---|---|---|---|",
    ]
    for (col, e), (_, _, _, values) in zip(columns, curves):
        rel = np.asarray(e["eval"]["relative_loss"], float)[:, -1, 0]
        r2 = np.nanmean(np.asarray(e["eval"]["r2"], float)[:, -1, 1:-1], axis=(1, 2))
        lines.append(
            f"| {col.column} | `{col.spec}` | {col.distribution} | "
            f"{'connected' if col.connected else 'disconnected'} | {mean_std(values[:, -1])} | {mean_std(rel, 4)} | "
            f"{mean_std(r2)} |"
        )
    where = ledger.standing(record)
    stand = "complete" if record.complete else f"in progress: {done:,} of {total:,} outer steps"
    what = (
        f"Fig. 2C at the paper's configuration, {stand} ({where['leases']} lease(s) on {where['devices']}, "
        f"{where['device_hours']:.2f} device-hours in all): module alignment over outer steps, one student per "
        f"Table A9 column (green: connected support; thick: seed mean, thin: single seeds; dashed: {PAPER_REFERENCE})"
    )
    return FigureResult(
        fig,
        f"{what}. Preset {record.preset}; seeds {', '.join(map(str, seeds))}.",
        "\n".join(lines),
        A.paper_scale_claims(record),
    )


def paper_scale_section(folder):
    """What the chapter shows of Fig. 2C at the paper's scale: :func:`paper_scale` of the ledger's state in
    ``folder`` (with a note when it is stale, :func:`compgen.ledger.staleness`), or a note that no lease has run it. A
    damaged record stops the chapter with one line naming it (:func:`compgen.recordfile.read`)."""
    record = ledger.read_progress(folder)
    if record is None:
        return (
            ":::{admonition} Not run yet\n:class: note\nFig. 2C at the paper's configuration needs a GPU: the first "
            "work of the paper-scale ledger (`records/ledger.json`), which `tools/gpu_lease.py` advances on every GPU "
            "lease; no lease has run it yet.\n:::"
        )
    result = paper_scale(record)
    stale = ledger.staleness(record)
    if stale:
        result.notes = (
            ":::{admonition} Recorded by older code\n:class: warning\nThis record no longer shows what the current "
            f"code would compute: {'; '.join(stale)}. Its next lease starts it again (`tools/gpu_lease.py`).\n:::"
        )
    return result
