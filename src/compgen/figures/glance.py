"""The results-at-a-glance page: every claim of the paper that the book tests, judged when the book is built.

:func:`claims` reads each chapter's runs at a preset from the results store (nothing is trained) and computes
the chapter's claims with the same functions its figures use; a claim whose runs are not stored is "not run".
:func:`page` lays them out one compact table per chapter, one line per claim, with columns that are all judged by
the current claim code from numbers, never read as verdicts from a record:

* ours on the book's seeds (the store), and on each further seed set that the book neither tunes on nor shows (the
  per-seed final numbers of ``tools/second_set.py``'s records, :data:`SEED_SETS`, :mod:`compgen.analysis.finals`);
* all of them pooled: the same criterion on all their seeds under the pooled rule
  (the rule for runs pooled over seed sets, :attr:`compgen.runs.Runs.pooled`); the page's headline counts these
  and its forest plot (:mod:`compgen.figures.forest`) draws them, both by :func:`compgen.analysis.claims.category`;
* the twin world: ours and the authors' implementation at the same configs (``tools/twin.py``'s records, judged by
  :func:`compgen.analysis.twin.judged`), a mark per seed set and the pooled one;
* the paper's scale, where the paper-scale ledger has a record of it (:mod:`compgen.ledger`).

A claim's wording, criterion and numbers are one click away (a ``<details>`` element), so that the page reads at a
glance in a 1,300-pixel-wide browser.

Every record is read by :mod:`compgen.recordfile`: a damaged or newer-schema record stops the page with one line
naming it and the command that rewrites it (the records are committed: a damaged one is a bug to fix). A missing
record, or one made at another preset, leaves its column out with a note; a config the record lacks, or whose seed
sets cannot be paired, is "not run"; a record made by other code than this build's, or naming none, is marked so.
"""

from __future__ import annotations

import datetime
import html
import re
from pathlib import Path

from compgen import catalog, ledger, programs, recordfile, records, results
from compgen.analysis import claims as C
from compgen.analysis import finals, scale, teacher_student
from compgen.analysis.chapters import (  # noqa: F401 (read as glance.* by the book)
    CHAPTERS,
    SEED_SETS,
    judged_sets,
    row_claims,
    set_runs,
)
from compgen.analysis.twin import judged as judged_twin
from compgen.analysis.twin import load_twin
from compgen.analysis.twin import pooled as pooled_twin
from compgen.analysis.twin import staleness as twin_staleness
from compgen.figures import forest, verdicts
from compgen.figures import twin as twin_
from compgen.notebook import stored


def load_seed_set(path, preset) -> records.SeedSet | None:
    """The seed-set record at ``path`` (written by ``tools/second_set.py``, checked by
    :meth:`compgen.records.Record.load`) if it exists and was made at ``preset``, else ``None``."""
    record = records.SeedSet.load_if_there(path)
    return record if record is not None and record.preset == preset else None


def load_seed_sets(paths, preset) -> list:
    """The seed-set records at ``paths`` (a path or several) that exist and were made at ``preset``, in order."""
    paths = [paths] if isinstance(paths, (str, Path)) else list(paths or ())
    return [r for r in (load_seed_set(p, preset) for p in paths) if r is not None]


def code_keys() -> dict:
    """{section: the key of what its code computes at quick} (:func:`compgen.programs.section_key`)."""
    return {name: programs.section_key(catalog.get(name)) for name in CHAPTERS}


def stale_chapters(record: records.SeedSet | None) -> list:
    """The chapters of the record whose training code changed since it was recorded (their runs would differ), or
    whose code key it does not record or recorded under other library versions (whether it changed cannot be told)."""
    return [n for n in (record.runs if record else ()) if n in CHAPTERS and _stale_why(record, n)]


def _stale_why(record: records.SeedSet, name: str) -> str:
    """Why chapter ``name``'s runs in the seed-set ``record`` may not be the current code's ("" if they are)."""
    key, versions = record.computed_by(name)
    state = recordfile.code_state(key, programs.section_key(catalog.get(name)), versions, programs.versions())
    if state == recordfile.STALE:
        return f"the training code of {CHAPTERS[name].title} changed since the record was made"
    if state == recordfile.OTHER_VERSIONS:
        return f"the record's code key for {CHAPTERS[name].title} was computed under other library versions"
    return "" if state == recordfile.CURRENT else f"the record names no code key for {CHAPTERS[name].title}"


