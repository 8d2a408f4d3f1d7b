"""The few-shot core shared by the hyperteacher, the two grid worlds and the in-context learners (the paper's Alg. 2).

A section supplies an :class:`Environment` - how to draw training tasks, turn a task into support and query
data, score predictions and (optionally) the task latent a probe decodes - and a config derived from
:class:`MetaConfig`. :func:`make_section` turns the pair into a :class:`compgen.section.Section`.

Per outer step a run draws ``meta_batch`` training tasks and their data inside the compiled step, solves each
task from its support set - the paper's learners adapt their fast parameters by ``inner_steps`` of inner AdamW
(:func:`compgen.meta.fewshot_loss`), an in-context learner reads the support set in its forward pass - and
takes a clipped outer AdamW step on the query loss (the exact second-order meta-gradient through the inner
loop); non-finite updates are skipped and counted (:func:`compgen.meta.outer_step`). Evaluation solves the
fixed evaluation tasks of the run in the same way and, with ``probe``, fits a ridge decoder from each task's
representation (the adapted fast parameters, or the in-context learner's task code) to its latent on the
``test`` tasks and scores it on the ``ood`` tasks (paper §4.1).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.flatten_util import ravel_pytree

from compgen import devices, meta, metrics, models, params
from compgen.params import field, positive
from compgen.section import Section

OUTER_SCHEDULES = ("constant", "warmup_cosine")
MODELS = ("anil", "maml", "hnet_linear", "hnet_deepmlp")  # the paper's order (its tables' columns)
HNETS = ("hnet_linear", "hnet_deepmlp")
MODEL_LABELS = {name: models.label(name) for name in MODELS}
# Fields that change memory use and speed only, not the numbers (beyond float round-off): never listed as
# differences from the paper.
MEMORY_ONLY = ("remat", "eval_chunk", "train_chunk")


@dataclass(frozen=True)
class Environment:
    """What a few-shot section supplies; every function but ``run_arrays`` is jittable and describes one run.

    * ``run_arrays(cfg, seed) -> dict``: one run's inputs (host side): its training tasks, its evaluation
      tasks ``eval_tasks`` (n_sets, eval_tasks, ...) with ``eval_valid`` (n_sets,) and any world tables;
    * ``init_world(cfg, run) -> dict``: per-run world state computed once in the compiled program (the
      hyperteacher's teacher), passed to ``task_data``;
    * ``sample_tasks(cfg, run, key, num)`` -> ``num`` training tasks (leading axis ``num``);
    * ``task_data(cfg, run, world, task, key, n_query)`` -> ``(support, query)``, each ``(x (N, n_in), target)``;
    * ``loss(prediction, target)``; ``metrics(prediction, target, n_query) -> dict`` of scalars;
    * ``latent(cfg, task) -> (K,)``: what the probe decodes (None: no probe);
    * ``tokens(cfg, support) -> (x, y, mask | None)``: the support set as an in-context learner reads it;
    * ``loader_keys``: how many data-loader keys the authors split a seed's key into (the training key is the
      first); ``headline``: the name of the query accuracy among ``metrics`` (None: the world has none).
    """

    name: str
    run_arrays: Callable
    sample_tasks: Callable
    task_data: Callable
    loss: Callable
    metrics: Callable = lambda prediction, target, n_query: {}
    latent: Callable | None = None
    tokens: Callable | None = None
    init_world: Callable = lambda cfg, run: {}
    loader_keys: int = 4
    headline: str | None = None


@dataclass(frozen=True)
class MetaConfig(params.Config):
    """The outer loop, the evaluation and the probe; a section's config adds its learner and world fields."""

    outer_steps: int = positive(100_000)
    meta_batch: int = positive(128)
    outer_lr: float = field(3e-4, gt=0)
    outer_schedule: str = field("constant", choices=OUTER_SCHEDULES)
    warmup_steps: int = field(0, ge=0)
    clip_norm: float = field(1.0, gt=0)
    outer_weight_decay: float = field(1e-2, ge=0)
    eval_every: int = positive(1000)
    eval_tasks: int = positive(1024)
    eval_chunk: int = positive(64)  # tasks solved at once during evaluation (memory only)
    # tasks each device adapts at once per outer step; None: the device decides (compgen.devices.resolve and
    # train_chunk: 8 on a CPU at the paper's meta-batch, all at once elsewhere)
    train_chunk: int | None = field(None, ge=1)
    probe: bool = True
    ridge_lambda: float = field(1.0, gt=0)
    ridge_cg_iters: int | None = field(10, ge=1)
    seeds: tuple = (2020, 2021, 2022)
    xla_opt_level: int | None = field(None, ge=0, le=3)  # None: the device decides (compgen.devices.resolve)

    def check(self):
        if self.train_chunk is not None and self.meta_batch % self.train_chunk:
            raise params.ParameterError(
                f"train_chunk ({self.train_chunk}) must divide meta_batch ({self.meta_batch}), or be None (all at once)"
            )
        if self.outer_schedule == "constant" and self.warmup_steps:
            raise params.ParameterError(
                f"warmup_steps must be 0 with outer_schedule='constant' (only 'warmup_cosine' warms up), "
                f"got {self.warmup_steps}"
            )
        if self.outer_schedule == "warmup_cosine" and self.warmup_steps >= self.outer_steps:
            raise params.ParameterError(
                f"warmup_steps ({self.warmup_steps}) must be below outer_steps "
                f"({self.outer_steps}) with outer_schedule='warmup_cosine'"
            )


