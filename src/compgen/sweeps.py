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
error names the file, the key or field and what is allowed. A sweep file is at most :data:`MAX_FILE_BYTES` of UTF-8
text nested at most :data:`MAX_DEPTH` deep, and its grid has at most :data:`MAX_POINTS` points (cases x the grid's
product, before ``exclude``; the paper's largest sweep, ``theory/overparam``, has 200), with at most
:data:`MAX_EXCLUDE` exclude rules: a larger one is refused in one line before anything is built (split it into several
files). A dry run (``--dry-run``) prints each point as soon as its config is built.

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
import math
import sys
from pathlib import Path

from compgen import backends, devices, dispatch, params, results, runner, storage
from compgen.backends import ray as ray_backend
from compgen.catalog import SECTIONS, get
from compgen.section import PRESET_NAMES, figure_configs, make_config

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: sweep files must then be JSON
    tomllib = None

BACKENDS = ("local", "devices", "ray")  # the command line's --backend of a sweep
FILE_KEYS = ("section", "preset", "seeds", "experiment", "fixed", "at", "cases", "grid", "exclude", "description")
MAX_POINTS = 10_000  # grid points of one sweep file: 50x the paper's largest (theory/overparam, 200 points)
MAX_EXCLUDE = 100  # exclude rules (the paper's sweeps have at most 3)
MAX_FILE_BYTES = 1_000_000  # a sweep file's size (the paper's are under 2 kB)
MAX_DEPTH = 10  # nesting of tables and lists (the paper's files nest 4 deep: the file, [at], [at.paper], a list)


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
        raise params.ParameterError(f"{where}: unknown field(s) {params._short(unknown)}; allowed: {sorted(allowed)}")


def _table(value, where):
    if not isinstance(value, dict):
        raise params.ParameterError(f"{where} must be a table of field = value, got {params._short(value)}")
    return value


def _tables(value, where):
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise params.ParameterError(
            f"{where} must be a list of tables such as [{{n_modules = 4}}], got {params._short(value)}"
        )
    return value


def parse(data: dict, name: str = "sweep") -> Sweep:
    """A :class:`Sweep` from the dict of a sweep file, checking every key, field and seed, its nesting
    (:data:`MAX_DEPTH`) and its size (:data:`MAX_POINTS`, :data:`MAX_EXCLUDE`)."""
    section, experiment = _header(data, name)
    preset, at = _presets(data, name)
    grid, fixed, exclude, cases = _fields(data, name, section.config.field_names(), at)
    _check_size(name, grid, cases)
    seeds = data.get("seeds")
    if seeds is not None:
        seeds = params.check_seeds(seeds, f"{name}: seeds")
    if not grid and not cases and experiment is None:
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
        cases=tuple(cases),
        exclude=tuple(exclude),
        description=str(data.get("description", "")),
    )


def _header(data, name: str) -> tuple:
    """The sweep's section and experiment (or ``None``), its nesting, top-level keys and section checked."""
    if _depth(data) > MAX_DEPTH:
        raise params.ParameterError(
            f"{name}: not a sweep file: its tables and lists nest more than {MAX_DEPTH} deep (the paper's sweep "
            "files nest 4 deep, see sweeps/README.md)"
        )
    _table(data, name)
    _check_fields(data, FILE_KEYS, f"{name}: top-level key")
    if "section" not in data:
        raise params.ParameterError(f"{name}: the key 'section' is required (one of {list(SECTIONS)})")
    if not isinstance(data["section"], str) or data["section"] not in SECTIONS:
        raise params.ParameterError(
            f"{name}: section must be one of {list(SECTIONS)}, got {params._short(data['section'])}"
        )
    section = get(data["section"])
    experiment = data.get("experiment")
    if experiment is not None and (not isinstance(experiment, str) or experiment not in section.figures("paper")):
        raise params.ParameterError(
            f"{name}: experiment must be one of {list(section.figures('paper'))}, got {params._short(experiment)}"
        )
    return section, experiment


def _presets(data, name: str) -> tuple:
    """The sweep's preset and its ``[at.<preset>]`` tables, each preset checked."""
    preset = data.get("preset", "paper")
    at = _table(data.get("at", {}), f"{name}: [at]")
    for p in (preset, *at):
        if not isinstance(p, str) or p not in PRESET_NAMES:
            raise params.ParameterError(f"{name}: preset must be one of {list(PRESET_NAMES)}, got {params._short(p)}")
    return preset, at