def _cell(claim, stale="") -> str:
    """A verdict mark and the mean difference it read with the seeds of the paper's sign, shortest form
    (``"54.9 vs 47.3 %: +7.5 ± 0.6 pts (3/3 seeds)"`` -> ``"✓ +7.5 (3/3)"``), everything ``ours`` says on
    hover; "(stale)" with why on hover."""
    if claim is None:
        return "– not recorded"
    if claim.verdict == C.NOT_RUN:
        return verdicts.MARKS[C.NOT_RUN]
    cell = (
        f'{twin_.MARK[claim.verdict]} <span title="{html.escape(claim.ours)}">{html.escape(short(claim.ours))}</span>'
    )
    return f'{cell} <span title="{html.escape(stale)}">(stale)</span>' if stale else cell


def short(ours: str) -> str:
    """The mean difference and the seeds' count of a claim's ``ours`` (``"... : +7.5 ± 0.6 pts (3/3 seeds)"`` ->
    ``"+7.5 (3/3)"``, the unit the criterion's); a text without a paired difference as it is."""
    tail = ours.rsplit(": ", 1)[-1]
    found = re.fullmatch(r"([-+][\d.]+)(?: ± [\d.]+)?( \S+)? \((\d+/\d+) seeds\)", tail)
    if found is None:
        return tail.replace(" seeds)", ")")
    mean, _, seeds = found.groups()  # the unit is the criterion's (on hover)
    return f"{mean} ({seeds})"


def _pooled_cell(claim) -> str:
    """The pooled verdict, with "at the criterion" beside it where its interval contains the criterion."""
    if claim is None or claim.verdict == C.NOT_RUN:
        return verdicts.MARKS[C.NOT_RUN] if claim else "–"
    if C.category(claim) == C.AT_CRITERION:
        return f'{_cell(claim)} <span class="edge">at the criterion</span>'
    return _cell(claim)


def _commits(record: records.SeedSet) -> str:
    """Where a second-set record was computed: "commit `abc`", or per chapter when its chapters differ."""
    by_commit = {}
    for name, commit in record.commits.items():
        by_commit.setdefault(commit[:12], []).append(CHAPTERS[name].title if name in CHAPTERS else name)
    if len(by_commit) == 1:
        return f"commit `{next(iter(by_commit))}`"
    return "commits " + "; ".join(f"`{c}` ({', '.join(names)})" for c, names in by_commit.items())


STYLE = """<style>
body:has(table.glance) .bd-sidebar-secondary { display: none !important; }
body:has(table.glance) .bd-page-width, body:has(table.glance) .bd-article-container { max-width: none !important; }
table.glance { width: 100%; table-layout: fixed; font-size: 0.85em; margin: 0.4em 0 1.2em; }
table.glance th, table.glance td { white-space: nowrap; overflow: hidden; text-overflow: ellipsis;
  padding: 0.15em 0.5em; vertical-align: top; }
table.glance td:has(details[open]) { white-space: normal; } table.glance th { white-space: normal; }
table.glance summary { overflow: hidden; text-overflow: ellipsis; cursor: pointer; }
table.glance .holds { color: #1a7f37; font-weight: bold; } table.glance .fails { color: #cf222e; font-weight: bold; }
table.glance td:has(.edge), table.glance td:has(a.path) { white-space: normal; }
table.glance .edge { color: #9a6700; font-weight: bold; }
div.glance-scroll { overflow-x: auto; } @media (max-width: 900px) { table.glance { min-width: 900px; } }
</style>"""


# columns' share of the page (figure 8 %, claim the rest)
WIDTHS = {"seeds": 9, "pooled": 12, "twin": 9, "paper": 9, "path": 13}


def _claim_details(c) -> str:
    """The claim's wording as a one-line summary; its criterion, the paper's number and ours when opened."""
    seeds = ", ".join(map(str, c.seeds)) or "–"
    body = (
        f"<b>criterion</b>: {html.escape(c.criterion)}<br><b>paper</b>: {html.escape(c.paper)}<br>"
        f"<b>ours</b>: {html.escape(c.ours)} (seeds {seeds})"
    )
    return f"<details><summary>{html.escape(c.claim)}</summary>{body}</details>"


