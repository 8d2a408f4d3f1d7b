"""In-context learners on the hyperteacher tasks and on the compositional-goals world (a comparison beyond
the paper; see book/incontext.py).

The three learners of :mod:`compgen.models.incontext` (a key-value memory, a transformer, a
transformer with a task-code bottleneck and a hypernetwork) are trained episodically on exactly the
task stream of the section named by ``environment``; for the same seed they see:

* ``hyperteacher`` (:mod:`compgen.experiments.hyperteacher`): the same teacher, task split, training
  tasks in the same order and fixed evaluation tasks with the same support and query points. Support
  tokens are the support points ``(x, y)`` (the teacher's soft targets); the loss is the query KL,
  the metric the query accuracy.
* ``goals`` (:mod:`compgen.experiments.goals`): the same mazes, goal split, training goals in the
  same order and evaluation goals with the same demonstrations. Support tokens are the steps
  ``(observation, one-hot optimal action)`` of the support demonstrations, their padded steps masked
  (they have no influence at all); the queries are the observations of the query demonstrations;
  the loss is the section's masked cross-entropy, the metrics its per-trajectory accuracies
  (:func:`compgen.tasks.goals.episode_metrics`: ``acc``, ``acc_all``, ``acc_first``, ``acc_last``).
  Evaluation uses ``shots_query`` query demonstrations (the goals section's ``eval_shots_query``,
  1 in all its presets).

There is no inner loop: per outer step a run predicts the query targets of ``meta_batch`` tasks from
their support sets and takes a clipped AdamW step on the mean query loss.

Evaluation reports the query loss and metrics per evaluation set, and, with ``probe``, the linear
decodability of the task latent from each learner's task representation (the bottleneck's code; the
pooled support states of the others): a ridge decoder fitted on the ``test`` tasks and scored on the
``ood`` tasks, as :func:`compgen.experiments.hyperteacher.evaluate_run` does for the adapted fast
parameters. The latent is the hyperteacher's task code z (2M entries) or the goal, one one-hot per
factor (quadrant, interaction, maze, object type: 4 + 2 + 5 + 5 = 16 entries).

The presets and the config lists live in :mod:`compgen.experiments.incontext_presets`.
"""

from __future__ import annotations

import dataclasses
import sys
from dataclasses import dataclass
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
import optax

from compgen import experiments, meta, metrics
from compgen.experiments import fewshot
from compgen.experiments import goals as goals_experiment
from compgen.experiments import hyperteacher as hyperteacher_experiment
from compgen.models import incontext
from compgen.tasks import goals as gl
from compgen.tasks import hyperteacher as ht

KIND = "incontext"
ENVIRONMENTS = ("hyperteacher", "goals")
OUTER_SCHEDULES = ("constant", "warmup_cosine")
# n_in, n_out when left None: the hyperteacher's defaults (free), the goals world's observation and actions (fixed)
DEFAULT_SIZES = {"hyperteacher": (16, 8), "goals": (gl.OBS_SIZE, gl.N_ACTIONS)}


