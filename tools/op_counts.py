"""Serial work per inner step of our outer step and of the authors', at the paper's configurations, on a CPU.

For each case of :data:`CASES` (the paper configurations of ``python -m compgen.bench``, one seed) our step is
lowered as the runner compiles it in a plain process (:func:`compgen.bench._program`: one outer step) and counted by
``tools/hlo_count.py``: the operations of the lowered StableHLO and the instructions (fusions) of the optimised CPU
program that one inner step executes in sequence. With ``--reference`` the authors' step at the same configuration
(translated by ``tools/twin.py``) is counted by the same code, in the twin virtualenv (``tools/authors_step.py``).

    .venv/bin/python tools/op_counts.py                           # ours, printed
    .venv/bin/python tools/op_counts.py --reference ../modular-hyperteacher --twin-python .venv-twin/bin/python \\
        --record                                                  # both, written to book/records/op_counts.json

The record (kind ``op_counts``, :mod:`compgen.recordfile`) holds per case the inner steps, our counts and the
section's code fingerprint, and the authors' counts; ``tests/tools/test_op_counts.py`` recomputes our operation
counts against it. The book's appendix ("Running it yourself") shows them side by side.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import hlo_count  # noqa: E402

RECORD = ROOT / "book" / "records" / "op_counts.json"
AUTHORS_STEP = ROOT / "tools" / "authors_step.py"
_HT = {"n_modules": 4, "max_hot": 2, "seeds": (2020,)}  # the hyperteacher's case in compgen.bench (M = 4, K = 2)
CASES = {  # case: (section, model, overrides of the paper preset)
    "teacher_student": ("teacher_student", None, {"seeds": (100,)}),
    "hyperteacher hnet_linear": ("hyperteacher", "hnet_linear", _HT),
    "hyperteacher hnet_deepmlp": ("hyperteacher", "hnet_deepmlp", _HT),
    "hyperteacher anil": ("hyperteacher", "anil", _HT),
    "preferences hnet_linear": ("preferences", "hnet_linear", {"seeds": (2020,)}),
    "goals hnet_linear": ("goals", "hnet_linear", {"seeds": (2020,)}),
}
SUMMARY = ("per_step", "loops", "runs")  # what the record keeps of a count (hlo_count's dicts)


def lowered(case: str):
    """``(our step lowered for one outer step, the config)`` of ``case``."""
    import jax

    from compgen.bench import _program

    section, model, overrides = CASES[case]
    _, cfg, runs, program = _program(section, "paper", model, overrides)
    return program.steps.lower(runs, jax.eval_shape(program.init, runs), 1), cfg


def our_ops(case: str) -> dict:
    """Our operations per inner step (:func:`hlo_count.stablehlo_ops`), from the lowering alone."""
    step, cfg = lowered(case)
    return hlo_count.stablehlo_ops(step.as_text(), cfg.inner_steps)


def ours(case: str) -> dict:
    """Both our counts of ``case`` (:func:`hlo_count.count_lowered`) and the section's code fingerprint."""
    from compgen import catalog, programs

    step, cfg = lowered(case)
    found = hlo_count.count_lowered(step, cfg.inner_steps)
    return {**found, "code_key": programs.section_key(catalog.get(CASES[case][0]))}


def authors_case(case: str) -> dict:
    """The case as ``tools/authors_step.py`` reads it: the reference's flat config of our paper configuration
    (:func:`tools.twin.translate`), whether it is ``run_theory.py``'s, and the inner steps."""
    import twin

    from compgen import catalog
    from compgen.section import make_config

    section, model, overrides = CASES[case]
    cfg = make_config(catalog.get(section), "paper", model, **overrides)
    config = twin.translate(section, cfg, cfg.seeds[0]).config
    return {"case": case, "theory": section == "teacher_student", "inner_steps": cfg.inner_steps, "config": config}


