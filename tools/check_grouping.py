"""Train one config of a figure alone, then beside the figure's other configs of the same model in 2 workers, and
compare what the store holds for it byte for byte (the grouping-independence rule of the engine).

    python tools/check_grouping.py hyperteacher fig3b --preset quick --model hnet_linear

Uses the results store of ``$COMPGEN_RESULTS`` (point it at a scratch folder: both trainings use ``force``).
Exit status 1 if any stored array differs.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from compgen import backends, catalog, dispatch, results
from compgen.section import figure_configs


def stored_bytes(section, cfg) -> dict:
    arrays, _ = results.Store.default().load(section, cfg)
    return {k: np.asarray(v).tobytes() for k, v in arrays.items()}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("section")
    parser.add_argument("figure")
    parser.add_argument("--preset", default="quick")
    parser.add_argument("--model", required=True)
    args = parser.parse_args(argv)
    section = catalog.get(args.section)
    configs = [c for c in figure_configs(section, args.figure, args.preset) if c.model == args.model]
    if len(configs) < 2:
        parser.error(f"{args.figure} at {args.preset} has {len(configs)} config(s) of {args.model}; need 2 or more")
    first = configs[0]
    start = time.time()
    dispatch.train_or_load(section, [first], backend=backends.Workers(1), force=True)
    alone, t_alone = stored_bytes(section, first), time.time() - start
    start = time.time()
    dispatch.train_or_load(section, configs[1:] + [first], backend=backends.Workers(2), force=True)
    together, t_together = stored_bytes(section, first), time.time() - start
    same = sorted(k for k in alone if together.get(k) == alone[k])
    print(section.label(first))
    print(f"alone, 1 worker: {t_alone:.0f} s; beside {len(configs) - 1} other config(s), 2 workers: {t_together:.0f} s")
    print(f"{len(same)}/{len(alone)} stored arrays byte-identical; differing: {sorted(set(alone) - set(same))}")
    return 0 if len(same) == len(alone) == len(together) else 1


if __name__ == "__main__":
    sys.exit(main())
