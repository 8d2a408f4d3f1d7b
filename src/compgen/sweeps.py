"""Sweeps: a small declarative file expands into runs, which a backend trains into the results store.

A sweep file (TOML, or JSON with the same keys) names a section and either builds each config with
the section's ``make_config`` or calls one of its experiments; every point of ``grid`` gives one
config (or the experiment's configs), trained for every seed::

    section = "hyperteacher"          # a section of `compgen list`
    preset = "paper"                  # default preset; `compgen sweep --preset smoke` overrides it
    seeds = [2020, 2021, 2022]
    # experiment = "fig3b"            # optional: call this experiment with the fields below
    [fixed]                           # fields set at every grid point
    n_modules = 8
    [at.paper]                        # fields set only at the paper preset
    outer_steps = 100_000
    [grid]                            # the cartesian product of these lists
    model = ["anil", "maml", "hnet_linear", "hnet_deepmlp"]
    split = ["non_compositional", "random"]
    # exclude = [{n_modules = 4, max_hot = 6}]   # grid points left out
    # [[cases]]                       # optional: fields that vary together; each case x the grid
    # masks = "01;12;23;34;45;50"
    # expect_connected = true

Backends: ``local`` (groups of same-shape configs one after another, each one compiled program),
``devices`` (the same, with each group's seeds and configs sharded over the local accelerators,
:mod:`compgen.devices`) and ``ray`` (each config a task on a Ray cluster; ``pip install
'compgen[cluster]'``). Runs already in the store are skipped unless ``force``; a run that fails is
reported and the others go on. Command line: ``compgen sweep FILE --backend local``.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import itertools
import json
import os
import tempfile
from pathlib import Path

from compgen import checkpoint, devices, experiments, results

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: sweep files must then be JSON
    tomllib = None

BACKENDS = ("local", "devices", "ray")
FILE_KEYS = ("section", "preset", "seeds", "experiment", "fixed", "at", "cases", "grid", "exclude", "description")


@dataclasses.dataclass(frozen=True)
class Sweep:
    """A parsed sweep file (see module docstring)."""

    name: str
    section: str
    preset: str = "paper"
    seeds: tuple | None = None
    experiment: str | None = None
    fixed: dict = dataclasses.field(default_factory=dict)
    at: dict = dataclasses.field(default_factory=dict)
    grid: dict = dataclasses.field(default_factory=dict)
    cases: tuple = ()
    exclude: tuple = ()
    description: str = ""


@dataclasses.dataclass(frozen=True)
class Point:
    """One point of an expanded sweep: its grid values, and its config or why it has none."""

    label: str
    config: object = None
    error: str | None = None


@dataclasses.dataclass
class Report:
    """What a sweep did: configs skipped (already stored), trained, and ``(label, error)`` failures."""

    stored: list = dataclasses.field(default_factory=list)
    trained: list = dataclasses.field(default_factory=list)
    failed: list = dataclasses.field(default_factory=list)

    def summary(self) -> str:
        runs = lambda configs: sum(len(c.seeds) for c in configs)
        lines = [f"{len(self.trained)} config(s) ({runs(self.trained)} runs) trained, {len(self.stored)} "
                 f"({runs(self.stored)} runs) already stored, {len(self.failed)} failed"]
        lines += [f"  FAILED {label}: {error}" for label, error in self.failed]
        return "\n".join(lines)


def _sections():
    from compgen import cli

    return cli.SECTIONS


def presets_module(section: str):
    """The module of ``section`` with ``make_config``, ``EXPERIMENTS`` and ``PRESET_NAMES``."""
    if section not in _sections():
        raise ValueError(f"section must be one of {sorted(_sections())}, got {section!r}")
    return importlib.import_module(_sections()[section])


def training_module(section: str):
    """The module of ``section`` that trains (``KIND``, ``shape_key``, ``train_group``, ``code``)."""
    return importlib.import_module(presets_module(section).run.__module__)


def _tuples(value):
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value


def _check_fields(names, allowed, where):
    unknown = sorted(set(names) - set(allowed))
    if unknown:
        raise ValueError(f"{where}: unknown field(s) {unknown}; allowed: {sorted(allowed)}")


def allowed_fields(section: str, experiment: str | None = None) -> set:
    """The names a sweep may set: the section's config fields, plus the experiment's own parameters."""
    allowed = {f.name for f in dataclasses.fields(training_module(section).CONFIG_CLASS)}
    if experiment is not None:
        params = inspect.signature(presets_module(section).EXPERIMENTS[experiment]).parameters
        allowed |= {p for p in params if p != "preset" and params[p].kind is not inspect.Parameter.VAR_KEYWORD}
    return allowed


def parse(data: dict, name: str = "sweep") -> Sweep:
    """A :class:`Sweep` from the dict of a sweep file, checking every key and field name."""
    _check_fields(data, FILE_KEYS, f"{name}: top-level key")
    if "section" not in data:
        raise ValueError(f"{name}: the key 'section' is required (one of {sorted(_sections())})")
    module = presets_module(data["section"])
    experiment = data.get("experiment")
    if experiment is not None and experiment not in module.EXPERIMENTS:
        raise ValueError(f"{name}: experiment must be one of {sorted(module.EXPERIMENTS)}, got {experiment!r}")
    allowed = allowed_fields(data["section"], experiment)
    preset = data.get("preset", "paper")
    for p in (preset, *data.get("at", {})):
        if p not in module.PRESET_NAMES:
            raise ValueError(f"{name}: preset must be one of {list(module.PRESET_NAMES)}, got {p!r}")
    grid = data.get("grid", {})
    for field, values in grid.items():
        if not isinstance(values, list) or not values:
            raise ValueError(f"{name}: grid.{field} must be a non-empty list, got {values!r}")
    _check_fields(data.get("fixed", {}), allowed, f"{name}: [fixed]")
    _check_fields(grid, allowed, f"{name}: [grid]")
    for p, fields in data.get("at", {}).items():
        _check_fields(fields, allowed, f"{name}: [at.{p}]")
    for rule in data.get("exclude", []):
        _check_fields(rule, allowed, f"{name}: exclude")
    for case in data.get("cases", []):
        _check_fields(case, allowed, f"{name}: [[cases]]")
    seeds = data.get("seeds")
    return Sweep(name=name, section=data["section"], preset=preset, seeds=None if seeds is None else tuple(seeds),
                 experiment=experiment, fixed=dict(data.get("fixed", {})), at=dict(data.get("at", {})),
                 grid=dict(grid), cases=tuple(data.get("cases", [])), exclude=tuple(data.get("exclude", [])),
                 description=data.get("description", ""))


def load(path) -> Sweep:
    """Read a sweep file (``.toml`` or ``.json``)."""
    path = Path(path)
    text = path.read_text()
    if path.suffix != ".json" and tomllib is None:
        raise ValueError(f"reading the TOML sweep file {path} needs Python >= 3.11 (tomllib); "
                         "on Python 3.10 write it as JSON with the same keys")
    data = json.loads(text) if path.suffix == ".json" else tomllib.loads(text)
    return parse(data, name=str(path))


def grid_points(sweep: Sweep, preset: str, overrides: dict | None = None) -> list:
    """``(label, fields)`` of every (case, grid point) not excluded, in file order. Fields apply in the
    order: ``fixed``, ``at.<preset>``, the case, the grid point, ``seeds``, ``overrides``."""
    points, names = [], list(sweep.grid)
    for case, values in itertools.product(sweep.cases or ({},), itertools.product(*(sweep.grid[n] for n in names))):
        combo = {**case, **dict(zip(names, values))}
        fields = {**sweep.fixed, **sweep.at.get(preset, {}), **combo}
        if any(all(fields.get(k) == v for k, v in rule.items()) for rule in sweep.exclude):
            continue
        if sweep.seeds is not None:
            fields["seeds"] = sweep.seeds
        fields = {k: _tuples(v) for k, v in {**fields, **(overrides or {})}.items()}
        points.append((", ".join(f"{k}={v}" for k, v in combo.items()) or sweep.section, fields))
    return points


def expand(sweep: Sweep, preset: str | None = None, overrides: dict | None = None) -> list:
    """The :class:`Point` of every grid point (:func:`grid_points`), with its config (built by the
    section's ``make_config`` or experiment) or the error that prevented one; duplicates dropped."""
    module = presets_module(sweep.section)
    preset = preset or sweep.preset
    if preset not in module.PRESET_NAMES:
        raise ValueError(f"preset must be one of {list(module.PRESET_NAMES)}, got {preset!r}")
    _check_fields(overrides or {}, allowed_fields(sweep.section, sweep.experiment), "--set")
    points, seen = [], set()
    for label, fields in grid_points(sweep, preset, overrides):
        try:
            if sweep.experiment is not None:
                configs = module.EXPERIMENTS[sweep.experiment](preset, **fields)
            else:
                configs = [module.make_config(preset, **fields)]
        except (TypeError, ValueError) as error:
            points.append(Point(label, error=f"{type(error).__name__}: {error}"))
            continue
        for i, config in enumerate(configs):
            if config not in seen:
                seen.add(config)
                points.append(Point(label if len(configs) == 1 else f"{label} #{i}", config))
    return points


# --------------------------------------------------------------------------------------------- running


def run_sweep(sweep, backend: str = "local", preset: str | None = None, overrides: dict | None = None,
              force: bool = False, checkpoint_every: int | None = None, log=print, ray_address: str | None = None,
              ray_gpus: float = 0, ray_cpus: float = 1) -> Report:
    """Train every run of ``sweep`` (a :class:`Sweep` or a path) not yet stored with ``backend``.

    Returns a :class:`Report`; failures (a config that cannot be built, a run that raises) are
    collected there and logged, never raised. ``checkpoint_every``: see
    :func:`compgen.experiments.train_and_store`.
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    sweep = load(sweep) if isinstance(sweep, (str, Path)) else sweep
    section = training_module(sweep.section)
    report, todo = Report(), []
    for point in expand(sweep, preset, overrides):
        if point.config is None:
            report.failed.append((point.label, point.error))
            log(f"[sweep] FAILED {point.label}: {point.error}")
        elif not force and results.load(section.KIND, point.config, code=section.code()) is not None:
            report.stored.append(point.config)
        else:
            todo.append(point)
    log(f"[sweep] {sweep.name}: {len(todo)} config(s) to train with backend {backend!r}, "
        f"{len(report.stored)} already stored")
    if backend == "ray":
        _run_ray(section, todo, report, checkpoint_every, log, ray_address, ray_gpus, ray_cpus)
    elif backend == "devices":
        with devices.use_devices() as mesh:
            log(f"[sweep] sharding the runs of each group over {mesh.size} device(s): {list(mesh.devices.flat)}")
            _run_local(section, todo, report, checkpoint_every, log)
    else:
        _run_local(section, todo, report, checkpoint_every, log)
    log("[sweep] " + report.summary())
    return report


def _run_local(section, points, report, checkpoint_every, log):
    """Same-shape configs train together; a group that fails is retried one config at a time."""
    groups = {}
    for p in points:
        groups.setdefault((section.shape_key(p.config), len(p.config.seeds)), []).append(p)
    for group in groups.values():
        _train_isolated(section, group, report, checkpoint_every, log)


def _train_isolated(section, points, report, checkpoint_every, log):
    try:
        experiments.train_and_store(section, [p.config for p in points], log, checkpoint_every)
    except Exception as error:  # noqa: BLE001  (any failure of one run must not stop the sweep)
        if len(points) > 1:
            log(f"[sweep] a group of {len(points)} configs failed ({error!r}); training them one by one")
            for p in points:
                _train_isolated(section, [p], report, checkpoint_every, log)
        else:
            report.failed.append((points[0].label, f"{type(error).__name__}: {error}"))
            log(f"[sweep] FAILED {points[0].label}: {error!r}")
        return
    report.trained.extend(p.config for p in points)


def _train_remote(module_name: str, config: dict, checkpoint_every, checkpoint_dir: str) -> dict:
    """Ray task: train one config into a private store; returns its files (path in the store -> bytes),
    which the driver writes into its own store, so workers need no shared file system."""
    section = importlib.import_module(module_name)
    config = section.CONFIG_CLASS(**config)
    saved = {k: os.environ.get(k) for k in ("COMPGEN_RESULTS", "COMPGEN_CHECKPOINTS")}
    with tempfile.TemporaryDirectory() as store:
        os.environ.update(COMPGEN_RESULTS=store, COMPGEN_CHECKPOINTS=checkpoint_dir)
        try:
            experiments.train_and_store(section, [config], print, checkpoint_every)
        finally:
            for k, v in saved.items():
                os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)
        return {str(p.relative_to(store)): p.read_bytes() for p in Path(store).rglob("*") if p.is_file()}


def _run_ray(section, points, report, checkpoint_every, log, address, gpus, cpus):
    try:
        import ray
    except ImportError:
        raise RuntimeError("the ray backend needs Ray: pip install 'compgen[cluster]' (or pip install ray)") from None
    if not ray.is_initialized():
        ray.init(address=address)
    task = ray.remote(_train_remote).options(num_gpus=gpus, num_cpus=cpus)
    ckpt_dir = str(checkpoint.checkpoint_root())
    pending = {task.remote(section.__name__, dataclasses.asdict(p.config), checkpoint_every, ckpt_dir): p
               for p in points}
    root = results.results_root()
    while pending:
        (ref,), _ = ray.wait(list(pending), num_returns=1)
        point = pending.pop(ref)
        try:
            for name, data in ray.get(ref).items():
                (root / name).parent.mkdir(parents=True, exist_ok=True)
                (root / name).write_bytes(data)
            if results.load(section.KIND, point.config, code=section.code()) is None:
                raise RuntimeError("the worker stored the run under another config hash: is its compgen the "
                                   "same version as the driver's?")
        except Exception as error:  # noqa: BLE001
            lines = str(error).strip().splitlines() or [type(error).__name__]
            report.failed.append((point.label, lines[-1]))  # a Ray task error ends with the original exception
            log(f"[sweep] FAILED {point.label}: {error}")
            continue
        report.trained.append(point.config)
        log(f"[sweep] stored {point.label} ({len(report.trained)}/{len(points)} done)")


def main(args, overrides) -> int:
    """``compgen sweep``: exit status 0 if every run is stored, 1 if any failed."""
    try:
        sweep = load(args.file)
        if args.backend not in BACKENDS:
            raise ValueError(f"--backend must be one of {BACKENDS}, got {args.backend!r}")
        if args.dry_run:
            section = training_module(sweep.section)
            points = expand(sweep, args.preset, overrides)
            for p in points:
                status = ("FAILED " + p.error) if p.config is None else (
                    "stored" if results.load(section.KIND, p.config, code=section.code()) else "to train")
                print(f"{p.label}: {status}")
            configs = [p.config for p in points if p.config is not None]
            print(f"{len(configs)} config(s), {sum(len(c.seeds) for c in configs)} runs")
            return 0
        report = run_sweep(sweep, args.backend, args.preset, overrides, args.force, args.checkpoint_every,
                           ray_address=args.ray_address, ray_gpus=args.ray_gpus)
    except (ValueError, FileNotFoundError, json.JSONDecodeError) as error:
        raise SystemExit(f"error: {error}") from None
    return 1 if report.failed else 0
