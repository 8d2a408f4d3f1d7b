"""Where each claim appears along the scale bridge (:mod:`compgen.bridge`): which claims need it, the work that
trains their figures at each point, and each claim's standing at the points trained so far.

* :func:`unresolved` - the paper's claims that do not hold clearly when pooled over the recorded seed sets (a
  claim at its criterion or clearly not reproduced), computed from the records;
* :func:`configs_read` - the configs whose runs a claim is judged from (those without which it is not run);
* :func:`plan` - the ledger works (:class:`compgen.ledger.Work`) that train those figures at each point, one per
  program shape, each with its estimated seconds from the quick book's measured time;
* :func:`works_by_point` - how many of the ledger's works at each point are complete;
* :func:`chapter_paths` - each unresolved claim's :class:`Point` at ×1 and at every bridge point, and where the
  authors' code was run at a bridge point (a twin record, ``<chapter>_x<multiple>.json`` under :data:`TWINS`), the
  same claim judged on its runs (:func:`authors_points`).
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import NamedTuple

import numpy as np

from compgen import bridge, catalog, ledger, programs, records
from compgen.analysis import claims as C
from compgen.analysis import finals
from compgen.analysis.chapters import CHAPTERS, SEED_SETS, set_runs

MULTIPLES = (4, 16, 64)  # the points two CPU cores can reach, in multiples of the quick compute
FAR_SECONDS = 8 * 3600 * 2  # a chapter trains its last point only where all its points fit in 8 hours of two cores


def pooled_runs(name: str, seed_sets) -> object | None:
    """Chapter ``name``'s runs pooled over the seed-set records ``seed_sets`` that hold it (None where none does)."""
    found = [r for r in (set_runs(record, name) for record in seed_sets) if r is not None]
    return finals.pool(*found) if len(found) > 1 else (found[0] if found else None)


def load_seed_sets(book: Path) -> list:
    """The recorded seed sets of the book in ``book`` (:data:`compgen.analysis.chapters.SEED_SETS`)."""
    return [records.SeedSet.load(Path(book) / path) for path in SEED_SETS if (Path(book) / path).exists()]


def unresolved(seed_sets) -> dict:
    """``{chapter: [Claim]}``: the paper's claims (chapters beyond the paper apart) that do not hold clearly when
    pooled over ``seed_sets`` (seed-set records), in the chapters' order."""
    out = {}
    for name, chapter in CHAPTERS.items():
        runs = pooled_runs(name, seed_sets)
        if chapter.beyond_the_paper or runs is None:
            continue
        found = [c for c in chapter.claims(runs) if C.category(c) in (C.AT_CRITERION, C.FAILS_CLEARLY)]
        if found:
            out[name] = found
    return out


def _without(runs, config):
    return dataclasses.replace(runs, outputs={c: (None if c == config else o) for c, o in runs.outputs.items()})


def unseeded(cfg) -> str:
    """``cfg``'s fields but its seeds and the device's knobs, as sorted JSON: what identifies it across seed sets."""
    return json.dumps({k: v for k, v in programs.config_fields(cfg).items() if k != "seeds"}, sort_keys=True)


def configs_read(name: str, runs, claim) -> set:
    """The configs of ``runs`` (chapter ``name``'s) that ``claim`` is judged from, as :func:`unseeded` keys: those of
    the figures it reads whose run taken away leaves it not run."""
    chapter, read = CHAPTERS[name], set()
    for cfg in {c for figure in claim.reads for c in runs.figures.get(figure, ())}:
        again = C.find(chapter.claims(_without(runs, cfg)), claim)
        if again is not None and again.verdict == C.NOT_RUN:
            read.add(unseeded(cfg))
    return read


def _distinguishing(configs) -> list:
    """The fields in which ``configs`` differ (the device's knobs and seeds apart), in field order."""
    first = programs.config_fields(configs[0])
    return [k for k in first if k != "seeds" and any(programs.config_fields(c)[k] != first[k] for c in configs)]


def quick_seconds(book_time) -> dict:
    """``{(section, config key): seconds}`` of training and evaluating each quick run, from a book-time record."""
    if book_time is None:
        return {}
    out = {}
    for run in book_time.runs:
        try:
            cfg = catalog.SECTIONS[run["section"]].config_from_dict(dict(run["config"]))
        except (KeyError, TypeError, ValueError):
            continue
        out[(run["section"], finals.config_key(cfg))] = sum(run.get(k, 0) for k in ("setup", "train", "evaluate"))
    return out


