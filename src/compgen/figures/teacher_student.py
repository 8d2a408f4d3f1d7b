"""Figures and claims of the teacher-student chapter (paper §3.3): Fig. 2C, Fig. 2D, Table A1, training curves."""

from __future__ import annotations

import numpy as np

from compgen import metrics
from compgen.figures import FigureResult, Runs, caption, final, mean_std, paper_numbers, plots
from compgen.figures import claims as C
from compgen.tasks import support, teacher

SECTION = "teacher_student"
# Table A1 of the paper (spec §6.1): {weight decay: alignment of four overparameterised discrete students}.
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
    f"connected − disconnected alignment (column means per seed) ≥ {ALIGNMENT_MARGIN} with the paper's sign on every "
    f"seed, and connected ≥ {IDENTIFIED}",
    paper="≈ 1 vs clearly lower",
    anchor="#fig2c",
)
FIG2D = C.ClaimSpec(
    SECTION,
    "Fig. 2D",
    "beyond about 2x overparameterisation alignment drops for discrete tasks and not for continuous ones",
    f"alignment drop from the 2x student to the largest is ≥ {ALIGNMENT_MARGIN} larger for discrete than for "
    "continuous tasks, on every seed",
    paper="qualitative",
    anchor="#fig2d",
)
TABLE_A1 = C.ClaimSpec(
    SECTION,
    "Table A1",
    "weight decay does not rescue the alignment of overparameterised students on discrete tasks",
    f"mean alignment gain of weight decay over none stays below {DECAY_GAIN:g} on every seed",
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
    found = []
    for distribution in ("discrete", "continuous"):
        conn = [
            values[i]
            for i, (col, _) in enumerate(_columns(runs))
            if col.distribution == distribution and col.connected and values[i] is not None
        ]
        disc = [
            values[i]
            for i, (col, _) in enumerate(_columns(runs))
            if col.distribution == distribution and not col.connected and values[i] is not None
        ]
        check = None
        if conn and disc:
            conn_mean, disc_mean = np.mean(conn, axis=0), np.mean(disc, axis=0)
            check = fig2c_check(conn_mean, disc_mean)
            ours = (
                f"connected {conn_mean.mean():.3f}, disconnected {disc_mean.mean():.3f}: "
                f"{C.describe_difference(check, digits=3)}"
            )
        seeds = runs.configs("fig2c")[0].seeds if runs.configs("fig2c") else ()
        found.append(FIG2C.judge(check, ours if check else "–", seeds, distribution=distribution))
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
    return [FIG2D.judge(check, ours, seeds)]


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
    return [TABLE_A1.judge(check, ours, cfgs[0].seeds if cfgs else ())]


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


# --------------------------------------------------------------------------------------------- the search (issue 23)
# The search behind the quick preset is a record, book/search/teacher_student.json (see compgen.figures.search): one
# entry per regime, student and training support, with the final alignment per seed. Besides the readable model
# and split names, each entry has the student's factors, weight decay, distribution and support, from which the
# chapter's criteria are checked regime by regime.

OVERPARAM_NAME = "one-hots + ring pairs"  # the support of Fig. 2D and Table A1, Table A9 column 1's masks
DRIFT = 0.05  # how far below its own best evaluation a student must end to count as having drifted
_SHORT = {"discrete": "discr.", "continuous": "cont."}


def search_model(hidden_factor, module_factor, weight_decay=0.0) -> str:
    """A student's name in the search record: ``"f=(8,8)"``, ``"f=(8,8), wd=0.001"``."""
    return f"f=({hidden_factor},{module_factor})" + (f", wd={weight_decay:g}" if weight_decay else "")


def search_split(distribution, connected=True, name=OVERPARAM_NAME) -> str:
    """A training support's name in the search record: ``"continuous disconnected: two triangles"``."""
    return f"{distribution} {'connected' if connected else 'disconnected'}: {name}"


# The columns of the two search tables: {(model, Table A9 column): title}, {(model, split): title}
FIG2C_SEARCH_COLUMNS = {
    (search_model(2, 2), s.column): f"{s.column} {_SHORT[s.distribution]} {'conn.' if s.connected else 'disc.'}"
    for s in support.TABLE_A9
}
FIG2D_SEARCH_COLUMNS = {
    **{(search_model(f, f), search_split(d)): f"({f},{f}) {d}" for f in (2, 8) for d in ("discrete", "continuous")},
    (search_model(8, 8, 1e-3), search_split("discrete")): "(8,8) discrete, wd 0.001",
}


def search_records(runs: Runs, regime: str) -> list:
    """The chapter's stored runs as entries of the search record, under ``regime``: one per config, with its final
    alignment per seed, its best evaluation (``extra.peak``), the wall seconds of its run (``cpu_s``) and, for a
    Fig. 2C run, its Table A9 ``column``."""
    from compgen import results

    configs = list(dict.fromkeys(c for cs in runs.figures.values() for c in cs if runs.output(c) is not None))
    fig2c = set(runs.figures.get("fig2c", ()))
    out = []
    for cfg in configs:
        named = next(s for s in support.TABLE_A9 if s.spec == cfg.masks)
        factors = (cfg.hidden_factor, cfg.module_factor)
        column = named.column if cfg in fig2c else None  # Fig. 2C's configs are Table A9's columns
        connected = bool(support.is_connected(cfg.mask_array()))
        stored = (runs.store or results.Store.default()).load(runs.section, cfg, log=lambda _: None)
        alignment = np.asarray(runs.output(cfg)["eval/alignment"], float)  # (seed, evaluation)
        out.append(
            dict(
                regime=regime,
                world=dict(n=cfg.n_in, h=cfg.teacher_hidden, outputs=cfg.n_out, M=cfg.n_modules),
                budget=dict(
                    outer_steps=cfg.outer_steps,
                    meta_batch=cfg.meta_batch,
                    inner_steps=cfg.inner_steps,
                    inner_lr=cfg.inner_lr,
                    inner_schedule=cfg.inner_schedule,
                    batch=cfg.batch,
                    outer_lr=cfg.outer_lr,
                    warmup_steps=cfg.warmup_steps,
                ),
                model=search_model(*factors, cfg.weight_decay),
                split=search_split(cfg.distribution, connected, named.name),
                factors=list(factors),
                weight_decay=cfg.weight_decay,
                distribution=cfg.distribution,
                connected=connected,
                **({"column": column} if column else {}),
                seeds=list(cfg.seeds),
                values=[float(v) for v in alignment[:, -1]],
                cpu_s=float(stored[1]["provenance"]["wall_time_s"]) if stored else 0.0,
                extra=dict(peak=[round(float(v), 4) for v in alignment.max(1)]),
                branch="main",
            )
        )
    return out


def search_tables(path) -> str:
    """The search record at ``path`` as two tables: Fig. 2C's students (one column per Table A9 column), and Fig. 2D's
    and Table A1's (one-hots + ring pairs)."""
    from compgen.figures.search import search_table

    fig2c = search_table(path, FIG2C_SEARCH_COLUMNS, 1.0, 3, by=("model", "column"), prefix_split=False)
    fig2d = search_table(path, FIG2D_SEARCH_COLUMNS, 1.0, 3, by=("model", "split"))
    # each table starts with the same line (metric and source) and a blank line: show that line once
    lead, _, fig2c_rows = fig2c.partition("\n\n")
    fig2d_rows = fig2d.partition("\n\n")[2]
    return (
        f"{lead}\n\n**Fig. 2C**: students (2, 2), one column per Table A9 column (conn. = connected, disc. = "
        f"disconnected support).\n\n{fig2c_rows}\n\n**Fig. 2D and Table A1**: students (f, f) on one-hots + ring "
        f"pairs.\n\n{fig2d_rows}"
    )


def _regimes(path) -> dict:
    from compgen.figures.search import load_search

    regimes = {}
    for r in load_search(path)["records"]:
        regimes.setdefault(r["regime"], []).append(r)
    return regimes


def _aligned(records):
    """The records' values as one array (records, seeds), or ``None`` if their seeds differ."""
    if not records or any(r["seeds"] != records[0]["seeds"] for r in records):
        return None
    return np.array([r["values"] for r in records], float)


def _find(records, **where):
    return [r for r in records if all(r.get(k) == v for k, v in where.items())]


def search_checks(records) -> dict:
    """The chapter's criteria on one regime's records, for the claims it has the runs of: {claim: (Check, text)},
    the text being what the criterion measured, as in the chapter's claim tables."""
    found = {}
    for distribution in ("discrete", "continuous"):
        columns = [r for r in records if r.get("column") and r["distribution"] == distribution]
        conn = _aligned([r for r in columns if r["connected"]])
        disc = _aligned([r for r in columns if not r["connected"]])
        if conn is not None and disc is not None and conn.shape[1] == disc.shape[1]:
            check = fig2c_check(conn.mean(0), disc.mean(0))
            found[f"Fig. 2C {distribution}"] = (
                check,
                f"{C.describe_difference(check, digits=3)}, connected {conn.mean():.3f}",
            )
    over = [r for r in records if r["split"].endswith(OVERPARAM_NAME) and r["connected"]]
    drops = {}
    for distribution in ("discrete", "continuous"):
        cells = {tuple(r["factors"]): r for r in _find(over, distribution=distribution, weight_decay=0.0)}
        large = max(cells, key=lambda f: f[0] * f[1], default=None)
        pair = _aligned([cells[(2, 2)], cells[large]]) if (2, 2) in cells and large != (2, 2) else None
        if pair is not None:
            drops[distribution] = pair[0] - pair[1]
    if len(drops) == 2 and drops["discrete"].shape == drops["continuous"].shape:
        check = fig2d_check(drops["discrete"], drops["continuous"])
        found["Fig. 2D"] = (check, C.describe_difference(check, digits=3))
    gains = []
    for r in _find(over, distribution="discrete"):
        base = _find(over, distribution="discrete", factors=r["factors"], weight_decay=0.0)
        pair = _aligned([r, base[0]]) if r["weight_decay"] and base else None
        if pair is not None:
            gains.append(pair[0] - pair[1])
    if gains and len({g.shape for g in gains}) == 1:
        gain = np.mean(gains, axis=0)
        check = table_a1_check(gain)
        found["Table A1"] = (
            check,
            f"gain {gain.mean():+.3f} ({check.agreeing}/{gain.size} seeds below {DECAY_GAIN:g})",
        )
    return found


SEARCH_CLAIMS = ("Fig. 2C discrete", "Fig. 2C continuous", "Fig. 2D", "Table A1")


def search_verdicts(path) -> str:
    """The chapter's criteria (:data:`FIG2C`, :data:`FIG2D`, :data:`TABLE_A1`) checked on every regime of the search
    record: a markdown list of the criteria and a table of verdicts with what each criterion measured."""
    lines = [
        "| regime | seeds | " + " | ".join(SEARCH_CLAIMS) + " |",
        "|---|---|" + "---|" * len(SEARCH_CLAIMS),
    ]
    for name, records in _regimes(path).items():
        checks = search_checks(records)
        if checks:
            cells = [
                f"{'✅' if checks[c][0].holds else '❌'} {checks[c][1]}" if c in checks else "–" for c in SEARCH_CLAIMS
            ]
            lines.append(f"| {name} | {_seeds(records)} | " + " | ".join(cells) + " |")
    criteria = "\n".join(f"* **{spec.figure}**: {spec.criterion}." for spec in (FIG2C, FIG2D, TABLE_A1))
    return (
        f"The criteria are those of the chapter's claim tables:\n\n{criteria}\n\nEach cell: ✅ holds or ❌ not, then "
        "what the criterion measured, mean over the seeds: for Fig. 2C connected − disconnected ± its standard error "
        "with the seeds of the paper's sign, and the connected columns' mean; for Fig. 2D the discrete drop − the "
        "continuous drop from the (2, 2) student to the largest, likewise; for Table A1 the gain of weight decay over "
        "none and the seeds on which it stays below the threshold.\n\n" + "\n".join(lines)
    )


def _span(values, digits=3) -> str:
    lo, hi = float(np.min(values)), float(np.max(values))
    return f"{lo:.{digits}f}" if round(lo, digits) == round(hi, digits) else f"{lo:.{digits}f}–{hi:.{digits}f}"


def _seeds(records) -> str:
    return ", ".join(map(str, sorted({s for r in records for s in r["seeds"]})))


def search_findings(path) -> str:
    """What the search record says about the overparameterised students, as markdown bullets computed from it: the
    paper's world at quick's budget, the drift of (8, 8) students in the smaller world W1 (n = h = 8) at quick's
    inner loop, and W1 with the paper's inner loop."""
    from compgen.figures.search import load_search

    records = [r for r in load_search(path)["records"] if r.get("branch") == "probe/ts"]
    over = [r for r in records if r["split"].endswith(OVERPARAM_NAME) and r["connected"]]

    def select(n, inner_steps, outer_steps=4000, **where):
        return [
            r
            for r in _find(over, **where)
            if r["world"] == dict(n=n, h=n, outputs=4, M=6)
            and r["budget"]["inner_steps"] == inner_steps
            and r["budget"]["outer_steps"] == outer_steps
        ]

    def values(found, key=None):
        return np.concatenate([r["values"] if key is None else r["extra"][key] for r in found])

    bullets = []
    paper = {
        f: {d: select(16, 50, factors=[f, f], distribution=d, weight_decay=0.0) for d in ("discrete", "continuous")}
        for f in (2, 8)
    }
    if all(paper[f][d] for f in paper for d in paper[f]):
        bullets.append(
            f"In the paper's world ($n = h = 16$) at `quick`'s budget (seeds {_seeds(paper[8]['discrete'])}) the "
            f"larger students learn faster instead of worse: the (8, 8) students ended at an alignment of "
            f"{_span(values(paper[8]['discrete']))} on discrete and {_span(values(paper[8]['continuous']))} on "
            f"continuous tasks, the (2, 2) students at {_span(values(paper[2]['discrete']))} and "
            f"{_span(values(paper[2]['continuous']))}."
        )
    w1 = {d: select(8, 50, factors=[8, 8], distribution=d, weight_decay=0.0) for d in ("discrete", "continuous")}
    small = select(8, 50, factors=[2, 2], distribution="discrete", weight_decay=0.0)
    decayed = [r for r in select(8, 50, factors=[8, 8], distribution="discrete") if r["weight_decay"]]
    if all(w1.values()) and small:
        drifted = {
            d: [
                (r, i) for r in w1[d] for i, (v, p) in enumerate(zip(r["values"], r["extra"]["peak"])) if p - v >= DRIFT
            ]
            for d in w1
        }
        n = len(values(w1["discrete"]))
        pick = lambda pairs, key: [r["extra"][key][i] if key else r["values"][i] for r, i in pairs]
        twin = [(s, r["seeds"][i]) for r, i in drifted["discrete"] for s in small if r["seeds"][i] in s["seeds"]]
        small_at = lambda key: [s["extra"][key][s["seeds"].index(seed)] for s, seed in twin]
        text = (
            f"In the smaller world W1 ($n = h = 8$) at `quick`'s budget, over {n} seeds ({_seeds(w1['discrete'])}), "
            f"an (8, 8) student on discrete tasks ended at least {DRIFT:g} below its own best evaluation on "
            f"{len(drifted['discrete'])} of {n} seeds"
        )
        if drifted["discrete"]:
            peaks = pick(drifted["discrete"], "peak")
            text += (
                ": it had first identified the modules" if min(peaks) >= IDENTIFIED else ""
            ) + f" (best {_span(peaks)}, final {_span(pick(drifted['discrete'], None))})"
        text += "."
        have = all("unit_consistency" in r["extra"] for r, _ in drifted["discrete"]) and all(
            "unit_consistency" in s["extra"] for s, _ in twin
        )
        if drifted["discrete"] and twin and have:
            separated = max(pick(drifted["discrete"], "unit_consistency")) < min(small_at("unit_consistency"))
            text += (
                " The drifted students serve each teacher unit by different student units from task to task: their "
                if separated
                else " Their "
            ) + (
                f"unit consistency was {_span(pick(drifted['discrete'], 'unit_consistency'), 2)} against "
                f"{_span(small_at('unit_consistency'), 2)} for the (2, 2) students of the same seeds, and the share "
                "of their latents' variance that is not an affine function of $z$ was "
                f"{_span(pick(drifted['discrete'], 'zhat_nonaffine_frac'), 2)} against "
                f"{_span(small_at('zhat_nonaffine_frac'), 2)}"
                + (", like a partial version of the theory chapter's look-up student." if separated else ".")
            )
        text += (
            f" But the drift is not specific to discrete tasks: on continuous tasks the (8, 8) students drifted as "
            f"far on {len(drifted['continuous'])} of {len(values(w1['continuous']))} seeds."
        )
        if decayed:
            fell = sum(p - v >= DRIFT for r in decayed for v, p in zip(r["values"], r["extra"]["peak"]))
            text += (
                f" With a weight decay of {decayed[0]['weight_decay']:g}, {fell} of {len(values(decayed))} discrete "
                f"(8, 8) students drifted that far (final alignment {_span(values(decayed))})."
            )
        bullets.append(text)
    inner = {
        f: {d: select(8, 300, factors=[f, f], distribution=d, weight_decay=0.0) for d in ("discrete", "continuous")}
        for f in (2, 8)
    }
    if all(inner[f][d] for f in inner for d in inner[f]):
        b = inner[8]["discrete"][0]["budget"]
        loss = {f: np.concatenate([values(inner[f][d], "train_rel_loss") for d in inner[f]]) for f in inner}
        bullets.append(
            f"With the paper's inner loop ({b['inner_steps']} Adam steps at a {b['inner_schedule']} "
            f"{b['inner_lr']:g}) in W1 (seeds {_seeds(inner[8]['discrete'])}), the (8, 8) students fitted their "
            f"training tasks better (relative training loss {_span(loss[8], 4)} against {_span(loss[2], 4)}). On "
            f"continuous tasks they were also better aligned ({_span(values(inner[8]['continuous']))} against "
            f"{_span(values(inner[2]['continuous']))}), on discrete ones hardly "
            f"({_span(values(inner[8]['discrete']))} against {_span(values(inner[2]['discrete']))}): the direction "
            "of Fig. 2D, not its size."
        )
    bullets.append(_search_outcome(path))
    return "\n".join(f"* {b}" for b in bullets)


def _search_outcome(path) -> str:
    """Sentences computed from the record: in which regimes each criterion holds, and, where Table A1's holds,
    whether the overparameterised discrete students had lost alignment to begin with."""
    by_regime = _regimes(path)
    regimes = {name: search_checks(records) for name, records in by_regime.items()}
    parts = []
    for claim in SEARCH_CLAIMS:
        tried = [name for name, checks in regimes.items() if claim in checks]
        held = [name for name in tried if regimes[name][claim][0].holds]
        parts.append(
            f"{claim} in {len(held)} of the {len(tried)} regimes with its runs"
            + (f" ({'; '.join(f'*{name}*' for name in held)})" if held else "")
        )
    text = "By the chapter's criteria the claims hold in these regimes: " + "; ".join(parts) + "."
    pairs, gaps = [], []
    for name, checks in regimes.items():
        if "Table A1" not in checks or not checks["Table A1"][0].holds:
            continue
        over = [r for r in by_regime[name] if r["split"].endswith(OVERPARAM_NAME) and r["connected"]]
        unregularised = _find(over, distribution="discrete", weight_decay=0.0)
        mild = _find(unregularised, factors=[2, 2])
        large = max(unregularised, key=lambda r: r["factors"][0] * r["factors"][1], default=None)
        if mild and large is not None and large["factors"] != [2, 2]:
            a, b = np.mean(large["values"]), np.mean(mild[0]["values"])
            gaps.append(b - a)
            pairs.append(f"{a:.3f} at {tuple(large['factors'])} against {b:.3f} at (2, 2) in *{name}*")
    if pairs:
        paper = np.concatenate([list(v) for v in PAPER_TABLE_A1.values()])
        lead = (
            "Where Table A1's criterion holds, weight decay had nothing to rescue: "
            if max(gaps) < ALIGNMENT_MARGIN
            else "Where Table A1's criterion holds, "
        )
        text += (
            f" {lead}without weight decay the discrete students' alignment was {'; '.join(pairs)} (the paper's "
            f"overparameterised students: {paper.min():.2f}–{paper.max():.2f})."
        )
    return text
