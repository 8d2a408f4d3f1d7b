"""Figures and claims of the teacher-student chapter (paper §3.3): Fig. 2C, Fig. 2D, Table A1, training curves."""

from __future__ import annotations

import dataclasses

import numpy as np

from compgen import ledger, metrics
from compgen.analysis import claims as C
from compgen.figures import FigureResult, caption, final, mean_std, paper_numbers, plots
from compgen.notebook import Runs
from compgen.tasks import support, teacher

SECTION = "teacher_student"
# Table A1 of the paper (App. B.1): {weight decay: alignment of four overparameterised discrete students}.
_A1 = paper_numbers(SECTION)["table_a1"]
PAPER_TABLE_A1 = dict(zip(_A1["weight_decay"], map(tuple, _A1["alignment"])))
ALIGNMENT_MARGIN = 0.1  # the size a claim on alignment must reach
IDENTIFIED = 0.9  # alignment of a student that identified the modules (connected support)
DECAY_GAIN = 0.05  # the alignment gain from weight decay that would count as a rescue (Table A1)

FIG2C = C.ClaimSpec(  # {distribution}: discrete or continuous
    SECTION,
    "Fig. 2C",
    "connected support gives clearly higher module alignment than disconnected ({distribution} tasks), near "
    "identification",
    f"connected − disconnected alignment (column means per seed) ≥ {ALIGNMENT_MARGIN}, and connected ≥ {IDENTIFIED}",
    paper="≈ 1 vs clearly lower",
    anchor="#fig2c",
)
FIG2D = C.ClaimSpec(
    SECTION,
    "Fig. 2D",
    "beyond about 2x overparameterisation alignment drops for discrete tasks and not for continuous ones",
    f"alignment drop from the 2x student to the largest is ≥ {ALIGNMENT_MARGIN} larger for discrete than for "
    "continuous tasks",
    paper="qualitative",
    anchor="#fig2d",
)
TABLE_A1 = C.ClaimSpec(
    SECTION,
    "Table A1",
    "weight decay does not rescue the alignment of overparameterised students on discrete tasks",
    f"mean alignment gain of weight decay over none (over the overparameterised cells) stays below {DECAY_GAIN:g}",
    paper="0.67–0.85, no gain",
    anchor="#table-a1",
)


def fig2c_check(connected, disconnected) -> C.Check:
    """Fig. 2C's criterion on the per-seed means over the connected and over the disconnected columns."""
    connected = np.asarray(connected, float)
    return C.paired(connected, disconnected, ALIGNMENT_MARGIN, level_ok=bool(connected.mean() >= IDENTIFIED))


def fig2d_check(drop_discrete, drop_continuous) -> C.Check:
    """Fig. 2D's criterion on the per-seed alignment drops from the 2x student to the largest."""
    return C.paired(drop_discrete, drop_continuous, ALIGNMENT_MARGIN)


def table_a1_check(mean_gain) -> C.Check:
    """Table A1's criterion on the per-seed mean gain of weight decay over none."""
    mean_gain = np.asarray(mean_gain, float)
    return C.lower(mean_gain, np.full_like(mean_gain, DECAY_GAIN), 0.0)


def final_alignment(output):
    """Module alignment at the last evaluation, one value per seed: (seeds,)."""
    return final(output, "alignment")


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


def _columns(runs: Runs):
    """(Table A9 column, config) of Fig. 2C, matched by masks and distribution."""
    out = []
    for col in support.TABLE_A9:
        cfg = runs.one("fig2c", masks=col.spec, distribution=col.distribution)
        out.append((col, cfg))
    return out


def _fig2c_claims(runs: Runs, values):
    seeds = runs.configs("fig2c")[0].seeds if runs.configs("fig2c") else ()
    return fig2c_claims([(col, v) for (col, _), v in zip(_columns(runs), values)], seeds, runs.pooled)


