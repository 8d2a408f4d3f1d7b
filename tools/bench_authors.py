"""`make bench-authors`: the authors' outer step and ours timed alternately, case by case, on a CPU.

For each case of ``tools/op_counts.py`` (the paper configurations, one seed) and each pass, our step runs as
``python -m compgen.bench --case`` runs it (its own process: a chunk of outer steps compiled, run once untimed, then
timed; :mod:`compgen.bench`) and the authors' as ``tools/authors_step.py --time`` runs it in the twin virtualenv (its
own process: one untimed outer step, then ``--steps`` timed ones, each with its meta-batch from their loader), both in
the environment of our paper case (:func:`compgen.bench.case_environment`). The two alternate within a case and swap
order from one pass to the next; a case's figure is the mean over passes of each process's median.

    .venv/bin/python tools/bench_authors.py --reference ../modular-hyperteacher [--only "hyperteacher hnet_linear"]
        [--passes 2] [--steps 3] [--record]

``--record`` writes the session as two step-time records under ``book/records/steps/`` (or ``--records``), the
authors' and ours, sharing one ``session`` id, so that the appendix divides their figures
(:func:`compgen.figures.running.same_session`).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import os
import shlex
import statistics
import sys
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import op_counts  # noqa: E402
import twin  # noqa: E402

from compgen import bench, steptimes  # noqa: E402
from compgen.records import Steps  # noqa: E402

BENCH_CASE = {  # our case -> compgen.bench's case of the same configuration (a plain process)
    "teacher_student": "teacher_student paper, 1 run",
    "hyperteacher hnet_linear": "hyperteacher hnet_linear paper (M=4, K=2)",
    "hyperteacher hnet_deepmlp": "hyperteacher hnet_deepmlp paper (M=4, K=2)",
    "hyperteacher anil": "hyperteacher anil paper (M=4, K=2)",
    "preferences hnet_linear": "preferences hnet_linear paper",
    "goals hnet_linear": "goals hnet_linear paper",
}


def time_case(case: str, reference: Path, python: Path, passes: int, steps: int) -> tuple[dict, dict]:
    """``(ours, theirs)``: each a process's result (:func:`compgen.bench.run_case`, ``authors_step.py --time``) with
    ``s_per_step`` the mean over ``passes`` of its medians, the two alternating, first one then the other."""
    name = BENCH_CASE[case]
    env = bench.case_environment(name)
    found = {"ours": [], "theirs": []}
    for i in range(passes):
        for who in ("ours", "theirs") if i % 2 == 0 else ("theirs", "ours"):
            if who == "ours":
                result = bench.case_process(name)
                if isinstance(result, str):
                    raise RuntimeError(f"our case {name!r} failed: {result}")
            else:
                result = op_counts.authors_process(case, reference, python, ["--time", str(steps)], env)
            found[who].append(result)
    ours, theirs = (
        {**runs[-1], "s_per_step": statistics.mean(r["s_per_step"] for r in runs), "passes": len(runs)}
        for runs in (found["ours"], found["theirs"])
    )
    return {**ours, "gemm_readings": [r["gemm_gflops"] for r in found["ours"]]}, theirs


def records(measured: dict, command: str, passes: int, steps: int) -> tuple:
    """The session's two step-time records (:func:`compgen.steptimes.step_records`): ``(authors', ours)``, both with one
    ``session`` id; ``measured`` is ``{case: (ours, theirs)}`` (:func:`time_case`)."""
    session = f"{datetime.date.today().isoformat()}-{uuid.uuid4().hex[:8]}"
    how = (
        f"`{command}` on {os.cpu_count()} cores of a CPU: case by case, the authors' step and ours alternating, each "
        f"in its own process, in {passes} passes that swap their order; "
    )
    ours = bench.step_record({BENCH_CASE[c]: o for c, (o, _) in measured.items()}, "cpu", command)
    readings = [g for o, _ in measured.values() for g in o["gemm_readings"]]
    gemm = (min(readings), max(readings))  # every GEMM reading of the session
    ours = dataclasses.replace(
        ours,
        how=how + "ours as `python -m compgen.bench --case` times it (" + ours.how.split(": ", 1)[1] + ")",
        session=session,
        gemm_gflops=gemm,
    )
    theirs = {
        "who": "authors",
        "device": "cpu",
        "date": ours.date,
        "code": f"{twin.REPOSITORY}@{twin.COMMIT[:7]}",
        "how": how + f"theirs by tools/authors_step.py (their jitted FewshotExperiment.step with the next meta-batch "
        f"of their loader, or run_theory.py's meta_train), the median of {steps} steps after an untimed one, the "
        "mean over passes; peak resident memory; the GEMM readings are those of our processes in the session",
        "gemm_gflops": gemm,
        "session": session,
        "rows": {
            steptimes.figure_key(BENCH_CASE[c]): {"s_per_step": t["s_per_step"], "peak_gb": t["peak_gb"]}
            for c, (_, t) in measured.items()
        },
    }
    return Steps.from_dict(theirs), ours


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reference", type=Path, required=True, help="a checkout of smonsays/modular-hyperteacher")
    parser.add_argument("--twin-python", type=Path, default=ROOT / ".venv-twin" / "bin" / "python")
    parser.add_argument("--only", nargs="+", choices=sorted(BENCH_CASE), help="these cases (default: all)")
    parser.add_argument("--passes", type=int, default=2, help="passes over each case (default 2)")
    parser.add_argument("--steps", type=int, default=3, help="the authors' timed steps per process (default 3)")
    parser.add_argument("--record", action="store_true", help="write the session's two step-time records")
    parser.add_argument("--records", type=Path, default=ROOT / steptimes.RECORDS, help="where (default book/records)")
    args = parser.parse_args(argv)
    if args.passes < 1 or args.steps < 1:
        parser.error("--passes and --steps must be at least 1")
    reference = args.reference.resolve()
    problem = twin.reference_problem(reference, args.twin_python)  # before our case is timed
    if args.record and not os.access(args.records if args.records.exists() else args.records.parent, os.W_OK):
        problem = problem or f"--records {args.records} cannot be written"
    if problem:
        print(f"bench_authors: {problem}", file=sys.stderr)
        return 2
    measured = {}
    print("| case | ours s/step | authors s/step | authors ÷ ours | ours GEMM GFLOP/s |")
    print("|---|---:|---:|---:|---:|")
    for case in args.only or BENCH_CASE:
        ours, theirs = time_case(case, reference, args.twin_python, args.passes, args.steps)
        measured[case] = (ours, theirs)
        ratio = theirs["s_per_step"] / ours["s_per_step"]
        print(
            f"| {case} | {ours['s_per_step']:.3f} | {theirs['s_per_step']:.3f} | {ratio:.2f}× "
            f"| {ours['gemm_gflops']:.0f} |",
            flush=True,
        )
    if args.record:
        command = shlex.join(["python", "tools/bench_authors.py", *(sys.argv[1:] if argv is None else argv)])
        theirs_record, ours_record = records(measured, command, args.passes, args.steps)
        folder = args.records / "steps"
        for record in (theirs_record, ours_record):
            path = record.save(folder / f"{record.who}-cpu-{record.session}.json")
            print(f"record: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
