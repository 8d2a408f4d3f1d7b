"""Train every chapter on a second seed set and record its computed claims for the results-at-a-glance page.

    COMPGEN_RESULTS=<store> python tools/second_set.py --preset quick --seeds 31 32 33
    COMPGEN_RESULTS=<store> python tools/second_set.py --preset quick --seeds 31 32 33 --chapters teacher_student

Trains (or loads from the store) every run of every chapter at the preset with these seeds, exactly as the
chapters do on theirs, then computes the claims with the same functions as the glance page
(:func:`compgen.figures.glance.claims`) and writes them to ``book/search/second_set.json``: the preset, the seeds,
the commit and the library's code fingerprint they were computed at, each chapter's wall time, and one entry per
claim (section, figure, claim, verdict, ours). With ``--chapters`` only those chapters are trained and recomputed;
the other chapters' entries of an existing record at the same preset and seeds are kept, each chapter with the
commit it was computed at (``commits``).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from compgen import notebook, results
from compgen.figures import glance

DEFAULT = Path(__file__).resolve().parents[1] / "book" / "search" / "second_set.json"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="quick")
    parser.add_argument("--seeds", type=int, nargs="+", required=True)
    parser.add_argument("--out", type=Path, default=DEFAULT)
    parser.add_argument("--no-train", action="store_true", help="only compute the claims from the stored runs")
    parser.add_argument(
        "--chapters",
        nargs="+",
        choices=list(glance.CHAPTERS),
        default=list(glance.CHAPTERS),
        help="recompute only these chapters, keeping the others of the existing record (default: every chapter)",
    )
    args = parser.parse_args(argv)
    record = _kept(args) if set(args.chapters) != set(glance.CHAPTERS) else _empty(args)
    commit, fingerprints = results._git_commit(), glance.code_fingerprints()
    for name in args.chapters:
        if not args.no_train:  # --no-train keeps the wall time of the training that stored the runs
            start = time.perf_counter()
            notebook.train(name, args.preset, args.seeds)
            record["wall_s"][name] = round(time.perf_counter() - start, 1)
        found = glance.claims(args.preset, args.seeds, [name])[name]
        record["claims"] = [c for c in record["claims"] if c["section"] != name] + [
            {"section": c.section, "figure": c.figure, "claim": c.claim, "verdict": c.verdict, "ours": c.ours}
            for c in found
        ]
        record["commits"][name] = commit
        record["fingerprints"][name] = fingerprints[name]
    order = {name: i for i, name in enumerate(glance.CHAPTERS)}
    record["claims"].sort(key=lambda c: order[c["section"]])  # stable: a chapter's claims keep their order
    args.out.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n")
    print(f"{len(record['claims'])} claims written to {args.out} ({', '.join(args.chapters)} recomputed)")
    return 0


def _empty(args) -> dict:
    return {
        "about": "The claims of every chapter computed on a second seed set that the book neither tunes on nor "
        "shows, by tools/second_set.py (see its docstring).",
        "preset": args.preset,
        "seeds": args.seeds,
        "commits": {},
        "fingerprints": {},
        "wall_s": {},
        "claims": [],
    }


def _kept(args) -> dict:
    """The existing record, to update some of its chapters; it must be at the same preset and seeds."""
    if not args.out.exists():
        raise SystemExit(f"error: --chapters updates an existing record, and {args.out} does not exist")
    record = json.loads(args.out.read_text())
    if record.get("preset") != args.preset or record.get("seeds") != args.seeds:
        raise SystemExit(
            f"error: {args.out} is at preset {record.get('preset')!r} and seeds {record.get('seeds')}; "
            f"--chapters can only update a record at preset {args.preset!r} and seeds {args.seeds}"
        )
    old_commit = record.pop("commit", None)  # records before per-chapter commits had one
    record.setdefault("commits", {name: old_commit for name in record["fingerprints"]})
    return record


if __name__ == "__main__":
    raise SystemExit(main())
