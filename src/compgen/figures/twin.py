"""Twin runs with the authors' implementation, as tables for a chapter's appendix and the results page.

A twin record (``book/search/twin_<section>.json``, written by ``tools/twin.py``) holds the chapter's claim
configs trained with the reference implementation (``smonsays/modular-hyperteacher`` at a fixed commit), per
seed: the final numbers, the OOD curve, the wall time and the translation of every config field; and, per seed
set, the chapter's claims judged by the chapter's own ``claims`` function on the reference's numbers. The book
renders the stored record; building it needs no reference checkout.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import numpy as np

from compgen import claims as C

SHORT = {C.HOLDS: "✅", C.NOT_REPRODUCED: "❌", C.NOT_RUN: "–"}


def load_twin(path) -> dict | None:
    """The twin record at ``path``, or ``None`` if there is none."""
    path = Path(path)
    return json.loads(path.read_text()) if path.exists() else None


def seed_sets(record: dict) -> list:
    """The record's seed sets, as the strings that key its claims (``"2020,2021,2022"``)."""
    return list(record.get("claims", {}))


def verdicts(record: dict | None, claim) -> dict:
    """{seed set: the reference's claim entry (verdict, ours) or None} for one of our :class:`~compgen.claims.Claim`."""
    if record is None:
        return {}
    found = {}
    for seeds, entries in record.get("claims", {}).items():
        match = [e for e in entries if e["figure"] == claim.figure and e["claim"] == claim.claim]
        found[seeds] = match[0] if match else None
    return found


def glance_cell(record: dict | None, claim, link: str) -> str:
    """The results page's cell (HTML): the reference's verdict on each seed set (``✅ ✅``), linked to the twin
    table; "–" where no twin was recorded."""
    found = verdicts(record, claim)
    if not found or all(v is None for v in found.values()):
        return "–"
    marks = " ".join(SHORT[v["verdict"]] if v else "–" for v in found.values())
    return f'<a href="{link}">{marks}</a>'


def _label(seeds: str) -> str:
    values = seeds.split(",")
    return f"seeds {values[0]}–{values[-1]}" if len(values) > 2 else f"seeds {', '.join(values)}"


def claims_table(record: dict, ours: list, second_set: dict | None = None) -> str:
    """A markdown table, one row per claim of ``ours`` (the chapter's claims on its runs): our verdict and the
    reference's on each seed set of the record, with the numbers each verdict read. Our verdicts on a seed set
    other than the chapter's come from ``second_set`` (the record of ``tools/second_set.py``), where it has them."""
    sets = seed_sets(record)
    head = ["figure", "claim"]
    for s in sets:
        head += [f"ours, {_label(s)}", f"authors' code, {_label(s)}"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for claim in ours:
        theirs = verdicts(record, claim)
        cells = [claim.figure, claim.claim]
        for s in sets:
            cells += [_cell(_ours(claim, s, second_set)), _cell(theirs.get(s))]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _ours(claim, seeds: str, second_set: dict | None):
    """Our entry (verdict, ours) for ``claim`` on ``seeds``: the claim itself on its own seeds, else the
    second-seed-set record's entry, else ``None``."""
    if seeds == ",".join(map(str, claim.seeds)):
        return {"verdict": claim.verdict, "ours": claim.ours}
    if second_set and seeds == ",".join(map(str, second_set["seeds"])):
        for entry in second_set["claims"]:
            if entry["figure"] == claim.figure and entry["claim"] == claim.claim:
                return entry
    return None


def _cell(entry) -> str:
    if entry is None or entry["verdict"] == C.NOT_RUN:
        return "– not run"
    return f"{SHORT[entry['verdict']]} {entry['ours']}"


def runs_table(record: dict, labels: dict) -> str:
    """A markdown table of the reference's runs: one row per config (figure, model, support, world), per seed set
    the mean final OOD accuracy (%) and our R² on its adapted fast parameters, and the reference's minutes."""
    groups = defaultdict(list)
    for run in record["runs"].values():
        w = run["world"]
        key = (
            run["figure"],
            run["model"],
            run["split"],
            w["n_modules"],
            w["max_hot"],
            w["outer_steps"],
            w["meta_batch"],
        )
        groups[key].append(run)
    sets = [tuple(int(s) for s in seeds.split(",")) for seeds in seed_sets(record)] or [()]
    head = ["figure", "model", "support", "M, K", "steps × tasks"]
    for s in sets:
        head += [f"OOD acc. %, {_label(','.join(map(str, s)))}", "R²"]
    head.append("minutes")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for (figure, model, split, m, k, steps, batch), runs in groups.items():
        cells = [figure, labels.get(model, model), split.replace("_", "-"), f"{m}, {k}", f"{steps:,} × {batch}"]
        for s in sets:
            on = [r for r in runs if r["seed"] in s]
            acc = [100 * r["final"]["ood"]["accuracy"] for r in on]
            r2 = [r["r2_ood_pooled"] for r in on]
            cells += [_mean_sd(acc, 1), _mean_sd(r2, 2)]
        cells.append(f"{sum(r['wall_s'] for r in runs) / 60:.0f}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _mean_sd(values, digits) -> str:
    if not values:
        return "–"
    return f"{np.mean(values):.{digits}f} ± {np.std(values):.{digits}f} ({len(values)})"


def unmatched(record: dict) -> list:
    """The (what, why) pairs of every run's translation that the reference could not match, once each."""
    seen = {}
    for run in record["runs"].values():
        for what, why in run["translation"]["unmatched"]:
            seen.setdefault(what, why)
    return list(seen.items())
