"""The scale bridge's ledger, computed: which works train the points of :mod:`compgen.bridge` for the claims that do
not hold clearly at quick (:mod:`compgen.analysis.scale`), and where they stand.

    python tools/bridge.py plan            # write book/records/bridge/ledger.json from the committed records
    python tools/bridge.py plan --check    # exit 1 where the committed ledger is not the computed one
    python tools/bridge.py status          # where each work stands, with its estimate and the seconds it took
    python tools/bridge.py prune           # remove the checkpoints of complete works (their progress stays)
    python tools/gpu_lease.py --bridge --budget 10800 --cores 1    # a CPU lease of it, in the background (--cores 2:
                                                                   # two works at once, a core each)

The plan reads the recorded seed sets (``book/search/*_set.json``) and the quick book's measured time
(``book/records/book_time.json``) for each work's estimate; it trains nothing.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from compgen import ledger, records  # noqa: E402
from compgen.analysis import scale  # noqa: E402

BOOK = ROOT / "book"
FOLDER = BOOK / "records" / "bridge"


def planned() -> str:
    sets = scale.load_seed_sets(BOOK)
    book_time = records.BookTime.load_if_there(BOOK / "records" / "book_time.json")
    return scale.plan_text(scale.plan(sets, book_time=book_time))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=("plan", "status", "prune"))
    parser.add_argument("--check", action="store_true", help="plan: compare with the committed ledger, write nothing")
    args = parser.parse_args(argv)
    path = FOLDER / ledger.LEDGER
    if args.command == "plan":
        text = planned()
        if args.check:
            same = path.exists() and path.read_text() == text
            print(f"{path}: " + ("as computed" if same else "differs from the plan (python tools/bridge.py plan)"))
            return 0 if same else 1
        FOLDER.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        print(f"wrote {path}: {len(ledger.read(path))} works")
        return 0
    if args.command == "prune":  # the checkpoints of complete works, which a lease of older code left
        for work in ledger.read(path):
            ledger.prune(FOLDER / work.name)
        return 0
    works = ledger.read(path)
    for work in works:
        found = ledger.read_progress(FOLDER / work.name)
        took = ledger.standing(found)["device_hours"] * 60 if found else 0
        estimate = f"{work.estimate_s / 60:.0f} min" if work.estimate_s else "no estimate"
        print(f"{ledger.status(work, FOLDER / work.name)} (estimated {estimate}, took {took:.0f} min)")
    left = ledger.forecast(works, FOLDER)
    line = f"left: {left['works']} work(s), estimated {left['estimated_s'] / 3600:.1f} h of one core"
    if left["pace"] is not None:
        line += f"; at the median pace of the complete works ({left['pace']:.2f} x their estimates)"
        line += f", {left['paced_s'] / 3600:.1f} h"
    print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