def _fields(data, name: str, allowed, at) -> tuple:
    """``(grid, fixed, exclude, cases)`` of the sweep, every field they and ``at`` name one of ``allowed``."""
    grid = _table(data.get("grid", {}), f"{name}: [grid]")
    for field, values in grid.items():
        if not isinstance(values, list) or not values:
            raise params.ParameterError(
                f"{name}: grid.{field} must be a non-empty list of values, got {params._short(values)}"
            )
    fixed = _table(data.get("fixed", {}), f"{name}: [fixed]")
    _check_fields(fixed, allowed, f"{name}: [fixed]")
    _check_fields(grid, allowed, f"{name}: [grid]")
    for p, fields in at.items():
        _check_fields(_table(fields, f"{name}: [at.{p}]"), allowed, f"{name}: [at.{p}]")
    exclude = _tables(data.get("exclude", []), f"{name}: exclude")
    for rule in exclude:
        _check_fields(rule, allowed, f"{name}: exclude")
    if len(exclude) > MAX_EXCLUDE:
        raise params.ParameterError(
            f"{name}: {len(exclude)} exclude rules; a sweep may have at most {MAX_EXCLUDE} (the paper's have 3 at most)"
        )
    cases = _tables(data.get("cases", []), f"{name}: [[cases]]")
    for case in cases:
        _check_fields(case, allowed, f"{name}: [[cases]]")
    return grid, fixed, exclude, cases


def _check_size(name: str, grid, cases) -> None:
    """Refuse a sweep of more than :data:`MAX_POINTS` grid points."""
    size = max(1, len(cases)) * math.prod(len(values) for values in grid.values())
    if size > MAX_POINTS:
        axes = " x ".join([*([f"{len(cases)} cases"] if cases else []), *(f"{len(v)} {f}" for f, v in grid.items())])
        raise params.ParameterError(
            f"{name}: the grid has {size:,} points ({axes}); a sweep may have at most {MAX_POINTS:,} (50x the paper's "
            "largest, theory/overparam with 200): split it into several files"
        )


