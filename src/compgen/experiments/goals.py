"""The compositional-goals experiments (paper §4.3, App. C.4): meta-learning to imitate an agent that walks to a
goal object in one of 5 mazes and interacts with it, from one demonstration of the goal.

A task is a goal (quadrant, interaction, maze, object type) drawn from the run's training goals; its support
and query sets are shortest-path demonstrations on fresh instances of the goal, generated inside the compiled
step (:mod:`compgen.tasks.goals`). The four models predict the optimal action (6 classes) of each visited state
under the masked softmax cross-entropy; the query metrics are the per-trajectory accuracies of
:func:`compgen.tasks.goals.episode_metrics`, and the probe decodes the goal's factors (one one-hot each).
:func:`imitate` lets a trained learner act in closed loop.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

from compgen import meta, params
from compgen.experiments import fewshot
from compgen.params import field, positive
from compgen.section import Grid, Preset
from compgen.tasks import goals as gl

EVAL_SETS = ("valid", "test", "ood")  # no auxiliary OOD sets in this world (App. C.4)


@functools.cache
def shortest_demonstration_bound(seed: int, world: gl.GoalsWorld = gl.WORLD) -> int:
    """Steps of the longest possible demonstration in the mazes of ``seed`` (path + interaction)."""
    return gl.max_demo_length(gl.make_tables(seed, world=world))


@functools.cache
def goal_split(split: str, seed: int, world: gl.GoalsWorld = gl.WORLD):
    """Training and OOD goal ids of a run (cached :func:`compgen.tasks.goals.goal_split`)."""
    return gl.goal_split(split, seed, world)


WORLD_FIELDS = tuple(f.name for f in dataclasses.fields(gl.GoalsWorld))


@dataclass(frozen=True)
class WorldFields(params.Config):
    """The sizes of a goals world (:class:`compgen.tasks.goals.GoalsWorld`; the paper's by default), as config
    fields: the grid's side (odd), the mazes, object types and interactions (goal factors besides the 4
    quadrants), the distractor objects and the agent's minimum shortest-path distance to the goal object at
    the start. ``world`` is the value the task functions take."""

    grid: int = positive(gl.GRID)
    n_mazes: int = field(gl.N_MAZES, ge=1, le=100)
    n_object_types: int = positive(gl.N_OBJECT_TYPES)
    n_interactions: int = positive(gl.N_INTERACTIONS)
    n_distractors: int = field(gl.N_DISTRACTORS, ge=0)
    min_distance: int = positive(gl.MIN_DISTANCE)

    @property
    def world(self) -> gl.GoalsWorld:
        return gl.GoalsWorld(**{name: getattr(self, name) for name in WORLD_FIELDS})


def check_world(cfg, split, demo_length):
    """Check ``cfg``'s world against its seeds (every random split keeps each factor value in training, every
    maze has starts far enough from each goal cell) and the demonstration length; return ``demo_length``
    (None: the longest demonstration of the seeds' mazes). Raises a ParameterError naming the field."""
    try:
        world = cfg.world
    except ValueError as error:
        raise params.ParameterError(f"goals world ({world_label(cfg)}): {error}") from None
    try:
        for seed in cfg.seeds:
            goal_split(split, seed, world)  # raises if a random split leaves a factor out of training
        needed = longest_demonstration(cfg.seeds, world)
    except ValueError as error:
        raise params.ParameterError(f"goals world ({world_label(cfg)}) with seeds {cfg.seeds}: {error}") from None
    demo_length = needed if demo_length is None else demo_length
    if not needed <= demo_length <= world.max_steps:
        raise params.ParameterError(
            f"demo_length must be between {needed} (the longest demonstration in the mazes "
            f"of seeds {cfg.seeds}) and {world.max_steps}, got {demo_length}"
        )
    return demo_length


def world_label(cfg) -> str:
    """The world's sizes in words, e.g. '11x11, 5 mazes, 5 object types, 4 distractors, start >= 11 steps'."""
    return (
        f"{cfg.grid}x{cfg.grid}, {cfg.n_mazes} mazes, {cfg.n_object_types} object types, "
        f"{cfg.n_interactions} interactions, {cfg.n_distractors} distractors, start >= {cfg.min_distance} steps"
    )


@dataclass(frozen=True)
class GoalsConfig(fewshot.FewshotConfig, WorldFields):
    """One goals configuration (defaults: the paper's common settings, App. C.4); every seed is trained.

    Shots count demonstrations, each padded to ``demo_length`` steps (masked after the interaction). The paper
    pads to 120 = 11² − 1; any length that still holds the longest demonstration of every seed's mazes gives
    the same loss and metrics, at a fraction of the cost: ``demo_length=None`` sets it to that longest
    demonstration (:func:`longest_demonstration` of the seeds). The world's sizes are :class:`WorldFields`;
    ``n_in`` (the observation) and ``n_out`` (4 moves + the interactions) follow from them.
    """

    split: str = field("random", choices=gl.SPLITS)
    templates: int = positive(32)  # T, the hypernetworks' number of modules
    num_hidden: int = positive(2)
    outer_steps: int = positive(200_000)
    shots_support: int = positive(1)
    shots_query: int = positive(1)
    eval_shots_query: int = positive(1)
    demo_length: int | None = positive(gl.MAX_STEPS)

    def check(self):
        super().check()
        object.__setattr__(self, "demo_length", check_world(self, self.split, self.demo_length))

    @property
    def n_in(self) -> int:
        return self.world.obs_size

    @property
    def n_out(self) -> int:
        return self.world.n_actions

    @property
    def n_templates(self) -> int:
        return self.templates

    def eval_set_names(self):
        return EVAL_SETS


# --------------------------------------------------------------------------------------------- environment


def evaluation_goals(seed, split, num, world=gl.WORLD):
    """The fixed evaluation sets of a run: ``{name: goals (num, 4)}`` for valid, test (training goals) and ood.

    Keys: ``split(key(seed), 4)`` gives (unused: the training key, test, valid, ood), as the other sections;
    each task's goal is drawn uniformly from its set's goal ids.
    """
    train, ood = goal_split(split, seed, world)
    _, k_test, k_valid, k_ood = jax.random.split(jax.random.key(seed), 4)
    draw = lambda key, ids: np.asarray(jax.vmap(lambda k: gl.sample_goal(k, ids, world))(jax.random.split(key, num)))
    return {"valid": draw(k_valid, train), "test": draw(k_test, train), "ood": draw(k_ood, ood)}


def run_arrays(cfg, seed):
    """One run's inputs: the mazes of the seed and their path tables, its training goals (padded) and the fixed
    evaluation goals."""
    world = cfg.world
    train, _ = goal_split(cfg.split, seed, world)
    padded = np.zeros(world.n_goals, np.int32)
    padded[: len(train)] = train
    sets = evaluation_goals(seed, cfg.split, cfg.eval_tasks, world)
    return {
        "seed_key": jax.random.key(seed),
        "tables": gl.make_tables(seed, world=world),
        "mazes": gl.make_mazes(seed, world=world),
        "train_ids": padded,
        "n_train": len(train),
        "eval_tasks": np.stack([sets[n] for n in cfg.eval_set_names()]),
        "eval_valid": np.ones(len(cfg.eval_set_names()), bool),
    }


def sample_tasks(cfg, run, key, num):
    """``num`` training goals drawn uniformly from the run's (padded) training goal ids: (num, 4) int32."""
    ids = run["train_ids"][jax.random.randint(key, (num,), 0, run["n_train"])]
    return jnp.asarray(gl.goal_table(cfg.world))[ids]


def episode_metrics(prediction, target, n_query):
    """:func:`compgen.tasks.goals.episode_metrics` of the query trajectories (prediction (n_query·L, 6))."""
    actions, mask = target
    length = actions.shape[0] // n_query
    return gl.episode_metrics(
        prediction.reshape(n_query, length, -1), actions.reshape(n_query, length), mask.reshape(n_query, length)
    )


def goal_latent(cfg, goal):
    """A goal (4,) as one one-hot per factor, concatenated: (4 + 2 + 5 + 5,) = (16,) in the paper's world."""
    return jnp.concatenate([jax.nn.one_hot(goal[i], n) for i, n in enumerate(cfg.world.factor_sizes)])


def support_tokens(cfg, support_set):
    """A support demonstration as an in-context learner reads it: (observations, one-hot optimal actions, mask)."""
    x, (actions, mask) = support_set
    return x, jax.nn.one_hot(actions, cfg.world.n_actions), mask


ENV = fewshot.Environment(
    name="goals",
    run_arrays=run_arrays,
    sample_tasks=sample_tasks,
    loss=gl.masked_cross_entropy,
    task_data=lambda cfg, run, world, goal, key, n_query: gl.task_data(
        run["tables"], run["mazes"], goal, key, cfg.shots_support, n_query, cfg.demo_length, cfg.world
    ),
    metrics=episode_metrics,
    latent=goal_latent,
    tokens=support_tokens,
    headline="acc",
)


def label(cfg):
    world = "" if cfg.world == gl.WORLD else f"world {world_label(cfg)}"
    return (
        f"{fewshot.learner_text(cfg, f'demo length {cfg.demo_length}', world)} on {cfg.split} support: "
        f"{len(cfg.seeds)} seed(s), {cfg.outer_steps} steps"
    )


def flops_per_step(cfg) -> float:
    return fewshot.flops_per_step(cfg, cfg.demo_length * cfg.shots_support, cfg.demo_length * cfg.shots_query)


def longest_demonstration(seeds, world: gl.GoalsWorld = gl.WORLD) -> int:
    """Steps of the longest demonstration possible in the mazes of any of ``seeds`` (a padding that loses nothing)."""
    return max(shortest_demonstration_bound(int(s), world) for s in seeds)


# --------------------------------------------------------------------------------------------- trained learners


def meta_params(cfg: GoalsConfig, flat):
    """The meta-parameter pytree of ``cfg``'s model from a flat vector (a row of ``final/meta``)."""
    unravel = ravel_pytree(cfg.build_model().init(jax.random.key(0)))[1]
    return unravel(jnp.asarray(flat))


def imitate(cfg: GoalsConfig, flat_meta, seed, goals, key):
    """Adapt a trained learner to each of ``goals`` (n, 4) on fresh support demonstrations, then let it act.

    ``flat_meta`` is a row of ``final/meta`` of a run of ``cfg`` with seed ``seed``. Goal i uses
    ``split(key, n)[i]``, split into (support instances, new instance, inner loop), so the same key gives every
    learner the same demonstrations and the same new instances. The learner acts greedily (argmax of its
    logits) in closed loop from the new instance's start. Returns a dict of arrays with a leading goal axis:
    ``support_instances`` (each leaf (n, shots_support, ...)), ``support_cells`` (n, shots_support, demo_length)
    and ``support_distance`` (n, shots_support) (the demonstrated paths and their lengths); ``instance`` (the
    new instances), their ``optimal_cells`` (n, demo_length) and ``distance`` (n,); ``cells`` (n, demo_length +
    1) and ``actions`` (n, demo_length) of the learner's rollouts, and ``success`` (n,) (it took the goal's
    interaction on the goal cell). Unlike ``acc_all`` (every step of the optimal trajectory predicted,
    teacher-forced), a rollout may leave the optimal path and still succeed.
    """
    params_ = meta_params(cfg, flat_meta)
    tables, mazes = gl.make_tables(seed, world=cfg.world), gl.make_mazes(seed, world=cfg.world)
    goals = jnp.asarray(goals, jnp.int32).reshape(-1, 4)
    return jax.device_get(_imitate(cfg, params_, tables, mazes, goals, jax.random.split(key, goals.shape[0])))


def _imitate_one(cfg, params_, tables, mazes, goal, key):
    model, world = cfg.build_model(), cfg.world
    k_support, k_test, k_inner = jax.random.split(key, 3)
    support_instances = jax.vmap(lambda k: gl.sample_instance(k, tables, goal, world))(
        jax.random.split(k_support, cfg.shots_support)
    )
    obs, actions, mask = jax.vmap(lambda inst: gl.demonstration(tables, mazes, inst, goal, cfg.demo_length, world))(
        support_instances
    )
    support_set = (obs.reshape(-1, world.obs_size), (actions.reshape(-1), mask.reshape(-1)))
    loop = meta.InnerLoop(fewshot.inner_optimizer(cfg), cfg.inner_steps, cfg.inner_batch)
    fast, _ = meta.adapt(model, params_, support_set, gl.masked_cross_entropy, loop, k_inner)
    instance = gl.sample_instance(k_test, tables, goal, world)
    policy = lambda o: jnp.argmax(model.apply(params_, fast, o[None])[0])
    cells, taken, success = gl.rollout(policy, tables, mazes, instance, goal, cfg.demo_length, world)
    distance = lambda inst: tables["distance"][goal[2], inst["agent"], inst["objects"][0]]
    return {
        "support_instances": support_instances,
        "support_cells": jax.vmap(lambda inst: gl.optimal_path(tables, inst, goal, cfg.demo_length))(support_instances),
        "support_distance": jax.vmap(distance)(support_instances),
        "instance": instance,
        "optimal_cells": gl.optimal_path(tables, instance, goal, cfg.demo_length),
        "distance": distance(instance),
        "cells": cells,
        "actions": taken,
        "success": success,
    }


@functools.partial(jax.jit, static_argnums=0)
def _imitate(cfg, params_, tables, mazes, goals, keys):
    return jax.lax.map(lambda a: _imitate_one(cfg, params_, tables, mazes, *a), (goals, keys), batch_size=16)


# --------------------------------------------------------------------------------------------- presets

_E = dict(split=("random", "non_compositional"))
# the quick preset's world (chosen on seeds 7-9, checked on 31-33; the book uses 2020-2022)
QUICK_WORLD = dict(grid=5, n_mazes=2, n_object_types=3, n_distractors=2, min_distance=2)


def _figa10(models_, hidden, templates, outer_lr=None, **fixed):
    axes = dict(hidden=hidden, templates=templates)
    if outer_lr:
        axes["outer_lr"] = outer_lr
    return Grid(models=models_, fixed=dict(split="random", **fixed), axes=axes)


PRESETS = {
    "paper": Preset(
        "the paper's configuration (App. C.4); GPU",
        # the class defaults: B = 128, 200k steps, shots 1/1, outer weight decay 1e-2, inner weight decay 1e-4,
        # constant lr, demonstrations padded to 120 steps
        per_model={
            "hnet_deepmlp": dict(hidden=32, templates=8, inner_steps=10, inner_lr=0.1, outer_lr=1e-3, clip_norm=2.0),
            "hnet_linear": dict(hidden=32, templates=8, inner_steps=10, inner_lr=0.3, outer_lr=3e-3, clip_norm=2.0),
            "anil": dict(hidden=512, inner_steps=100, inner_batch=None, inner_lr=0.01, outer_lr=1e-3, clip_norm=2.0),
            "maml": dict(hidden=384, inner_steps=10, inner_lr=0.01, outer_lr=1e-3, clip_norm=1.0),
        },
        figures={
            "fig4ef": Grid(models=fewshot.MODELS, axes=_E),
            "figa10": _figa10(fewshot.HNETS, (32, 64, 128, 256), (8, 16, 32), (3e-4, 1e-3, 3e-3)),
        },
    ),
    "quick": Preset(
        "2 CPU cores, in a smaller world (5x5 mazes, 48 goals)",
        # A smaller world (search record book/search/goals.json): 5x5 mazes from the authors' generator, 2 mazes,
        # 3 object types, 2 distractors, the agent starting >= 2 steps from the goal object: 4 quadrants x 2
        # interactions x 2 mazes x 3 types = 48 goals (36 train / 12 OOD), a 125-wide observation, demonstrations
        # padded to the longest one of the seeds' mazes (17 steps for 2020-2022). Both splits are the paper's.
        common=dict(
            QUICK_WORLD,
            outer_steps=2000,
            meta_batch=16,
            demo_length=None,
            eval_every=500,
            eval_tasks=128,
        ),
        # outer learning rates 3x the paper's: every learner leaves its initial plateau within ~200 steps; the
        # paper's inner loops (10 steps, ANIL 100): with half of them (5, ANIL 20) the hypernetworks' lead was
        # narrower on every seed set (the chapter's diagnosis and search record)
        per_model={
            "hnet_linear": dict(outer_lr=1e-2),
            "hnet_deepmlp": dict(outer_lr=3e-3),
            "anil": dict(hidden=128, outer_lr=3e-3),
            "maml": dict(hidden=64, outer_lr=3e-3),
        },
        figures={
            "fig4ef": Grid(models=fewshot.MODELS, axes=_E),
            "figa10": _figa10(("hnet_linear",), (32, 64), (8, 16), seeds=(2020,)),
        },
    ),
    "smoke": Preset(
        "nearly all compilation; checks that everything runs, shows nothing",
        common=dict(
            outer_steps=6,
            meta_batch=2,
            demo_length=None,
            eval_every=3,
            eval_tasks=8,
            eval_chunk=8,
            seeds=(2020,),
        ),
        per_model={
            "hnet_linear": dict(hidden=16, templates=4, inner_steps=2),
            "hnet_deepmlp": dict(hidden=16, templates=4, inner_steps=2),
            "anil": dict(hidden=16, inner_steps=3),
            "maml": dict(hidden=16, inner_steps=2),
        },
        figures={"fig4ef": Grid(models=fewshot.MODELS, axes=_E), "figa10": _figa10(fewshot.HNETS, (16,), (4,))},
    ),
}

SECTION = fewshot.make_section(
    ENV,
    "goals",
    GoalsConfig,
    PRESETS,
    flops_per_step=flops_per_step,
    label=label,
    keep_params=True,
)
