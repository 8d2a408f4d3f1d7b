"""Twin runs with the authors' implementation, drawn: the tables of a chapter's twin appendix and the results page's
twin cells, from a twin record judged by :mod:`compgen.analysis.twin` (which reads the record, lays both codes'
numbers out as runs and judges them with the chapter's own claims)."""

from __future__ import annotations

import html
from collections import defaultdict
from pathlib import Path

import numpy as np

from compgen import records
from compgen.analysis import claims as C
from compgen.analysis.twin import (
    config_row,
    judged,
    load_twin,
    metric_name,
    our_finals,
    seed_sets,
    staleness,
    twin_of,
)

SHORT = {C.HOLDS: "✅", C.NOT_REPRODUCED: "❌", C.NOT_RUN: "–"}  # markdown tables
# HTML cells (the results page): marks every font has, coloured by the page's style
MARK = {
    C.HOLDS: '<span class="holds" title="holds">✓</span>',
    C.NOT_REPRODUCED: '<span class="fails" title="not reproduced at this preset">✗</span>',
    C.NOT_RUN: '<span title="not run">–</span>',
}


def glance_cell(found: dict, pooled_claims: list | None, claim, link: str, who: str, why_not=None) -> str:
    """The results page's cell (HTML) of ``who``'s code at the twin world: the verdict on each seed set of ``found``
    (:func:`judged`) and the pooled verdict with its seed count, linked to the chapter's twin table; "n/e" where the
    claim cannot be expressed in the authors' code (``why_not``), "–" where nothing was recorded."""
    if why_not:
        return f'<a href="{link}" title="not expressible in the authors\' code: {html.escape(why_not)}">n/e</a>'
    marks = [C.find(sets[who], claim) for sets in found.values() if sets[who] is not None]
    marks = [m for m in marks if m is not None and m.verdict != C.NOT_RUN]  # sets that judge this claim
    if not marks:
        return "–"
    text = " ".join(MARK[m.verdict] for m in marks)
    total = C.find(pooled_claims, claim)
    if total is not None and total.verdict != C.NOT_RUN and len(marks) > 1:
        why = html.escape(f"pooled over {len(total.seeds)} seeds: {total.ours}")
        text += f' <span title="{why}">Σ{MARK[total.verdict]}</span>'
    return f'<a href="{link}">{text}</a>'


def _label(seeds: str) -> str:
    values = seeds.split(",")
    return f"seeds {values[0]}–{values[-1]}" if len(values) > 2 else f"seeds {', '.join(values)}"