def _estimate(sec, quick, points, seconds) -> float | None:
    """Seconds to train ``points`` (the bridge's configs of ``quick``): each quick run's measured seconds times the
    compute multiple its point reached; None where a quick run was not measured."""
    found = [seconds.get((sec.name, finals.config_key(q))) for q in quick]
    if any(s is None for s in found):
        return None
    return round(sum(s * bridge.multiple(sec, q, p) for s, q, p in zip(found, quick, points)), 1)


def needed(seed_sets) -> dict:
    """``{(chapter, figure): (quick configs, [claim texts])}``: the quick configs (the book's seeds) that the
    :func:`unresolved` claims are judged from, each under the first figure of its chapter that holds it."""
    out = {}
    for name, found in unresolved(seed_sets).items():
        runs, sec = pooled_runs(name, seed_sets), catalog.SECTIONS[name]
        read = {claim.id: configs_read(name, runs, claim) for claim in found}
        texts = {claim.id: claim.claim for claim in found}
        taken = set()
        for figure in sec.figures("quick"):
            configs = [q for q in bridge.figure_configs(sec, figure, "quick") if unseeded(q) not in taken]
            mine = [q for q in configs if any(unseeded(q) in keys for keys in read.values())]
            if mine:
                claims = [texts[i] for i, keys in read.items() if keys & {unseeded(q) for q in mine}]
                out[(name, figure)] = (mine, claims)
                taken |= {unseeded(q) for q in mine}
    return out


def _select(sec, every, chosen) -> tuple:
    """A ``{field: value}`` per config of ``chosen`` naming it alone among ``every`` (the figure's configs): by its
    learner and data fields where they suffice, else by every field in which the figure's configs differ."""
    for fields in (["model", *sec.data_fields], _distinguishing(every)):
        fields = [k for k in _distinguishing(every) if k in fields]
        picks = tuple({k: programs.config_fields(c)[k] for k in fields} for c in chosen)
        if all(len(ledger.matching(every, p)) == 1 for p in picks):
            return picks
    raise ValueError(f"{sec.name}: no selection names each config alone")


def plan(seed_sets, multiples=MULTIPLES, book_time=None) -> list:
    """The works of the scale bridge: for each point of ``multiples`` (in order), each chapter with
    :func:`unresolved` claims and each figure holding configs they read (:func:`needed`), one
    :class:`compgen.ledger.Work` per program shape of those configs at that point, each estimated from ``book_time``
    (a book-time record of the quick book). Within a point, the figure whose works cost least comes first, so that
    a lease judges the most claims soonest. The last point is planned only for the chapters whose points all fit in
    :data:`FAR_SECONDS` (one core's seconds: 8 hours of two cores) by those estimates."""
    seconds, todo = quick_seconds(book_time), needed(seed_sets)
    works = []
    for m in multiples:
        point = [
            w for (name, figure), (q, claims) in todo.items() for w in _point_works(name, figure, q, claims, m, seconds)
        ]
        works += _cheapest_figure_first(point)
    if len(multiples) > 1:
        last = bridge.point_name(multiples[-1])
        cost = {}
        for w in works:
            cost[w.section] = cost.get(w.section, 0.0) + (w.estimate_s or math.inf)
        works = [w for w in works if w.preset != last or cost[w.section] <= FAR_SECONDS]
    return works


def _cheapest_figure_first(works) -> list:
    """One point's ``works`` with each figure's together, in order of the figure's estimated seconds in all (a work
    without an estimate counting as endless), ties in their order."""
    cost = {}
    for w in works:
        cost[w.figure] = cost.get(w.figure, 0.0) + (w.estimate_s or math.inf)
    return sorted(works, key=lambda w: cost[w.figure])