@dataclass(frozen=True)
class InContextConfig:
    """One in-context learner on the tasks of ``environment``; every seed in ``seeds`` is trained.

    The task fields and their defaults are those of
    :class:`compgen.experiments.hyperteacher.HyperteacherConfig` (the paper's M = 8, K = 2 setting);
    ``n_modules`` to ``norm_inputs`` are read by the hyperteacher only. Under ``goals`` the shots count
    demonstrations, each padded to ``demo_length`` steps, and ``split``, ``seeds``, the shots,
    ``demo_length`` and ``eval_tasks`` fix the task stream (:meth:`goals_config`). The model fields size
    :class:`compgen.models.incontext.InContextSpec`.
    """

    model: str = "transformer"
    environment: str = "hyperteacher"
    split: str = "random"
    n_modules: int = 8  # M
    max_hot: int = 2  # K
    frac_ood: float = 0.25
    n_in: int | None = None  # None: the environment's (hyperteacher 16; goals 847, the observation, fixed)
    n_out: int | None = None  # None: the environment's (hyperteacher 8; goals 6, the actions, fixed)
    teacher_hidden: int = 32
    temperature: float = 0.1
    norm_inputs: int = 1000
    shots_support: int = 256
    shots_query: int = 256
    demo_length: int = gl.MAX_STEPS  # goals only: steps each demonstration is padded to
    d_model: int = 128
    num_layers: int = 4
    num_heads: int = 4
    d_ff: int = 256
    code_dim: int = 32
    hnet_hidden: int = 64
    hnet_num_hidden: int = 3
    n_templates: int = 32
    outer_steps: int = 200_000
    meta_batch: int = 128
    outer_lr: float = 1e-3
    outer_schedule: str = "warmup_cosine"
    warmup_steps: int = 2000
    clip_norm: float = 1.0
    outer_weight_decay: float = 1e-2
    eval_every: int = 1000
    eval_tasks: int = 1024
    eval_chunk: int = 64
    probe: bool = True
    ridge_lambda: float = 1.0
    ridge_cg_iters: int | None = 10
    seeds: tuple = (2020, 2021, 2022)

    def __post_init__(self):
        if self.model not in incontext.INCONTEXT_MODEL_NAMES:
            raise ValueError(f"model must be one of {incontext.INCONTEXT_MODEL_NAMES}, got {self.model!r}")
        if self.environment not in ENVIRONMENTS:
            raise ValueError(f"environment must be one of {ENVIRONMENTS}, got {self.environment!r}")
        goals = self.environment == "goals"
        for name, size in zip(("n_in", "n_out"), DEFAULT_SIZES[self.environment]):
            if getattr(self, name) is None:
                object.__setattr__(self, name, size)
            elif goals and getattr(self, name) != size:
                raise ValueError(f"{name} must be {size} (or None) for environment='goals', "
                                 f"got {getattr(self, name)!r}")
        positive = ("n_modules", "max_hot", "n_in", "n_out", "teacher_hidden", "norm_inputs", "shots_support",
                    "shots_query", "demo_length", "outer_steps", "meta_batch", "eval_every", "eval_tasks",
                    "eval_chunk")
        for name in positive:
            fewshot.check_positive_int(name, getattr(self, name))
        for name in ("temperature", "outer_lr", "clip_norm", "ridge_lambda"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)!r}")
        for name in ("outer_weight_decay", "warmup_steps"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)!r}")
        if self.outer_schedule not in OUTER_SCHEDULES:
            raise ValueError(f"outer_schedule must be one of {OUTER_SCHEDULES}, got {self.outer_schedule!r}")
        if not self.seeds:
            raise ValueError("seeds must name at least one seed")
        object.__setattr__(self, "seeds", tuple(int(s) for s in self.seeds))
        self.spec()  # raises if a model size is invalid
        if goals:
            self.goals_config()  # raises if the split, a seed's split or demo_length is invalid
        else:
            ht.check_modules(self.n_modules, self.max_hot)
            ht.task_split(self.n_modules, self.max_hot, self.split, self.frac_ood, self.seeds[0])  # raises if invalid

    def spec(self) -> incontext.InContextSpec:
        return incontext.InContextSpec(self.model, self.n_in, self.n_out, self.d_model, self.num_layers,
                                       self.num_heads, self.d_ff, self.code_dim, self.hnet_hidden,
                                       self.hnet_num_hidden, self.n_templates)

    def build_model(self) -> incontext.InContextModel:
        return incontext.make_incontext_model(self.spec())

    def goals_config(self) -> goals_experiment.GoalsConfig:
        """The goals section's config whose task stream this one trains on (its model fields are unused)."""
        return goals_experiment.GoalsConfig(split=self.split, seeds=self.seeds, shots_support=self.shots_support,
                                            shots_query=self.shots_query, eval_shots_query=self.shots_query,
                                            demo_length=self.demo_length, eval_tasks=self.eval_tasks)

    def eval_set_names(self):
        if self.environment == "goals":
            return goals_experiment.EVAL_SETS
        return ("valid", "test", "ood") + tuple(f"ood_{k}" for k in ht.ood_k_values(self.n_modules))


CONFIG_CLASS = InContextConfig


def shape_key(cfg: InContextConfig):
    """Fields that fix the compiled program; configs equal here can be vmapped together."""
    varying = {"split", "frac_ood", "seeds"}
    return tuple((f.name, getattr(cfg, f.name)) for f in dataclasses.fields(cfg) if f.name not in varying)


