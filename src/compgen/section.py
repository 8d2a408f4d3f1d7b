"""A section of the book as a value: what it trains (:class:`Section`) and its named configurations (:class:`Preset`).

A section is a frozen :class:`Section`: its config class, its presets, and the pure functions that the
engine (:mod:`compgen.runner`) compiles - per-run arrays, initial state, one outer step, evaluation - plus a
progress line, a label and the FLOPs of one outer step. Its code fingerprint follows from its module's imports.

Presets are data. The config class's defaults are the paper's configuration of the section, and
``PRESETS["paper"].per_model`` each model's paper hyper-parameters (the paper preset sets nothing else). Every other
preset is a set of replacements over them: a config of ``model`` at ``preset`` is built (:func:`make_config`, the one
place configs are resolved; the config validates itself once, when constructed) from

    the class defaults, paper.per_model[model], preset.common, preset.per_model[model], the figure's grid, overrides.

A figure's configs are a :class:`Grid` expanded by :func:`figure_configs`: its models, times the cartesian
product of its ``axes`` (first axis outermost), times its ``cases`` (fields that vary together), each with
its ``fixed`` fields. Fields that the grid sets - its axes, cases and fixed fields - define the experiment and
cannot be overridden, except :data:`BUDGET_FIELDS` (which seeds, how many steps). ``model`` picks one of the figure's
models. Any other field may be overridden: the config then differs from the figure's, and so does its hash in the
results store.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import NamedTuple

import jax

from compgen import fingerprint, meta, params

PRESET_NAMES = ("smoke", "quick", "paper")
# Fields a figure's grid may set that a user may still override: they choose seeds and budget, not the experiment.
BUDGET_FIELDS = ("seeds", "outer_steps", "eval_every")


def _frozen(mapping):
    return MappingProxyType(dict(mapping or {}))


@dataclass(frozen=True)
class Grid:
    """The configs of one figure: ``models`` x product(``axes``) x ``cases``, each with ``fixed`` fields."""

    models: tuple = ()
    fixed: Mapping = dataclasses.field(default_factory=dict)
    axes: Mapping = dataclasses.field(default_factory=dict)
    cases: tuple = ()

    def __post_init__(self):
        object.__setattr__(self, "fixed", _frozen(self.fixed))
        object.__setattr__(self, "axes", _frozen({k: tuple(v) for k, v in dict(self.axes).items()}))
        object.__setattr__(self, "cases", tuple(_frozen(c) for c in self.cases))

    def points(self):
        """The field dicts of every point (models excluded), axes outermost, then cases."""
        names = list(self.axes)
        for values in itertools.product(*(self.axes[n] for n in names)):
            for case in self.cases or ({},):
                yield {**self.fixed, **dict(zip(names, values)), **case}

    def varied(self) -> dict:
        """{field: why} for the fields the grid sets (they cannot be overridden), :data:`BUDGET_FIELDS` apart."""
        out = {name: f"its fixed value {value!r}" for name, value in self.fixed.items()}
        out.update({name: f"the figure's axis {name}" for name in self.axes})
        for case in self.cases:
            out.update({name: "the figure's cases" for name in case})
        return {name: why for name, why in out.items() if name not in BUDGET_FIELDS}


@dataclass(frozen=True)
class Preset:
    """A named configuration: field overrides for every config, per model, and one :class:`Grid` per figure."""

    description: str
    common: Mapping = dataclasses.field(default_factory=dict)
    per_model: Mapping = dataclasses.field(default_factory=dict)
    figures: Mapping = dataclasses.field(default_factory=dict)

    def __post_init__(self):
        object.__setattr__(self, "common", _frozen(self.common))
        object.__setattr__(self, "per_model", _frozen({k: _frozen(v) for k, v in dict(self.per_model).items()}))
        object.__setattr__(self, "figures", _frozen(self.figures))


def model_table(columns: tuple, **rows: tuple) -> dict:
    """Per-model fields written as a table: ``model_table(("hidden", "lr"), anil=(512, 1e-3))`` gives
    ``{"anil": {"hidden": 512, "lr": 1e-3}}`` (a :class:`Preset`'s ``per_model``)."""
    for model, values in rows.items():
        if len(values) != len(columns):
            raise ValueError(f"model_table: {model} has {len(values)} values for the {len(columns)} columns {columns}")
    return {model: dict(zip(columns, values)) for model, values in rows.items()}


def compiler_options(cfg) -> dict | None:
    """XLA options for ``cfg``'s programs: its ``xla_opt_level`` (:func:`compgen.devices.resolve`), if set."""
    level = getattr(cfg, "xla_opt_level", None)
    return None if level is None else {"xla_backend_optimization_level": level}


_PROGRAMS: dict = {}  # (section, shape key, device ids) -> Program: this process's compiled programs


class Program(NamedTuple):
    """The compiled pieces that train the seeds of one config: ``init(runs) -> state``,
    ``steps(runs, state, n) -> (state, per-step metrics)`` (``n`` outer steps under one ``lax.scan``, ``n`` static)
    and ``evaluate(runs, state) -> metrics``; every array has a leading run (seed) axis."""

    init: Callable
    steps: Callable
    evaluate: Callable


@dataclass(frozen=True)
class Section:
    """One section of the book, as the engine drives it (see module docstring).

    * ``run_arrays(configs) -> runs``: per-run inputs (splits, evaluation tasks), stacked over (config, seed);
    * ``init(cfg, run) -> state``, ``outer_step(cfg, run, state, mesh=None) -> (state, metrics)`` (``mesh``: the
      devices its tasks are sharded over, if any) and ``evaluate(cfg, run, state) -> metrics``: one run;
      :meth:`program` vmaps them over runs and compiles them. The step's metrics hold ``streak``, the outer
      updates in a row that were non-finite and skipped (:func:`compgen.meta.outer_update`), from which the runner
      stops a diverged run;
    * ``progress(cfg, step_metrics, eval_metrics) -> str``: the progress line's tail;
    * ``label(cfg) -> str``: one line naming a config; ``flops_per_step(cfg) -> float``: analytic FLOPs of one outer
      step of one seed (the bench's GFLOP/s, the sharding rule; :meth:`cost` of a whole run schedules workers);
    * ``data_fields``: the fields that enter only the per-run arrays (a split, masks, seeds): configs that
      differ only there share one compiled program;
    * ``models``: the learners in the paper's order (empty for a section without a model field);
    * ``base_fields(preset, model, overrides) -> dict``: fields taken over from another section (in-context
      learners share the task stream of the section they run on);
    * ``keep_params``: store each run's final meta-parameters too;
    * ``learner_code(cfg) -> str | None``: what ``cfg``'s learner computes where it is defined outside the library
      (:func:`compgen.models.code_of`), which joins the fingerprint of its runs.
    """

    name: str
    config: type
    presets: Mapping
    run_arrays: Callable
    init: Callable
    outer_step: Callable
    evaluate: Callable
    progress: Callable
    label: Callable
    flops_per_step: Callable
    data_fields: tuple = ("seeds",)
    models: tuple = ()
    base_fields: Callable | None = None
    keep_params: bool = False
    experiment_fields: tuple = ("seeds",)  # fields that pick an experiment, never "differences from the paper"
    learner_code: Callable | None = None  # cfg -> what its learner computes, where defined outside the library, or None

    def __post_init__(self):
        if self.presets["paper"].common:  # one source for the paper's values
            raise ValueError(f"{self.name}: the paper's common settings belong in the config class's defaults")

    @property
    def module(self) -> str:
        """The module that defines the section (its code fingerprint starts there)."""
        return self.config.__module__

    @property
    def fingerprint(self) -> str:
        """The hash of the code the section's numbers can depend on: its module's import closure
        (:func:`compgen.fingerprint.of_section`), computed once per process."""
        return fingerprint.of_section(self.module)

    def fingerprint_of(self, cfg) -> str:
        """The fingerprint ``cfg``'s run is stored under: :attr:`fingerprint`, joined by what its learner computes
        where the learner is defined outside the library (editing a user's learner retrains its runs and no other)."""
        code = self.learner_code(cfg) if self.learner_code and getattr(cfg, "model", None) is not None else None
        return self.fingerprint if code is None else fingerprint.joined(self.fingerprint, code)

    def configs(self, figure: str, preset: str = "quick", **overrides) -> list:
        """The configs of ``figure`` at ``preset`` (:func:`figure_configs`)."""
        return figure_configs(self, figure, preset, **overrides)

    def cost(self, cfg) -> float:
        """FLOPs of training every seed of ``cfg``: :attr:`flops_per_step` x outer steps x seeds."""
        return self.flops_per_step(cfg) * cfg.outer_steps * len(cfg.seeds)

    def shape_key(self, cfg) -> tuple:
        """The fields that shape ``cfg``'s program: all but :attr:`data_fields` (configs with the same key share
        one compiled program, their differences passed in as per-run arrays)."""
        return tuple((f.name, getattr(cfg, f.name)) for f in dataclasses.fields(cfg) if f.name not in self.data_fields)

    def program(self, cfg, mesh=None) -> Program:
        """The jitted :class:`Program` that trains every seed of ``cfg`` (its device knobs resolved,
        :func:`compgen.devices.resolve`), with each outer step's tasks sharded over ``mesh`` (a one-axis
        :class:`jax.sharding.Mesh`, or ``None``). Built from its arguments only: the same ``(cfg, mesh)`` gives
        the same program wherever it is built and called, and within a process the same object for every config
        of the same :meth:`shape_key` (built once)."""
        devices = None if mesh is None else tuple(d.id for d in mesh.devices.flat)
        key = (self.name, self.shape_key(cfg), devices)
        if key not in _PROGRAMS:
            _PROGRAMS[key] = self._build_program(cfg, mesh)
        return _PROGRAMS[key]

    def _build_program(self, cfg, mesh) -> Program:
        jit = functools.partial(jax.jit, compiler_options=compiler_options(cfg))

        def steps(runs, state, n):
            step_all = lambda s: jax.vmap(lambda r, x: self.outer_step(cfg, r, x, mesh))(runs, s)
            return meta.scan_steps(step_all, state, n)

        init = jit(lambda runs: jax.vmap(lambda r: self.init(cfg, r))(runs))
        evaluate = jit(lambda runs, state: jax.vmap(lambda r, s: self.evaluate(cfg, r, s))(runs, state))
        return Program(init, jit(steps, static_argnums=2), evaluate)

    def config_from_dict(self, values: dict):
        """The config whose fields are ``values`` (a dict read from JSON, where tuples came back as lists)."""
        return self.config(**{k: tuple(v) if isinstance(v, list) else v for k, v in values.items()})

    def preset(self, name: str) -> Preset:
        if name not in self.presets:
            names = tuple(n for n in PRESET_NAMES if n in self.presets)
            raise params.ParameterError(f"preset must be one of {names}, got {name!r}")
        return self.presets[name]

    def figures(self, preset: str = "quick") -> tuple:
        return tuple(self.preset(preset).figures)


# The longest a run may be estimated to take, and the estimate: its analytic FLOPs (Section.cost) at the rate these
# learners sustain on one H100, plus a floor per outer step (a step of any size costs at least a dispatch). The
# paper's costliest run (hyperteacher Fig. 3F, 2.5e18 FLOP) comes to about 27 hours; beyond the limit a config is
# refused before anything compiles: it cannot finish (outer_steps=10^12 at any size).
MAX_RUN_DAYS = 60
SUSTAINED_FLOPS = 25e12
STEP_FLOOR_S = 50e-6


def run_days(section: Section, cfg) -> float:
    """The estimated days of training ``cfg`` on one H100 (see :data:`MAX_RUN_DAYS`)."""
    return (float(section.cost(cfg)) / SUSTAINED_FLOPS + cfg.outer_steps * STEP_FLOOR_S) / 86400


def check_budget(section: Section, cfg) -> None:
    """Refuse a config whose run is estimated to take more than :data:`MAX_RUN_DAYS`, with the estimate."""
    days = run_days(section, cfg)
    if days <= MAX_RUN_DAYS:
        return
    when = f"{days / 365:.3g} years" if days > 365 else f"{days:.3g} days"
    raise params.ParameterError(
        f"{section.name}: this config cannot finish: about {when} on one H100 ({float(section.cost(cfg)):.2g} FLOP "
        f"over {cfg.outer_steps:,} outer steps), more than the {MAX_RUN_DAYS} days allowed (the paper's longest run "
        "takes about a day); lower outer_steps, the sizes or the number of seeds"
    )


def make_config(section: Section, preset: str = "quick", model: str | None = None, **overrides):
    """The config of ``model`` (None: the section's first model, or a section without models) at ``preset``."""
    p, paper = section.preset(preset), section.presets["paper"]
    if section.models:  # a learner outside the section's own (a user's) is checked by the config
        model = section.models[0] if model is None else model
    params.check_overrides(section.config, {k: v for k, v in overrides.items() if k != "model"}, "override")
    fields = dict(section.base_fields(preset, model, overrides)) if section.base_fields else {}
    fields.update(paper.per_model.get(model, {}))
    if preset != "paper":
        fields.update(p.common)
        fields.update(p.per_model.get(model, {}))
    fields.update(overrides)
    if section.models:
        fields["model"] = model
    config = section.config(**fields)
    check_budget(section, config)
    return config


def figure_configs(section: Section, figure: str, preset: str = "quick", models=None, **overrides) -> list:
    """The configs of ``figure`` at ``preset`` (see module docstring), in grid order. ``models`` replaces the
    figure's models: each is built at every point of the grid with its own preset settings, also a model the preset's
    figure leaves out (a probe of it). ``model`` among the overrides picks one of the figure's models, or a learner
    outside the section's own (a user's, :mod:`compgen.models.learners`), built at every point of the grid."""
    grid = section.preset(preset).figures.get(figure)
    if grid is None:
        raise params.ParameterError(f"experiment must be one of {section.figures(preset)}, got {figure!r}")
    chosen = models if models is not None else grid.models or (section.models[:1] if section.models else (None,))
    if section.models and "model" in overrides:  # picks one of the figure's models
        model = overrides.pop("model")
        if model not in chosen and model in section.models:
            raise params.ParameterError(
                f"{section.name} {figure}: model must be one of the experiment's models {tuple(chosen)}, got {model!r}"
            )
        chosen = (model,)
    params.check_overrides(
        section.config,
        overrides,
        f"{section.name} {figure}",
        fixed={k: f"experiment {figure} ({why})" for k, why in grid.varied().items()},
    )
    configs = []
    for model in chosen:
        for point in grid.points():
            config = make_config(section, preset, model, **{**point, **overrides})
            if config not in configs:
                configs.append(config)
    return configs


def differences_from_paper(section: Section, cfg, experiment_fields=()):
    """``(field, value, paper value)`` for each field of ``cfg`` that differs from the paper's configuration of the
    same model, leaving out the fields that pick the experiment (the section's and ``experiment_fields``)."""
    model = getattr(cfg, "model", None)
    skip = {*section.experiment_fields, *experiment_fields, "model"}
    kept = {f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg) if f.name in skip and f.name != "model"}
    paper = make_config(section, "paper", model, **kept)
    return [
        (f.name, getattr(cfg, f.name), getattr(paper, f.name))
        for f in dataclasses.fields(cfg)
        if f.name not in skip and getattr(cfg, f.name) != getattr(paper, f.name)
    ]
