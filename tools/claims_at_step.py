"""A chapter's claims as if every run had stopped at an earlier evaluation: what a shorter training budget would give.

    COMPGEN_RESULTS=<store> python tools/claims_at_step.py goals --seeds 7 8 9
    COMPGEN_RESULTS=<store> python tools/claims_at_step.py goals            # the preset's own seeds

Reads the chapter's stored runs at the preset (nothing is trained) and, for each evaluation step they share, computes
the chapter's claims (:data:`compgen.analysis.chapters.CHAPTERS`) from the evaluations up to that step. This is what a
run of that many outer steps would give only where a shorter run is the first part of the longer one: a constant outer
learning rate (a decaying schedule depends on the run's length), so a chapter with any other schedule is refused. The
figures' own evaluation metrics are read; a metric computed from the final parameters is not cut.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys

import numpy as np

from compgen import notebook, params
from compgen.analysis import chapters
from compgen.analysis import claims as C


def truncated(runs: notebook.Runs, step: int) -> notebook.Runs:
    """``runs`` with every stored output's evaluations (``eval/*``, ``eval_steps``) cut after the last one at or
    before ``step``; per-step metrics and final parameters are kept as they are."""
    outputs = {}
    for cfg, output in runs.outputs.items():
        if output is None:
            outputs[cfg] = None
            continue
        keep = int(np.searchsorted(np.asarray(output["eval_steps"]), step, side="right"))
        cut = {k: (v[:, :keep] if k.startswith("eval/") else v) for k, v in output.items()}
        cut["eval_steps"] = np.asarray(output["eval_steps"])[:keep]
        outputs[cfg] = cut
    return dataclasses.replace(runs, outputs=outputs)


def check_constant_schedule(runs: notebook.Runs) -> None:
    """Refuse runs whose outer learning rate is not constant: their shorter runs are not their first parts."""
    for cfg in runs.outputs:
        schedule = getattr(cfg, "outer_schedule", None)
        if schedule != "constant":
            raise params.ParameterError(
                f"{runs.section.name}: outer_schedule must be 'constant' for a shorter run to be the first part of a "
                f"longer one, got {schedule!r} ({runs.section.label(cfg)})"
            )


def shared_steps(runs: notebook.Runs) -> list:
    """The evaluation steps every stored run has, after step 0."""
    stored = [set(np.asarray(o["eval_steps"]).tolist()) for o in runs.outputs.values() if o is not None]
    return sorted(set.intersection(*stored) - {0}) if stored else []


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("chapter", choices=list(chapters.CHAPTERS))
    parser.add_argument("--preset", default="quick")
    parser.add_argument("--seeds", type=int, nargs="+", default=None, help="default: the preset's own seeds")
    args = parser.parse_args(argv)
    runs = notebook.stored(args.chapter, args.preset, args.seeds)
    try:
        check_constant_schedule(runs)
    except params.ParameterError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    steps = shared_steps(runs)
    if not steps:
        print(f"error: no stored runs of {args.chapter} at preset {args.preset}", file=sys.stderr)
        return 1
    chapter = chapters.get(args.chapter)
    verdicts = {step: chapter.claims(truncated(runs, step)) for step in steps}
    print("| figure | claim | " + " | ".join(f"step {s}" for s in steps) + " |")
    print("|---|---|" + "---|" * len(steps))
    for claim in verdicts[steps[-1]]:
        cells = [f"{found.verdict}: {found.ours}" for found in (C.find(verdicts[s], claim) for s in steps)]
        print(f"| {claim.figure} | {claim.claim} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