def code():
    """The modules whose source the numbers of this section depend on (see results.code_fingerprint)."""
    import compgen.tasks.support as support_module
    import compgen.tasks.teacher as teacher_module
    from compgen import models
    from compgen.models import hypernetwork, mlp

    return (ht, support_module, teacher_module, hyperteacher_experiment, gl, goals_experiment, fewshot, meta,
            metrics, models, hypernetwork, mlp, incontext, experiments, sys.modules[__name__])


def accuracy_key(cfg: InContextConfig) -> str:
    """The name of the query accuracy among the metrics of ``cfg``'s environment (``accuracy`` or ``acc``)."""
    return WORLDS[cfg.environment].accuracy


# --------------------------------------------------------------------------------------------- environments


@dataclass(frozen=True)
class World:
    """What an environment supplies to the in-context learners; every function but ``run_arrays`` describes
    one run and is jittable.

    * ``run_arrays(configs)`` -> the section's per-run inputs, stacked over (config, seed);
    * ``init_run(cfg, run)`` -> ``{"meta", "opt_state", "key", ...}`` with the section's keys;
    * ``sample_tasks(cfg, run, key, num)`` -> ``num`` training tasks, as the section draws them;
    * ``task_data(cfg, run, state, task, key)`` -> ``((x_s, y_s, mask_s), (x_q, target))``: the learner's
      support tokens (``mask_s`` None: all valid), the query inputs and the query target;
    * ``loss(prediction, target)``; ``metrics(prediction, target, n_query)`` -> dict of scalars;
    * ``eval_sets(cfg, run)`` -> ``(tasks (n_sets, eval_tasks, ...), valid (n_sets,), keys (n_sets, eval_tasks))``;
    * ``latent(task)`` -> (K,): the ground truth that the probe decodes;
    * ``accuracy``: the name of the query accuracy among the metrics.
    """

    run_arrays: Callable
    init_run: Callable
    sample_tasks: Callable
    task_data: Callable
    loss: Callable
    metrics: Callable
    eval_sets: Callable
    latent: Callable
    accuracy: str


def _hyperteacher_init_run(cfg, run):
    """Keys of :func:`compgen.experiments.hyperteacher.init_run`: the seed's key draws the teacher,
    ``fold_in(key, 1)`` the model, ``split(key, 5)[0]`` the training tasks."""
    root = run["seed_key"]
    return {"teacher": ht.init_teacher(root, cfg.n_modules, cfg.n_in, cfg.teacher_hidden, cfg.n_out),
            **fewshot.init_run(cfg, run), "key": jax.random.split(root, 5)[0]}


def _hyperteacher_task_data(cfg, run, state, code, key):
    support_set, query_set = ht.task_data(state["teacher"], run["norm_inputs"], code, key, cfg.shots_support,
                                          cfg.shots_query, cfg.temperature)
    return (*support_set, None), query_set


def _hyperteacher_eval_sets(cfg, run):
    data_keys = jax.random.split(jax.random.fold_in(run["seed_key"], 2), len(cfg.eval_set_names()))
    return run["eval_codes"], run["eval_valid"], jax.vmap(lambda k: jax.random.split(k, cfg.eval_tasks))(data_keys)


def _goals_task_data(cfg, run, state, goal, key):
    (x_s, (actions, mask)), query_set = goals_experiment.ENV.task_data(cfg, run, goal, key, cfg.shots_query)
    return (x_s, jax.nn.one_hot(actions, gl.N_ACTIONS), mask), query_set


def _goals_eval_sets(cfg, run):
    """The goals section's evaluation goals and keys (:func:`compgen.experiments.fewshot.evaluate_run`)."""
    tasks = run["eval_tasks"]
    keys = jax.random.split(jax.random.fold_in(run["seed_key"], 2), tasks.shape[:2])
    return tasks, jnp.ones(tasks.shape[0], bool), keys


def goal_latent(goal):
    """A goal (4,) as one one-hot per factor, concatenated: (4 + 2 + 5 + 5,) = (16,)."""
    return jnp.concatenate([jax.nn.one_hot(goal[i], n) for i, n in enumerate(gl.FACTOR_SIZES)])