@dataclass(frozen=True)
class FewshotConfig(MetaConfig):
    """A meta-learner and its inner loop: ``model`` names one of the paper's (App. D) or a user's
    (:mod:`compgen.models.learners`); ``n_in``, ``n_out`` and ``n_templates`` (the hypernetworks' T) come from
    the section's config."""

    model: str = "hnet_linear"
    hidden: int = positive(64)
    num_hidden: int = positive(3)
    inner_steps: int = positive(10)
    inner_batch: int | None = field(None, ge=1)  # None: the whole support set every inner step
    # recompute inner steps in the meta-backward: less memory (meta.inner_adapt); None: the device decides (off unless
    # the config does not fit otherwise, compgen.devices.lighter)
    remat: bool | None = None
    inner_lr: float = field(0.1, gt=0)
    inner_weight_decay: float = field(1e-4, ge=0)
    gradient: str = field("second_order", choices=meta.GRADIENT_MODES)

    def check(self):
        super().check()
        models.model_of(self, "fewshot")  # the learner exists and takes these sizes (one line where it does not)

    def build_model(self) -> models.Model:
        return models.get(self.model, "fewshot").build(self)


def learner_text(cfg, *more: str) -> str:
    """The learner of ``cfg`` and the fields that size it, then ``more``: ``"Linear hnet (hidden 3x64, T=32)"``."""
    found = models.get(cfg.model)
    sizes = []
    for name in found.sized_by:
        if name == "hidden" and "num_hidden" in found.sized_by:
            sizes.append(f"hidden {cfg.num_hidden}x{cfg.hidden}")
        elif name == "n_templates":
            sizes.append(f"T={cfg.n_templates}")
        elif name != "num_hidden":
            sizes.append(f"{name} {getattr(cfg, name)}")
    sizes.extend(m for m in more if m)
    return f"{found.label} ({', '.join(sizes)})" if sizes else found.label


def is_incontext(cfg) -> bool:
    """Whether ``cfg`` is an in-context learner's (no inner loop) rather than a meta-learner's."""
    return not isinstance(cfg, FewshotConfig)


# --------------------------------------------------------------------------------------------- one run


def inner_optimizer(cfg):
    return meta.inner_optimizer(cfg.inner_lr, cfg.inner_weight_decay)


def outer_optimizer(cfg):
    lr = cfg.outer_lr
    if cfg.outer_schedule == "warmup_cosine":
        lr = optax.warmup_cosine_decay_schedule(
            0.0, cfg.outer_lr, max(cfg.warmup_steps, 1), cfg.outer_steps, end_value=0.05 * cfg.outer_lr
        )
    return meta.outer_optimizer(lr, cfg.clip_norm, cfg.outer_weight_decay)


