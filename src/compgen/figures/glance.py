"""The results-at-a-glance page: every claim of the paper that the book tests, with our verdict, from the store.

:func:`claims` reads each chapter's runs at a preset from the results store (nothing is trained) and computes
the chapter's claims with the same functions its figures use; a claim whose runs are not stored is "not run".
:func:`page` adds, when given the record of ``tools/second_set.py``, the verdicts of the same claims on a second
seed set that the book neither tunes on nor shows, and, from the records of ``tools/twin.py``, the verdicts of the
authors' implementation at the same configs. Each chapter's claims are one compact table, one line per claim: the
verdict marks and the numbers they read, with the claim's full wording, criterion and the paper's number one click
away (a ``<details>`` element), so that the page reads at a glance in a 1,300-pixel-wide browser.
"""

from __future__ import annotations

import datetime
import html
import json
from pathlib import Path

from compgen import catalog, results
from compgen.figures import claims as C
from compgen.figures import goals, hyperteacher, incontext, preferences, teacher_student
from compgen.figures import twin as twin_
from compgen.notebook import stored

CHAPTERS = {
    "teacher_student": teacher_student,
    "hyperteacher": hyperteacher,
    "preferences": preferences,
    "goals": goals,
    "incontext": incontext,
}
TITLES = {
    "teacher_student": "Teacher and student (§3.3)",
    "hyperteacher": "The hyperteacher (§4.1)",
    "preferences": "Compositional preferences (§4.2)",
    "goals": "Compositional goals (§4.3)",
    "incontext": "In-context learners (beyond the paper)",
}


def claims(preset="quick", seeds=None, chapters=None) -> dict:
    """{section: [Claim]} computed from the stored runs of every chapter (or of ``chapters``) at ``preset``."""
    return {
        name: module.claims(stored(name, preset, seeds))
        for name, module in CHAPTERS.items()
        if chapters is None or name in chapters
    }


def load_second_set(path, preset) -> dict | None:
    """The second-seed-set record at ``path`` (written by ``tools/second_set.py``) if it exists and was computed
    at ``preset``, else ``None``."""
    path = Path(path)
    if not path.exists():
        return None
    record = json.loads(path.read_text())
    return record if record.get("preset") == preset else None


def code_fingerprints() -> dict:
    """{section: the fingerprint of its training code}, as the results store keys its runs."""
    return {name: catalog.get(name).fingerprint for name in CHAPTERS}


def _second_set_matches(found: dict, record: dict) -> dict:
    """{section: [the record's entry for each claim of ``found``, or ``None``]}."""
    by_key = {(c["section"], c["figure"], c["claim"]): c for c in record["claims"]}
    return {name: [by_key.get((c.section, c.figure, c.claim)) for c in group] for name, group in found.items()}


def _second_set_cell(entry) -> str:
    if entry is None:
        return "– not recorded"
    return _verdict_cell(entry["verdict"], entry["ours"])


def _verdict_cell(verdict: str, ours: str) -> str:
    """A verdict mark and the numbers it read, shortest form: the paired difference where ``ours`` states one
    (``"54.9 vs 47.3 %: +7.5 ± 0.6 pts (3/3 seeds)"`` -> ``"+7.5 ± 0.6 pts (3/3)"``)."""
    if verdict == C.NOT_RUN:
        return C.MARKS[C.NOT_RUN]
    return f"{twin_.MARK[verdict]} {ours.rsplit(': ', 1)[-1].replace(' seeds)', ')')}"


def _second_set_summary(found: dict, record: dict, matches: dict) -> str:
    seeds = ", ".join(map(str, record["seeds"]))
    pairs = [(c, entry) for name, group in found.items() for c, entry in zip(group, matches[name])]
    holds = sum(c.verdict == C.HOLDS for c, _ in pairs)
    both = sum(c.verdict == C.HOLDS and entry is not None and entry["verdict"] == C.HOLDS for c, entry in pairs)
    current = code_fingerprints()
    changed = [TITLES[name] for name, code in record.get("fingerprints", {}).items() if current.get(name, code) != code]
    stale = (
        f" The training code of {', '.join(changed)} has changed since that record was computed, so its column shows "
        "the older code's runs."
        if changed
        else ""
    )
    return (
        f"The column **seeds {seeds}** repeats every claim on a second seed set that the book neither tunes on nor "
        f"shows (computed by `tools/second_set.py` at {_commits(record)}, same preset): of the "
        f"{holds} claims that hold on the book's seeds, **{both} also hold there**. Each cell gives the verdict "
        f"and then the same numbers as the *ours* column.{stale}"
    )