def _point_works(name, figure, quick, claims, multiple, seconds) -> list:
    """The works that train ``quick`` (configs of ``figure``) at ``multiple``: one per program shape."""
    sec, preset = catalog.SECTIONS[name], bridge.point_name(multiple)
    points = [bridge.point(sec, q, multiple) for q in quick]
    every = bridge.figure_configs(sec, figure, "quick")
    groups = {}
    for q, p in zip(quick, points):
        groups.setdefault(sec.shape_key(p), []).append((q, p))
    works = []
    for i, group in enumerate(groups.values()):
        suffix = f"-{i + 1}" if len(groups) > 1 else ""
        works.append(
            ledger.Work(
                name=f"{figure}-x{multiple}{suffix}",
                section=name,
                figure=figure,
                preset=preset,
                select=_select(sec, every, [q for q, _ in group]),
                labels=tuple(sec.label(p) for _, p in group),
                why=f"read by {len(claims)} claim(s) not holding clearly at quick: " + "; ".join(claims),
                estimate_s=_estimate(sec, [q for q, _ in group], [p for _, p in group], seconds),
            )
        )
    return works


def plan_text(works) -> str:
    """The bridge ledger's file text (:func:`compgen.ledger.dumps_ledger`)."""
    return ledger.dumps_ledger(works)


# ----------------------------------------------------------------------------------------------- standings on the path


@dataclasses.dataclass(frozen=True)
class Point:
    """A claim at one point of the path: ``label`` ("×1", "×4", the paper's "1.0"), its ``multiple`` of the quick
    compute, the ``fraction`` of the paper's compute of the configs the claim reads, the claim's per-seed
    ``positions`` in units of its criterion (0 no effect, 1 the criterion; :func:`positions`), its pooled
    ``standing`` and ``verdict``, the ``seeds`` and ``state`` ("complete", or where its runs stand)."""

    label: str
    multiple: float
    fraction: float
    positions: tuple
    standing: C.Standing | None
    verdict: str
    seeds: tuple = ()
    state: str = "complete"

    @property
    def judged(self) -> bool:
        return self.state == "complete" and self.standing is not None and self.verdict != C.NOT_RUN


def positions(claim) -> tuple:
    """``claim``'s per-seed differences in units of its criterion, as :meth:`compgen.analysis.claims.Check.standing`
    places their mean: ``1 + (d - threshold) / scale``; empty where the claim was not judged per seed."""
    found = claim.details
    if "threshold" not in found or not found.get("differences"):
        return ()
    return tuple(1 + (d - found["threshold"]) / found["scale"] for d in found["differences"])


def _fraction(sec, quick, points) -> float:
    """The geometric mean over ``quick`` configs of their points' fraction of the paper's compute."""
    fractions = [bridge.multiple(sec, q, p) / bridge.paper_multiple(sec, q) for q, p in zip(quick, points)]
    return float(np.exp(np.mean(np.log(fractions)))) if fractions else float("nan")


def point_runs(name: str, multiple: int, works, folder):
    """Chapter ``name``'s runs at the bridge point ``multiple`` (:class:`compgen.runs.Runs` at its preset) from the
    progress records under ``folder`` of the ledger ``works`` that trained them: a config's output is its work's last
    evaluation where that work is complete, else none. Also ``{work name: its state}`` of the point's works."""
    from compgen.runs import Runs

    sec, preset = catalog.SECTIONS[name], bridge.point_name(multiple)
    figures = {f: bridge.figure_configs(sec, f, preset) for f in sec.figures("quick")}
    outputs = {c: None for cs in figures.values() for c in cs}
    by_fields = {unseeded(c): c for c in outputs}
    states = {}
    for work in works:
        if work.section != name or work.preset != preset:
            continue
        record = ledger.read_progress(Path(folder) / work.name)
        states[work.name] = ledger.standing(record)["state"] if record else "not started"
        if record is None or not record.complete:
            continue
        for entry in record.configs:
            cfg = by_fields.get(json.dumps({k: v for k, v in entry["config"].items() if k != "seeds"}, sort_keys=True))
            if cfg is not None and tuple(entry["seeds"]) == tuple(cfg.seeds):
                outputs[cfg] = {f"eval/{k}": np.asarray(v, float) for k, v in entry["eval"].items()}
    return Runs(sec, preset, figures, outputs), states


def works_by_point(works, folder) -> dict:
    """``{multiple: (complete, total)}``: how many of the ledger ``works`` at each bridge point are complete in their
    state folders under ``folder``, the points in the ledger's order."""
    found = {}
    for work in works:
        multiple = bridge.parse(work.preset)
        if multiple is None:
            continue
        record = ledger.read_progress(Path(folder) / work.name)
        done, total = found.get(multiple, (0, 0))
        found[multiple] = (done + bool(record is not None and record.complete), total + 1)
    return found


