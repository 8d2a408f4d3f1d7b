"""The claims of the teacher-student chapter (paper §3.3), judged from its runs: Fig. 2C, Fig. 2D, Table A1, and
Fig. 2C at the paper's scale from the ledger's record."""

from __future__ import annotations

import dataclasses

import numpy as np

from compgen.analysis import claims as C
from compgen.analysis.chapter import Chapter, Twin, steps_cell
from compgen.analysis.values import final
from compgen.runs import Runs
from compgen.tasks import support

SECTION = "teacher_student"
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
    id="fig2c/{distribution}",
    reads=("fig2c",),
)
FIG2D = C.ClaimSpec(
    SECTION,
    "Fig. 2D",
    "beyond about 2x overparameterisation alignment drops for discrete tasks and not for continuous ones",
    f"alignment drop from the 2x student to the largest is ≥ {ALIGNMENT_MARGIN} larger for discrete than for "
    "continuous tasks",
    paper="qualitative",
    anchor="#fig2d",
    id="fig2d",
    reads=("fig2d",),
)
TABLE_A1 = C.ClaimSpec(
    SECTION,
    "Table A1",
    "weight decay does not rescue the alignment of overparameterised students on discrete tasks",
    f"mean alignment gain of weight decay over none (over the overparameterised cells) stays below {DECAY_GAIN:g}",
    paper="0.67–0.85, no gain",
    anchor="#table-a1",
    id="table_a1",
    reads=("table_a1",),
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


def columns(runs: Runs):
    """(Table A9 column, config) of Fig. 2C, matched by masks and distribution."""
    out = []
    for col in support.TABLE_A9:
        cfg = runs.one("fig2c", masks=col.spec, distribution=col.distribution)
        out.append((col, cfg))
    return out


def fig2c_claims_of(runs: Runs, values) -> list:
    seeds = runs.configs("fig2c")[0].seeds if runs.configs("fig2c") else ()
    return fig2c_claims([(col, v) for (col, _), v in zip(columns(runs), values)], seeds, runs.pooled)


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


def fig2d_values(runs: Runs):
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


def fig2d_claims(runs: Runs, values) -> list:
    check, ours, seeds = None, "–", ()
    both = set(values) == {"discrete", "continuous"}
    if both and values["discrete"][0] == values["continuous"][0] and len(values["discrete"][0]) > 1:
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


def table_a1_data(runs: Runs):
    cfgs = [c for c in runs.configs("table_a1") if runs.output(c) is not None]
    factors = list(dict.fromkeys((c.hidden_factor, c.module_factor) for c in cfgs))
    decays = list(dict.fromkeys(c.weight_decay for c in cfgs))
    value = {(c.weight_decay, (c.hidden_factor, c.module_factor)): final_alignment(runs.output(c)) for c in cfgs}
    return cfgs, factors, decays, value


def table_a1_claims(runs: Runs) -> list:
    cfgs, factors, decays, value = table_a1_data(runs)
    check, ours = None, "–"
    if 0.0 in decays and len(decays) > 1:
        gains = np.stack([value[(wd, f)] - value[(0.0, f)] for wd in decays if wd for f in factors])  # (cells, seeds)
        mean_gain = gains.mean(0)
        check = table_a1_check(mean_gain)
        ours = f"mean gain from weight decay {mean_gain.mean():+.3f} (largest cell {gains.mean(1).max():+.3f})"
    return [TABLE_A1.judge(check, ours, cfgs[0].seeds if cfgs else (), runs.pooled)]


def claims(runs: Runs) -> list:
    """Every claim of the chapter, computed from ``runs`` (stored runs may be missing: "not run")."""
    values = [None if runs.output(c) is None else final_alignment(runs.output(c)) for _, c in columns(runs)]
    return [*fig2c_claims_of(runs, values), *fig2d_claims(runs, fig2d_values(runs)), *table_a1_claims(runs)]


# --------------------------------------------------------------------------------------------- the paper's scale


def paper_columns(record) -> list:
    """``[(Table A9 column, entry)]`` of a ledger record of Fig. 2C (:mod:`compgen.ledger`), in the record's order."""
    by_pick = {(col.spec, col.distribution): col for col in support.TABLE_A9}
    return [(by_pick[(e["select"]["masks"], e["select"]["distribution"])], e) for e in record.configs]


def paper_scale_claims(record) -> list:
    """Fig. 2C's claims from a ledger record: judged (:func:`fig2c_claims`) once the run is complete; before, "not
    run" with where the run stands in ``ours`` and ``details["progress"]`` = (steps done, outer steps)."""
    columns = [(col, np.asarray(e["eval"]["alignment"], float)[:, -1]) for col, e in paper_columns(record)]
    seeds = tuple(record.configs[0]["seeds"])
    if record.complete:
        return fig2c_claims(columns, seeds)
    done, total = record.steps_done, record.outer_steps
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


CHAPTER = Chapter(
    SECTION,
    "Teacher and student (§3.3)",
    claims,
    (FIG2C, FIG2D, TABLE_A1),
    twin=Twin(
        figures=("fig2c",),
        rows={
            "masks": lambda f: f["masks"],
            "distribution": lambda f: f["distribution"],
            "student": lambda f: f"{f['hidden_factor']}x units, {f['module_factor']}x modules",
            "steps × tasks": steps_cell,
        },
        headlines={"alignment": ("alignment", None, 1)},
        # run_theory.py trains train_step * n_task outer steps, evaluated every log_every steps in whole chunks, with
        # a cosine outer schedule and no warm-up: quick's 8,000 steps with a 400-step warm-up become 7,998 steps
        # (1,333 x 6), no warm-up; the bridge's x4 point's 12,800 steps with a 313-step warm-up become 12,798 (2,133
        # x 6), no warm-up (the twin of the bridge, where both codes sit at the criterion at quick).
        matched={
            "quick": {"fig2c": dict(warmup_steps=0, outer_steps=7998, eval_every=1333)},
            "bridge-x4": {"fig2c": dict(warmup_steps=0, outer_steps=12798, eval_every=2133)},
        },
    ),
)


# ----------------------------------------------------------------------------------------------- the search's regimes

OVERPARAM_NAME = "one-hots + ring pairs"  # the support of Fig. 2D and Table A1, Table A9 column 1's masks


def _aligned(records):
    """The records' values as one array (records, seeds), or ``None`` if their seeds differ."""
    if not records or any(r["seeds"] != records[0]["seeds"] for r in records):
        return None
    return np.array([r["values"] for r in records], float)


def records_where(records, **where):
    """The search records whose fields equal ``where``."""
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
        cells = {tuple(r["factors"]): r for r in records_where(over, distribution=distribution, weight_decay=0.0)}
        large = max(cells, key=lambda f: f[0] * f[1], default=None)
        pair = _aligned([cells[(2, 2)], cells[large]]) if (2, 2) in cells and large != (2, 2) else None
        if pair is not None:
            drops[distribution] = pair[0] - pair[1]
    if len(drops) == 2 and drops["discrete"].shape == drops["continuous"].shape:
        check = fig2d_check(drops["discrete"], drops["continuous"])
        found["Fig. 2D"] = (check, C.describe_difference(check, digits=3))
    gains = []
    for r in records_where(over, distribution="discrete"):
        base = records_where(over, distribution="discrete", factors=r["factors"], weight_decay=0.0)
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
