"""Train Fig. 2C at the paper's configuration (or another preset) and record its per-seed numbers.

    COMPGEN_RESULTS=<store> python tools/paper_fig2c.py                        # on a GPU: Table A9 columns 1, 2, 3, 5
    COMPGEN_RESULTS=<store> python tools/paper_fig2c.py --columns 1 2 3 4 5 6 7 --out /tmp/fig2c.json
    COMPGEN_RESULTS=<store> python tools/paper_fig2c.py --preset smoke --out /tmp/fig2c.json   # a rehearsal

Trains (or loads from the store) the teacher-student Fig. 2C configs of the preset, one per Table A9 column asked
for, with the runner (``backend="local"``: on an accelerator the configs are lanes of one program,
:func:`compgen.runner.train_lanes`), saving a checkpoint after every evaluation, so that a run stopped by a time
limit resumes where it stopped when started again with the same store. Once every config is stored it writes the
record (default ``book/search/paper_fig2c.json``): per config its column, masks, distribution and support, and per
seed the module alignment at every evaluation, the final relative losses, losses and R² per evaluation set, and
the training loss averaged over each block of ``eval_every`` steps; with the device, jax version, commit and
seconds of the runs. The verdicts are computed from it when the book is built
(:func:`compgen.figures.teacher_student.paper_scale`).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from compgen import dispatch, recordfile, results, section
from compgen.experiments import teacher_student as ts
from compgen.figures import records
from compgen.tasks import support

DEFAULT = Path(__file__).resolve().parents[1] / "book" / "search" / "paper_fig2c.json"
COLUMNS = (1, 2, 3, 5)  # the discrete and continuous connected and disconnected pairs with the same ring/triangles


def configs(preset: str, columns, **overrides) -> list:
    """``[(Table A9 column, config)]`` of Fig. 2C at ``preset`` for ``columns``, with ``overrides``."""
    by_masks = {(c.masks, c.distribution): c for c in section.figure_configs(ts.SECTION, "fig2c", preset, **overrides)}
    out = []
    for col in support.TABLE_A9:
        if col.column in columns:
            cfg = by_masks.get((col.spec, col.distribution))
            if cfg is None:
                raise SystemExit(f"Table A9 column {col.column} is not in Fig. 2C at preset {preset}")
            out.append((col, cfg))
    return out


def _rounded(a, digits=5):
    return np.round(np.asarray(a, float), digits).tolist()


def entry(col, cfg, arrays, meta) -> dict:
    """One config's part of the record, from its stored run."""
    block = cfg.eval_every
    loss = np.asarray(arrays["steps/loss"], float)  # (seeds, steps)
    blocks = loss[:, : loss.shape[1] // block * block].reshape(loss.shape[0], -1, block).mean(-1)
    prov = meta["provenance"]
    return {
        "column": col.column,
        "masks": col.spec,
        "distribution": col.distribution,
        "connected": col.connected,
        "seeds": list(cfg.seeds),
        "config": results.config_dict(cfg),
        "eval_steps": np.asarray(arrays["eval_steps"]).tolist(),
        "sets": list(cfg.eval_set_names()),
        "alignment": _rounded(arrays["eval/alignment"]),  # (seeds, evals)
        "relative_loss": _rounded(np.asarray(arrays["eval/relative_loss"])[:, -1], 7),  # (seeds, sets), final
        "loss": _rounded(np.asarray(arrays["eval/loss"])[:, -1], 7),
        "r2": _rounded(np.asarray(arrays["eval/r2"])[:, -1], 4),  # (seeds, sets, M)
        "train_loss_blocks": _rounded(blocks, 7),  # (seeds, outer_steps / eval_every)
        "skipped": int(np.asarray(arrays["steps/skipped"])[:, -1].max()),
        "provenance": {k: prov.get(k) for k in ("device", "jax_version", "git_commit", "matmul_precision", "date")}
        | {"seconds": prov.get("seconds"), "knobs": prov.get("knobs"), "wall_time_s": prov.get("wall_time_s")},
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="paper")
    parser.add_argument("--columns", type=int, nargs="+", default=list(COLUMNS))
    parser.add_argument("--out", type=Path, default=DEFAULT)
    parser.add_argument("--checkpoint-every", type=int, default=1, help="evaluations between checkpoints")
    parser.add_argument(
        "--scan", action="store_true", help="the inner loop as a lax.scan on a GPU too (fused_inner=False)"
    )
    args = parser.parse_args(argv)
    chosen = configs(args.preset, args.columns, **({"fused_inner": False} if args.scan else {}))
    store = results.Store.default()
    start = time.perf_counter()
    stamp = lambda line: print(f"[{time.perf_counter() - start:7.1f} s] {line}", flush=True)
    dispatch.train_or_load(
        ts.SECTION, [c for _, c in chosen], store, backend="local", checkpoint_every=args.checkpoint_every, log=stamp
    )
    record = {
        "schema": recordfile.SCHEMA,
        "what": "Fig. 2C (Table A9 columns) trained at the preset; per-seed numbers, verdicts computed at build",
        "preset": args.preset,
        "configs": [],
    }
    for col, cfg in chosen:
        arrays, meta = store.load(ts.SECTION, cfg)
        record["configs"].append(entry(col, cfg, arrays, meta))
    first = record["configs"][0]
    record.update(
        outer_steps=chosen[0][1].outer_steps,
        device=first["provenance"]["device"],
        jax_version=first["provenance"]["jax_version"],
        commit=first["provenance"]["git_commit"],
        fingerprint=ts.SECTION.fingerprint,
    )
    args.out.write_text(records.dumps(record))
    stamp(f"{len(chosen)} configs recorded in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
