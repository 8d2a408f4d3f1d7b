"""Sweeps: a small declarative file expands into runs, which a backend trains into the results store.

A sweep file (TOML, or JSON with the same keys) names a section and either builds each config with
:func:`compgen.section.make_config` or expands one of its experiments; every point of ``grid`` gives one config
(or the experiment's configs), trained for every seed::

    section = "hyperteacher"          # a section of `compgen-cli list`
    preset = "paper"                  # default preset; `compgen-cli sweep --preset smoke` overrides it
    seeds = [2020, 2021, 2022]
    # experiment = "fig3b"            # optional: expand this experiment with the fields below
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

Every key and field is checked when the file is read, and every config is built before anything trains; an
error names the file, the key or field and what is allowed.

Backends: ``local`` (one config after another; configs of equal shapes share a compiled program), ``devices``
(one config per local device at a time, :func:`compgen.devices.train_on_devices`) and ``ray`` (each config a
task on a Ray cluster; ``pip install 'compgen[cluster]'``). A config is always trained by its own program, so
the three store the same numbers. Runs already stored are skipped unless ``force``; a run that fails is
reported and the others go on. Command line: ``compgen-cli sweep FILE --backend local``.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import sys
from pathlib import Path

from compgen import dispatch, params, results, runner
from compgen.catalog import SECTIONS, get
from compgen.section import PRESET_NAMES, figure_configs, make_config

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
        lines = [
            f"{len(self.trained)} config(s) ({runs(self.trained)} runs) trained, {len(self.stored)} "
            f"({runs(self.stored)} runs) already stored, {len(self.failed)} failed"
        ]
        lines += [f"  FAILED {label}: {error}" for label, error in self.failed]
        return "\n".join(lines)


def _tuples(value):
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value


def _check_fields(names, allowed, where):
    unknown = sorted(set(names) - set(allowed))
    if unknown:
        raise params.ParameterError(f"{where}: unknown field(s) {unknown}; allowed: {sorted(allowed)}")


def _table(value, where):
    if not isinstance(value, dict):
        raise params.ParameterError(f"{where} must be a table of field = value, got {value!r}")
    return value


def _tables(value, where):
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise params.ParameterError(f"{where} must be a list of tables such as [{{n_modules = 4}}], got {value!r}")
    return value


def parse(data: dict, name: str = "sweep") -> Sweep:
    """A :class:`Sweep` from the dict of a sweep file, checking every key, field and seed."""
    _table(data, name)
    _check_fields(data, FILE_KEYS, f"{name}: top-level key")
    if "section" not in data:
        raise params.ParameterError(f"{name}: the key 'section' is required (one of {list(SECTIONS)})")
    if data["section"] not in SECTIONS:
        raise params.ParameterError(f"{name}: section must be one of {list(SECTIONS)}, got {data['section']!r}")
    section = get(data["section"])
    experiment = data.get("experiment")
    if experiment is not None and experiment not in section.figures("paper"):
        raise params.ParameterError(
            f"{name}: experiment must be one of {list(section.figures('paper'))}, got {experiment!r}"
        )
    allowed = section.config.field_names()
    preset = data.get("preset", "paper")
    at = _table(data.get("at", {}), f"{name}: [at]")
    for p in (preset, *at):
        if p not in PRESET_NAMES:
            raise params.ParameterError(f"{name}: preset must be one of {list(PRESET_NAMES)}, got {p!r}")
    grid = _table(data.get("grid", {}), f"{name}: [grid]")
    for field, values in grid.items():
        if not isinstance(values, list) or not values:
            raise params.ParameterError(f"{name}: grid.{field} must be a non-empty list of values, got {values!r}")
    fixed = _table(data.get("fixed", {}), f"{name}: [fixed]")
    _check_fields(fixed, allowed, f"{name}: [fixed]")
    _check_fields(grid, allowed, f"{name}: [grid]")
    for p, fields in at.items():
        _check_fields(_table(fields, f"{name}: [at.{p}]"), allowed, f"{name}: [at.{p}]")
    for rule in _tables(data.get("exclude", []), f"{name}: exclude"):
        _check_fields(rule, allowed, f"{name}: exclude")
    for case in _tables(data.get("cases", []), f"{name}: [[cases]]"):
        _check_fields(case, allowed, f"{name}: [[cases]]")
    seeds = data.get("seeds")
    if seeds is not None:
        seeds = params.check_seeds(seeds, f"{name}: seeds")
    if not grid and not data.get("cases") and experiment is None:
        raise params.ParameterError(
            f"{name}: [grid] must list at least one field to vary (or give [[cases]] or an experiment); for one "
            "config use `compgen-cli run`"
        )
    return Sweep(
        name=name,
        section=data["section"],
        preset=preset,
        seeds=seeds,
        experiment=experiment,
        fixed=dict(fixed),
        at=dict(at),
        grid=dict(grid),
        cases=tuple(data.get("cases", [])),
        exclude=tuple(data.get("exclude", [])),
        description=str(data.get("description", "")),
    )


def load(path) -> Sweep:
    """Read a sweep file (``.toml`` or ``.json``); every error names the file."""
    path = Path(path)
    if path.is_dir():
        raise params.ParameterError(f"{path} is a directory; give a sweep file such as {path}/<name>.toml")
    if not path.exists():
        raise params.ParameterError(f"{path}: no such sweep file")
    text = path.read_text()
    if path.suffix != ".json" and tomllib is None:
        raise params.ParameterError(
            f"reading the TOML sweep file {path} needs Python >= 3.11 (tomllib); "
            "on Python 3.10 write it as JSON with the same keys"
        )
    try:
        data = json.loads(text) if path.suffix == ".json" else tomllib.loads(text)
    except (json.JSONDecodeError, ValueError) as error:  # tomllib.TOMLDecodeError is a ValueError
        raise params.ParameterError(
            f"{path}: not valid {'JSON' if path.suffix == '.json' else 'TOML'}: {error}"
        ) from None
    return parse(data, name=str(path))


def grid_points(sweep: Sweep, preset: str, overrides: dict | None = None) -> list:
    """``(label, fields)`` of every (case, grid point) not excluded, in file order. Fields apply in the order:
    ``fixed``, ``at.<preset>``, the case, the grid point, ``seeds``, ``overrides``."""
    points, names, used = [], list(sweep.grid), [False] * len(sweep.exclude)
    for case, values in itertools.product(sweep.cases or ({},), itertools.product(*(sweep.grid[n] for n in names))):
        combo = {**case, **dict(zip(names, values))}
        fields = {**sweep.fixed, **sweep.at.get(preset, {}), **combo}
        matches = [all(fields.get(k) == v for k, v in rule.items()) for rule in sweep.exclude]
        used = [u or m for u, m in zip(used, matches)]
        if any(matches):
            continue
        if sweep.seeds is not None:
            fields["seeds"] = sweep.seeds
        fields = {k: _tuples(v) for k, v in {**fields, **(overrides or {})}.items()}
        points.append((", ".join(f"{k}={v}" for k, v in combo.items()) or sweep.section, fields))
    unused = [rule for rule, u in zip(sweep.exclude, used) if not u]
    if unused:
        raise params.ParameterError(
            f"{sweep.name}: exclude rule {unused[0]} matches no grid point (at preset {preset}); a misspelt value "
            "would otherwise exclude nothing"
        )
    if not points:
        raise params.ParameterError(f"{sweep.name}: exclude leaves out every grid point: nothing to train")
    return points


def expand(sweep: Sweep, preset: str | None = None, overrides: dict | None = None) -> list:
    """The :class:`Point` of every grid point (:func:`grid_points`), with its config (built by
    :func:`compgen.section.make_config` or the experiment) or the error that prevented one; duplicates dropped."""
    section = get(sweep.section)
    preset = preset or sweep.preset
    if preset not in PRESET_NAMES:
        raise params.ParameterError(f"preset must be one of {list(PRESET_NAMES)}, got {preset!r}")
    _check_fields(overrides or {}, section.config.field_names(), "--set")
    points, seen = [], set()
    for label, fields in grid_points(sweep, preset, overrides):
        try:
            if sweep.experiment is not None:
                configs = figure_configs(section, sweep.experiment, preset, **fields)
            else:
                model = fields.pop("model", None)
                configs = [make_config(section, preset, model, **fields)]
        except (TypeError, ValueError) as error:
            points.append(Point(label, error=f"{sweep.name}: {label}: {error}"))
            continue
        for i, config in enumerate(configs):
            if config not in seen:
                seen.add(config)
                points.append(Point(label if len(configs) == 1 else f"{label} #{i}", config))
    return points


# --------------------------------------------------------------------------------------------- running


def run_sweep(
    sweep,
    backend: str = "local",
    preset: str | None = None,
    overrides: dict | None = None,
    force: bool = False,
    checkpoint_every: int | None = None,
    log=print,
    ray_address: str | None = None,
    ray_gpus: float = 0,
    ray_cpus: float = 1,
    store=None,
    keep_going: bool = False,
) -> Report:
    """Train every run of ``sweep`` (a :class:`Sweep` or a path) not yet in ``store`` (default
    :meth:`compgen.results.Store.default`) with ``backend`` (:func:`compgen.dispatch.train_or_load`).

    Every grid point is built first: if one cannot be, nothing is trained and a :class:`compgen.params.ParameterError`
    names it (with ``keep_going`` the valid points are trained and the invalid ones reported). Returns a
    :class:`Report`; failures (a config that cannot be built, a run that raises) are collected there and logged.
    """
    if backend not in BACKENDS:
        raise params.ParameterError(f"backend must be one of {BACKENDS}, got {backend!r}")
    dispatch.check_environment()
    runner.checkpoint_interval(checkpoint_every)
    store = results.Store.default() if store is None else store
    sweep = load(sweep) if isinstance(sweep, (str, Path)) else sweep
    section = get(sweep.section)
    report, todo = Report(), []
    points = expand(sweep, preset, overrides)
    invalid = [p for p in points if p.config is None]
    if invalid and not keep_going:
        raise params.ParameterError(
            f"{len(invalid)} of {len(points)} grid points cannot be built, so nothing is trained (first: "
            f"{invalid[0].error}); fix them, or pass --keep-going to train the valid ones"
        )
    for point in points:
        if point.config is None:
            report.failed.append((point.label, point.error))
            log(f"[sweep] FAILED {point.label}: {point.error}")
        elif not force and store.load(section, point.config, log=log) is not None:
            report.stored.append(point.config)
        else:
            todo.append(point)
    log(
        f"[sweep] {sweep.name}: {len(todo)} config(s) to train with backend {backend!r}, "
        f"{len(report.stored)} already stored"
    )
    failures = {}
    ray_options = {"address": ray_address, "num_gpus": ray_gpus, "num_cpus": ray_cpus}
    dispatch.train_or_load(
        section,
        [p.config for p in todo],
        store,
        backend,
        force=force,
        checkpoint_every=checkpoint_every,
        log=log,
        failures=failures,
        ray_options=ray_options,
    )
    for p in todo:
        if p.config in failures:
            report.failed.append((p.label, failures[p.config]))
        else:
            report.trained.append(p.config)
    log("[sweep] " + report.summary())
    return report


def main(args, overrides) -> int:
    """``compgen-cli sweep``: exit status 0 if every run is stored, 1 if any failed, 2 for a bad file or option."""
    try:
        if args.backend not in BACKENDS:
            raise params.ParameterError(f"--backend must be one of {BACKENDS}, got {args.backend!r}")
        sweep = load(args.file)
        if args.dry_run:
            section = get(sweep.section)
            points = expand(sweep, args.preset, overrides)
            for p in points:
                status = (
                    ("FAILED " + p.error)
                    if p.config is None
                    else ("stored" if runner.load(section, p.config, log=lambda _: None) is not None else "to train")
                )
                print(f"{p.label}: {status}")
            configs = [p.config for p in points if p.config is not None]
            failed = len(points) - len(configs)
            print(
                f"{len(configs)} config(s), {sum(len(c.seeds) for c in configs)} runs"
                + (f"; {failed} invalid" if failed else "")
            )
            return 1 if failed else 0
        report = run_sweep(
            sweep,
            args.backend,
            args.preset,
            overrides,
            args.force,
            args.checkpoint_every,
            ray_address=args.ray_address,
            ray_gpus=args.ray_gpus,
            keep_going=args.keep_going,
        )
    except params.ParameterError as error:
        print(f"error: {error}", file=sys.stderr)
        raise SystemExit(2) from None
    return 1 if report.failed else 0
