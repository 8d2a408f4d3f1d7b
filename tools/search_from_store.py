"""Append the stored runs of a figure to a chapter's search record (``book/search/<section>.json``).

    COMPGEN_RESULTS=<store> python tools/search_from_store.py goals fig4ef --preset quick --seeds 31 32 33 \
        --regime main_unseen_w5_2k

One record per config of the figure at the preset (with those seeds) that the store holds: the world fields (those
of the record's first entry) and the budget, the model and split, the seeds, the value of ``--metric`` on
``--eval-set`` (default OOD) per seed, and the run's wall time in seconds (``cpu_s`` holds wall seconds for these
records) and code fingerprint. The record carries its ``schema``; an existing record that is damaged or of a newer
schema is refused in one line (exit status 2), never overwritten.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

import numpy as np

from compgen import catalog, legacy, params, programs, recordfile, records, results
from compgen.section import figure_configs


def code_of(section, fingerprint) -> dict:
    """``code_key`` and ``code_versions`` of a stored run that its section's code of source ``fingerprint`` made: this
    code's key where that is this code, the key it migrates to where it is the last fingerprint before keys
    (:mod:`compgen.legacy`), else none."""
    if fingerprint == section.fingerprint:
        return {"code_key": programs.section_key(section)}
    return {"code_key": legacy.key(section.name, fingerprint)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("section")
    parser.add_argument("figure")
    parser.add_argument("--preset", default="quick")
    parser.add_argument("--seeds", type=int, nargs="+", required=True)
    parser.add_argument("--regime", required=True)
    parser.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE", help="as `compgen-cli run --set`")
    parser.add_argument(
        "--metric",
        default="acc",
        help="the evaluation metric whose OOD value (or value, e.g. r2_ood_pooled) is recorded",
    )
    parser.add_argument(
        "--eval-set",
        default="ood",
        help="the evaluation set whose value of --metric is recorded (e.g. test, for a diagnosis); default ood",
    )
    parser.add_argument(
        "--budget",
        nargs="+",
        default=["outer_steps", "meta_batch"],
        help="config fields recorded as the regime's budget (default: outer_steps meta_batch)",
    )
    parser.add_argument(
        "--extra",
        action="append",
        default=[],
        metavar="NAME=METRIC",
        help="also record METRIC (on --eval-set, per seed) as extra.NAME, e.g. optimal_episodes=acc_all",
    )
    parser.add_argument("--world", nargs="*", default=None, help="world fields to record (default: the first entry's)")
    parser.add_argument("--record", type=Path, default=None, help="default: book/search/<section>.json")
    parser.add_argument(
        "--models",
        nargs="+",
        default=None,
        help="record these models at every point of the figure's grid, each with its own preset settings, "
        "even where the preset's figure runs other models (a probe of a model the figure leaves out)",
    )
    args = parser.parse_args(argv)
    section = catalog.get(args.section)
    path = args.record or Path(__file__).resolve().parents[1] / "book" / "search" / f"{args.section}.json"
    try:
        record = records.Search.load_if_there(path)
    except recordfile.RecordError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    record = record or records.Search(section=args.section, metric=f"{args.eval_set} {args.metric}", records=())
    if args.world is None and not record.records:
        parser.error(f"{path} has no record yet: name its world fields with --world")
    world_fields = args.world if args.world is not None else list(record.records[0]["world"])
    entries = list(record.records)
    added = 0
    overrides = dict(params.parse_assignment(text) for text in args.set)
    configs = figure_configs(section, args.figure, args.preset, args.models, seeds=tuple(args.seeds), **overrides)
    for cfg in configs:
        found = results.Store.default().load(section, cfg)
        if found is None:
            continue
        arrays, meta = found
        names = list(cfg.eval_set_names())

        def final(metric):
            values = np.asarray(arrays[f"eval/{metric}"])[:, -1]  # (seeds,) or (seeds, evaluation sets)
            if values.ndim == 2 and args.eval_set not in names:
                parser.error(f"--eval-set must be one of {names}, got {args.eval_set!r}")
            return [float(v) for v in (values[:, names.index(args.eval_set)] if values.ndim == 2 else values)]

        world = {name: getattr(cfg, name) for name in world_fields}
        entry = dict(
            regime=args.regime,
            world=world,
            budget={name: getattr(cfg, name) for name in args.budget},
            model=cfg.model,
            split=getattr(cfg, "split", ""),
            seeds=list(cfg.seeds),
            values=final(args.metric),
            cpu_s=float(meta.provenance["wall_time_s"]),
            **code_of(section, meta.provenance.get("code_fingerprint")),
        )
        if args.extra:
            entry["extra"] = {name: final(metric) for name, metric in (text.split("=", 1) for text in args.extra)}
        entries.append(entry)
        added += 1
    dataclasses.replace(record, records=entries, code_versions=programs.versions()).save(path)
    print(f"{path}: {added} record(s) added under regime {args.regime}")
    return 0 if added else 1


if __name__ == "__main__":
    raise SystemExit(main())
