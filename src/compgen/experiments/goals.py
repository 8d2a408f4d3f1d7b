"""The compositional-goals experiments (paper §4.3, spec §4): meta-learning to imitate an agent that
walks to a goal object in one of 5 mazes and interacts with it, from one demonstration of the goal.

A task is a goal (quadrant, interaction, maze, object type) drawn from the run's training goals; its
support and query sets are shortest-path demonstrations on fresh instances of the goal, generated
inside the compiled step (:mod:`compgen.tasks.goals`). The four models predict the optimal action
(6 classes) of each visited state under the masked softmax cross-entropy; the query metrics are the
per-trajectory accuracies of :func:`compgen.tasks.goals.episode_metrics`. The presets and the
figures' config lists live in :mod:`compgen.experiments.goals_presets`, so that tuning them does not
touch the code these numbers are stored under.
"""

from __future__ import annotations

import dataclasses
import functools
import sys
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

from compgen import experiments, meta, models
from compgen.experiments import fewshot
from compgen.models import hypernetwork, mlp
from compgen.tasks import goals as gl

KIND = "goals"
EVAL_SETS = ("valid", "test", "ood")  # no auxiliary OOD sets in this world (spec §4.2)


@functools.lru_cache(maxsize=None)
def shortest_demonstration_bound(seed: int) -> int:
    """Steps of the longest possible demonstration in the mazes of ``seed`` (path + interaction)."""
    return gl.max_demo_length(gl.make_tables(seed))


@functools.lru_cache(maxsize=None)
def goal_split(split: str, seed: int):
    """Training and OOD goal ids of a run (cached :func:`compgen.tasks.goals.goal_split`)."""
    return gl.goal_split(split, seed)


@dataclass(frozen=True)
class GoalsConfig(fewshot.FewshotConfig):
    """One goals configuration (defaults: the paper's linear hypernetwork's shared values, spec §4.3);
    every seed is trained.

    Shots count demonstrations, each padded to ``demo_length`` steps (masked after the interaction).
    The paper pads to 120 = 11² − 1; any length that still holds the longest demonstration of every
    seed's mazes gives the same loss and metrics, at a fraction of the cost.
    """

    n_in = gl.OBS_SIZE
    n_out = gl.N_ACTIONS

    split: str = "random"
    n_mazes: int = gl.N_MAZES
    shots_support: int = 1
    shots_query: int = 1
    eval_shots_query: int = 1
    demo_length: int = gl.MAX_STEPS

    def __post_init__(self):
        super().__post_init__()
        for name in ("shots_support", "shots_query", "eval_shots_query", "demo_length", "n_mazes"):
            fewshot.check_positive_int(name, getattr(self, name))
        if self.split not in gl.SPLITS:
            raise ValueError(f"split must be one of {gl.SPLITS}, got {self.split!r}")
        if self.n_mazes != gl.N_MAZES:
            raise ValueError(f"n_mazes must be {gl.N_MAZES} (the 200 goals are 4 quadrants x 2 interactions x "
                             f"{gl.N_MAZES} mazes x 5 object types), got {self.n_mazes!r}")
        for seed in self.seeds:
            goal_split(self.split, seed)  # raises if a random split leaves a factor out of training
        needed = max(shortest_demonstration_bound(seed) for seed in self.seeds)
        if not needed <= self.demo_length <= gl.MAX_STEPS:
            raise ValueError(f"demo_length must be between {needed} (the longest demonstration in the mazes of seeds "
                             f"{self.seeds}) and {gl.MAX_STEPS}, got {self.demo_length}")

    def eval_set_names(self):
        return EVAL_SETS


CONFIG_CLASS = GoalsConfig


def shape_key(cfg: GoalsConfig):
    """Fields that fix the compiled program; configs equal here are vmapped together."""
    return tuple((f.name, getattr(cfg, f.name)) for f in dataclasses.fields(cfg) if f.name not in ("split", "seeds"))


def code():
    """The modules whose source the numbers of this section depend on (see results.code_fingerprint)."""
    return (gl, meta, models, hypernetwork, mlp, fewshot, experiments, sys.modules[__name__])


# --------------------------------------------------------------------------------------------- environment


