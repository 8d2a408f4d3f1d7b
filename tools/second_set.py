"""Train every chapter on a further seed set and record its runs' final numbers for the results-at-a-glance page.

    COMPGEN_RESULTS=<store> python tools/second_set.py --preset quick --seeds 31 32 33
    COMPGEN_RESULTS=<store> python tools/second_set.py --preset quick --seeds 51 52 53 --out book/search/third_set.json
    COMPGEN_RESULTS=<store> python tools/second_set.py --preset quick --seeds 31 32 33 --chapters teacher_student

Trains (or loads from the store) every run of every chapter at the preset with these seeds, exactly as the
chapters do on theirs, then writes to ``--out`` (default ``book/search/second_set.json``; the book reads the records of
:data:`compgen.figures.glance.SEED_SETS`) each run's final evaluation per seed
(:func:`compgen.analysis.finals.entries`: the numbers every claim reads) with its config, and per chapter the commit
and code fingerprint they were computed at and the wall time. No verdict is stored: the page judges the claims on
these numbers with the current claim code when the book is built (:func:`compgen.figures.glance.page`). With
``--chapters`` only those chapters are trained and recorded; the other chapters of an existing record at the same
preset and seeds are kept, each with the commit it was computed at (``commits``). The record carries its ``schema``
(:mod:`compgen.recordfile`); every error, a damaged existing record included, is one line with exit status 2, and
every input is checked before anything trains: a known preset, seeds that are whole numbers below 2**32 and shared
with no other seed set of the book (the book's own seeds, every recorded set, and the target record unless it is
that very set), an ``--out`` that can be written, and with ``--no-train`` a store that holds every run.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
from pathlib import Path

from compgen import catalog, notebook, params, programs, recordfile, records, results, section
from compgen.analysis import finals
from compgen.figures import glance

BOOK = Path(__file__).resolve().parents[1] / "book"
DEFAULT = BOOK / "search" / "second_set.json"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="quick")
    parser.add_argument("--seeds", type=int, nargs="+", required=True)
    parser.add_argument("--out", type=Path, default=DEFAULT)
    parser.add_argument("--no-train", action="store_true", help="only record the stored runs")
    parser.add_argument(
        "--chapters",
        nargs="+",
        choices=list(glance.CHAPTERS),
        default=list(glance.CHAPTERS),
        help="record only these chapters, keeping the others of the existing record (default: every chapter)",
    )
    args = parser.parse_args(argv)
    try:
        _check_inputs(args)
        _check_disjoint(args)
        record = _kept(args) if set(args.chapters) != set(glance.CHAPTERS) else _empty(args)
        if args.no_train:
            _check_stored(args)
    except params.ParameterError as error:  # a RecordError among them
        print(f"error: {error}", file=sys.stderr)
        return 2
    commit, keys = results._git_commit(), glance.code_keys()
    runs, commits, prints, wall_s = (dict(getattr(record, f)) for f in ("runs", "commits", "keys", "wall_s"))
    for name in args.chapters:
        if not args.no_train:  # --no-train keeps the wall time of the training that stored the runs
            start = time.perf_counter()
            notebook.train(name, args.preset, args.seeds)
            wall_s[name] = round(time.perf_counter() - start, 1)
        runs[name] = finals.entries(notebook.stored(name, args.preset, args.seeds))
        commits[name], prints[name] = commit, keys[name]
    order = list(glance.CHAPTERS).index
    in_order = lambda found: {k: found[k] for k in sorted(found, key=order)}  # noqa: E731
    record = dataclasses.replace(
        record,
        runs=in_order(runs),
        commits=in_order(commits),
        keys=in_order(prints),
        code_versions=programs.versions(),
        wall_s=in_order(wall_s),
    )
    record.save(args.out)
    count = sum(len(v) for v in record.runs.values())
    print(f"{count} configs' final numbers written to {args.out} ({', '.join(args.chapters)} recorded)")
    return 0


def _empty(args) -> records.SeedSet:
    return records.SeedSet(
        about="Every chapter's runs on a seed set that the book neither tunes on nor shows, as final numbers "
        "per seed (tools/second_set.py, see its docstring); the claims are judged on them when the book is built.",
        preset=args.preset,
        seeds=args.seeds,
    )


def _check_inputs(args):
    """Refuse an unknown preset, bad seeds and an ``--out`` that cannot be written, in one line, before anything."""
    if args.preset not in section.PRESET_NAMES:
        raise params.ParameterError(f"--preset must be one of {section.PRESET_NAMES}, got {args.preset!r}")
    args.seeds = list(params.check_seeds(args.seeds, "--seeds"))
    out = args.out
    if out.exists() and (not out.is_file() or not os.access(out, os.W_OK)):
        raise params.ParameterError(f"--out {out} cannot be written (a folder, or read-only)")
    folder = next((p for p in (out.parent, *out.parent.parents) if p.exists()), None)
    if folder is None or not os.access(folder, os.W_OK) or not folder.is_dir():
        raise params.ParameterError(f"--out {out} cannot be written: {folder} is not a folder it can write in")


def _check_disjoint(args):
    """Refuse seeds that another seed set of the book holds: the book's own (each chapter's at the preset), those of
    every recorded seed-set record at the preset, and those of the target record unless it is that very set (the
    same seeds, re-recorded). Pooled, a seed would count twice (the page leaves such a set out)."""
    mine = set(args.seeds)
    for name in glance.CHAPTERS:
        sec = catalog.get(name)
        own = {
            s for f in sec.figures(args.preset) for c in section.figure_configs(sec, f, args.preset) for s in c.seeds
        }
        if own & mine:
            raise _error(args, f"--seeds {sorted(own & mine)} are the book's own seeds of {name} at {args.preset}")
    for path in {*(BOOK / p for p in glance.SEED_SETS), args.out}:
        other = glance.load_seed_set(path, args.preset)
        same = path.resolve() == args.out.resolve() and other is not None and set(other.seeds) == mine
        if other is not None and not same and set(other.seeds) & mine:
            shared = sorted(set(other.seeds) & mine)
            raise _error(args, f"--seeds {shared} are already in {path}; choose seeds no other seed set holds")


def _check_stored(args):
    """With ``--no-train``: refuse where the store does not hold every run of the chapters to record."""
    for name in args.chapters:
        runs = notebook.stored(name, args.preset, args.seeds)
        missing = sum(runs.output(c) is None for cs in runs.figures.values() for c in cs)
        if missing:
            raise params.ParameterError(
                f"--no-train: the results store ({results.Store.default().root}) lacks {missing} run(s) of {name} at "
                f"{args.preset} on seeds {args.seeds}; train them (drop --no-train) or point COMPGEN_RESULTS to the "
                "store that holds them"
            )


def _kept(args) -> records.SeedSet:
    """The existing record, to update some of its chapters; it must be at the same preset and seeds."""
    if not args.out.exists():
        raise _error(args, "--chapters updates an existing record, and there is none")
    record = records.SeedSet.load(args.out)
    if record.preset != args.preset or record.seeds != tuple(args.seeds):
        raise _error(
            args,
            f"it is at preset {record.preset!r} and seeds {list(record.seeds)}; --chapters can only update a record "
            f"at preset {args.preset!r} and seeds {args.seeds}",
        )
    return record


def _error(args, what: str) -> recordfile.RecordError:
    return recordfile.RecordError(f"{args.out}: {what}")


if __name__ == "__main__":
    raise SystemExit(main())
