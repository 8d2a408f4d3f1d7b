"""Command line: run one experiment of a section at a preset, or a sweep file, writing to the results store.

The command is ``compgen-cli`` (not ``compgen``, a bash builtin that would run instead); ``python -m compgen``
runs the same.

    compgen-cli list
    compgen-cli show hyperteacher fig3b --preset smoke --set seeds=[1,2]   # the configs it would train; --json
    compgen-cli run teacher_student fig2c --preset paper
    compgen-cli run teacher_student fig2d --preset quick --set seeds=[100] --set outer_steps=2000 --force
    compgen-cli run hyperteacher fig3b --preset paper --set seeds=[2020]
    compgen-cli run hyperteacher fig3b --preset paper --set seeds=[2020] --shard-tasks   # every run here, on every core
    compgen-cli sweep sweeps/hyperteacher/compositional.toml --backend devices --checkpoint-every 10
    compgen-cli store                  # stored runs per section: current (this code's), stale or unknown
    compgen-cli store --remove-stale   # delete the stale ones

A notebook that asks for the same config afterwards loads the stored result instead of training. A run at the
paper's sizes trains alone with its tasks sharded over every CPU core (compgen.devices.shard_count;
COMPGEN_SHARD_TASKS=0 turns that off).
Every parameter is checked before anything is compiled; a bad one exits with status 2 and a one-line message.
A run that diverges (its outer updates stay non-finite, its loss passes compgen.runner.DIVERGED_LOSS or a metric
turns NaN) stops, is not stored, and exits with status 1, as does a results store that cannot be written.
"""

from __future__ import annotations

import argparse
import os
import sys

from compgen import params


class _Parser(argparse.ArgumentParser):
    """argparse, with a bad option reported in one line (argparse prints its usage above it) like every other error."""

    def error(self, message):
        print(f"error: {self.prog}: {message} (see {self.prog} --help)", file=sys.stderr)
        raise SystemExit(2)


def _fail(error) -> SystemExit:
    print(f"error: {error}", file=sys.stderr)
    return SystemExit(2)


def _nonnegative(text):
    try:
        return params.check_int("--checkpoint-every", int(text), ge=0, le=params.ENV_INT_LIMIT)
    except (ValueError, params.ParameterError):
        raise argparse.ArgumentTypeError(
            f"must be an integer from 0 to {params.ENV_INT_LIMIT} (evaluations between checkpoints, 0 = off), "
            f"got {params._short(text)}"
        ) from None


def _add_set(command, help):
    """``--set FIELD=VALUE``, repeatable: the config overrides of ``run`` and ``sweep``."""
    command.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE", help=help)


def _add_checkpoint_every(command):
    command.add_argument(
        "--checkpoint-every",
        type=_nonnegative,
        default=None,
        metavar="N",
        help="save the training state every N evaluations and resume from it "
        "(default $COMPGEN_CHECKPOINT_EVERY, else off)",
    )