def _sample_tasks(cfg, run, key, num):
    """``num`` training goals drawn uniformly from the run's (padded) training goal ids: (num, 4) int32."""
    ids = run["train_ids"][jax.random.randint(key, (num,), 0, run["n_train"])]
    return jnp.asarray(gl.goal_table())[ids]


def _task_data(cfg, run, goal, key, n_query):
    return gl.task_data(run["tables"], run["mazes"], goal, key, cfg.shots_support, n_query, cfg.demo_length)


def _metrics(prediction, target, n_query):
    """:func:`compgen.tasks.goals.episode_metrics` of the query trajectories (prediction (n_query·L, 6))."""
    actions, mask = target
    length = actions.shape[0] // n_query
    return gl.episode_metrics(prediction.reshape(n_query, length, -1), actions.reshape(n_query, length),
                              mask.reshape(n_query, length))


ENV = fewshot.Environment(sample_tasks=_sample_tasks, task_data=_task_data, loss=gl.masked_cross_entropy,
                          metrics=_metrics)


def evaluation_goals(seed, split, num):
    """The fixed evaluation sets of a run: ``{name: goals (num, 4)}`` for valid, test (training goals) and ood.

    Keys: ``split(key(seed), 4)`` gives (unused: the training key, test, valid, ood), as the other sections;
    each task's goal is drawn uniformly from its set's goal ids.
    """
    train, ood = goal_split(split, seed)
    _, k_test, k_valid, k_ood = jax.random.split(jax.random.key(seed), 4)
    draw = lambda key, ids: np.asarray(jax.vmap(lambda k: gl.sample_goal(k, ids))(jax.random.split(key, num)))
    return {"valid": draw(k_valid, train), "test": draw(k_test, train), "ood": draw(k_ood, ood)}


def run_arrays(configs):
    """Per-run inputs of same-shape configs, stacked over (config, seed)."""
    rows = []
    for c in configs:
        for seed in c.seeds:
            train, _ = goal_split(c.split, seed)
            padded = np.zeros(gl.N_GOALS, np.int32)
            padded[: len(train)] = train
            sets = evaluation_goals(seed, c.split, c.eval_tasks)
            tables = gl.make_tables(seed, c.n_mazes)
            rows.append({"seed_key": jax.random.key(seed), "tables": tables, "mazes": gl.make_mazes(seed, c.n_mazes),
                         "train_ids": padded, "n_train": len(train),
                         "eval_tasks": np.stack([sets[n] for n in c.eval_set_names()])})
    return jax.tree.map(lambda *xs: jnp.stack([jnp.asarray(x) for x in xs]), *rows)


def make_train(configs):
    """``(runs, init, chunk, evaluate)``: the compiled pieces that train every seed of same-shape ``configs``."""
    return fewshot.make_train(ENV, configs, run_arrays, shape_key)


def describe_group(group):
    c = group[0]
    splits = ", ".join(sorted({g.split for g in group}))
    size = f"hidden {c.num_hidden}x{c.hidden}" + (f", T={c.templates}" if c.model.startswith("hnet") else "")
    return (f"{c.model} ({size}, demo length {c.demo_length}) on {splits}: "
            f"{len(group)} config(s) x {len(c.seeds)} seed(s), {c.outer_steps} steps")


def train_group(configs, log=print):
    """Train every seed of same-shape ``configs`` in one compiled program; ``(history, wall_time_s)``.

    The final meta-parameters of every run are kept (``history["final"]["meta"]``)."""
    ood = configs[0].eval_set_names().index("ood")

    def describe(step_metrics, evaluation):
        text = f"loss {np.mean(step_metrics['loss'][-1]):.4f}  train acc {np.mean(step_metrics['acc'][-1]):.3f}"
        if evaluation is not None:
            text += f"  ood acc {np.mean(evaluation['acc'][:, ood]):.3f}"
        return text

    return experiments.train_compiled(make_train, configs, describe, log, keep_params=True)


def training_cost(cfg: GoalsConfig) -> float:
    points = cfg.demo_length * np.array([cfg.shots_support, cfg.shots_query])
    return fewshot.flops_per_step(cfg, *points) * cfg.outer_steps * len(cfg.seeds)


