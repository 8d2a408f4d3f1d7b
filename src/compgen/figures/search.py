"""The search behind a chapter's ``quick`` preset, as a table for its appendix.

A search record (``book/search/<section>.json``) lists every regime tried for the chapter's claims: the world,
the budget, the model and split, the seeds, the metric per seed and the CPU time, each record made from a run
of the results store. :func:`search_table` groups the records by regime so that a reader sees every world and
budget that was tried, not only the one the preset keeps.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import numpy as np

SPLIT_SHORT = {"random": "r", "non_compositional": "nc", "connected": "c", "disconnected": "d"}


def load_search(path) -> dict:
    """The search record at ``path``: ``{"section", "metric", "source", "records": [...]}``."""
    record = json.loads(Path(path).read_text())
    for name in ("metric", "records"):
        if name not in record:
            raise ValueError(f"{path}: a search record needs a {name!r} entry")
    return record


def _describe(values: dict, skip=()) -> str:
    return ", ".join(f"{k} {v}" for k, v in values.items() if k not in skip)


def search_table(path, labels: dict, scale: float = 100.0, digits: int = 1) -> str:
    """A markdown table of the search at ``path``: one row per regime (world, budget, seeds), one cell per model
    with its mean metric per split (``labels``: model name -> column title), and the CPU minutes of the regime's
    runs. Regimes appear in the order of their first record."""
    record = load_search(path)
    regimes = defaultdict(list)
    for r in record["records"]:
        regimes[r["regime"]].append(r)
    rows = []
    for name, records in regimes.items():
        first = records[0]
        cells = {}
        for model in labels:
            found = [r for r in records if r["model"] == model]
            cells[model] = " / ".join(
                f"{SPLIT_SHORT.get(r['split'], r['split'])} {scale * np.mean(r['values']):.{digits}f}" for r in found
            )
        seeds = sorted({s for r in records for s in r["seeds"]})
        cpu = sum(r.get("cpu_s", 0.0) for r in records) / 60
        rows.append(
            f"| {name} | {_describe(first['world'])} | {first['budget'].get('outer_steps')} × "
            f"{first['budget'].get('meta_batch')} | {', '.join(map(str, seeds))} | "
            + " | ".join(cells[m] or "–" for m in labels)
            + f" | {cpu:.1f} |"
        )
    header = (
        "| regime | world | steps × tasks | seeds | "
        + " | ".join(labels.values())
        + " | CPU min |\n|"
        + "---|" * (5 + len(labels))
    )
    return "\n".join(
        [
            f"{record['metric']} (mean over the seeds, %) per split: "
            + ", ".join(f"{v} = {k.replace('_', '-')}" for k, v in SPLIT_SHORT.items())
            + f". {record.get('source', '')}",
            "",
            header,
            *rows,
        ]
    )