def init_run(env: Environment, cfg, run):
    """Meta-parameters from ``fold_in(seed_key, 1)``, the outer optimiser's state, the world state, and the
    training key ``split(seed_key, env.loader_keys)[0]``."""
    params_ = cfg.build_model().init(jax.random.fold_in(run["seed_key"], 1))
    return {
        "meta": params_,
        "opt_state": meta.outer_init(outer_optimizer(cfg), params_),
        "world": env.init_world(cfg, run),
        "key": jax.random.split(run["seed_key"], env.loader_keys)[0],
    }


class Solver(NamedTuple):
    """What solves a task: the ``env`` that draws its data, the ``cfg`` and its ``model``."""

    env: object
    cfg: object
    model: object


def inner_loop(cfg) -> meta.InnerLoop:
    """``cfg``'s inner loop (:class:`compgen.meta.InnerLoop`): its AdamW, steps, minibatch, gradient mode and remat."""
    return meta.InnerLoop(inner_optimizer(cfg), cfg.inner_steps, cfg.inner_batch, cfg.gradient, cfg.remat)


def solve_task(solver: Solver, params_, run, world, task, key, n_query):
    """One task: its support and query data, the query prediction after adaptation (or in context).

    Returns ``(query loss, (metrics, representation, support set, fast parameters or None, prediction))``,
    differentiable in ``params_``; the representation is what the probe decodes the task latent from. The query
    targets reach the loss and the metrics only, never the learner.
    """
    env, cfg, model = solver
    k_data, k_inner = jax.random.split(key)
    support_set, query_set = env.task_data(cfg, run, world, task, k_data, n_query)
    if is_incontext(cfg):
        tokens = env.tokens(cfg, support_set)
        prediction = model.apply(params_, *tokens[:2], query_set[0], tokens[2])
        representation, fast = model.task_representation(params_, *tokens), None
        loss = env.loss(prediction, query_set[1])
    else:
        loss, (fast, prediction) = meta.fewshot_loss(
            model, params_, support_set, query_set, env.loss, inner_loop(cfg), k_inner
        )
        representation = ravel_pytree(fast)[0]
    return loss, (env.metrics(prediction, query_set[1], n_query), representation, support_set, fast, prediction)


def outer_step(env: Environment, cfg, run, state, mesh=None):
    """One outer step of one run: draw tasks, solve them, meta-gradient, guarded clipped AdamW; with a ``mesh``
    the tasks are split over its devices (:func:`compgen.meta.mean_over_tasks`)."""
    model = cfg.build_model()
    key, k_tasks, k_data = jax.random.split(state["key"], 3)
    tasks = env.sample_tasks(cfg, run, k_tasks, cfg.meta_batch)

    def one_task(params_, task, k, world):
        loss, (task_metrics, *_) = solve_task(Solver(env, cfg, model), params_, run, world, task, k, cfg.shots_query)
        return loss, task_metrics

    batch = meta.TaskBatch(tasks, jax.random.split(k_data, cfg.meta_batch), state["world"])
    chunk = devices.train_chunk(cfg.meta_batch, cfg.train_chunk, mesh=mesh)
    params_, opt_state, step_metrics = meta.outer_step(
        one_task, state["meta"], state["opt_state"], outer_optimizer(cfg), batch, chunk, mesh
    )
    return {**state, "meta": params_, "opt_state": opt_state, "key": key}, step_metrics