def fig2c_claims(column_values, seeds, pooled=False) -> list:
    """Fig. 2C's two claims (discrete, continuous tasks) from ``[(Table A9 column, final alignment per seed or
    None)]``: each distribution's connected columns against its disconnected ones (:func:`fig2c_check`), under the
    rule for runs pooled over seed sets where ``pooled``."""
    found = []
    for distribution in ("discrete", "continuous"):
        pick = lambda connected: [
            v
            for col, v in column_values
            if col.distribution == distribution and col.connected == connected and v is not None
        ]
        conn, disc = pick(True), pick(False)
        check, ours = None, "–"
        if conn and disc:
            conn_mean, disc_mean = np.mean(conn, axis=0), np.mean(disc, axis=0)
            check = fig2c_check(conn_mean, disc_mean)
            ours = (
                f"connected {conn_mean.mean():.3f}, disconnected {disc_mean.mean():.3f}: "
                f"{C.describe_difference(check, digits=3)}"
            )
        found.append(FIG2C.judge(check, ours, seeds, pooled, distribution=distribution))
    return found


def fig2c(runs: Runs) -> FigureResult:
    """Fig. 2C: final module alignment per Table A9 column (student factors (2, 2), no weight decay)."""
    columns = _columns(runs)
    values = [None if runs.output(c) is None else final_alignment(runs.output(c)) for _, c in columns]
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
        _fig2c_claims(runs, values),
    )


def _fig2d_values(runs: Runs):
    """{distribution: (factors, alignment (cells, seeds))} of Fig. 2D."""
    out = {}
    for distribution in ("discrete", "continuous"):
        cfgs = [c for c in runs.configs("fig2d", distribution=distribution) if runs.output(c) is not None]
        if cfgs:
            out[distribution] = (
                [(c.hidden_factor, c.module_factor) for c in cfgs],
                np.stack([final_alignment(runs.output(c)) for c in cfgs]),
            )
    return out


def _fig2d_claims(runs: Runs, values):
    check, ours, seeds = None, "–", ()
    if set(values) == {"discrete", "continuous"}:
        factors = values["discrete"][0]
        mild = factors.index((2, 2)) if (2, 2) in factors else 0
        large = int(np.argmax([fh * fm for fh, fm in factors]))
        drop = {d: v[1][mild] - v[1][large] for d, v in values.items()}
        check = fig2d_check(drop["discrete"], drop["continuous"])
        ours = (
            f"drop from {factors[mild]} to {factors[large]}: discrete {drop['discrete'].mean():+.3f}, continuous "
            f"{drop['continuous'].mean():+.3f}; difference {C.describe_difference(check, digits=3)}"
        )
        seeds = runs.configs("fig2d")[0].seeds
    return [FIG2D.judge(check, ours, seeds, runs.pooled)]


def fig2d(runs: Runs) -> FigureResult:
    """Fig. 2D: final alignment over the student's (hidden, module) factors, discrete and continuous tasks."""
    values = _fig2d_values(runs)
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
        _fig2d_claims(runs, values),
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
            f"| {c.distribution} | ({c.student_hidden}, {c.student_modules}) | {mean_std(final_alignment(out))} | "
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


def _table_a1_data(runs: Runs):
    cfgs = [c for c in runs.configs("table_a1") if runs.output(c) is not None]
    factors = list(dict.fromkeys((c.hidden_factor, c.module_factor) for c in cfgs))
    decays = list(dict.fromkeys(c.weight_decay for c in cfgs))
    value = {(c.weight_decay, (c.hidden_factor, c.module_factor)): final_alignment(runs.output(c)) for c in cfgs}
    return cfgs, factors, decays, value


def _table_a1_claims(runs: Runs):
    cfgs, factors, decays, value = _table_a1_data(runs)
    check, ours = None, "–"
    if 0.0 in decays and len(decays) > 1:
        gains = np.stack([value[(wd, f)] - value[(0.0, f)] for wd in decays if wd for f in factors])  # (cells, seeds)
        mean_gain = gains.mean(0)
        check = table_a1_check(mean_gain)
        ours = f"mean gain from weight decay {mean_gain.mean():+.3f} (largest cell {gains.mean(1).max():+.3f})"
    return [TABLE_A1.judge(check, ours, cfgs[0].seeds if cfgs else (), runs.pooled)]