def _html_table(name: str, group: list, columns: list) -> str:
    """One chapter's claims as a compact HTML table: figure, claim, then ``columns`` ((title, [cell per claim],
    width class)), cells given as HTML."""
    widths = [WIDTHS[w] for _, _, w in columns]  # per cent of the page's width
    widths = [8, max(18, 92 - sum(widths))] + widths
    cols = "".join(f'<col style="width: {w}%">' for w in widths)
    head = "<th>figure</th><th>claim (click for the criterion)</th>" + "".join(f"<th>{t}</th>" for t, _, _ in columns)
    rows = []
    for i, c in enumerate(group):
        figure = f'<a href="{name}.html{c.anchor}">{html.escape(c.figure)}</a>' if c.anchor else html.escape(c.figure)
        cells = "".join(f"<td>{cells[i]}</td>" for _, cells, _ in columns)
        rows.append(f"<tr><td>{figure}</td><td>{_claim_details(c)}</td>{cells}</tr>")
    body = "".join(rows)
    table = f'<table class="glance" style="table-layout: fixed; width: 100%"><colgroup>{cols}</colgroup>'
    return f'<div class="glance-scroll">{table}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


# Chapters whose claims have no twin, with why (the column shows "n/a", the reason on hover).
NOT_TWINNED = {
    "incontext": "not a claim of the paper, and the authors' run_fewshot.py trains no in-context learner to compare",
}


def page(preset="quick", seeds=None, seed_sets=(), twins=None, paper_scale=None, bridge=None) -> str:
    """The page's markdown (see the module docstring): how it was built, the counts of claims by where they stand,
    the forest plot of every claim, and one compact table per chapter. ``seed_sets``: the paths of
    ``tools/second_set.py``'s records (:data:`SEED_SETS`); ``twins``: the folder of ``tools/twin.py``'s records
    (``twin_<section>.json`` and ``twin_<section>_*.json``); ``paper_scale``: the state folder of the paper-scale
    ledger's Fig. 2C work (:mod:`compgen.ledger`); ``bridge``: the folder of the scale bridge's ledger and state,
    whose column says where each claim not holding clearly at quick stands along the path to the paper's
    configuration (:func:`compgen.analysis.scale.words`)."""
    recorded = load_seed_sets(seed_sets, preset)
    runs = {name: stored(name, preset, seeds) for name in CHAPTERS}
    sets = {name: judged_sets(name, runs[name], recorded) for name in CHAPTERS}
    rows = {name: row_claims(sets[name], _book(runs[name])) for name in CHAPTERS}
    parts = [_headline(preset, runs, sets, rows)]
    if recorded:
        parts.append(_seed_sets_summary(recorded, runs))
    parts += [_other_preset(p, preset) for p in _paths(seed_sets) if Path(p).exists() and not load_seed_set(p, preset)]
    parts.append(_forest(sets, runs, rows, link=True))
    twin_records = _twin_records(twins, preset) if twins else {}
    if twins:
        parts.append(_twin_summary(twin_records))
    paper_claims = _paper_scale_claims(paper_scale) if paper_scale else None
    if paper_scale:
        parts.append(_paper_scale_summary(paper_claims))
    if bridge is not None:
        parts.append(_bridge_summary(bridge))
    parts.append(STYLE)
    for name in CHAPTERS:
        found, book = sets[name], _book(runs[name])
        group = found[book]
        columns = [(f"ours, {_seeds_label(book).removeprefix('seeds ')}", [_cell(c) for c in group], "seeds")]
        for record in recorded:
            key = records.seed_set_name(record.seeds)
            why = _stale_why(record, name) if name in stale_chapters(record) else ""
            cells = [_cell(C.find(found.get(key), c), why) for c in group]
            columns.append((f"ours, {_seeds_label(key).removeprefix('seeds ')}", cells, "seeds"))
        if recorded:
            columns.append(("pooled", [_pooled_cell(c) for c in rows[name]], "pooled"))
        if twins:
            columns += _twin_columns(name, group, twin_records.get(name, []), found)
        if paper_claims:
            paper_found = paper_claims["claims"] if name == "teacher_student" else []
            cells = [C.find(paper_found, c) for c in group]
            columns.append(("paper scale", [_paper_scale_cell(p, paper_claims["stale"]) for p in cells], "paper"))
        if bridge is not None and not CHAPTERS[name].beyond_the_paper:
            paths = _bridge_paths(name, runs[name], seed_sets, bridge)
            cells = [_bridge_cell(name, paths.get(c.id)) for c in group]
            columns.append(("along the path to the paper's scale", cells, "path"))
        parts.append(f"**{CHAPTERS[name].title}**\n\n" + _html_table(name, group, columns))
    return "\n\n".join(parts)


