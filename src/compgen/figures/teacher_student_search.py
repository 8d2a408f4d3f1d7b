"""The search behind the teacher-student chapter's quick preset (issue 23): its record, tables, checks and findings.

The search is a record, ``book/search/teacher_student.json`` (see :mod:`compgen.figures.search`): one entry per
regime, student and training support, with the final alignment per seed. Besides the readable model and split
names, each entry has the student's factors, weight decay, distribution and support, from which the chapter's
criteria (:mod:`compgen.analysis.teacher_student`) are checked regime by regime.
"""

from __future__ import annotations

import numpy as np

from compgen.analysis.teacher_student import (
    ALIGNMENT_MARGIN,
    FIG2C,
    FIG2D,
    IDENTIFIED,
    OVERPARAM_NAME,
    TABLE_A1,
    records_where,
    search_checks,
)
from compgen.figures.teacher_student import PAPER_TABLE_A1
from compgen.runs import Runs
from compgen.tasks import support

DRIFT = 0.05  # how far below its own best evaluation a student must end to count as having drifted
_SHORT = {"discrete": "discr.", "continuous": "cont."}
DISTRIBUTIONS = ("discrete", "continuous")


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
                cpu_s=float(stored[1].provenance["wall_time_s"]) if stored else 0.0,
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
    for r in load_search(path).records:
        regimes.setdefault(r["regime"], []).append(r)
    return regimes


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

    records = [r for r in load_search(path).records if r.get("branch") == "probe/ts"]
    over = [r for r in records if r["split"].endswith(OVERPARAM_NAME) and r["connected"]]
    bullets = [_paper_world(over), _drift(over), _paper_inner_loop(over), _search_outcome(path)]
    return "\n".join(f"* {b}" for b in bullets if b)


def _select(over, n, inner_steps, outer_steps=4000, **where) -> list:
    """The entries of ``over`` in the world n = h = ``n`` trained with ``inner_steps`` and ``outer_steps``."""
    return [
        r
        for r in records_where(over, **where)
        if r["world"] == dict(n=n, h=n, outputs=4, M=6)
        and r["budget"]["inner_steps"] == inner_steps
        and r["budget"]["outer_steps"] == outer_steps
    ]


def _values(found, key=None):
    """The final alignments (or the extra ``key``) of ``found``, every seed of every entry."""
    return np.concatenate([r["values"] if key is None else r["extra"][key] for r in found])


def _by_size(over, n, inner_steps) -> dict:
    """{factor: {distribution: entries}} of the (2, 2) and (8, 8) students without weight decay."""
    return {
        f: {d: _select(over, n, inner_steps, factors=[f, f], distribution=d, weight_decay=0.0) for d in DISTRIBUTIONS}
        for f in (2, 8)
    }


def _paper_world(over) -> str:
    """The paper's world at quick's budget: the larger students learn faster, not worse ("" if not searched)."""
    paper = _by_size(over, 16, 50)
    if not all(paper[f][d] for f in paper for d in paper[f]):
        return ""
    return (
        f"In the paper's world ($n = h = 16$) at `quick`'s budget (seeds {_seeds(paper[8]['discrete'])}) the "
        f"larger students learn faster instead of worse: the (8, 8) students ended at an alignment of "
        f"{_span(_values(paper[8]['discrete']))} on discrete and {_span(_values(paper[8]['continuous']))} on "
        f"continuous tasks, the (2, 2) students at {_span(_values(paper[2]['discrete']))} and "
        f"{_span(_values(paper[2]['continuous']))}."
    )


def _drift(over) -> str:
    """W1 at quick's budget: how many (8, 8) students drifted below their best, what they compute, and whether
    weight decay stops it ("" if not searched)."""
    w1 = _by_size(over, 8, 50)[8]
    small = _select(over, 8, 50, factors=[2, 2], distribution="discrete", weight_decay=0.0)
    decayed = [r for r in _select(over, 8, 50, factors=[8, 8], distribution="discrete") if r["weight_decay"]]
    if not (all(w1.values()) and small):
        return ""
    drifted = {
        d: [(r, i) for r in w1[d] for i, (v, p) in enumerate(zip(r["values"], r["extra"]["peak"])) if p - v >= DRIFT]
        for d in w1
    }
    n = len(_values(w1["discrete"]))
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
        f"far on {len(drifted['continuous'])} of {len(_values(w1['continuous']))} seeds."
    )
    if decayed:
        fell = sum(p - v >= DRIFT for r in decayed for v, p in zip(r["values"], r["extra"]["peak"]))
        text += (
            f" With a weight decay of {decayed[0]['weight_decay']:g}, {fell} of {len(_values(decayed))} discrete "
            f"(8, 8) students drifted that far (final alignment {_span(_values(decayed))})."
        )
    return text


def _paper_inner_loop(over) -> str:
    """W1 with the paper's inner loop: the larger students fit and align better on continuous tasks ("" if not
    searched)."""
    inner = _by_size(over, 8, 300)
    if not all(inner[f][d] for f in inner for d in inner[f]):
        return ""
    b = inner[8]["discrete"][0]["budget"]
    loss = {f: np.concatenate([_values(inner[f][d], "train_rel_loss") for d in inner[f]]) for f in inner}
    return (
        f"With the paper's inner loop ({b['inner_steps']} Adam steps at a {b['inner_schedule']} "
        f"{b['inner_lr']:g}) in W1 (seeds {_seeds(inner[8]['discrete'])}), the (8, 8) students fitted their "
        f"training tasks better (relative training loss {_span(loss[8], 4)} against {_span(loss[2], 4)}). On "
        f"continuous tasks they were also better aligned ({_span(_values(inner[8]['continuous']))} against "
        f"{_span(_values(inner[2]['continuous']))}), on discrete ones hardly "
        f"({_span(_values(inner[8]['discrete']))} against {_span(_values(inner[2]['discrete']))}): the direction "
        "of Fig. 2D, not its size."
    )


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
        unregularised = records_where(over, distribution="discrete", weight_decay=0.0)
        mild = records_where(unregularised, factors=[2, 2])
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