def load(path) -> Sweep:
    """Read a sweep file (``.toml`` or ``.json``); every error names the file."""
    path = Path(path)
    if path.is_dir():
        raise params.ParameterError(f"{path} is a directory; give a sweep file such as {path}/<name>.toml")
    if not path.exists():
        raise params.ParameterError(f"{path}: no such sweep file")
    if not path.is_file():
        raise params.ParameterError(f"{path} is not a regular file (a pipe or a device?); give a sweep file")
    kind = "JSON" if path.suffix == ".json" else "TOML"
    try:
        raw = storage.read_bytes(path, MAX_FILE_BYTES)
    except storage.NotAFile as error:
        if "bytes" in str(error):
            raise params.ParameterError(
                f"{path}: not a sweep file: larger than {MAX_FILE_BYTES:,} bytes (the paper's sweep files are under "
                "2 kB)"
            ) from None
        raise params.ParameterError(f"{path} is not a regular file (a pipe or a device?); give a sweep file") from None
    except OSError as error:
        raise params.ParameterError(f"{path}: cannot read it: {error.strerror or error}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise params.ParameterError(f"{path}: not {kind} text (not UTF-8 at byte {error.start})") from None
    if kind == "TOML" and tomllib is None:
        raise params.ParameterError(
            f"reading the TOML sweep file {path} needs Python >= 3.11 (tomllib); "
            "on Python 3.10 write it as JSON with the same keys"
        )
    try:
        data = json.loads(text) if kind == "JSON" else tomllib.loads(text)
    except RecursionError:
        raise params.ParameterError(
            f"{path}: not a sweep file: its tables and lists nest too deep for the {kind} reader (a sweep file nests "
            f"at most {MAX_DEPTH} deep)"
        ) from None
    except (json.JSONDecodeError, ValueError) as error:  # tomllib.TOMLDecodeError is a ValueError
        raise params.ParameterError(f"{path}: not valid {kind}: {params._short(str(error), 300)}") from None
    return parse(data, name=str(path))


def _depth(value) -> int:
    """How deep tables and lists nest in ``value`` (a scalar: 0), counted without recursion and up to just beyond
    :data:`MAX_DEPTH`."""
    deepest, stack = 0, [(value, 1)]
    while stack and deepest <= MAX_DEPTH:
        item, depth = stack.pop()
        if isinstance(item, (dict, list, tuple)):
            deepest = max(deepest, depth)
            stack.extend((x, depth + 1) for x in (item.values() if isinstance(item, dict) else item))
    return deepest


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
    return list(iter_points(sweep, preset, overrides))


def iter_points(sweep: Sweep, preset: str | None = None, overrides: dict | None = None):
    """:func:`expand` one point at a time: the preset, the overrides, the grid (:func:`grid_points`) and ``XLA_FLAGS``
    (building a config may start JAX's backend: :func:`compgen.devices.check_xla_flags`) are checked now, and each
    config is built as the iterator reaches it (a dry run prints the first at once)."""
    devices.check_xla_flags()
    section = get(sweep.section)
    preset = preset or sweep.preset
    if preset not in PRESET_NAMES:
        raise params.ParameterError(f"preset must be one of {list(PRESET_NAMES)}, got {params._short(preset)}")
    _check_fields(overrides or {}, section.config.field_names(), "--set")
    return _build(sweep, section, preset, grid_points(sweep, preset, overrides))


def _build(sweep, section, preset, grid):
    seen = set()
    for label, fields in grid:
        try:
            if sweep.experiment is not None:
                configs = figure_configs(section, sweep.experiment, preset, **fields)
            else:
                model = fields.pop("model", None)
                configs = [make_config(section, preset, model, **fields)]
        except (TypeError, ValueError) as error:
            yield Point(label, error=f"{sweep.name}: {label}: {error}")
            continue
        for i, config in enumerate(configs):
            if config not in seen:
                seen.add(config)
                yield Point(label if len(configs) == 1 else f"{label} #{i}", config)


# --------------------------------------------------------------------------------------------- running


def run_sweep(sweep, backend=None, store=None, preset=None, overrides=None, force=False, keep_going=False, log=print):
    """Train every run of ``sweep`` (a :class:`Sweep` or a path) not yet in ``store`` (default
    :meth:`compgen.results.Store.default`) with ``backend`` (a :mod:`compgen.backends` value, default
    :class:`~compgen.backends.Local`; :func:`compgen.dispatch.train_or_load_each`).

    Every grid point is built first: if one cannot be, nothing is trained and a :class:`compgen.params.ParameterError`
    names it (with ``keep_going`` the valid points are trained and the invalid ones reported). Returns a
    :class:`Report`; failures (a config that cannot be built, a run that raises) are collected there and logged.
    """
    backend = backends.Local() if backend is None else backend
    if not isinstance(backend, (backends.Local, backends.Devices, backends.Ray)):
        raise params.ParameterError(
            f"backend must be one of Local(), Devices() or Ray(...) (compgen.backends), got {params._short(backend)}"
        )
    dispatch.check_environment()
    runner.checkpoint_interval(backend.checkpoint_every)
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
    log(f"[sweep] {sweep.name}: {len(todo)} config(s) to train with {backend}, {len(report.stored)} already stored")
    _, failures = dispatch.train_or_load_each(section, [p.config for p in todo], store, backend, force, log)
    for p in todo:
        if p.config in failures:
            report.failed.append((p.label, failures[p.config]))
        else:
            report.trained.append(p.config)
    log("[sweep] " + report.summary())
    return report


def check_ray_options(address, gpus, cpus=1, names=("--ray-address", "--ray-gpus", "--ray-cpus")) -> None:
    """Refuse a bad Ray address or number of GPUs or CPUs per task (:func:`compgen.backends.ray.check_resource`) in
    one line naming the option (``names``), before anything is read, built or started."""
    ray_backend.check_address(names[0], address)
    ray_backend.check_resource(names[1], gpus)
    ray_backend.check_resource(names[2], cpus)


def dry_run(sweep, preset=None, overrides=None, out=print) -> int:
    """List every point of ``sweep`` as its config is built (``out`` gets one line per point, at once) and whether
    it is stored, then the totals; 0 if every point has a config, else 1."""
    section = get(sweep.section)
    configs = runs = failed = 0
    for p in iter_points(sweep, preset, overrides):
        if p.config is None:
            failed += 1
            status = "FAILED " + p.error
        else:
            configs, runs = configs + 1, runs + len(p.config.seeds)
            status = "stored" if runner.load(section, p.config, log=lambda _: None) is not None else "to train"
        out(f"{p.label}: {status}")
    out(f"{configs} config(s), {runs} runs" + (f"; {failed} invalid" if failed else ""))
    return 1 if failed else 0


def main(args, overrides) -> int:
    """``compgen-cli sweep``: exit status 0 if every run is stored, 1 if any failed, 2 for a bad file, option or
    environment variable (one line, before anything is built, started or trained)."""
    try:
        if args.backend not in BACKENDS:
            raise params.ParameterError(f"--backend must be one of {BACKENDS}, got {params._short(args.backend)}")
        check_ray_options(args.ray_address, args.ray_gpus, args.ray_cpus)
        backend = backends.named(
            args.backend,
            args.checkpoint_every,
            ray_address=args.ray_address,
            ray_gpus=args.ray_gpus,
            ray_cpus=args.ray_cpus,
        )
        dispatch.check_environment()
        sweep = load(args.file)
        if args.dry_run:
            return dry_run(sweep, args.preset, overrides, out=lambda line: print(line, flush=True))
        report = run_sweep(sweep, backend, None, args.preset, overrides, args.force, args.keep_going)
    except params.ParameterError as error:
        print(f"error: {error}", file=sys.stderr)
        raise SystemExit(2) from None
    except RuntimeError as error:  # Ray could not start, a run was not found after training: said in one line
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 1 if report.failed else 0
