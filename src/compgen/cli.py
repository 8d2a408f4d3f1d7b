"""Command line: run one experiment of a section at a preset, writing to the results store.

    compgen list
    compgen run teacher_student fig2c --preset paper
    compgen run teacher_student fig2d --preset quick --set seeds=[100] --set outer_steps=2000 --force
    compgen run hyperteacher fig3b --preset paper --set seeds=[2020]
    compgen run preferences fig4c --preset quick --set seeds=[2020]
    compgen run goals fig4ef --preset paper --set seeds=[2020]
    compgen run hyperteacher fig3b --preset paper --set seeds=[2020] --split-tasks   # one run on every CPU core
    compgen sweep sweeps/hyperteacher/compositional.toml --backend devices --checkpoint-every 10

A notebook that asks for the same config afterwards loads the stored result instead of training.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import os
import sys

SECTIONS = {"teacher_student": "compgen.experiments.teacher_student",
            "hyperteacher": "compgen.experiments.hyperteacher_presets",
            "preferences": "compgen.experiments.preferences_presets",
            "goals": "compgen.experiments.goals_presets",
            "incontext": "compgen.experiments.incontext_presets"}


def _section(name):
    if name not in SECTIONS:
        raise SystemExit(f"section must be one of {sorted(SECTIONS)}, got {name!r}")
    return importlib.import_module(SECTIONS[name])


def _parse_override(text):
    if "=" not in text:
        raise SystemExit(f"--set takes FIELD=VALUE, got {text!r}")
    field, value = text.split("=", 1)
    try:
        value = ast.literal_eval(value)
    except (ValueError, SyntaxError):
        pass  # a plain string such as a mask list "01;12"
    if isinstance(value, list):
        value = tuple(value)
    return field, value


def main(argv=None):
    parser = argparse.ArgumentParser(prog="compgen", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="list sections, experiments and presets")
    run = sub.add_parser("run", help="run one experiment of a section")
    run.add_argument("section", help=f"one of {sorted(SECTIONS)}")
    run.add_argument("experiment", help="an experiment of the section (see `compgen list`)")
    run.add_argument("--preset", default="quick", help="smoke, quick or paper (default quick)")
    run.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                     help="override a config field, e.g. --set seeds=[100] (repeatable)")
    run.add_argument("--force", action="store_true", help="recompute even if the store has the result")
    run.add_argument("--split-tasks", action="store_true",
                     help="train in this one process with every meta-batch split over one CPU device per core "
                          "(for a few large runs, e.g. the paper's configuration on a CPU; see compgen.devices)")
    sweep = sub.add_parser("sweep", help="run every config of a sweep file (sweeps/*.toml) with a backend")
    sweep.add_argument("file", help="a sweep file, e.g. sweeps/hyperteacher/compositional.toml")
    sweep.add_argument("--backend", default="local", help="local (default), devices or ray")
    sweep.add_argument("--preset", default=None, help="smoke, quick or paper (default: the file's)")
    sweep.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                       help="override a config field of every run (repeatable)")
    sweep.add_argument("--force", action="store_true", help="retrain runs that are already stored")
    sweep.add_argument("--dry-run", action="store_true", help="list the runs and whether they are stored")
    sweep.add_argument("--checkpoint-every", type=int, default=None, metavar="N",
                       help="save the training state every N chunks and resume from it (default "
                            "$COMPGEN_CHECKPOINT_EVERY, else off)")
    sweep.add_argument("--ray-address", default=None, help="Ray cluster address (default: $RAY_ADDRESS or local)")
    sweep.add_argument("--ray-gpus", type=float, default=0, help="GPUs per Ray task (default 0)")
    args = parser.parse_args(argv)

    if args.command == "sweep":
        from compgen import sweeps

        return sweeps.main(args, dict(_parse_override(text) for text in args.set))

    if args.command == "list":
        for name in SECTIONS:
            module = _section(name)
            print(f"{name}: experiments {sorted(module.EXPERIMENTS)}; presets {list(module.PRESET_NAMES)}")
        return 0

    if args.command == "run" and args.split_tasks:
        from compgen import devices  # before the section's import starts jax's backend: XLA reads the flag then

        os.environ["XLA_FLAGS"] = " ".join(filter(None, [os.environ.get("XLA_FLAGS"),
                                                         devices.host_devices_flag(os.cpu_count() or 1)]))
    module = _section(args.section)
    if args.experiment not in module.EXPERIMENTS:
        raise SystemExit(f"experiment must be one of {sorted(module.EXPERIMENTS)}, got {args.experiment!r}")
    overrides = dict(_parse_override(text) for text in args.set)
    try:
        configs = module.EXPERIMENTS[args.experiment](args.preset, **overrides)
    except (TypeError, ValueError) as error:
        raise SystemExit(f"error: {error}") from None
    if args.split_tasks:
        import jax

        from compgen import devices

        with devices.split_tasks():
            print(f"[devices] every meta-batch split over {jax.local_device_count()} {jax.default_backend()} "
                  "device(s)")
            outputs = module.run(configs, force=args.force, workers=1)
    else:
        outputs = module.run(configs, force=args.force)
    print(module.summarize(configs, outputs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