WORLDS = {
    "hyperteacher": World(
        run_arrays=hyperteacher_experiment.run_arrays, init_run=_hyperteacher_init_run,
        sample_tasks=lambda cfg, run, key, num: run["train_codes"][jax.random.randint(key, (num,), 0, run["n_train"])],
        task_data=_hyperteacher_task_data, loss=ht.kl_loss,
        metrics=lambda prediction, target, n_query: {"accuracy": ht.accuracy(prediction, target)},
        eval_sets=_hyperteacher_eval_sets, latent=lambda code: code.reshape(-1), accuracy="accuracy"),
    "goals": World(
        run_arrays=lambda configs: goals_experiment.run_arrays([c.goals_config() for c in configs]),
        init_run=fewshot.init_run, sample_tasks=goals_experiment.ENV.sample_tasks, task_data=_goals_task_data,
        loss=goals_experiment.ENV.loss, metrics=goals_experiment.ENV.metrics, eval_sets=_goals_eval_sets,
        latent=goal_latent, accuracy="acc"),
}


# --------------------------------------------------------------------------------------------- training


def init_run(cfg: InContextConfig, run):
    """Initial state of one run, with the keys of the environment's section: the model from
    ``fold_in(seed_key, 1)``, the training key as the section's (plus the hyperteacher's teacher)."""
    return WORLDS[cfg.environment].init_run(cfg, run)


def predict(model, params, support, query_set):
    """Query logits of one task from its support tokens ``(x, y)`` or ``(x, y, mask)`` and the query *inputs* only."""
    x_query, _ = query_set  # the query targets never reach the model
    return model.apply(params, *support[:2], x_query, *support[2:])


def task_loss(world: World, model, params, support, query_set, n_query):
    """Query loss of one task predicted in context, and the environment's metrics: ``(loss, metrics)``."""
    prediction = predict(model, params, support, query_set)
    return world.loss(prediction, query_set[1]), world.metrics(prediction, query_set[1], n_query)


def outer_step(cfg: InContextConfig, run, state):
    """One outer step of one run: the section's task sampling, query loss, clipped AdamW (skips non-finite)."""
    world, model = WORLDS[cfg.environment], cfg.build_model()
    key, k_tasks, k_data = jax.random.split(state["key"], 3)
    tasks = world.sample_tasks(cfg, run, k_tasks, cfg.meta_batch)

    def one_task(params, task, task_key):
        data_key, _ = jax.random.split(task_key)  # as the sections, whose second key drives the inner loop
        support, query_set = world.task_data(cfg, run, state, task, data_key)
        return task_loss(world, model, params, support, query_set, cfg.shots_query)

    (loss, task_metrics), grads = meta.mean_over_tasks(one_task, state["meta"], tasks,
                                                       jax.random.split(k_data, cfg.meta_batch))
    updates, opt_state = fewshot.outer_optimizer(cfg).update(grads, state["opt_state"], state["meta"])
    params = optax.apply_updates(state["meta"], updates)
    step_metrics = {"loss": loss, **task_metrics, "grad_norm": optax.tree.norm(grads),
                    "skipped": opt_state.total_notfinite}
    return {**state, "meta": params, "opt_state": opt_state, "key": key}, step_metrics


def evaluate_run(cfg: InContextConfig, run, state):
    """Query loss and metrics per evaluation set (NaN where a set is empty) and, with ``probe``, the R² of
    a ridge decoder from the task representation to the task latent (fit on ``test``, scored on ``ood``).

    The evaluation tasks and their data are those of the environment's section.
    """
    world, model = WORLDS[cfg.environment], cfg.build_model()
    params = state["meta"]
    names = cfg.eval_set_names()
    tasks, valid, keys = world.eval_sets(cfg, run)

    def task_metrics(args):
        task, key = args
        data_key, _ = jax.random.split(key)
        support, query_set = world.task_data(cfg, run, state, task, data_key)
        loss, m = task_loss(world, model, params, support, query_set, cfg.shots_query)
        return {"loss": loss, **m}, model.task_representation(params, *support)

    flat = lambda a: a.reshape((-1,) + a.shape[2:])
    out, feats = jax.lax.map(task_metrics, (flat(tasks), flat(keys)), batch_size=cfg.eval_chunk)
    out = jax.tree.map(lambda v: v.reshape(len(names), cfg.eval_tasks), out)
    result = {k: jnp.where(valid, v.mean(1), jnp.nan) for k, v in out.items()}
    if cfg.probe:
        feats = feats.reshape((len(names), cfg.eval_tasks, -1))
        latents = jax.vmap(jax.vmap(world.latent))(tasks)  # (n_sets, eval_tasks, K)
        test, ood = names.index("test"), names.index("ood")
        weights, bias = metrics.ridge_fit(feats[test], latents[test], cfg.ridge_lambda, cfg.ridge_cg_iters,
                                          intercept=True, penalise_intercept=True)
        prediction = feats[ood] @ weights + bias
        result["r2_ood"] = metrics.r2_score(prediction, latents[ood])
        result["r2_ood_pooled"] = metrics.pooled_r2(prediction, latents[ood])
        result["r2_test_pooled"] = metrics.pooled_r2(feats[test] @ weights + bias, latents[test])
    return result