def run(configs, force: bool = False, workers: int | None = None, log=print):
    """Results for each config (a list, in order): dicts of arrays with a leading seed axis.

    Keys: ``steps/{loss,grad_norm,skipped,acc,acc_all,acc_first,acc_last}`` (seed, step) on the training
    meta-batches; ``eval/{loss,acc,acc_all,acc_first,acc_last,inner_loss_init,inner_loss_final}``
    (seed, eval, set) over :data:`EVAL_SETS`; ``eval_steps`` (eval,); ``final/meta`` (seed, P), the
    final meta-parameters, flattened (:func:`meta_params` restores them).
    """
    return experiments.run(sys.modules[__name__], configs, force, workers, log)


# --------------------------------------------------------------------------------------------- trained learners


def meta_params(cfg: GoalsConfig, flat):
    """The meta-parameter pytree of ``cfg``'s model from a flat vector (a row of ``final/meta``)."""
    unravel = ravel_pytree(cfg.build_model().init(jax.random.key(0)))[1]
    return unravel(jnp.asarray(flat))


def imitate(cfg: GoalsConfig, flat_meta, seed, goals, key):
    """Adapt a trained learner to each of ``goals`` (n, 4) on fresh support demonstrations, then let it act.

    ``flat_meta`` is a row of ``final/meta`` of a run of ``cfg`` with seed ``seed``. Goal i uses
    ``split(key, n)[i]``, split into (support instances, new instance, inner loop), so the same key gives
    every learner the same demonstrations and the same new instances. The learner acts greedily
    (argmax of its logits) in closed loop from the new instance's start. Returns a dict of arrays with
    a leading goal axis: ``support_instances`` (each leaf (n, shots_support, ...)), ``support_cells``
    (n, shots_support, demo_length) and ``support_distance`` (n, shots_support) (the demonstrated paths
    and their lengths); ``instance`` (the new instances), their ``optimal_cells`` (n, demo_length) and
    ``distance`` (n,); ``cells`` (n, demo_length + 1) and ``actions`` (n, demo_length) of the learner's
    rollouts, and ``success`` (n,) (it took the goal's interaction on the goal cell). Unlike ``acc_all``
    (every step of the optimal trajectory predicted, teacher-forced), a rollout may leave the optimal
    path and still succeed.
    """
    params = meta_params(cfg, flat_meta)
    tables, mazes = gl.make_tables(seed, cfg.n_mazes), gl.make_mazes(seed, cfg.n_mazes)
    goals = jnp.asarray(goals, jnp.int32).reshape(-1, 4)
    return jax.device_get(_imitate(cfg, params, tables, mazes, goals, jax.random.split(key, goals.shape[0])))


def _imitate_one(cfg, params, tables, mazes, goal, key):
    model = cfg.build_model()
    k_support, k_test, k_inner = jax.random.split(key, 3)
    support_instances = jax.vmap(lambda k: gl.sample_instance(k, tables, goal))(
        jax.random.split(k_support, cfg.shots_support))
    obs, actions, mask = jax.vmap(lambda inst: gl.demonstration(tables, mazes, inst, goal, cfg.demo_length))(
        support_instances)
    support = (obs.reshape(-1, gl.OBS_SIZE), (actions.reshape(-1), mask.reshape(-1)))
    fast, _ = meta.adapt(model, params, support, gl.masked_cross_entropy, fewshot.inner_optimizer(cfg),
                         cfg.inner_steps, k_inner, cfg.inner_batch)
    instance = gl.sample_instance(k_test, tables, goal)
    policy = lambda o: jnp.argmax(model.apply(params, fast, o[None])[0])
    cells, taken, success = gl.rollout(policy, tables, mazes, instance, goal, cfg.demo_length)
    distance = lambda inst: tables["distance"][goal[2], inst["agent"], inst["objects"][0]]
    return {"support_instances": support_instances,
            "support_cells": jax.vmap(lambda inst: gl.optimal_path(tables, inst, goal, cfg.demo_length))(
                support_instances),
            "support_distance": jax.vmap(distance)(support_instances),
            "instance": instance, "optimal_cells": gl.optimal_path(tables, instance, goal, cfg.demo_length),
            "distance": distance(instance), "cells": cells, "actions": taken, "success": success}


@functools.partial(jax.jit, static_argnums=0)
def _imitate(cfg, params, tables, mazes, goals, keys):
    return jax.lax.map(lambda a: _imitate_one(cfg, params, tables, mazes, *a), (goals, keys), batch_size=16)
