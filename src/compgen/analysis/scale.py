"""Where each claim appears along the scale bridge (:mod:`compgen.bridge`): which claims need it, the work that
trains their figures at each point, and each claim's standing at the points trained so far.

* :func:`unresolved` - the paper's claims that do not hold clearly when pooled over the recorded seed sets (a
  claim at its criterion or clearly not reproduced), computed from the records;
* :func:`configs_read` - the configs whose runs a claim is judged from (those without which it is not run);
* :func:`plan` - the ledger works (:class:`compgen.ledger.Work`) that train those figures at each point, one per
  program shape, each with its estimated seconds from the quick book's measured time.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from compgen import bridge, catalog, ledger, programs, records
from compgen.analysis import claims as C
from compgen.analysis import finals
from compgen.analysis.chapters import BEYOND_THE_PAPER, CHAPTERS, SEED_SETS, set_runs

MULTIPLES = (4, 16, 64)  # the points two CPU cores can reach, in multiples of the quick compute


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
    for name, module in CHAPTERS.items():
        runs = pooled_runs(name, seed_sets)
        if name in BEYOND_THE_PAPER or runs is None:
            continue
        found = [c for c in module.claims(runs) if C.category(c) in (C.AT_CRITERION, C.FAILS_CLEARLY)]
        if found:
            out[name] = found
    return out


def _without(runs, config):
    return dataclasses.replace(runs, outputs={c: (None if c == config else o) for c, o in runs.outputs.items()})


def unseeded(cfg) -> str:
    """``cfg``'s fields but its seeds and the device's knobs, as sorted JSON: what identifies it across seed sets."""
    return json.dumps({k: v for k, v in programs.config_fields(cfg).items() if k != "seeds"}, sort_keys=True)


def configs_read(name: str, runs, claim) -> set:
    """The configs of ``runs`` (chapter ``name``'s) that ``claim`` is judged from, as :func:`unseeded` keys: those
    whose run taken away leaves it not run."""
    module, read = CHAPTERS[name], set()
    for cfg in {c for configs in runs.figures.values() for c in configs}:
        again = [c for c in module.claims(_without(runs, cfg)) if c.claim == claim.claim]
        if again and again[0].verdict == C.NOT_RUN:
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
    """``{(chapter, figure): (quick configs, [claims])}``: the quick configs (the book's seeds) that the
    :func:`unresolved` claims are judged from, each under the first figure of its chapter that holds it."""
    out = {}
    for name, found in unresolved(seed_sets).items():
        runs, sec = pooled_runs(name, seed_sets), catalog.SECTIONS[name]
        read = {claim.claim: configs_read(name, runs, claim) for claim in found}
        taken = set()
        for figure in sec.figures("quick"):
            configs = [q for q in bridge.figure_configs(sec, figure, "quick") if unseeded(q) not in taken]
            mine = [q for q in configs if any(unseeded(q) in keys for keys in read.values())]
            if mine:
                claims = [c for c, keys in read.items() if keys & {unseeded(q) for q in mine}]
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
    (a book-time record of the quick book)."""
    seconds, works, todo = quick_seconds(book_time), [], needed(seed_sets)
    for multiple in multiples:
        preset = bridge.point_name(multiple)
        for (name, figure), (quick, claims) in todo.items():
            sec = catalog.SECTIONS[name]
            points = [bridge.point(sec, q, multiple) for q in quick]
            every = bridge.figure_configs(sec, figure, "quick")
            groups = {}
            for q, p in zip(quick, points):
                groups.setdefault(sec.shape_key(p), []).append((q, p))
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