def _bridge_paths(name: str, runs, seed_sets, folder) -> dict:
    """``{claim id: ClaimPath}`` of chapter ``name``'s claims along the scale bridge whose ledger and
    state are in ``folder`` (:func:`compgen.analysis.scale.chapter_paths`), the claims chosen on the recorded seed
    sets at quick."""
    quick_sets = load_seed_sets(seed_sets, "quick")
    return scale.chapter_paths(name, runs, quick_sets, _bridge_works(folder), folder)


def _bridge_works(folder) -> list:
    """The works of the bridge's ledger in ``folder``; none before it is planned."""
    ledger_path = Path(folder) / ledger.LEDGER
    return ledger.read(ledger_path) if ledger_path.exists() else []


def _bridge_summary(folder) -> str:
    """What the column along the path says, how its words are chosen, and how far the bridge's ledger in ``folder``
    has come (:func:`compgen.analysis.scale.works_by_point`, :func:`compgen.ledger.forecast`)."""
    works = _bridge_works(folder)
    counts = scale.works_by_point(works, folder)
    points = "; ".join(f"×{m}: {done} of {total} complete" for m, (done, total) in counts.items())
    left = ledger.forecast(works, folder)
    if not works:
        where = "Its ledger lists no work yet."
    elif left["works"] == 0:
        where = f"Every work of its ledger is complete ({points})."
    else:
        pace = (
            f", about {left['paced_s'] / 3600:.0f} hours of one core at the pace the complete ones kept"
            if left["paced_s"] is not None
            else ""
        )
        where = f"Works of its ledger, by point: {points}; {left['works']} left{pace}."
    return (
        "**Along the path to the paper's scale.** A claim that does not hold clearly at `quick`, pooled over the "
        "recorded seed sets, is trained again on the book's seeds at points between `quick` and the paper's "
        "configuration, named by their multiple of the quick training compute; each chapter's figure shows them and "
        "states which fields move, and by which rule. The column's words are chosen by the numbers: **holds from ×N** "
        "where the claim holds clearly at ×N and at every later point judged; **grows** or **shrinks** with the fitted "
        "slope, in criterion units per ×4 of compute, where the slope of the per-seed effects against the logarithm of "
        f"the compute lies more than {scale.TREND_SE:g} standard errors from zero; **no trend** otherwise. A point "
        "whose runs are not complete gets no verdict and is named with its state; – marks a claim that holds clearly "
        "at `quick` and is not trained along the path. These runs take hours, so they are a ledger "
        "(`records/bridge/ledger.json`, computed by `tools/bridge.py plan`) that leases on the CPU continue, committed "
        f"under `records/bridge/`. {where}"
    )


def _bridge_cell(name: str, path) -> str:
    """Where a claim stands along the bridge in words, linked to its chapter's figure; "–" for a claim that holds
    clearly at quick (not on the bridge)."""
    if path is None:
        return '<span title="holds clearly at quick: not trained along the bridge">–</span>'
    label = name.replace("_", "-")
    return f'<a class="path" href="{name}.html#bridge-{label}">{html.escape(scale.words(path.points))}</a>'


def _paths(seed_sets) -> list:
    return [seed_sets] if isinstance(seed_sets, (str, Path)) else list(seed_sets or ())


def _other_preset(path, preset) -> str:
    other = records.SeedSet.load(path).preset
    return (
        f"The seed-set record `{path}` was made at preset `{other}`; this page is at `{preset}`, so its column is left "
        "out."
    )


def _book(runs) -> str:
    return records.seed_set_name(runs.seeds)


def _seeds_label(seeds: str) -> str:
    values = seeds.split(",")
    if len(values) == 1:
        return f"seed {values[0]}"
    return f"seeds {values[0]}–{values[-1]}" if len(values) > 2 else f"seeds {', '.join(values)}"


def _set_labels(found: dict) -> list:
    """The labels of the seed sets of one chapter's :func:`judged_sets`: the book's seeds, then the recorded sets."""
    return ["the book's seeds"] + [_seeds_label(k) for k in list(found)[1:] if k != "pooled"]


