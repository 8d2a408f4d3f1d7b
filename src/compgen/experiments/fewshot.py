"""Few-shot meta-learning experiments over a task environment (spec §5.1), shared by the grid worlds.

A section supplies an :class:`Environment` (how to draw training tasks, turn a task into support and
query data, score predictions) and a config derived from :class:`FewshotConfig` (the model and the
bilevel optimisation). This module turns the pair into the per-run ``init_run``/``outer_step``/
``evaluate_run`` that :func:`compgen.experiments.compile_runs` vmaps over seeds and configs.

Per outer step a run draws ``meta_batch`` training tasks and their data inside the compiled step,
adapts each task's fast parameters with ``inner_steps`` steps of inner AdamW on the support set,
and takes a clipped outer AdamW step on the exact second-order meta-gradient of the query loss;
non-finite updates are skipped and counted. Evaluation adapts in the same way on fixed task sets.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Callable, ClassVar

import jax
import jax.numpy as jnp
import numpy as np
import optax

from compgen import meta, models
from compgen.models import hypernetwork

OUTER_SCHEDULES = ("constant", "warmup_cosine")
PRESET_NAMES = ("smoke", "quick", "paper")


@dataclass(frozen=True)
class Environment:
    """What a few-shot section supplies; every function is jittable and describes one run.

    * ``sample_tasks(cfg, run, key, num)`` -> ``num`` training tasks (a pytree with leading axis ``num``);
    * ``task_data(cfg, run, task, key, n_query)`` -> ``(support, query)``, each ``(x (N, n_in), target)``;
    * ``loss(prediction, target)`` -> scalar (inner and outer loss);
    * ``metrics(prediction, target, n_query)`` -> dict of scalars reported beside the loss (may be empty).
    """

    sample_tasks: Callable
    task_data: Callable
    loss: Callable
    metrics: Callable = lambda prediction, target, n_query: {}


@dataclass(frozen=True)
class FewshotConfig:
    """The model and the bilevel optimisation; a section's config adds its environment's fields.

    ``n_in``/``n_out`` are class attributes of the section's config.
    """

    n_in: ClassVar[int] = 0
    n_out: ClassVar[int] = 0

    model: str = "hnet_linear"
    hidden: int = 64
    num_hidden: int = 3
    templates: int = 32  # T, the hypernetworks' number of modules
    inner_steps: int = 10
    inner_batch: int | None = None  # None: the whole support set every inner step
    remat: bool = True  # recompute inner steps in the meta-backward: about half the memory (meta.inner_adapt)
    inner_lr: float = 0.1
    inner_weight_decay: float = 1e-4
    gradient: str = "second_order"
    outer_steps: int = 100_000
    meta_batch: int = 128
    outer_lr: float = 3e-4
    outer_schedule: str = "constant"
    warmup_steps: int = 0
    clip_norm: float = 1.0
    outer_weight_decay: float = 1e-2
    eval_every: int = 1000
    eval_tasks: int = 1024
    eval_chunk: int = 64  # tasks adapted at once during evaluation (memory only)
    seeds: tuple = (2020, 2021, 2022)

    def __post_init__(self):
        if self.model not in models.MODEL_NAMES:
            raise ValueError(f"model must be one of {models.MODEL_NAMES}, got {self.model!r}")
        for name in ("hidden", "num_hidden", "templates", "inner_steps", "outer_steps", "meta_batch", "eval_every",
                     "eval_tasks", "eval_chunk"):
            check_positive_int(name, getattr(self, name))
        for name in ("inner_lr", "outer_lr", "clip_norm"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)!r}")
        for name in ("inner_weight_decay", "outer_weight_decay", "warmup_steps"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)!r}")
        if self.inner_batch is not None:
            check_positive_int("inner_batch", self.inner_batch, "None (full batch) or ")
        if self.gradient not in meta.GRADIENT_MODES:
            raise ValueError(f"gradient must be one of {meta.GRADIENT_MODES}, got {self.gradient!r}")
        if self.outer_schedule not in OUTER_SCHEDULES:
            raise ValueError(f"outer_schedule must be one of {OUTER_SCHEDULES}, got {self.outer_schedule!r}")
        if self.model.startswith("hnet") and self.num_hidden < 2:
            raise ValueError(f"num_hidden must be >= 2 for a hypernetwork, got {self.num_hidden}")
        if not self.seeds:
            raise ValueError("seeds must name at least one seed")
        object.__setattr__(self, "seeds", tuple(int(s) for s in self.seeds))

    def build_model(self) -> models.Model:
        return models.make_model(self.model, self.n_in, self.n_out, self.hidden, self.num_hidden, self.templates)


def check_positive_int(name, value, allowed=""):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be {allowed}a positive integer, got {value!r}")


def make_config(config_class, model_defaults, presets, preset, model, **overrides):
    """A section's config of ``model`` at ``preset``: the paper's values for the model, the preset's common
    overrides, its per-model overrides, then ``overrides``."""
    if preset not in presets:
        raise ValueError(f"preset must be one of {tuple(presets)}, got {preset!r}")
    if model not in model_defaults:
        raise ValueError(f"model must be one of {tuple(model_defaults)}, got {model!r}")
    p = presets[preset]
    return config_class(model=model, **{**model_defaults[model], **p["common"], **p["per_model"].get(model, {}),
                                        **overrides})


# Fields that change memory use only, not the numbers: never listed as differences from the paper.
MEMORY_ONLY = ("remat", "eval_chunk")


def differences_from_paper(cfg, model_defaults, per_experiment=("split", "seeds")):
    """``(field, value, paper value)`` for each field of ``cfg`` that differs from the paper's config of its model
    (fields in ``per_experiment`` and :data:`MEMORY_ONLY` left out)."""
    paper = type(cfg)(model=cfg.model, **model_defaults[cfg.model])
    skip = set(per_experiment) | set(MEMORY_ONLY)
    return [(f.name, getattr(cfg, f.name), getattr(paper, f.name)) for f in dataclasses.fields(cfg)
            if f.name not in skip and getattr(cfg, f.name) != getattr(paper, f.name)]


# --------------------------------------------------------------------------------------------- one run


def inner_optimizer(cfg):
    return meta.inner_optimizer(cfg.inner_lr, cfg.inner_weight_decay)


def outer_optimizer(cfg):
    lr = cfg.outer_lr
    if cfg.outer_schedule == "warmup_cosine":
        lr = optax.warmup_cosine_decay_schedule(0.0, cfg.outer_lr, max(cfg.warmup_steps, 1), cfg.outer_steps,
                                                end_value=0.05 * cfg.outer_lr)
    return meta.outer_optimizer(lr, cfg.clip_norm, cfg.outer_weight_decay)


def init_run(cfg, run):
    """Meta-parameters from ``fold_in(seed_key, 1)``, outer AdamW state, training key ``split(seed_key, 4)[0]``."""
    params = cfg.build_model().init(jax.random.fold_in(run["seed_key"], 1))
    return {"meta": params, "opt_state": outer_optimizer(cfg).init(params),
            "key": jax.random.split(run["seed_key"], 4)[0]}


def adapted_task(env: Environment, cfg, model, params, run, task, key, n_query):
    """Adapt on one task's support set; ``(query loss, (metrics, fast))``, differentiable in ``params``."""
    k_data, k_inner = jax.random.split(key)
    support_set, query_set = env.task_data(cfg, run, task, k_data, n_query)
    loss, (fast, prediction) = meta.fewshot_loss(model, params, support_set, query_set, env.loss,
                                                 inner_optimizer(cfg), cfg.inner_steps, k_inner, cfg.inner_batch,
                                                 cfg.gradient, remat=cfg.remat)
    return loss, (env.metrics(prediction, query_set[1], n_query), fast, support_set)


