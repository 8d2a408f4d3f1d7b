"""The search behind a chapter's ``quick`` preset, as a table for its appendix.

A search record (``book/search/<section>.json``) lists every regime tried for the chapter's claims: the world,
the budget, the model and split, the seeds, the metric per seed and the CPU time, each record made from a run
of the results store. :func:`search_table` groups the records by regime so that a reader sees every world and
budget that was tried, not only the one the preset keeps, and says how many of them were made by other code than the
current (:func:`code_states`). A damaged search record stops the chapter with one line naming it
(:func:`compgen.recordfile.read`).
"""

from __future__ import annotations

from collections import Counter, defaultdict

import numpy as np

from compgen import recordfile, records

SPLIT_SHORT = {"random": "r", "non_compositional": "nc", "connected": "c", "disconnected": "d"}


def load_search(path) -> records.Search:
    """The search record at ``path``, checked (:meth:`compgen.records.Record.load`)."""
    return records.Search.load(path)


def code_states(record: records.Search) -> Counter:
    """How many of the search ``record``'s entries were made by the section's current code, by other code, or name
    none (:func:`compgen.recordfile.code_state`; an entry's ``code_key`` is its section's when it ran)."""
    from compgen import catalog, programs

    section = record.section
    current = programs.section_key(catalog.get(section)) if section in catalog.SECTIONS else None
    return Counter(
        recordfile.code_state(r.get("code_key"), current, record.code_versions, programs.versions())
        if current
        else recordfile.NOT_RECORDED
        for r in record.records
    )


def _code_sentence(record: records.Search) -> str:
    """What :func:`code_states` found, as a sentence ("" when every entry is the current code's)."""
    states, total = code_states(record), len(record.records)
    parts = []
    if states[recordfile.STALE]:
        parts.append(f"{states[recordfile.STALE]} of its {total} runs were made by other code than this build's")
    unknown = states[recordfile.NOT_RECORDED] + states[recordfile.OTHER_VERSIONS]
    if unknown:
        parts.append(
            f"{unknown} of its {total} runs name no code key comparable here, so whether the code changed since "
            "cannot be told"
        )
    return f" {'; '.join(parts)}." if parts else ""


def _describe(values: dict, skip=()) -> str:
    return ", ".join(f"{k} {v}" for k, v in values.items() if k not in skip)


def _cell(found: list, scale: float, digits: int, prefix: bool) -> str:
    """A :func:`search_table` cell: the mean metric of each entry of ``found``, after its split where ``prefix``."""
    return " / ".join(
        (f"{SPLIT_SHORT.get(r['split'], r['split'])} " if prefix else "") + f"{scale * np.mean(r['values']):.{digits}f}"
        for r in found
    )


def search_table(
    path, labels: dict, scale: float = 100.0, digits: int = 1, by=("model",), prefix_split: bool | None = None
) -> str:
    """A markdown table of the search at ``path``: one row per regime (world, budget, seeds), one column per entry
    of ``labels`` with the mean metric of the matching records, and the CPU minutes of the regime's runs. Regimes
    appear in the order of their first record; a regime with no record in any column is left out.

    ``by`` names the record fields that make a record's key in ``labels`` (the field's value for one field, a
    tuple of values for several; a field a record lacks is ``None``). By default the key is the model and a cell
    lists the model's mean per split, each after its split; ``prefix_split`` (default: unless ``"split"`` is one
    of ``by``) says whether values carry their split. World fields with the same value in every row are named once,
    in the caption, and the world column gives each regime's other fields (``–`` if none)."""
    record = load_search(path)
    by = (by,) if isinstance(by, str) else tuple(by)
    prefix = "split" not in by if prefix_split is None else prefix_split
    key = (lambda r: r.get(by[0])) if len(by) == 1 else (lambda r: tuple(r.get(f) for f in by))
    regimes = defaultdict(list)
    for r in record.records:
        regimes[r["regime"]].append(r)
    shown = []  # (name, the regime's first record, its entries, cells) of the regimes with a cell
    for name, entries in regimes.items():
        cells = {c: _cell([r for r in entries if key(r) == c], scale, digits, prefix) for c in labels}
        if any(cells.values()):
            shown.append((name, entries[0], entries, cells))
    # world fields with one value in every row go above the table, so the world column shows what a regime changes
    worlds = [first["world"] for _, first, _, _ in shown]
    shared = {k: v for k, v in (worlds[0] if worlds else {}).items() if all(w.get(k, object()) == v for w in worlds)}
    rows = []
    for name, first, entries, cells in shown:
        seeds = sorted({s for r in entries for s in r["seeds"]})
        cpu = sum(r.get("cpu_s", 0.0) for r in entries) / 60
        rows.append(
            f"| {name} | {_describe(first['world'], skip=shared) or '–'} | {first['budget'].get('outer_steps')} × "
            f"{first['budget'].get('meta_batch')} | {', '.join(map(str, seeds))} | "
            + " | ".join(cells[c] or "–" for c in labels)
            + f" | {cpu:.1f} |"
        )
    header = (
        "| regime | world | steps × tasks | seeds | "
        + " | ".join(labels.values())
        + " | CPU min |\n|"
        + "---|" * (5 + len(labels))
    )
    unit = ", %" if scale == 100 else ""
    legend = (
        " per split: " + ", ".join(f"{v} = {k.replace('_', '-')}" for k, v in SPLIT_SHORT.items()) if prefix else ""
    )
    return "\n".join(
        [
            f"{record.metric} (mean over the seeds{unit}){legend}. {record.source or ''}"
            + (f" Every regime's world has {_describe(shared)}; the world column gives the rest." if shared else "")
            + _code_sentence(record),
            "",
            header,
            *rows,
        ]
    )