def _pooled_label(found: dict, rows: list) -> str:
    """What a row's big point is: the claim pooled over every seed set, or on the book's seeds alone."""
    return f"pooled over {_seeds_per_claim(rows)} seeds" if "pooled" in found else "the book's seeds"


def _seeds_per_claim(claims) -> str:
    """How many seeds the judged ``claims`` read: ``"9"``, ``"6 or 9"``, or ``"all"`` where none was judged."""
    return " or ".join(map(str, sorted({len(c.seeds) for c in claims if c.verdict != C.NOT_RUN}))) or "all"


def _forest(sets: dict, runs: dict, rows: dict, link: bool, chapters=None) -> str:
    """The forest plot of the claims of ``chapters`` (default every chapter, those beyond the paper last)."""
    chapters = list(chapters or CHAPTERS)
    groups = []
    for name in chapters:
        found = sets[name]
        book_rows = found[_book(runs[name])]
        keys = [k for k in found if k != "pooled"]
        plotted = []
        for row, book_claim in zip(rows[name], book_rows):
            per_set = tuple((_seeds_label(k), C.find(found[k], book_claim)) for k in keys)
            plotted.append(forest.Row(row, per_set, f"{name}.html{row.anchor}" if link and row.anchor else row.anchor))
        groups.append((CHAPTERS[name].title, plotted))
    first = chapters[0]
    every = [c for name in chapters for c in rows[name]]
    counts = C.tally(every)
    alt = (
        f"Forest plot of {len(every)} claims, each one's mean difference in units of its criterion with two standard "
        f"errors: {_counted(counts)}."
    )
    return forest.plot(groups, _set_labels(sets[first]), _pooled_label(sets[first], rows[first]), alt)


def _counted(counts: dict) -> str:
    """``"12 hold clearly, 3 are at the criterion, 2 are clearly not reproduced and 1 was not run"`` (zeros left
    out)."""
    words = {C.HOLDS_CLEARLY: ("hold", "clearly"), C.AT_CRITERION: ("are", "at the criterion"),
             C.FAILS_CLEARLY: ("are", "clearly not reproduced"), C.NOT_RUN: ("were", "not run")}  # fmt: skip
    said = [f"{n} {_verb(n, words[k][0])} {words[k][1]}" for k, n in counts.items() if n]
    return said[0] if len(said) == 1 else ", ".join(said[:-1]) + " and " + said[-1] if said else "none"


def _headline(preset, runs: dict, sets: dict, rows: dict) -> str:
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
    paper = [n for n, chapter in CHAPTERS.items() if not chapter.beyond_the_paper]
    book = [c for n in paper for c in sets[n][_book(runs[n])]]
    count = lambda claims, verdict: sum(c.verdict == verdict for c in claims)
    text = (
        f"Built on {date} from commit `{results._git_commit()[:12]}` at preset **`{preset}`**, from the runs in the "
        f"results store and the records in `book/search/`; every verdict below is judged now, by the claims code of "
        f"this commit. Of the paper's {len(book)} claims tested here, on the book's seeds "
        f"**{count(book, C.HOLDS)} {_verb(count(book, C.HOLDS), 'hold')}**, {count(book, C.NOT_REPRODUCED)} "
        f"{_verb(count(book, C.NOT_REPRODUCED), 'are')} not reproduced at this preset and {count(book, C.NOT_RUN)} "
        f"{_verb(count(book, C.NOT_RUN), 'were')} not run."
    )
    every = [c for n in paper for c in rows[n]]
    pooled = any("pooled" in sets[n] for n in paper)
    where = (
        f"Pooled over the book's seeds and {_sets_count(sets)} ({_seeds_per_claim(every)} seeds per claim, the mean "
        'above two standard errors of the per-seed differences, the rule that replaces "the '
        "paper's sign on every seed\" when the seeds are many)"
        if pooled
        else "By where each stands against its criterion"
    )
    text += (
        f" {where}, **{_counted(C.tally(every))}**. A claim is at the criterion where its mean difference, two "
        "standard errors either side, reaches both sides of the criterion: more seeds could turn its verdict either "
        "way, so it is neither a clear success nor a clear failure. The forest plot below places every claim on one "
        "axis by that measure."
    )
    beyond = [c for n, chapter in CHAPTERS.items() if chapter.beyond_the_paper for c in rows[n]]
    if beyond:
        counted = _counted(C.tally(beyond))
        text += f" The {len(beyond)} in-context claims are not the paper's and are counted apart: {counted}."
    return text


