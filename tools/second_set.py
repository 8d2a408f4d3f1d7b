"""Train every chapter on a second seed set and record its computed claims for the results-at-a-glance page.

    COMPGEN_RESULTS=<store> python tools/second_set.py --preset quick --seeds 31 32 33

Trains (or loads from the store) every run of every chapter at the preset with these seeds, exactly as the
chapters do on theirs, then computes the claims with the same functions as the glance page
(:func:`compgen.figures.glance.claims`) and writes them to ``book/search/second_set.json``: the preset, the seeds,
the commit and the library's code fingerprint they were computed at, each chapter's wall time, and one entry per
claim (section, figure, claim, verdict, ours).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from compgen import figures, results
from compgen.figures import glance

DEFAULT = Path(__file__).resolve().parents[1] / "book" / "search" / "second_set.json"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="quick")
    parser.add_argument("--seeds", type=int, nargs="+", required=True)
    parser.add_argument("--out", type=Path, default=DEFAULT)
    parser.add_argument("--no-train", action="store_true", help="only compute the claims from the stored runs")
    args = parser.parse_args(argv)
    wall = {}
    for name in glance.CHAPTERS:
        start = time.perf_counter()
        if not args.no_train:
            figures.train(name, args.preset, args.seeds)
        wall[name] = round(time.perf_counter() - start, 1)
    found = glance.claims(args.preset, args.seeds)
    record = {
        "about": "The claims of every chapter computed on a second seed set that the book neither tunes on nor "
        "shows, by tools/second_set.py (see its docstring).",
        "preset": args.preset,
        "seeds": args.seeds,
        "commit": results._git_commit(),
        "fingerprints": glance.code_fingerprints(),
        "wall_s": wall,
        "claims": [
            {"section": c.section, "figure": c.figure, "claim": c.claim, "verdict": c.verdict, "ours": c.ours}
            for group in found.values()
            for c in group
        ],
    }
    args.out.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n")
    print(f"{sum(len(g) for g in found.values())} claims written to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