def parser() -> argparse.ArgumentParser:
    from compgen import __version__
    from compgen.catalog import SECTIONS

    top = _Parser(prog="compgen-cli", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    top.add_argument("--version", action="version", version=f"compgen {__version__}")
    sub = top.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="list sections, experiments, presets and config fields")
    run = sub.add_parser("run", help="run one experiment of a section")
    run.add_argument("section", help=f"one of {', '.join(SECTIONS)}")
    run.add_argument("experiment", help="an experiment (figure) of the section (see `compgen-cli list`)")
    run.add_argument("--preset", default="quick", help="smoke, quick, paper or bridge-x<N> (default quick)")
    _add_set(run, "override a config field, e.g. --set seeds=[100] (repeatable)")
    run.add_argument("--force", action="store_true", help="recompute even if the store has the result")
    _add_checkpoint_every(run)
    run.add_argument(
        "--shard-tasks",
        action="store_true",
        help="train in this one process with every meta-batch sharded over one CPU device per core, every run "
        "(without it a run at the paper's sizes is split in a worker of its own; see compgen.devices.shard_count)",
    )
    show = sub.add_parser(
        "show",
        help="print the configs an experiment trains at a preset: label, results-store hash and every field "
        "(* = differs from the paper's config of its model)",
    )
    show.add_argument("section", help=f"one of {', '.join(SECTIONS)}")
    show.add_argument("experiment", help="an experiment (figure) of the section (see `compgen-cli list`)")
    show.add_argument("--preset", default="quick", help="smoke, quick, paper or bridge-x<N> (default quick)")
    _add_set(show, "override a config field, as for run (repeatable)")
    show.add_argument("--json", action="store_true", help="print the configs as a JSON list of field dicts")
    store = sub.add_parser(
        "store",
        help="list the results store's runs per section: current (this code's), stale (other code's) or unknown "
        "(a learner this process cannot resolve; never removed)",
    )
    store.add_argument("--remove-stale", action="store_true", help="delete the stale runs (and their checkpoints)")
    store.add_argument("--verbose", action="store_true", help="list every stale run (label, fingerprint, date)")
    sweep = sub.add_parser("sweep", help="run every config of a sweep file (sweeps/*.toml) with a backend")
    sweep.add_argument("file", help="a sweep file, e.g. sweeps/hyperteacher/compositional.toml")
    sweep.add_argument("--backend", default="local", help="local (default), devices or ray")
    sweep.add_argument("--preset", default=None, help="smoke, quick or paper (default: the file's)")
    _add_set(sweep, "override a config field of every run (repeatable)")
    sweep.add_argument("--force", action="store_true", help="retrain runs that are already stored")
    sweep.add_argument(
        "--dry-run",
        action="store_true",
        help="list the runs and whether they are stored; exit 1 if any config is invalid",
    )
    sweep.add_argument(
        "--keep-going",
        action="store_true",
        help="train the valid grid points even if some are invalid (default: train nothing unless all are valid)",
    )
    _add_checkpoint_every(sweep)
    sweep.add_argument("--ray-address", default=None, help="Ray cluster address (default: $RAY_ADDRESS or local)")
    sweep.add_argument("--ray-gpus", type=float, default=0, help="GPUs per Ray task (default 0)")
    sweep.add_argument("--ray-cpus", type=float, default=1, help="CPUs per Ray task (default 1)")
    return top


def _list():
    from compgen import catalog, models

    for name in catalog.SECTIONS:
        section = catalog.get(name)
        print(f"{name}: experiments {list(section.figures('paper'))}; presets {list(section.presets)}")
        print("  fields: " + "; ".join(section.config.describe_field(f) for f in section.config.field_names()))
    for kind, sections in (("fewshot", "hyperteacher, preferences, goals"), ("incontext", "incontext")):
        print(f"model ({sections}): one of {models.names(kind)}, or an import path package.module:build")
    return 0


def _configs(args):
    """``(section, configs)`` of ``args.experiment`` at ``args.preset`` with the ``--set`` overrides (run and show)."""
    from compgen import bridge, catalog

    sec = catalog.get(args.section)
    overrides = params.parse_assignments(args.set, sec.config)
    params.check_overrides(sec.config, overrides, "--set")  # before they meet figure_configs' own arguments
    return sec, bridge.figure_configs(sec, args.experiment, args.preset, **overrides)