def _verb(n: int, plural: str) -> str:
    """``plural`` ("hold", "are", "were") agreeing with a count ``n``."""
    return {"hold": "holds", "are": "is", "were": "was"}[plural] if n == 1 else plural


def _sets_count(sets: dict) -> str:
    n = max(len([k for k in found if k != "pooled"]) for found in sets.values()) - 1
    return "the second seed set" if n == 1 else f"{n} further seed sets"


def _seed_sets_summary(recorded: list, runs: dict) -> str:
    labels = [f"**ours, {_seeds_label(records.seed_set_name(r.seeds)).removeprefix('seeds ')}**" for r in recorded]
    columns = labels[0] if len(labels) == 1 else ", ".join(labels[:-1]) + " and " + labels[-1]
    where = "; ".join(f"{_seeds_label(records.seed_set_name(r.seeds))} at {_commits(r)}" for r in recorded)
    text = (
        f"The column{'s' if len(labels) > 1 else ''} {columns} judge{'' if len(labels) > 1 else 's'} every claim on "
        f"seeds that the book neither tunes on nor shows: the final numbers per seed that `tools/second_set.py` "
        f"recorded ({where}; same preset), judged by the same claims code as the book's column. **pooled** judges "
        "each claim on every set's seeds together; each cell's count is the number of seeds."
    )
    for record in recorded:
        text += _staleness(record, runs)
    return text


def _staleness(record: records.SeedSet, runs: dict) -> str:
    """What a seed-set record's columns show that is not this build's: other code, no code key, shared seeds,
    configs changed since."""
    label, stale = _seeds_label(records.seed_set_name(record.seeds)), stale_chapters(record)
    changed = [CHAPTERS[n].title for n in stale if "changed" in _stale_why(record, n)]
    unknown = [CHAPTERS[n].title for n in stale if "changed" not in _stale_why(record, n)]
    missing = [CHAPTERS[n].title for n in CHAPTERS if (r := set_runs(record, n)) is not None and finals.missing(r)]
    overlap = [CHAPTERS[n].title for n, r in runs.items() if set(record.seeds) & set(r.seeds)]
    text = ""
    if changed:
        text += (
            f" The training code of {', '.join(changed)} has changed since {label} were recorded, so those cells, "
            "marked (stale), show the older code's runs."
        )
    if unknown:
        text += (
            f" The record of {label} names no code key comparable here for {', '.join(unknown)}, so whether its code "
            "changed since cannot be told: its cells are marked (stale)."
        )
    if overlap:
        text += f" This build's seeds of {', '.join(overlap)} are among {label}, so those are not compared."
    if missing:
        text += f" Configs of {', '.join(missing)} changed since {label} were recorded; theirs show as not run."
    return text


def _twin_records(folder, preset) -> dict:
    """{section: [twin records at ``preset``]} from ``folder``: ``twin_<section>.json`` first, then the others of
    the section (more seed sets)."""
    found = {}
    for name in CHAPTERS:
        paths = [Path(folder) / f"twin_{name}.json", *sorted(Path(folder).glob(f"twin_{name}_*.json"))]
        loaded = [load_twin(p) for p in paths]
        found[name] = [r for r in loaded if r is not None and r.preset == preset]
    return {k: v for k, v in found.items() if v}


def _twin_columns(name, group, twin_records, ours_sets) -> list:
    """The two twin-world columns of a chapter: ours and the authors' code, a mark per seed set and the pooled."""
    if name in NOT_TWINNED:
        cell = f'<span title="{html.escape(NOT_TWINNED[name])}">n/a</span>'
        return [("twin: ours", [cell] * len(group), "twin"), ("twin: authors'", [cell] * len(group), "twin")]
    if not twin_records:
        return [("twin: ours", ["–"] * len(group), "twin"), ("twin: authors'", ["–"] * len(group), "twin")]
    link = f"{name}.html#twin-{name.replace('_', '-')}"
    found = {}
    for record in twin_records:
        found.update(judged_twin(record))
    theirs = pooled_twin(twin_records, "authors'")
    if twin_records[0].matched_world:
        ours = pooled_twin(twin_records, "ours")
    else:  # the twins ran at the preset's own world: ours there are the book's runs and the second set
        for s in found:
            found[s]["ours"] = ours_sets.get(s)
        ours = ours_sets.get("pooled")
    why = lambda c: (twin_records[0].not_expressible or {}).get(c.figure)
    return [
        ("twin: ours", [twin_.glance_cell(found, ours, c, link, "ours", why(c)) for c in group], "twin"),
        ("twin: authors'", [twin_.glance_cell(found, theirs, c, link, "authors'", why(c)) for c in group], "twin"),
    ]