def outer_step(env: Environment, cfg, run, state):
    """One outer step of one run: draw tasks, adapt, meta-gradient, clipped AdamW (non-finite skipped)."""
    model = cfg.build_model()
    key, k_tasks, k_data = jax.random.split(state["key"], 3)
    tasks = env.sample_tasks(cfg, run, k_tasks, cfg.meta_batch)

    def one_task(params, task, k):
        loss, (m, _, _) = adapted_task(env, cfg, model, params, run, task, k, cfg.shots_query)
        return loss, m

    (loss, task_metrics), grads = meta.mean_over_tasks(one_task, state["meta"], tasks,
                                                       jax.random.split(k_data, cfg.meta_batch))
    updates, opt_state = outer_optimizer(cfg).update(grads, state["opt_state"], state["meta"])
    step_metrics = {"loss": loss, "grad_norm": optax.tree.norm(grads), "skipped": opt_state.total_notfinite,
                    **task_metrics}
    return {**state, "meta": optax.apply_updates(state["meta"], updates), "opt_state": opt_state,
            "key": key}, step_metrics


def evaluate_run(env: Environment, cfg, run, state):
    """Metrics of one run on its fixed evaluation sets ``run["eval_tasks"]`` (n_sets, eval_tasks, ...).

    Per set: query loss, the environment's metrics, and the support loss before and after adaptation,
    each averaged over the set's tasks: dict of (n_sets,) arrays.
    """
    model = cfg.build_model()
    params = state["meta"]
    n_sets = jax.tree.leaves(run["eval_tasks"])[0].shape[0]
    keys = jax.random.split(jax.random.fold_in(run["seed_key"], 2), (n_sets, cfg.eval_tasks))

    def task_metrics(args):
        task, key = args
        loss, (m, fast, support_set) = adapted_task(env, cfg, model, params, run, task, key, cfg.eval_shots_query)
        support_loss = lambda f: env.loss(model.apply(params, f, support_set[0]), support_set[1])
        return {"loss": loss, **m, "inner_loss_init": support_loss(model.fast_init(params)),
                "inner_loss_final": support_loss(fast)}

    flat = jax.tree.map(lambda a: a.reshape((-1,) + a.shape[2:]), (run["eval_tasks"], keys))
    out = jax.lax.map(task_metrics, flat, batch_size=cfg.eval_chunk)
    return jax.tree.map(lambda v: v.reshape(n_sets, cfg.eval_tasks).mean(1), out)