def authors_process(case: str, reference: Path, python: Path, args: list, env: dict | None = None) -> dict:
    """``tools/authors_step.py`` on ``case`` with ``args`` (``--count`` or ``--time N``), on the CPU, in the twin
    virtualenv's ``python`` and the environment ``env`` (default this process's): its JSON."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "case.json"
        path.write_text(json.dumps(authors_case(case)))
        env = {**(os.environ if env is None else env), "JAX_PLATFORMS": "cpu", "TQDM_DISABLE": "1"}
        command = [str(python), str(AUTHORS_STEP), "--reference", str(reference), "--config", str(path), *args]
        done = subprocess.run(command, env=env, capture_output=True, text=True)
    if done.returncode:
        tail = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise RuntimeError(f"authors_step.py {case} failed (exit {done.returncode}): {tail}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _kept(found: dict) -> dict:
    return {
        "inner_steps": found["inner_steps"],
        **{k: {f: found[k][f] for f in SUMMARY} for k in ("ops", "fusions")},
    }


def record(cases: dict, reference: bool) -> dict:
    """The ``op_counts`` record of ``cases`` (``{case: {"ours": ours(case), "theirs": ... or None}}``)."""
    import jax
    import twin

    return {
        "date": datetime.date.today().isoformat(),
        "jax": jax.__version__,
        "reference": {"repository": twin.REPOSITORY, "commit": twin.COMMIT if reference else None},
        "how": "`python tools/op_counts.py --reference <checkout> --record` on a CPU: each step lowered for one "
        "outer step (ours as the runner compiles it in a plain process, theirs by tools/authors_step.py) and "
        "counted by tools/hlo_count.py",
        "cases": {
            case: {
                "ours": {**_kept(found["ours"]), "code_key": found["ours"]["code_key"]},
                "theirs": None if found["theirs"] is None else _kept(found["theirs"]),
            }
            for case, found in cases.items()
        },
    }


def kinds_apart(ours_kinds: dict, theirs_kinds: dict, top: int = 8) -> str:
    """The kinds of operation whose count differs most between two counts, as ``kind ours/theirs`` words."""
    keys = sorted(
        set(ours_kinds) | set(theirs_kinds), key=lambda k: -abs(ours_kinds.get(k, 0) - theirs_kinds.get(k, 0))
    )
    return ", ".join(f"{k} {ours_kinds.get(k, 0)}/{theirs_kinds.get(k, 0)}" for k in keys[:top])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reference", type=Path, help="a checkout of smonsays/modular-hyperteacher")
    parser.add_argument("--twin-python", type=Path, default=ROOT / ".venv-twin" / "bin" / "python")
    parser.add_argument("--only", nargs="+", choices=sorted(CASES), help="these cases (default: all)")
    parser.add_argument("--record", action="store_true", help=f"write the record ({RECORD.relative_to(ROOT)})")
    args = parser.parse_args(argv)
    if args.record and args.only:
        parser.error("--record writes every case: leave out --only")
    if args.reference:
        import twin

        problem = twin.reference_problem(args.reference.resolve(), args.twin_python)  # before anything is counted
        if problem:
            print(f"op_counts: {problem}", file=sys.stderr)
            return 2
    found = {}
    print("| case | inner steps | ours ops | theirs ops | ours fusions | theirs fusions |")
    print("|---|---:|---:|---:|---:|---:|")
    for case in args.only or CASES:
        mine = ours(case)
        theirs = None
        if args.reference:
            theirs = authors_process(case, args.reference.resolve(), args.twin_python, ["--count"])
        found[case] = {"ours": mine, "theirs": theirs}
        cells = [f"{mine[k]['per_step']} | {theirs[k]['per_step'] if theirs else '–'}" for k in ("ops", "fusions")]
        print(f"| {case} | {mine['inner_steps']} | {' | '.join(cells)} |", flush=True)
    for case, f in found.items():
        for k in ("ops", "fusions"):
            if f["theirs"] and f["ours"][k]["per_step"] > f["theirs"][k]["per_step"]:
                print(f"{case}: ours has more {k} ({kinds_apart(f['ours'][k]['kinds'], f['theirs'][k]['kinds'])})")
    if args.record:
        from compgen import records

        records.write("op_counts", record(found, args.reference is not None), RECORD)
        print(f"record: {RECORD.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