def _twin_summary(twins: dict) -> str:
    """What the twin-world columns show, for which chapters a twin record exists, and which are stale."""
    worlds = {
        name: "the quick world" if not rs[0].matched_world else "the nearest world the authors' code expresses"
        for name, rs in twins.items()
    }
    done = "; ".join(f"{CHAPTERS[name].title} ({world})" for name, world in worlds.items()) or "none yet"
    return (
        "The columns **twin** compare the two implementations like with like: ours and the authors' "
        "(`smonsays/modular-hyperteacher`, `tools/twin.py`) trained at the same configs, each judged by the same "
        "claims code on its own numbers; a mark per seed set (the book's first), then Σ, the verdict pooled over every "
        "seed both records hold, each linked to the chapter's twin table. Where the authors' code cannot express the "
        f"preset's world, both run at the nearest world it does. Twin worlds: {done}. ✓ holds, ✗ not reproduced, – "
        "not run, n/e not expressible in the authors' code, n/a no twin to run (hover for why)."
    ) + _twin_staleness(twins)


def _twin_staleness(twins: dict) -> str:
    """A sentence per kind of staleness of the twin records (:func:`compgen.analysis.twin.staleness`), or ""."""
    why = {n: [twin_staleness(r) for r in rs] for n, rs in twins.items()}
    changed = [n for n, found in why.items() if any("other code" in w for w in found)]
    unknown = [n for n, found in why.items() if any(w and "other code" not in w for w in found)]
    text = ""
    if changed:
        titles = ", ".join(CHAPTERS[n].title for n in changed)
        text += f" Our code of {titles} has changed since its twin records were made."
    if unknown:
        text += (
            f" The twin records of {', '.join(CHAPTERS[n].title for n in unknown)} name no code key comparable here, "
            "so whether our code changed since they were made cannot be told."
        )
    return text


def _paper_scale_claims(folder) -> dict | None:
    """``{"claims": [Claim], "stale": [why], "record": record}`` of the ledger's Fig. 2C work in ``folder``, judged
    now by the chapter's claim code (no verdict before its last step); ``None`` before its first lease."""
    record = ledger.read_progress(folder)
    if record is None:
        return None
    return {"claims": teacher_student.paper_scale_claims(record), "stale": ledger.staleness(record), "record": record}


def _paper_scale_cell(claim, stale) -> str:
    if claim is None:
        return '<span title="not trained at the paper\'s scale">–</span>'
    if "progress" in claim.details:
        done, total = claim.details["progress"]
        cell = f'<span title="{html.escape(claim.ours)}">at {done:,} of {total:,} steps</span>'
    else:
        cell = _cell(claim)
    return f'{cell} <span title="{html.escape("; ".join(stale))}">(stale)</span>' if stale else cell


def _paper_scale_summary(found) -> str:
    if found is None:
        return (
            "No claim has been trained at the paper's configuration yet: it needs a GPU. The paper-scale ledger "
            "(`records/ledger.json`) lists that work in order, Fig. 2C first; `tools/gpu_lease.py` advances it on "
            "every GPU lease, and its first lease adds a column **paper scale** to this page."
        )
    record = found["record"]
    seeds = ", ".join(map(str, record.configs[0]["seeds"]))
    stand = ledger.standing(record)
    done, total, leases = (
        record.steps_done,
        record.outer_steps,
        f"{stand['leases']} lease(s) on {stand['devices']}",
    )
    where = (
        f"trained to its last step over {leases}, and judged from its record with the chapter's claim code"
        if record.complete
        else f"in progress: {done:,} of {total:,} outer steps after {leases}; its cells say how far it stands and "
        "give no verdict before the last step"
    )
    cfg = record.configs[0]["config"]
    return (
        f"The column **paper scale** holds Fig. 2C at the paper's own configuration ({total:,} outer steps of "
        f"{cfg['meta_batch']} tasks, {cfg['inner_steps']} inner steps, seeds {seeds}), {where}. Other claims were "
        "not trained at that scale (–)."
        + (f" The record is stale: {'; '.join(found['stale'])}." if found["stale"] else "")
    )