def table_a1(runs: Runs) -> FigureResult:
    """Table A1: overparameterised discrete students under weight decay, beside the paper's numbers."""
    cfgs, factors, decays, value = _table_a1_data(runs)
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
        _table_a1_claims(runs),
    )


def curves(runs: Runs) -> FigureResult:
    """Training loss and alignment over outer steps of the Fig. 2C students, mean over seeds."""
    columns = [(col, c) for col, c in _columns(runs) if runs.output(c) is not None]
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


def claims(runs: Runs) -> list:
    """Every claim of the chapter, computed from ``runs`` (stored runs may be missing: "not run")."""
    values = [None if runs.output(c) is None else final_alignment(runs.output(c)) for _, c in _columns(runs)]
    return [*_fig2c_claims(runs, values), *_fig2d_claims(runs, _fig2d_values(runs)), *_table_a1_claims(runs)]


# --------------------------------------------------------------------------------------------- the paper's scale

PAPER_SCALE_STATE = "records/paper/fig2c"  # the ledger's Fig. 2C work, as the book's notebooks name it
PAPER_REFERENCE = "the paper: about 1 with a connected support"


def paper_columns(record) -> list:
    """``[(Table A9 column, entry)]`` of a ledger record of Fig. 2C (:mod:`compgen.ledger`), in the record's order."""
    by_pick = {(col.spec, col.distribution): col for col in support.TABLE_A9}
    return [(by_pick[(e["select"]["masks"], e["select"]["distribution"])], e) for e in record["configs"]]


def paper_scale_claims(record) -> list:
    """Fig. 2C's claims from a ledger record: judged (:func:`fig2c_claims`) once the run is complete; before, "not
    run" with where the run stands in ``ours`` and ``details["progress"]`` = (steps done, outer steps)."""
    columns = [(col, np.asarray(e["eval"]["alignment"], float)[:, -1]) for col, e in paper_columns(record)]
    seeds = tuple(record["configs"][0]["seeds"])
    if record["complete"]:
        return fig2c_claims(columns, seeds)
    done, total = record["steps_done"], record["outer_steps"]
    found = []
    for claim in fig2c_claims(columns, seeds):
        at = f"at {done:,} of {total:,} steps"
        so_far = claim.ours.split(":")[0] if claim.ours != "–" else ""
        found.append(
            dataclasses.replace(
                claim,
                verdict=C.NOT_RUN,
                ours=f"{at}{': ' + so_far if so_far else ''} (no verdict before the last step)",
                details={**claim.details, "progress": (done, total)},
            )
        )
    return found


def paper_scale(record) -> FigureResult:
    """Fig. 2C from the ledger's record of it at the paper's configuration (:mod:`compgen.ledger`), complete or in
    progress: module alignment over the steps trained so far beside the paper's value, the latest alignment per Table
    A9 column, and the claims (:func:`paper_scale_claims`: judged only once the run is complete)."""
    columns = paper_columns(record)
    seeds = tuple(record["configs"][0]["seeds"])
    done, total = record["steps_done"], record["outer_steps"]
    curves = [
        (f"{col.column}: {col.name}", col.distribution, col.connected, np.asarray(e["eval"]["alignment"], float))
        for col, e in columns
    ]
    fig = plots.alignment_so_far(record["eval_steps"], curves, total, 1.0, PAPER_REFERENCE)
    lines = [
        f"| column | masks | distribution | support (paper) | alignment at step {record['eval_steps'][-1]:,} | "
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
    stand = "complete" if record["complete"] else f"in progress: {done:,} of {total:,} outer steps"
    what = (
        f"Fig. 2C at the paper's configuration, {stand} ({where['leases']} lease(s) on {where['devices']}, "
        f"{where['device_hours']:.2f} device-hours in all): module alignment over outer steps, one student per "
        f"Table A9 column (green: connected support; thick: seed mean, thin: single seeds; dashed: {PAPER_REFERENCE})"
    )
    return FigureResult(
        fig,
        f"{what}. Preset {record['preset']}; seeds {', '.join(map(str, seeds))}.",
        "\n".join(lines),
        paper_scale_claims(record),
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