def claim_path(name: str, claim, start, works, folder, multiples=MULTIPLES, read=None) -> list:
    """The :class:`Point` of chapter ``name``'s ``claim`` (a :class:`compgen.analysis.claims.Claim`, found on other
    runs by its id) at ×1 (``start``: runs at quick, the book's seeds or recorded sets) and at each bridge point of
    ``multiples`` whose works are under ``folder``. ``read``: the :func:`unseeded` keys of the configs the claim reads
    (their fractions of the paper's compute), default all."""
    chapter, sec = CHAPTERS[name], catalog.SECTIONS[name]
    quick = [c for f in sec.figures("quick") for c in bridge.figure_configs(sec, f, "quick")]
    quick = list({unseeded(c): c for c in quick if read is None or unseeded(c) in read}.values())
    found = []
    for multiple in (1, *multiples):
        points = [bridge.point(sec, q, multiple) for q in quick]
        if multiple == 1:
            runs, state = start, "complete"
        else:
            runs, states = point_runs(name, multiple, works, folder)
            wanted = {unseeded(p) for p in points}
            mine = [s for w, s in states.items() if wanted & _work_keys(works, w, multiple)] or list(states.values())
            state = (
                "complete"
                if mine and all(s == "complete" for s in mine)
                else ("not started" if not mine or all(s == "not started" for s in mine) else "in progress")
            )
        judged = C.find(chapter.claims(runs), claim) if runs is not None else None
        standing = judged.details.get("standing") if judged is not None else None
        found.append(
            Point(
                label=f"×{multiple}",
                multiple=float(multiple),
                fraction=_fraction(sec, quick, points),
                positions=positions(judged) if judged is not None else (),
                standing=standing,
                verdict=judged.verdict if judged is not None else C.NOT_RUN,
                seeds=tuple(judged.seeds) if judged is not None else (),
                state=state,
            )
        )
    return found


def _work_keys(works, name: str, multiple: int) -> set:
    """The :func:`unseeded` keys of the configs of the work called ``name`` (at its preset)."""
    work = next(w for w in works if w.name == name)
    return {unseeded(c) for c in work.configs()}


TREND_SE = 2.0  # a trend is a slope whose interval of this many standard errors excludes zero (stated before data)


def trend(points) -> tuple | None:
    """``(slope, standard error)`` of the claim's per-seed positions against log base 4 of the multiple, over the
    judged points (ordinary least squares); ``None`` with fewer than two judged points."""
    xs, ys = [], []
    for p in points:
        if p.judged:
            values = p.positions or (p.standing.position,)
            xs += [math.log(p.multiple, 4)] * len(values)
            ys += list(values)
    if len({round(x, 9) for x in xs}) < 2:
        return None
    x, y = np.asarray(xs), np.asarray(ys)
    x0 = x - x.mean()
    slope = float((x0 * (y - y.mean())).sum() / (x0**2).sum())
    residual = y - y.mean() - slope * x0
    dof = len(x) - 2
    se = float(math.sqrt((residual**2).sum() / dof / (x0**2).sum())) if dof > 0 else float("nan")
    return slope, se


def words(points) -> str:
    """Where the claim stands along the path, in words chosen by the numbers: "holds from ×16" (it holds clearly at
    that point and every judged point after it, the last included), "grows: +0.3 criterion per ×4, below it at ×16"
    (or "shrinks"; a trend is a slope whose :data:`TREND_SE` standard errors exclude zero), "no trend over ×1–×16";
    a point whose runs are not complete gets no verdict ("×16 in progress")."""
    judged = [p for p in points if p.judged]
    pending = [f"{p.label} {p.state}" for p in points if not p.judged and p.state != "complete"]
    tail = f"; {', '.join(pending)}" if pending else ""
    if not judged:
        return "not yet judged at any point" + tail
    clear = [C.category(_as_claim(p)) == C.HOLDS_CLEARLY for p in judged]
    if clear[-1]:
        first = len(clear)
        while first > 0 and clear[first - 1]:
            first -= 1
        return f"holds from {judged[first].label}" + tail
    found = trend(judged)
    span = f"{judged[0].label}–{judged[-1].label}"
    if found is None:
        return f"{'holds' if judged[-1].verdict == C.HOLDS else 'does not hold'} at {judged[-1].label}" + tail
    slope, se = found
    if not (math.isfinite(se) and abs(slope) > TREND_SE * se):
        return f"no trend over {span}" + tail
    last = judged[-1].standing.position
    side = "below" if last < 1 else "above"
    return (
        f"{'grows' if slope > 0 else 'shrinks'}: {slope:+.2f} criterion per ×4, {side} it at {judged[-1].label}" + tail
    )