# --------------------------------------------------------------------------------------------- cost


def make_train(env: Environment, configs, run_arrays, shape_key):
    """``(runs, init, chunk, evaluate)``: the compiled pieces that train every seed of same-shape ``configs``
    (see :func:`compgen.experiments.compile_runs`); ``run_arrays(configs)`` stacks the per-run inputs and
    ``shape_key(cfg)`` says which configs may share one program."""
    from compgen import experiments

    cfg = configs[0]
    experiments.check_group(configs, shape_key, "split and seeds")
    runs = run_arrays(configs)
    step = lambda c, r, s: outer_step(env, c, r, s)
    evaluate = lambda c, r, s: evaluate_run(env, c, r, s)
    return (runs,) + experiments.compile_runs(cfg, runs, init_run, step, evaluate)


def flops_per_step(cfg, support_points, query_points):
    """Analytic FLOPs of one outer step of one run (spec §7.1: backward = 2x forward, the meta-backward
    through the unroll = 2x the inner loop); ``*_points`` = data points per task."""
    sizes = [cfg.n_in] + [cfg.hidden] * cfg.num_hidden + [cfg.n_out]
    mlp_macs = sum(a * b for a, b in zip(sizes[:-1], sizes[1:]))
    generation, feature, head = 0, 0, mlp_macs
    if cfg.model.startswith("hnet"):
        width = cfg.templates if cfg.model == "hnet_linear" else hypernetwork.GENERATOR_WIDTH
        generation = width * sum(a * b + b for a, b in zip(sizes[:-1], sizes[1:]))
    if cfg.model == "anil":
        feature, head = mlp_macs - cfg.hidden * cfg.n_out, cfg.hidden * cfg.n_out
    batch = cfg.inner_batch or support_points
    inner = cfg.inner_steps * 3 * (batch * head + generation)
    per_task = 3 * inner + 3 * (support_points + query_points) * feature + 3 * (query_points * head + generation)
    return 2.0 * per_task * cfg.meta_batch