def evaluate_run(env: Environment, cfg, run, state):
    """Metrics of one run on its fixed evaluation sets ``run["eval_tasks"]`` (n_sets, eval_tasks, ...).

    Per set (NaN where ``run["eval_valid"]`` marks it empty): query loss, the environment's metrics and, for
    meta-learners, the support loss before and after adaptation, averaged over the set's tasks ((n_sets,)
    arrays). With ``probe`` and a latent: ``r2_ood`` (K,), ``r2_ood_pooled`` and ``r2_test_pooled`` of a ridge
    decoder from the task representation to the latent, fitted on ``test`` and scored on ``ood`` (NaN, unlike
    an empty set's NaN above, where a latent entry is constant on ``ood``: no variance to explain, R² undefined;
    :func:`compgen.metrics.r2_score`).
    """
    model, params_ = cfg.build_model(), state["meta"]
    tasks = run["eval_tasks"]
    n_sets = jax.tree.leaves(tasks)[0].shape[0]
    keys = jax.random.split(jax.random.fold_in(run["seed_key"], 2), (n_sets, cfg.eval_tasks))

    def task_metrics(args):
        task, key = args
        loss, (m, representation, support_set, fast, _) = solve_task(
            Solver(env, cfg, model), params_, run, state["world"], task, key, cfg.eval_shots_query
        )
        out = {"loss": loss, **m}
        if fast is not None:
            support_loss = lambda f: env.loss(model.apply(params_, f, support_set[0]), support_set[1])
            out.update(inner_loss_init=support_loss(model.fast_init(params_)), inner_loss_final=support_loss(fast))
        return out, representation

    # two compiled maps: the probe's sets (test, ood) keep each task's representation, the others do not (a
    # MAML representation is every parameter: keeping it for every set would cost gigabytes at paper scale)
    names = cfg.eval_set_names()
    probed = [names.index("test"), names.index("ood")] if cfg.probe and env.latent is not None else []
    sets, representations = {}, {}
    for indices, keep in ((probed, True), ([i for i in range(n_sets) if i not in probed], False)):
        if not indices:
            continue
        pick = lambda a: a[jnp.asarray(indices)].reshape((-1,) + a.shape[2:])
        fn = task_metrics if keep else (lambda args: (task_metrics(args)[0], None))
        out, reps = jax.lax.map(fn, jax.tree.map(pick, (tasks, keys)), batch_size=cfg.eval_chunk)
        means = jax.tree.map(lambda v: v.reshape(len(indices), cfg.eval_tasks).mean(1), out)
        for j, i in enumerate(indices):
            sets[i] = jax.tree.map(lambda m: m[j], means)
            if keep:
                representations[i] = reps[j * cfg.eval_tasks : (j + 1) * cfg.eval_tasks]
    result = {k: jnp.where(run["eval_valid"], jnp.stack([sets[i][k] for i in range(n_sets)]), jnp.nan) for k in sets[0]}
    if probed:
        test, ood = probed
        latent = lambda i: jax.vmap(lambda task: env.latent(cfg, task))(jax.tree.map(lambda a: a[i], tasks))
        probe = metrics.linear_probe(
            representations[test], latent(test), representations[ood], latent(ood), cfg.ridge_lambda, cfg.ridge_cg_iters
        )
        result.update(r2_ood=probe["r2"], r2_ood_pooled=probe["r2_pooled"], r2_test_pooled=probe["r2_fit_pooled"])
    return result


def stack_runs(env: Environment, configs):
    """Per-run inputs of ``configs``, stacked over (config, seed)."""
    rows = [env.run_arrays(c, seed) for c in configs for seed in c.seeds]
    return jax.tree.map(lambda *xs: jnp.stack([jnp.asarray(x) for x in xs]), *rows)


# --------------------------------------------------------------------------------------------- section


HEADLINES = ("accuracy", "acc")  # the metric a progress line shows besides the loss, where a world has one


def progress(cfg, step_metrics, evaluation):
    """Progress line: training loss, the headline metric on the training tasks and on the config's OOD evaluation
    set, or the OOD loss where the world has no accuracy."""
    ood_index = cfg.eval_set_names().index("ood")
    headline = next((h for h in HEADLINES if h in step_metrics), None)
    text = f"loss {np.mean(step_metrics['loss'][-1]):.4f}"
    if headline:
        text += f"  train {headline} {np.mean(step_metrics[headline][-1]):.3f}"
    if evaluation is not None:
        name = headline or "loss"
        text += f"  ood {name} {np.mean(evaluation[name][:, ood_index]):.4f}"
    return text