def _show(args):
    import dataclasses
    import json

    from compgen import bridge, dispatch, programs, results, section

    try:
        dispatch.check_environment()  # as run does, before a config starts JAX's backend, which reads XLA_FLAGS
        sec, configs = _configs(args)
    except params.ParameterError as error:
        raise _fail(error) from None
    if args.json:
        print(json.dumps([results.config_dict(c) for c in configs], indent=2))
        return 0
    # the paper's values of a config: the paper's config of its model in this figure (the paper grid's fixed fields),
    # at the config's grid point (the fields of the shown grid's axes and cases)
    on_bridge = bridge.parse(args.preset) is not None
    grid_preset = "quick" if on_bridge else args.preset
    grid, paper_grid = (sec.preset(p).figures.get(args.experiment) for p in (grid_preset, "paper"))
    point = {*grid.axes, *(name for case in grid.cases for name in case)}
    print(
        f"{sec.name} {args.experiment} at preset {args.preset}: {len(configs)} config(s); "
        "* = differs from the paper's value"
    )
    quick = (
        bridge.figure_configs(sec, args.experiment, "quick", **params.parse_assignments(args.set, sec.config))
        if (on_bridge)
        else configs
    )
    for i, cfg in enumerate(configs):
        fields = {**(paper_grid.fixed if paper_grid else {}), **{k: getattr(cfg, k) for k in point}}
        paper = section.make_config(sec, "paper", getattr(cfg, "model", None), **fields)
        print(f"\n{sec.label(cfg)}\n  key {programs.key_of(sec, cfg)}")
        if on_bridge:
            paper = bridge.paper_end(sec, quick[i])
            reached, whole = bridge.multiple(sec, quick[i], cfg), bridge.paper_multiple(sec, quick[i])
            print(f"  x{reached:.2f} of the quick compute, {reached / whole:.2g} of the paper's")
        for f in dataclasses.fields(cfg):
            ours, theirs = getattr(cfg, f.name), getattr(paper, f.name)
            print(f"    {f.name} = {ours!r}" if ours == theirs else f"  * {f.name} = {ours!r} (paper {theirs!r})")
    return 0


def _run(args):
    if args.shard_tasks:
        from compgen import devices  # before the section's import starts jax's backend: XLA reads the flag then

        os.environ["XLA_FLAGS"] = devices.xla_flags_with_host_devices(os.cpu_count() or 1)
    from compgen import backends, dispatch, runner
    from compgen.figures import summary_table

    try:
        dispatch.check_environment()  # first: building a config may start JAX's backend, which reads XLA_FLAGS
        sec, configs = _configs(args)
        runner.checkpoint_interval(args.checkpoint_every)
    except params.ParameterError as error:
        raise _fail(error) from None
    if args.restart:
        _huge_pages_for(sec, configs)
    try:
        if args.shard_tasks:
            import jax

            from compgen import devices

            with devices.shard_tasks():
                print(
                    f"[devices] every meta-batch sharded over {jax.local_device_count()} {jax.default_backend()} "
                    "device(s)"
                )
                backend = backends.Workers(1, checkpoint_every=args.checkpoint_every)
                outputs = dispatch.train_or_load(sec, configs, backend=backend, force=args.force)
        else:
            backend = backends.Workers(checkpoint_every=args.checkpoint_every)
            outputs = dispatch.train_or_load(sec, configs, backend=backend, force=args.force)
    except params.ParameterError as error:  # refused before training (compgen.memory), here or in a worker
        raise _fail(error) from None
    except runner.TrainingDiverged as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    except RuntimeError as error:  # a worker failed; its output is above
        print(f"error: {error}", file=sys.stderr)
        return 1
    except OSError as error:  # the store could not be written (a full disk, a file-size limit): nothing partial kept
        print(
            f"error: the results store {error.filename or ''} could not be written: {error.strerror}", file=sys.stderr
        )
        return 1
    print(summary_table(sec, configs, outputs))
    return 0


UNKNOWN_HINT = (
    "its learner is not known in this process: for an import path put its package on PYTHONPATH; a name registered "
    "by a notebook or script is known there only (check from it: compgen.cli.main(['store']) after registering)"
)


def run_status(sec, meta, entry, store) -> tuple:
    """``(status, why)`` of the stored run ``entry`` of ``sec`` described by ``meta``: ``"current"`` (this code
    computes its numbers: the entry is where this code looks for its config, under the key of what it computes),
    ``"stale"`` (other code computed it, or it holds no description that reads) or ``"unknown"`` (its learner cannot
    be resolved here, so its key cannot be computed: never removed)."""
    if meta is None:
        return "stale", "it holds no description that reads"
    config = meta.config
    try:
        cfg = sec.config_from_dict(config)
        if store.paths(sec, cfg)[0] == entry:
            return "current", ""
    except (params.ParameterError, TypeError) as error:
        return "unknown", f"{' '.join(str(error).split())}; {UNKNOWN_HINT}"
    fingerprint = meta.provenance.get("code_fingerprint")
    return "stale", f"computed by other code (source fingerprint {fingerprint}, key {meta.key or 'none'})"