def claims_table(record: records.Twin, ours: dict, found: dict | None = None) -> str:
    """A markdown table, one row per claim of the chapter: ours and the reference's verdict on each seed set of the
    record, with the numbers each verdict read, all judged now. ``ours``: {seed set: our claims there} for a record
    without a matched world (the chapter's runs, and the second set's); at a matched world ours are the record's."""
    found = judged(record) if found is None else found
    matched = bool(record.matched_world)
    sets = list(found)
    head = ["figure", "claim"]
    for s in sets:
        head += [f"ours{', twin world' if matched else ''}, {_label(s)}", f"authors' code, {_label(s)}"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for claim in found[sets[0]]["authors'"] if sets else []:
        cells = [claim.figure, claim.claim]
        why = (record.not_expressible or {}).get(claim.figure)
        if why:
            lines.append(
                "| " + " | ".join(cells + [f"not expressible in the authors' code: {why}"] * 2 * len(sets)) + " |"
            )
            continue
        for s in sets:
            mine = found[s]["ours"] if matched else ours.get(s)
            cells += [_cell(C.find(mine, claim)), _cell(C.find(found[s]["authors'"], claim))]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _cell(claim) -> str:
    if claim is None or claim.verdict == C.NOT_RUN:
        return "– not run"
    return f"{SHORT[claim.verdict]} {claim.ours}"


def shown(chapter: str, values: dict) -> dict:
    """A record's raw final numbers of ours (``{metric name: per seed}``) as the twin tables show them (their labels,
    their units)."""
    return {
        label: scale * np.asarray(values[metric_name(metric, set_name)], float)
        for label, (metric, set_name, scale) in twin_of(chapter).headlines.items()
    }


def reference_headline(chapter: str, run: dict) -> dict:
    """A reference run's final numbers as the twin tables show them (one value each)."""
    out = {}
    for label, (metric, set_name, scale) in twin_of(chapter).headlines.items():
        value = run["final"][set_name][metric] if set_name else run["final"].get(metric, run.get(metric))
        out[label] = scale * value
    return out


def our_headline(chapter: str, cfg, output) -> dict:
    """Our run's final numbers per seed, as :func:`reference_headline` names them."""
    return shown(chapter, our_finals(chapter, cfg, output))


def runs_table(record: records.Twin, labels: dict, ours: dict | None = None) -> str:
    """A markdown table, one row per config: the mean ± sd (seeds) of each headline number, ours beside the
    reference's on each seed set where we have them (``ours``: {seed set as in the record's claims: {row as a tuple
    of items: {name: per-seed values}}}), and the reference's minutes."""
    chapter = record.chapter
    ours = ours or {}
    groups = defaultdict(list)
    for run in record.runs.values():
        groups[tuple(run["row"].items())].append(run)
    sets = seed_sets(record)
    names, head = _headlines(record)
    for n in names:
        for i, s in enumerate(sets):
            who = ["ours", "authors'"] if s in ours else ["authors'"]
            head += [f"{n}: {w}, {_label(s)}" if i == j == 0 else f"{w}, {_label(s)}" for j, w in enumerate(who)]
    head.append("authors' minutes")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row, runs in groups.items():
        cells = _row_cells(row, labels)
        for n in names:
            digits = 1 if "%" in n else 2
            for s in sets:
                if s in ours:
                    mine = ours[s].get(row)
                    cells.append(_mean_sd(list(mine[n]), digits) if mine else "–")
                on = [r for r in runs if str(r["seed"]) in s.split(",")]
                cells.append(_mean_sd([reference_headline(chapter, r)[n] for r in on], digits))
        cells.append(f"{sum(r['wall_s'] for r in runs) / 60:.0f}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _headlines(record: records.Twin) -> tuple:
    """(the headline numbers' names, the row columns) of a record's tables, from its first run."""
    first = next(iter(record.runs.values()))
    return list(reference_headline(record.chapter, first)), list(first["row"])


def _row_cells(row, labels: dict) -> list:
    """A table row's config cells, the model by its label."""
    return [labels.get(v, v) if k == "model" else str(v) for k, v in row]


def ours_by_set(record: records.Twin, runs) -> dict:
    """Our numbers per seed set and table row: those the tool trained at the twins' matched world (the record's
    ``ours_matched_rows``, every seed set), else the chapter's own runs (``runs``, on the chapter's seeds)."""
    if record.matched_world:
        found = defaultdict(dict)
        for r in record.ours_matched_rows:
            found[records.seed_set_name(r["seeds"])][tuple(r["row"].items())] = shown(record.chapter, r["values"])
        return dict(found)
    figures = {r["row"]["figure"] for r in record.runs.values()}
    return {records.seed_set_name(runs.seeds): our_rows(record.chapter, runs, figures)}


def our_rows(chapter: str, runs, figures) -> dict:
    """{row: {name: per-seed values}} of our stored runs of ``figures`` (a :class:`compgen.runs.Runs`)."""
    from compgen import results

    found = {}
    for figure in figures:
        for cfg in runs.configs(figure):
            output = runs.output(cfg)
            if output is not None:
                row = config_row(chapter, figure, results.config_dict(cfg))
                found[tuple(row.items())] = our_headline(chapter, cfg, output)
    return found


def _mean_sd(values, digits) -> str:
    if not values:
        return "–"
    return f"{np.mean(values):.{digits}f} ± {np.std(values):.{digits}f} ({len(values)})"


def headlines_by_seed(twins: list) -> dict:
    """``{"ours": {(row, seed): {name: value}}, "authors'": {...}}``: every headline number of ``twins`` (twin
    records of one chapter) per config row (a tuple of the row's items, its figure included) and seed, ours from the
    records' ``ours_matched_rows``, the reference's from their ``runs``. A row and seed recorded twice count once."""
    chapter = twins[0].chapter
    found = {"ours": defaultdict(dict), "authors'": defaultdict(dict)}
    for record in twins:
        for r in record.ours_matched_rows:
            for name, values in shown(chapter, r["values"]).items():
                for seed, value in zip(r["seeds"], values):
                    found["ours"][tuple(r["row"].items()), seed][name] = value
        for run in record.runs.values():
            found["authors'"][tuple(run["row"].items()), run["seed"]].update(reference_headline(chapter, run))
    return found


def pooled_table(twins: list, labels: dict | None = None) -> str:
    """A markdown table pooling every seed of ``twins`` (twin records of one chapter, at one matched world): per
    config row and headline number, our mean ± standard error over the seeds (the records' ``ours_matched_rows``)
    beside the reference's, and their difference (reference − ours) with its standard error and in units of it.
    A seed recorded twice counts once."""
    labels, found = labels or {}, headlines_by_seed(twins)
    values = lambda code, row, name: np.array([v[name] for (r, _), v in found[code].items() if r == row and name in v])
    names, head = _headlines(twins[0])
    for n in names:
        head += [f"{n}: ours", "authors'", "authors' − ours", "in standard errors"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in dict.fromkeys(r for r, _ in found["authors'"]):
        cells = _row_cells(row, labels)
        for n in names:
            digits = 1 if "%" in n else 3
            a, b = values("ours", row, n), values("authors'", row, n)
            cells += [_mean_se(a, digits), _mean_se(b, digits)]
            if len(a) > 1 and len(b) > 1:
                diff, se = b.mean() - a.mean(), np.hypot(_se(a), _se(b))
                cells += [f"{diff:+.{digits}f} ± {se:.{digits}f}", f"{diff / se:+.1f}" if se > 0 else "–"]
            else:
                cells += ["–", "–"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def per_seed_points(twins: list, x: str, y: str) -> dict:
    """{"ours": [(x, y)], "authors'": [(x, y)]}: two headline numbers of every run of ``twins`` (twin records of
    one chapter), one point per config and seed however many figures share the config or twins repeat it."""
    points = {}
    for code, found in headlines_by_seed(twins).items():
        config = lambda row: tuple((k, v) for k, v in row if k != "figure")
        points[code] = {(config(row), seed): (v[x], v[y]) for (row, seed), v in found.items()}
    return {code: list(found.values()) for code, found in points.items()}


def relation_table(twins: list, x: str, y: str, bins, at_least: float) -> str:
    """A markdown table: per code, how headline ``y`` follows headline ``x`` over every run of ``twins`` - the
    least-squares slope of log y on log x (runs with x >= ``at_least`` and y > 0: the power of x that y grows as)
    and the mean of y over the runs whose x falls in each of ``bins`` ((low, high) pairs, high excluded)."""
    head = ["code", "runs", f"slope of log({y}) on log({x})"] + [f"{y} at {x} {lo:g}–{hi:g}" for lo, hi in bins]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for code, points in per_seed_points(twins, x, y).items():
        a, b = np.array(points, dtype=float).reshape(-1, 2).T
        fit = (a >= at_least) & (b > 0)
        slope = f"{np.polyfit(np.log(a[fit]), np.log(b[fit]), 1)[0]:.1f} ({fit.sum()} runs)" if fit.sum() > 2 else "–"
        cells = [code, str(len(a)), slope]
        for lo, hi in bins:
            inside = (a >= lo) & (a < hi)
            cells.append(f"{b[inside].mean():.1f} ({inside.sum()})" if inside.any() else "–")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _se(values) -> float:
    return float(np.std(values, ddof=1) / np.sqrt(len(values)))


def _mean_se(values, digits) -> str:
    if len(values) == 0:
        return "–"
    if len(values) == 1:
        return f"{values[0]:.{digits}f} (1)"
    return f"{np.mean(values):.{digits}f} ± {_se(values):.{digits}f} ({len(values)})"


def unmatched(record: records.Twin) -> list:
    """The (what, why) pairs of every run's translation that the reference could not match, once each."""
    seen = {}
    for run in record.runs.values():
        for what, why in run["translation"]["unmatched"]:
            seen.setdefault(what, why)
    return list(seen.items())


def _where_trained(runs) -> str:
    """ "82 minutes of training on ..." per device the reference ran on (a run without one: these CPUs)."""
    minutes, at_a_time = {}, {}
    for run in runs:
        device = run.get("device", "cpu")
        minutes[device] = minutes.get(device, 0.0) + run["wall_s"] / 60
        at_a_time[device] = max(at_a_time.get(device, 1), run.get("runs_at_a_time", 1))
    parts = []
    for device, total in minutes.items():
        where = "two CPU cores" if device.startswith("cpu") else device.split(":", 1)[-1]
        shared = f", up to {at_a_time[device]} runs at a time" if at_a_time[device] > 1 else ""
        parts.append(f"{total:.0f} minutes of training on {where}{shared}")
    return "; ".join(parts)


def appendix(path, preset: str, runs, ours: dict, labels: dict) -> str:
    """A chapter's twin appendix as markdown: the claims table (``ours``: {seed set: the chapter's claims there},
    beside the authors' code per seed set, :func:`claims_table`), each config's numbers (ours from ``runs``, the
    chapter's :class:`~compgen.runs.Runs`, beside the reference's), and what the translation could not match. A
    record of another preset than the chapter's is named, not compared."""
    record = load_twin(path)
    if record is None:
        chapter = Path(path).stem.removeprefix("twin_")
        return f"No twin record yet (`{path}`): `make twin REFERENCE=<checkout> CHAPTER={chapter}` makes it."
    if record.preset != preset:
        return (
            f"The twin record (`{path}`) was made at preset `{record.preset}`; this build is at `{preset}`, "
            "so the two are not compared here."
        )
    stale = staleness(record)
    lines = [
        f"Reference: `{record.reference.get('repository', 'the reference')}` at commit "
        f"`{record.reference['commit'][:12]}`; {len(record.runs)} runs, "
        f"{_where_trained(record.runs.values())}."
        + (f" Our side of the record may be out of date: {stale}." if stale else ""),
        "",
        claims_table(record, ours),
        "",
        runs_table(record, labels, ours_by_set(record, runs)),
        "",
        "What the translation cannot match (every field of every config is listed, with the reference's key or "
        "the reason, in the record):",
        "",
        *[f"- **{what}**: {why}." for what, why in unmatched(record)],
    ]
    return "\n".join(lines)


def agreement(twins: list) -> str:
    """One computed sentence on how far the two codes differ over every seed of ``twins`` (twin records of one
    chapter at one world; ``None`` entries are skipped): per config row and headline number, the difference of the
    means (authors' − ours) in units of its standard error; the words follow the numbers."""
    twins = [r for r in twins if r is not None and r.ours_matched_rows]
    if not twins:
        return "No twin record with ours at the same world yet."
    found = headlines_by_seed(twins)
    names, _ = _headlines(twins[0])
    z, most = [], 0
    for row in dict.fromkeys(r for r, _ in found["authors'"]):
        for n in names:
            a = np.array([v[n] for (r, s), v in found["ours"].items() if r == row and n in v])
            b = np.array([v[n] for (r, s), v in found["authors'"].items() if r == row and n in v])
            most = max(most, min(len(a), len(b)))
            se = np.hypot(_se(a), _se(b)) if len(a) > 1 and len(b) > 1 else 0.0
            if se > 0:
                z.append((b.mean() - a.mean()) / se)
    if not z:
        return "The twin records hold too few seeds per cell to compare the two codes."
    z = np.array(z)
    largest = float(np.abs(z).max())
    ways = "both ways" if (z > 0).any() and (z < 0).any() else ("the same way" if len(z) > 1 else "one way")
    cells = f"{len(z)} cell{'s' if len(z) != 1 else ''}"
    head = f"Pooled over every seed of both codes' twins (up to {most} a cell), in {cells}"
    if largest < 2:
        return (
            f"{head}, **no cell differs between the two codes by more than {largest:.1f} standard errors**, and the "
            f"differences go {ways}: the two implementations agree within what these seeds resolve."
        )
    beyond = int((np.abs(z) >= 2).sum())
    return (
        f"{head}, **{beyond} {'differs' if beyond == 1 else 'differ'} between the two codes by two standard errors "
        f"or more** (the largest by "
        f"{largest:.1f}), and the differences go {ways}."
    )