def make_train(configs):
    """``(runs, init, chunk, evaluate)`` for every seed of same-shape ``configs`` (one compiled program)."""
    cfg = configs[0]
    experiments.check_group(configs, shape_key, "split, frac_ood and seeds")
    runs = WORLDS[cfg.environment].run_arrays(configs)  # the section's splits and evaluation tasks
    return (runs,) + experiments.compile_runs(cfg, runs, init_run, outer_step, evaluate_run)


def describe_group(group):
    c = group[0]
    splits = ", ".join(sorted({g.split for g in group}))
    task = f"M={c.n_modules}, K={c.max_hot}" if c.environment == "hyperteacher" else f"demo length {c.demo_length}"
    return (f"in-context {c.model} on {c.environment} ({task}, d_model {c.d_model}) on {splits}: "
            f"{len(group)} config(s) x {len(c.seeds)} seed(s), {c.outer_steps} steps")


def train_group(configs, log=print):
    """Train every seed of same-shape ``configs`` in one compiled program; ``(history, wall_time_s)``."""
    ood = configs[0].eval_set_names().index("ood")
    acc = accuracy_key(configs[0])

    def describe(step_metrics, evaluation):
        text = f"loss {np.mean(step_metrics['loss'][-1]):.3f}  train acc {np.mean(step_metrics[acc][-1]):.3f}"
        if evaluation is not None:
            text += f"  ood acc {np.mean(evaluation[acc][:, ood]):.3f}"
        return text

    return experiments.train_compiled(make_train, configs, describe, log)


def train_and_store(configs, log=print):
    experiments.train_and_store(sys.modules[__name__], configs, log)


def count_params(cfg: InContextConfig) -> int:
    from compgen import models

    return models.count_params(jax.eval_shape(cfg.build_model().init, jax.random.key(0)))


def flops_per_step(cfg: InContextConfig) -> float:
    """Rough FLOPs of one outer step of one run: 6 x parameters x tokens (forward + backward) plus
    attention scores, plus the hyperteacher's teacher. An estimate for scheduling, not a measurement."""
    p = count_params(cfg)
    steps = cfg.demo_length if cfg.environment == "goals" else 1  # tokens per shot
    n_support, n_query = cfg.shots_support * steps, cfg.shots_query * steps
    attention = 6 * 2 * cfg.num_layers * cfg.d_model * (n_support ** 2 + n_query * n_support)
    teacher = 0
    if cfg.environment == "hyperteacher":
        teacher = 2 * (n_support + n_query + cfg.norm_inputs) * (
            cfg.n_in * cfg.teacher_hidden + 2 * cfg.teacher_hidden ** 2 + cfg.teacher_hidden * cfg.n_out)
    return float(cfg.meta_batch * (6 * p * (n_support + n_query) + attention + teacher))


def training_cost(cfg: InContextConfig) -> float:
    return flops_per_step(cfg) * cfg.outer_steps * len(cfg.seeds)


def run(configs, force: bool = False, workers: int | None = None, log=print):
    """Results for each config (a list, in order): dicts of arrays with a leading seed axis.

    Keys: ``steps/{loss,grad_norm,skipped}`` and the environment's metrics (hyperteacher ``accuracy``;
    goals ``acc, acc_all, acc_first, acc_last``) (seed, step); ``eval/loss`` and the same metrics (seed,
    eval, set); with the probe ``eval/r2_ood`` (seed, eval, latent: 2M or 16) and
    ``eval/r2_{ood,test}_pooled`` (seed, eval); ``eval_steps``.
    """
    return experiments.run(sys.modules[__name__], configs, force, workers, log)