def _store(args):
    """Per section: how many stored runs this code would load (current), how many it never will (stale: computed by
    other code, whose fingerprint differs) and how many it cannot tell (unknown: their learner is not known in this
    process), and, with ``--remove-stale``, delete the stale ones (never an unknown one)."""
    from compgen import catalog, dispatch, results

    try:
        dispatch.check_environment()
        store = results.Store.default()
        if store.root.exists() and not store.root.is_dir():
            raise params.ParameterError(f"COMPGEN_RESULTS names {store.root}, which is a file, not a folder")
    except params.ParameterError as error:
        raise _fail(error) from None
    print(f"results store {store.root}")
    for name in catalog.SECTIONS:
        sec = catalog.get(name)
        store.migrate(sec)  # runs stored under their legacy names that this code still computes: under their keys
        by_status = {"current": [], "stale": [], "unknown": []}
        for entry, meta in store.entries(name):
            status, why = run_status(sec, meta, entry, store)
            by_status[status].append((entry, meta, why))
        counts = ", ".join(f"{len(found)} {status}" for status, found in by_status.items())
        print(f"  {name}: {counts}")
        for entry, meta, why in by_status["stale"] if args.verbose else ():
            print(f"    {entry.stem}  {why}  {meta.provenance['date'] if meta else 'no description'}")
        for entry, _, why in by_status["unknown"]:
            print(f"    unknown {entry.stem}: {why}")
        if args.remove_stale:
            removed = 0
            for entry, _, _ in by_status["stale"]:  # judged again from what the entry itself holds
                if run_status(sec, store.embedded(entry), entry, store)[0] == "stale":
                    store.remove(name, entry)
                    removed += 1
            if by_status["stale"]:
                print(f"    removed {removed} stale run(s)")
            if by_status["unknown"]:
                print(f"    kept {len(by_status['unknown'])} unknown run(s)")
    return 0


def _huge_pages_for(section, configs):
    """Restart this process with glibc's huge pages if one of ``configs`` trains with them here
    (:func:`compgen.devices.huge_pages`): as ``python -m compgen.cli ARGS``, whichever command ran."""
    from compgen import allocator, devices

    if any(devices.huge_pages(section, c) for c in configs):
        allocator.restart_with_huge_pages("compgen.cli", sys.argv[1:])


def main(argv=None):
    args = parser().parse_args(argv)
    args.restart = argv is None  # a command line (not a call from Python) may restart itself, see _huge_pages_for
    if args.command == "list":
        return _list()
    if args.command == "show":
        return _show(args)
    if args.command == "store":
        return _store(args)
    if args.command == "sweep":
        from compgen import catalog, sweeps

        try:
            sweep = sweeps.load(args.file)
            overrides = params.parse_assignments(args.set, catalog.get(sweep.section).config)
            if args.restart and args.backend == "local" and not args.dry_run:
                points = sweeps.expand(sweep, args.preset, overrides)
                _huge_pages_for(catalog.get(sweep.section), [p.config for p in points if p.config is not None])
        except params.ParameterError as error:
            raise _fail(error) from None
        return sweeps.main(args, overrides)
    return _run(args)


def entry_point(argv=None):
    """``compgen-cli``: :func:`main`, with output into a closed pipe (``compgen-cli show ... | head -1``) ending the
    command quietly, as other command-line tools do."""
    try:
        status = main(argv)
        sys.stdout.flush()
        return status
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error when Python flushes at exit
        return 141  # 128 + SIGPIPE, the status of a command that a closed pipe ends


if __name__ == "__main__":
    sys.exit(entry_point())