def _commits(record: dict) -> str:
    """Where a second-set record was computed: "commit `abc`", or per chapter when its chapters differ."""
    commits = record.get("commits") or {name: record["commit"] for name in record.get("fingerprints", CHAPTERS)}
    by_commit = {}
    for name, commit in commits.items():
        by_commit.setdefault(commit[:12], []).append(TITLES.get(name, name))
    if len(by_commit) == 1:
        return f"commit `{next(iter(by_commit))}`"
    return "commits " + "; ".join(f"`{c}` ({', '.join(names)})" for c, names in by_commit.items())


STYLE = """<style>
body:has(table.glance) .bd-sidebar-secondary { display: none !important; }
body:has(table.glance) .bd-page-width, body:has(table.glance) .bd-article-container { max-width: none !important; }
table.glance { width: 100%; table-layout: fixed; font-size: 0.85em; margin: 0.4em 0 1.2em; }
table.glance th, table.glance td { white-space: nowrap; overflow: hidden; text-overflow: ellipsis;
  padding: 0.15em 0.5em; vertical-align: top; }
table.glance td:has(details[open]) { white-space: normal; }
table.glance summary { overflow: hidden; text-overflow: ellipsis; cursor: pointer; }
table.glance .holds { color: #1a7f37; font-weight: bold; } table.glance .fails { color: #cf222e; font-weight: bold; }
</style>"""


WIDTHS = {"seeds": 21, "twin": 13, "paper": 12}  # columns' share of the page (figure 8 %, the claim the rest)


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
    widths = [8, max(20, 92 - sum(widths))] + widths
    cols = "".join(f'<col style="width: {w}%">' for w in widths)
    head = "<th>figure</th><th>claim (click for the criterion)</th>" + "".join(f"<th>{t}</th>" for t, _, _ in columns)
    rows = []
    for i, c in enumerate(group):
        figure = f'<a href="{name}.html{c.anchor}">{html.escape(c.figure)}</a>' if c.anchor else html.escape(c.figure)
        cells = "".join(f"<td>{cells[i]}</td>" for _, cells, _ in columns)
        rows.append(f"<tr><td>{figure}</td><td>{_claim_details(c)}</td>{cells}</tr>")
    body = "".join(rows)
    table = f'<table class="glance" style="table-layout: fixed; width: 100%"><colgroup>{cols}</colgroup>'
    return f"{table}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


# Chapters whose claims have no twin, with why (the column shows "n/a", the reason on hover).
NOT_TWINNED = {
    "incontext": "not a claim of the paper, and the authors' run_fewshot.py trains no in-context learner to compare",
}


