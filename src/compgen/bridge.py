"""The scale bridge: configurations on the path from a figure's ``quick`` configs to the paper's, by their compute.

A **point** of the path is named by its multiple of the quick compute, ``bridge-x<N>`` (:func:`point_name`); it is a
preset like any other wherever configs are built through :func:`figure_configs`. Each config of a figure at ``quick``
has its **paper end**: the paper's configuration of the same learner and experiment (its section's
``experiment_fields`` kept; :func:`paper_end`). Every field in which the two ends differ moves with one parameter
``t`` (0 at quick, 1 at the paper) by the rule its kind takes (:func:`field_at`):

* a count or a rate with both ends positive moves **geometrically**, ``quick^(1-t) paper^t``, counts rounded to
  whole numbers (the outer steps to the quick config's number of evaluations, each :data:`STEP_GRAIN` steps times a
  whole number apart), rates to three significant digits;
* a count with one end at 0 (a warm-up) moves **linearly**;
* the evaluation (:data:`EVALUATION`: tasks, inputs, query shots) and every field that is not a number (a schedule,
  a sampler, a layout) **stay at quick's** value until the paper's end; so do the :data:`HELD` fields of a section
  (the grid world of the preferences: one discrete choice of layout, objects and colours, which a fraction of a step
  cannot move). At ``t = 1`` every field is the paper's.

``t`` is solved per config (:func:`point`) so that its training compute, its section's ``flops_per_step`` times its
outer steps, is the point's multiple of the quick config's, as near as the rounding allows (:func:`multiple`
gives the one reached). The path's far end is the paper's configuration and the multiple :func:`paper_multiple`.
"""

from __future__ import annotations

import dataclasses
import math
import re

from compgen import params, section

PREFIX = "bridge-x"
# Fields measured on, not trained with: the same evaluation at every point short of the paper's.
EVALUATION = ("eval_tasks", "eval_inputs", "eval_shots_query", "eval_every", "eval_chunk")
# Per section, fields held at quick's value until the paper's end, with the reason the chapter gives.
HELD = {
    "preferences": (
        ("n_modules", "n_colours", "n_objects", "layout", "horizon", "backups", "observation"),
        "the grid world is one discrete choice (its layout, objects, colours, horizon and observation together)",
    ),
}
STEP_GRAIN = 100  # outer steps between evaluations are a multiple of this: a chunk of steps divides them
DEVICE = ("xla_opt_level", "remat", "train_chunk", "fused_inner")  # the device's knobs: never moved


def point_name(multiple: int) -> str:
    """The preset name of the point at ``multiple`` times the quick compute: ``bridge-x4``."""
    return f"{PREFIX}{int(multiple)}"


def parse(preset: str) -> int | None:
    """The multiple a bridge point's name stands for, or ``None`` for any other preset."""
    found = re.fullmatch(rf"{PREFIX}([1-9]\d{{0,5}})", str(preset))
    return int(found.group(1)) if found else None


def paper_end(sec, cfg):
    """The paper's configuration of ``cfg``'s learner and experiment (the section's experiment fields kept)."""
    kept = {k: getattr(cfg, k) for k in sec.experiment_fields if hasattr(cfg, k) and k != "model"}
    return section.make_config(sec, "paper", getattr(cfg, "model", None), **kept)


def cost(sec, cfg) -> float:
    """Training FLOPs of one seed of ``cfg``: its section's ``flops_per_step`` times its outer steps."""
    return float(sec.flops_per_step(cfg)) * cfg.outer_steps


def paper_multiple(sec, cfg) -> float:
    """The paper's training compute in multiples of the quick config ``cfg``'s."""
    return cost(sec, paper_end(sec, cfg)) / cost(sec, cfg)


def moving(sec, quick, paper) -> dict:
    """``{field: rule}`` for every field in which ``quick`` and ``paper`` differ: "geometric", "linear" or "held"."""
    held = HELD.get(sec.name, ((), ""))[0]
    out = {}
    for f in dataclasses.fields(quick):
        a, b = getattr(quick, f.name), getattr(paper, f.name)
        if a == b or f.name in DEVICE:
            continue
        numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (a, b))
        if f.name in held or f.name in EVALUATION or not numbers:
            out[f.name] = "held"
        elif a > 0 and b > 0:
            out[f.name] = "geometric"
        else:
            out[f.name] = "linear"
    return out


def field_at(rule: str, a, b, t: float):
    """The value of a field going from ``a`` (quick) to ``b`` (paper) at ``t`` by ``rule`` (see module docstring)."""
    if t >= 1:
        return b
    if rule == "held" or t <= 0:
        return a
    value = a ** (1 - t) * b**t if rule == "geometric" else a + (b - a) * t
    if isinstance(a, int) and isinstance(b, int):
        return max(1, round(value)) if rule == "geometric" else round(value)
    return float(f"{value:.3g}")


def at(sec, quick, t: float):
    """``quick`` moved to ``t`` on its path to :func:`paper_end` (every field by its rule, :func:`moving`); the outer
    steps rounded to a multiple of :data:`STEP_GRAIN` per evaluation, as many evaluations as at quick."""
    paper = paper_end(sec, quick)
    if t >= 1:
        return paper
    rules = moving(sec, quick, paper)
    values = {name: field_at(rule, getattr(quick, name), getattr(paper, name), t) for name, rule in rules.items()}
    if "outer_steps" in values:
        grain = max(1, quick.outer_steps // quick.eval_every) * STEP_GRAIN
        values["outer_steps"] = max(grain, round(values["outer_steps"] / grain) * grain)
        values["eval_every"] = values["outer_steps"] * quick.eval_every // quick.outer_steps
        if "warmup_steps" in values:
            values["warmup_steps"] = min(values["warmup_steps"], values["outer_steps"] - 1)
    return dataclasses.replace(quick, **values)


def multiple(sec, quick, cfg) -> float:
    """``cfg``'s training compute in multiples of ``quick``'s."""
    return cost(sec, cfg) / cost(sec, quick)


def point(sec, quick, target: float):
    """The config on ``quick``'s path whose compute is nearest ``target`` times quick's (in ratio), found by bisection
    on ``t``; the paper's end where ``target`` reaches it. A target below 1 is a
    :class:`compgen.params.ParameterError`."""
    if target < 1:
        raise params.ParameterError(f"a bridge point's multiple must be at least 1, got {target}")
    if target == 1:
        return quick
    if target >= paper_multiple(sec, quick):
        return paper_end(sec, quick)
    low, high, goal = 0.0, 1.0, math.log(target)
    for _ in range(40):
        mid = (low + high) / 2
        if math.log(multiple(sec, quick, at(sec, quick, mid))) < goal:
            low = mid
        else:
            high = mid
    candidates = [at(sec, quick, low), at(sec, quick, high)]
    return min(candidates, key=lambda c: abs(math.log(multiple(sec, quick, c)) - goal))


def figure_configs(sec, figure: str, preset: str = "quick", **overrides) -> list:
    """The configs of ``figure`` at ``preset``: a bridge point (:func:`parse`) moves each of the figure's quick
    configs (with ``overrides``) to its multiple (:func:`point`); any other preset is
    :func:`compgen.section.figure_configs`."""
    target = parse(preset)
    if target is None:
        return section.figure_configs(sec, figure, preset, **overrides)
    return [point(sec, q, target) for q in section.figure_configs(sec, figure, "quick", **overrides)]