def xla_flops(fn, *shapes) -> float:
    """The FLOPs XLA's cost analysis counts for ``fn`` on arguments of these shapes (no compilation)."""
    return float(jax.jit(fn).lower(*shapes).cost_analysis().get("flops", 0.0))


_LEARNER_FLOPS: dict = {}  # (learner, sizes) -> _learner_flops


def _learner_flops(cfg) -> tuple:
    """``(features per point, head per point, head per call)``: FLOPs of one forward pass of ``cfg``'s learner, from
    XLA's cost analysis at one and two points (a hypernetwork's per-call cost is the generation of its weights);
    computed once per learner and sizes (``n_in``, ``n_out`` and its ``sized_by`` fields)."""
    found = models.get(cfg.model)
    key = (found.build, cfg.n_in, cfg.n_out, *(getattr(cfg, name) for name in found.sized_by))
    if key not in _LEARNER_FLOPS:
        model = found.build(cfg)
        meta_ = jax.eval_shape(model.init, jax.random.key(0))
        fast = jax.eval_shape(model.fast_init, meta_)
        x = [jax.ShapeDtypeStruct((n, cfg.n_in), jnp.float32) for n in (1, 2)]
        feature = [xla_flops(model.features, meta_, xn) for xn in x]
        head = [xla_flops(model.head, meta_, fast, jax.eval_shape(model.features, meta_, xn)) for xn in x]
        _LEARNER_FLOPS[key] = (feature[1] - feature[0], head[1] - head[0], max(2 * head[0] - head[1], 0.0))
    return _LEARNER_FLOPS[key]


def flops_per_step(cfg, support_points, query_points):
    """FLOPs of one outer step of one run of a meta-learner, from its forward pass's FLOPs (:func:`_learner_flops`):
    a backward pass counted as twice the forward, the meta-backward through the unroll as twice the inner loop;
    ``*_points`` = data points per task."""
    feature, head_point, head_call = _learner_flops(cfg)
    head = lambda points: head_call + points * head_point
    inner = cfg.inner_steps * 3 * head(cfg.inner_batch or support_points)
    per_task = 3 * inner + 3 * (support_points + query_points) * feature + 3 * head(query_points)
    return float(per_task * cfg.meta_batch)


# What a few-shot section may set besides its environment, name, config, presets, costs and labels (make_section).
SECTION_OPTIONS = {
    "models_": MODELS,
    "base_fields": None,
    "keep_params": False,
    "experiment_fields": ("split", "seeds"),
}


def make_section(env, name, config, presets, flops_per_step, label, **options) -> Section:
    """The :class:`compgen.section.Section` of a few-shot environment; ``env`` is an :class:`Environment`, or a
    function of the config that returns one (the in-context learners run on several). ``options`` (defaults
    :data:`SECTION_OPTIONS`): the section's ``models_``, its ``base_fields``, whether it ``keep_params`` and its
    ``experiment_fields``."""
    unknown = sorted(set(options) - set(SECTION_OPTIONS))
    if unknown:
        raise TypeError(f"make_section: unknown option(s) {unknown}; the options are {sorted(SECTION_OPTIONS)}")
    options = SECTION_OPTIONS | options
    models_, base_fields, keep_params, experiment_fields = (options[k] for k in SECTION_OPTIONS)
    env_of = (lambda cfg: env) if isinstance(env, Environment) else env
    return Section(
        name=name,
        config=config,
        presets=presets,
        run_arrays=lambda configs: stack_runs(env_of(configs[0]), configs),
        init=lambda cfg, run: init_run(env_of(cfg), cfg, run),
        outer_step=lambda cfg, run, s, mesh=None: outer_step(env_of(cfg), cfg, run, s, mesh),
        evaluate=lambda cfg, run, s: evaluate_run(env_of(cfg), cfg, run, s),
        progress=progress,
        label=label,
        flops_per_step=flops_per_step,
        data_fields=("split", "frac_ood", "seeds"),
        models=models_,
        base_fields=base_fields,
        keep_params=keep_params,
        experiment_fields=(*experiment_fields, *MEMORY_ONLY, "probe"),
        learner_code=models.code_of,
    )