def page(preset="quick", seeds=None, second_set=None, twins=None, paper_scale=None) -> str:
    """The page's markdown: how it was built, the counts of verdicts, and one compact table per chapter; with
    ``second_set`` (the path of a record of ``tools/second_set.py`` at ``preset``), a column of the verdicts on
    that record's seeds; with ``twins`` (the folder of ``twin_<section>.json``, written by ``tools/twin.py``), a
    column of the authors' implementation's verdicts at the same configs (one mark per seed set); with
    ``paper_scale`` (the path of the record of ``tools/paper_fig2c.py``), a column of the verdicts at the paper's
    configuration, judged from that record when the page is built."""
    found = claims(preset, seeds)
    every = [c for group in found.values() for c in group]
    counts = {v: sum(c.verdict == v for c in every) for v in (C.HOLDS, C.NOT_REPRODUCED, C.NOT_RUN)}
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
    parts = [
        f"Built on {date} from commit `{results._git_commit()[:12]}` at preset **`{preset}`**, from the runs in the "
        f"results store. Of {len(every)} claims, **{counts[C.HOLDS]} hold**, {counts[C.NOT_REPRODUCED]} are not "
        f"reproduced at this preset and {counts[C.NOT_RUN]} {'was' if counts[C.NOT_RUN] == 1 else 'were'} not run."
    ]
    record = load_second_set(second_set, preset) if second_set else None
    matches = _second_set_matches(found, record) if record else None
    if record:
        parts.append(_second_set_summary(found, record, matches))
    twin_records = {name: twin_.load_twin(Path(twins) / f"twin_{name}.json") for name in found} if twins else {}
    twin_records = {k: v for k, v in twin_records.items() if v is not None and v.get("preset") == preset}
    if twins:
        parts.append(_twin_summary(twin_records))
    paper_claims = _paper_scale_claims(paper_scale) if paper_scale else None
    if paper_scale:
        parts.append(_paper_scale_summary(paper_claims))
    parts.append(STYLE)
    for name, group in found.items():
        book_seeds = ", ".join(map(str, sorted({s for c in group for s in c.seeds}))) or "the book's"
        columns = [(f"seeds {book_seeds}", [_verdict_cell(c.verdict, c.ours) for c in group], "seeds")]
        if record:
            title = f"seeds {', '.join(map(str, record['seeds']))}"
            columns.append((title, [_second_set_cell(e) for e in matches[name]], "seeds"))
        if twins:
            link = f"{name}.html#twin-{name.replace('_', '-')}"
            cells = [twin_.glance_cell(twin_records.get(name), c, link) for c in group]
            if name in NOT_TWINNED:
                cells = [f'<span title="{html.escape(NOT_TWINNED[name])}">n/a</span>'] * len(group)
            columns.append(("authors' code", cells, "twin"))
        if paper_claims:
            by_claim = {(c.figure, c.claim): c for c in paper_claims["claims"]} if name == "teacher_student" else {}
            cells = [by_claim.get((c.figure, c.claim)) for c in group]
            columns.append(("paper scale", [_paper_scale_cell(p, paper_claims["stale"]) for p in cells], "paper"))
        parts.append(f"**{TITLES[name]}**\n\n" + _html_table(name, group, columns))
    return "\n\n".join(parts)


def _twin_summary(records: dict) -> str:
    """What the column "authors' code" shows, and for which chapters a twin record exists."""
    done = ", ".join(TITLES[name] for name in records) or "none yet"
    return (
        "The column **authors' code** gives the verdict of the same claim, judged by the same code, on the numbers "
        "of the authors' implementation (`smonsays/modular-hyperteacher`) trained at the same configs "
        "(`tools/twin.py`): one mark per seed set, the book's first, each linked to the chapter's twin table. "
        f"Chapters with twin runs: {done}. ✓ holds, ✗ not reproduced at this preset, – not run (no twin), n/e not "
        "expressible in the authors' code, n/a no twin to run (hover for why)."
    )


def _paper_scale_claims(path) -> dict | None:
    """``{"claims": [Claim], "stale": [why], "record": record}`` of the record of ``tools/paper_fig2c.py`` at
    ``path``, judged now by the chapter's claim code; ``None`` if there is none."""
    path = Path(path)
    if not path.exists():
        return None
    record = json.loads(path.read_text())
    return {
        "claims": teacher_student.paper_scale(record).claims,
        "stale": teacher_student.paper_scale_staleness(record),
        "record": record,
    }


def _paper_scale_cell(claim, stale) -> str:
    if claim is None:
        return '<span title="not trained at the paper\'s scale">–</span>'
    cell = _verdict_cell(claim.verdict, claim.ours)
    return f'{cell} <span title="{html.escape("; ".join(stale))}">(stale)</span>' if stale else cell


def _paper_scale_summary(found) -> str:
    if found is None:
        return (
            "No claim has been trained at the paper's configuration yet: it needs a GPU (`tools/gpu_check.sh` trains "
            "Fig. 2C there and commits its record, which adds a column **paper scale** to this page)."
        )
    record = found["record"]
    seeds = ", ".join(map(str, record["configs"][0]["seeds"]))
    return (
        f"The column **paper scale** judges Fig. 2C at the paper's own configuration ({record['outer_steps']:,} outer "
        f"steps of 64 tasks, 300 inner steps, seeds {seeds}), trained on {record['device'].split(':')[-1]} by "
        "`tools/paper_fig2c.py`, from its record with the chapter's claim code; other claims were not trained at "
        "that scale (–)." + (f" The record is stale: {'; '.join(found['stale'])}." if found["stale"] else "")
    )