# --------------------------------------------------------------------------------------------- a chapter's findings


def findings(runs, seed_sets=(), twins=None) -> str:
    """What a chapter's runs show, as markdown computed now: one item per claim with its verdict and the numbers it
    read on the book's seeds, on each recorded seed set and pooled over all (``seed_sets``: the paths of
    ``tools/second_set.py``'s records), the twins' verdicts at the same world in both codes (``twins``: the folder of
    ``tools/twin.py``'s records), and the chapter's forest plot. The verdicts are worded as on the results page
    (:func:`compgen.analysis.claims.verdict_words`); every word that depends on a verdict is chosen by it."""
    name = runs.section.name
    recorded = load_seed_sets(seed_sets, runs.preset)
    found = judged_sets(name, runs, recorded)
    book = _book(runs)
    rows = row_claims(found, book)
    older = {records.seed_set_name(r.seeds) for r in recorded if name in stale_chapters(r)}
    twin_records = _twin_records(twins, runs.preset).get(name, []) if twins else []
    twin_found = {}
    for r in twin_records:
        twin_found.update(judged_twin(r))
    lines = []
    for claim, row in zip(found[book], rows):
        parts = [f"{_seeds_label(book).capitalize()}: {_said(claim)}"]
        for key in (k for k in found if k not in (book, "pooled")):
            label = _seeds_label(key) + (" (older code)" if key in older else "")
            parts.append(f"{label}: {_said(C.find(found[key], claim))}")
        if "pooled" in found and row.verdict != C.NOT_RUN:
            parts.append(f"pooled over {len(row.seeds)} seeds: {_said(row)}")
        text = f"- **{claim.figure}** — {claim.claim}. " + "; ".join(parts) + "."
        if twin_found and not (twin_records[0].not_expressible or {}).get(claim.figure):
            marks = []
            for s, sets in twin_found.items():
                theirs = C.find(sets["authors'"], claim)
                if theirs is not None and theirs.verdict != C.NOT_RUN:
                    marks.append(f"{C.verdict_words(theirs)} on {_seeds_label(s)}")
            if marks:
                text += f" The authors' code at the twin world: {', '.join(marks)}."
        lines.append(text)
    held = sum(c.verdict == C.HOLDS for c in found[book])
    where = "Pooled over every seed set" if "pooled" in found else "By where each stands against its criterion"
    head = (
        f"**What the runs show**, judged when this page was built {sets_judged(found, book)} (the claim tables below "
        f"each figure and the [results page](results) give the criteria): {held} of {len(found[book])} claims hold on "
        "the book's seeds. "
        f"{where}, {_counted(C.tally(rows))} (at the criterion: the mean difference, two standard errors either side, "
        "reaches both sides of the criterion)."
    )
    plot = _forest({name: found}, {name: runs}, {name: rows}, link=False, chapters=[name])
    return "\n".join([head, "", *lines, "", plot])


def sets_judged(found: dict, book: str) -> str:
    """The seed sets a chapter's claims were judged on, named from :func:`judged_sets`' keys: "on the book's seeds
    (2020–2022, not tuned on), on the unseen seeds 31–33 and 51–53, and pooled over all of them"."""
    recorded = [_seeds_label(k).replace("seeds ", "") for k in found if k not in (book, "pooled")]
    label = _seeds_label(book)
    text = f"on the book's {label.replace('seeds ', 'seeds (').replace('seed ', 'seed (')}, not tuned on)"
    if not recorded:
        return text
    listed = recorded[0] if len(recorded) == 1 else ", ".join(recorded[:-1]) + f" and {recorded[-1]}"
    text += f", on the unseen seeds {listed}"
    return text + (", and pooled over all of them" if "pooled" in found else "")


def _said(claim) -> str:
    """A claim's verdict, worded as on the results page, in bold where judged, and the numbers it read."""
    if claim is None:
        return "not recorded"
    if claim.verdict == C.NOT_RUN:
        return "not run"
    return f"**{C.verdict_words(claim)}** ({claim.ours})"