def _as_claim(point):
    """A stand-in claim for :func:`compgen.analysis.claims.category` of a point."""
    return C.Claim("", "", "", "", verdict=point.verdict, details={"standing": point.standing})


def crossing(points) -> float | None:
    """The multiple of the quick compute at which the fitted trend reaches the criterion (an extrapolation), or
    ``None`` where there is no rising trend (:data:`TREND_SE`) below it."""
    judged = [p for p in points if p.judged]
    found = trend(judged)
    if not judged or found is None or judged[-1].standing.position >= 1:
        return None
    if not (found[0] > 0 and math.isfinite(found[1]) and found[0] > TREND_SE * found[1]):
        return None
    slope, _ = found
    last = judged[-1]
    return last.multiple * 4 ** ((1 - last.standing.position) / slope)


class ClaimPath(NamedTuple):
    """A claim along the bridge: the :class:`compgen.analysis.claims.Claim` at ×1, its :class:`Point` at each
    multiple, the paper's own position on the criterion axis (``None`` where the paper reports no number) and the
    claim judged on the authors' code at the points where it was run there (:func:`authors_points`)."""

    claim: C.Claim
    points: list
    paper_position: float | None
    authors: tuple = ()


TWINS = "records/bridge-twin"  # the authors' code at bridge points: <chapter>_x<multiple>.json (tools/twin.py)


def authors_points(name: str, claim, points, folder) -> tuple:
    """The :class:`Point` of chapter ``name``'s ``claim`` on the authors' code at each bridge point where a twin record
    under ``folder`` holds its runs (``<name>_x<multiple>.json``, :class:`compgen.records.Twin`), judged by the
    chapter's claims on every seed of the record pooled (:func:`compgen.analysis.twin.pooled`), where the record has
    the runs the claim reads. A point sits at the
    fraction of our own point of that multiple in ``points``: the record's world is the nearest the authors' code
    expresses (its ``matched_world``)."""
    from compgen.analysis import twin

    ours = {p.multiple: p for p in points}
    found = []
    for path in sorted(Path(folder).glob(f"{name}_x*.json")):
        record = records.Twin.load(path)
        multiple = bridge.parse(record.preset)
        judged = C.find(twin.pooled([record], "authors'") or [], claim)
        if multiple is None or float(multiple) not in ours or judged is None or judged.verdict == C.NOT_RUN:
            continue  # a record of another point, or of runs this claim does not read
        found.append(
            Point(
                label=f"×{multiple}, the authors' code",
                multiple=float(multiple),
                fraction=ours[float(multiple)].fraction,
                positions=positions(judged),
                standing=judged.details.get("standing"),
                verdict=judged.verdict,
                seeds=tuple(judged.seeds),
            )
        )
    return tuple(sorted(found, key=lambda p: p.multiple))


def chapter_paths(name: str, runs, seed_sets, works, folder, twins=None) -> dict:
    """``{claim id: ClaimPath}`` for each of chapter ``name``'s :func:`unresolved`
    claims: ×1 on ``runs`` where they are at quick (the book's seeds), else on the recorded ``seed_sets`` pooled; then
    each bridge point the ledger ``works`` plan for the chapter, from their state under ``folder``; and the authors'
    code at the points its twin records under ``twins`` hold (none without ``twins``)."""
    found = unresolved(seed_sets).get(name, [])
    if not found:
        return {}
    multiples = sorted({bridge.parse(w.preset) for w in works if w.section == name and bridge.parse(w.preset)})
    pooled = pooled_runs(name, seed_sets)
    start = runs if runs is not None and runs.preset == "quick" else pooled
    judged = CHAPTERS[name].claims(start)
    out = {}
    for claim in found:
        read = configs_read(name, pooled, claim)
        points = claim_path(name, claim, start, works, folder, multiples, read)
        paper = C.find(judged, claim)
        authors = authors_points(name, claim, points, twins) if twins is not None else ()
        paper_position = paper.details.get("paper_position") if paper is not None else None
        out[claim.id] = ClaimPath(claim, points, paper_position, authors)
    return out
