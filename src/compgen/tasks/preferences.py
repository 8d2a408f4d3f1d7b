"""The compositional-preferences grid world (paper §4.2, App. C.3).

An agent on a fixed grid with walls (the paper's 7×7) collects coloured objects. A task is a hidden
preference vector over the colours, a weighted sum of a few of the M preference modules (rows of a
template matrix); the agent's optimal action values come from finite-horizon value iteration over
(cell, which objects are left) and a demonstration is the greedy rollout of those values. A
meta-learner sees a few demonstrations of a task and must predict the action values in new layouts.

The sizes below are the paper's (App. C.3); a smaller world is a :class:`PreferencesWorld` (layout,
objects, colours, demonstration length, value-iteration backups, observation) passed as ``world=`` to
the functions (a frozen, hashable value, static under jit). At the default sizes every function
behaves exactly as the paper's world: the same operations on the same arrays, bit for bit.

Everything per instance is a pure JAX function of explicit arrays, so a meta-batch of tasks and
their demonstrations is generated inside the compiled training step. The few static tables
(layout, moves) are numpy constants of the world.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from compgen.tasks import support, teacher

LAYOUT = ("wwwwwww", "w  w  w", "w  w  w", "ww   ww", "w  w  w", "w  w  w", "wwwwwww")
# The layouts a world can use (walls 'w'): the paper's, and two smaller rooms that keep a wall inside, so that
# a path may have to go around it: 14 free cells in "6x6", 8 around a central pillar in "5x5".
LAYOUTS = {
    "paper": LAYOUT,
    "6x6": ("wwwwww", "w    w", "w w  w", "w  w w", "w    w", "wwwwww"),
    "5x5": ("wwwww", "w   w", "w w w", "w   w", "wwwww"),
}
OBSERVATIONS = ("grid", "free_cells")
ACTIONS = ("terminate", "up", "right", "down", "left")
N_ACTIONS = len(ACTIONS)
MOVES = ((0, 0), (-1, 0), (0, 1), (1, 0), (0, -1))  # (row, col) change of each action
GAMMA = 0.9
N_MODULES = 8
MAX_COLOURS = 8  # the colours the book's figures can draw
MAX_OBJECTS = 10  # value iteration runs over cells × 2^objects states per demonstration
SPLITS = support.SPLITS


@functools.cache
def layout_tables(layout: str):
    """``(walls (g, g) bool, free cells (n,) grid indices row * g + col, next cell (n, 5) int32)`` of a layout
    in :data:`LAYOUTS`; a move into a wall stays put, terminate never moves. Read-only arrays."""
    rows = LAYOUTS[layout]
    grid = len(rows)
    walls = np.array([[c == "w" for c in row] for row in rows])
    free = np.flatnonzero(~walls.ravel())
    index = {int(cell): i for i, cell in enumerate(free)}
    table = np.zeros((len(free), N_ACTIONS), np.int32)
    for i, cell in enumerate(free):
        row, col = divmod(int(cell), grid)
        for a, (dr, dc) in enumerate(MOVES):
            table[i, a] = index.get((row + dr) * grid + col + dc, i)
    for array in (walls, free, table):
        array.setflags(write=False)
    return walls, free, table


@dataclass(frozen=True)
class PreferencesWorld:
    """The sizes of a preferences world; the defaults are the paper's (App. C.3). Frozen and hashable, so
    it can be a static argument of jitted functions.

    * ``layout``: a name in :data:`LAYOUTS` (the grid and its walls; "paper" is the 7×7 room of App. C.3);
    * ``n_objects``: objects per layout; the agent and the objects sit on distinct free cells;
    * ``n_colours``: colours, drawn uniformly with replacement for each object;
    * ``horizon``: steps of a demonstration; ``backups``: value-iteration backups from Q₀ = 0;
    * ``observation``: "grid" (the paper's g×g×(colours + 2) tensor: colour one-hots, agent, walls) or
      "free_cells" (the colour and agent channels at the free cells only: the walls never change, so it drops
      only inputs that are the same in every instance).
    """

    layout: str = "paper"
    n_objects: int = 4
    n_colours: int = 8
    horizon: int = 8
    backups: int = 8
    observation: str = "grid"

    def __post_init__(self):
        if self.layout not in LAYOUTS:
            raise ValueError(f"layout must be one of {tuple(LAYOUTS)}, got {self.layout!r}")
        if self.observation not in OBSERVATIONS:
            raise ValueError(f"observation must be one of {OBSERVATIONS}, got {self.observation!r}")
        for name in ("n_objects", "n_colours", "horizon", "backups"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if self.n_colours > MAX_COLOURS:
            raise ValueError(f"n_colours must be at most {MAX_COLOURS}, got {self.n_colours}")
        most = min(MAX_OBJECTS, self.n_cells - 1)
        if self.n_objects > most:
            raise ValueError(
                f"n_objects must be at most {most} on layout {self.layout!r} ({self.n_cells} free cells, one for the "
                f"agent; at most {MAX_OBJECTS} in any layout), got {self.n_objects}"
            )

    @property
    def grid(self):
        return len(LAYOUTS[self.layout])

    @property
    def walls(self):
        return layout_tables(self.layout)[0]

    @property
    def free_cells(self):
        """Grid index (row * grid + col) of each free cell."""
        return layout_tables(self.layout)[1]

    @property
    def next_cell(self):
        """(n_cells, 5) free-cell index after each action."""
        return layout_tables(self.layout)[2]

    @property
    def n_cells(self):
        return len(self.free_cells)

    @property
    def n_states(self):
        """(free cell, availability bitmask) pairs."""
        return self.n_cells * 2**self.n_objects

    @property
    def obs_channels(self):
        return self.n_colours + (2 if self.observation == "grid" else 1)

    @property
    def obs_size(self):
        return (self.grid**2 if self.observation == "grid" else self.n_cells) * self.obs_channels

    def describe(self) -> str:
        """The world in words, e.g. '7x7 layout (19 free cells), 4 objects, 8 colours, horizon 8, 8 backups,
        grid observation (490 inputs)'."""
        return (
            f"{self.grid}x{self.grid} layout ({self.n_cells} free cells), {self.n_objects} objects, {self.n_colours} "
            f"colours, horizon {self.horizon}, {self.backups} backups, {self.observation.replace('_', '-')} "
            f"observation ({self.obs_size} inputs)"
        )


WORLD = PreferencesWorld()  # the paper's world (App. C.3)
GRID = WORLD.grid  # 7
WALLS = WORLD.walls
FREE_CELLS = WORLD.free_cells  # grid index (row * 7 + col) of each of the 19 free cells
N_CELLS = WORLD.n_cells
N_OBJECTS = WORLD.n_objects
N_COLOURS = WORLD.n_colours
N_STATES = WORLD.n_states  # (free cell, availability bitmask): 304
BACKUPS = WORLD.backups
HORIZON = WORLD.horizon  # steps of a demonstration
OBS_CHANNELS = WORLD.obs_channels  # colours, agent, walls
OBS_SIZE = WORLD.obs_size  # 490
NEXT_CELL = WORLD.next_cell


# --------------------------------------------------------------------------------------------- tasks


def preference_templates(seed: int, n_modules: int = N_MODULES, n_colours: int = N_COLOURS):
    """The template matrix P (n_modules, n_colours), entries N(0, 1) from ``key(seed)`` (App. C.3)."""
    return jax.random.normal(jax.random.key(seed), (n_modules, n_colours))


def check_masks(masks, n_modules: int = N_MODULES, name: str = "mask"):
    """Raise a ValueError naming ``name`` unless ``masks`` (..., n_modules) holds 0/1 entries."""
    masks = np.asarray(masks)
    if masks.ndim == 0 or masks.shape[-1] != n_modules:
        raise ValueError(
            f"{name} must have length n_modules={n_modules} (one entry per preference module), got shape {masks.shape}"
        )
    if not np.isin(masks, (0, 1)).all():
        raise ValueError(f"{name} entries must be 0 or 1")
    return masks


def preferences_of(templates, latents):
    """Colour preferences Pᵀz of task latents (..., M): (..., colours)."""
    return latents @ templates


def task_masks(n_modules: int = N_MODULES, max_hot: int = 3):
    """Every mask with 1..K active modules, ordered by k (92 for M = 8, K = 3): (n, M) int32."""
    if isinstance(max_hot, bool) or int(max_hot) != max_hot or not 1 <= max_hot <= n_modules:
        raise ValueError(f"max_hot (K) must be an integer in 1..n_modules={n_modules}, got {max_hot!r}")
    return support.masks_up_to_k(n_modules, max_hot)


def task_split(
    n_modules: int = N_MODULES,
    max_hot: int = 3,
    split: str = "random",
    frac_ood: float = 0.25,
    seed: int = 0,
    max_redraws: int = 100,
):
    """Training and OOD mask ids of a split (App. C.3): ``(train (n,), ood (m,), redraws)``.

    * ``random``: a permutation of the masks from ``key(seed)``; the last ⌊frac_ood·n⌋ are OOD (69/23
      at M = 8, K = 3). The authors' code does not check that every module is trained; here the split
      is re-drawn until it is (``redraws`` counts how often; 0 for the paper's seeds).
    * ``non_compositional``: OOD = every mask that uses module M-1 (63/29).
    * ``connected`` / ``disconnected`` (K = 2, even M > 4): one-hots and ring pairs at distance 1 and 2
      (24) / one- and two-hots inside one half of the modules (20); OOD = the pairs in neither (10).
    """
    masks = task_masks(n_modules, max_hot)
    return support.layered_split(masks[:, None, :], max_hot, split, frac_ood, seed, max_redraws, what="masks")


def ood_k_values(n_modules: int, max_hot: int):
    """The k of the auxiliary ``ood_k`` sets: K+1..M (App. C.3)."""
    return tuple(range(max_hot + 1, n_modules + 1))


def sample_latents(key, masks, num):
    """``num`` task latents: a mask drawn uniformly from ``masks`` (n, M), continuous Algorithm 1 weights
    (the code's normalisation): (num, M)."""
    return teacher.sample_latents(key, masks, num, "continuous", "code")


def sample_k_hot_latents(key, n_modules, k, num):
    """``num`` latents with k distinct modules drawn uniformly, continuous weights: (num, M)."""
    k_modules, k_weights = jax.random.split(key)
    scores = jax.random.uniform(k_modules, (num, n_modules))
    kth = jnp.sort(scores, axis=-1)[:, n_modules - k][:, None]
    return teacher.continuous_latents(k_weights, (scores >= kth).astype(jnp.float32), "code")


def evaluation_latents(key, n_modules, max_hot, train_ids, ood_ids, num):
    """The fixed evaluation sets (App. C.3): ``{name: latents (num, M)}`` for valid, test, ood and
    ``ood_k`` (k = K+1..M, keys split from the ood key as in the authors' code)."""
    masks = task_masks(n_modules, max_hot)
    _, k_test, k_valid, k_ood = jax.random.split(key, 4)
    sets = {
        "valid": sample_latents(k_valid, masks[train_ids], num),
        "test": sample_latents(k_test, masks[train_ids], num),
        "ood": sample_latents(k_ood, masks[ood_ids], num),
    }
    aux = ood_k_values(n_modules, max_hot)
    for k, aux_key in zip(aux, jax.random.split(k_ood, len(aux) + 1)[1:]):
        sets[f"ood_{k}"] = sample_k_hot_latents(aux_key, n_modules, k, num)
    return sets


# --------------------------------------------------------------------------------------------- one instance


def sample_instance(key, world: PreferencesWorld = WORLD):
    """A layout: the agent and ``n_objects`` objects on distinct free cells, colours uniform with replacement.

    Returns ``{"agent": () int32, "cells": (n_objects,) int32, "colours": (n_objects,) int32}`` (free-cell
    indices; 4 objects in the paper's world).
    """
    k_cells, k_colours = jax.random.split(key)
    cells = jax.random.choice(k_cells, world.n_cells, (world.n_objects + 1,), replace=False).astype(jnp.int32)
    colours = jax.random.randint(k_colours, (world.n_objects,), 0, world.n_colours, dtype=jnp.int32)
    return {"agent": cells[0], "cells": cells[1:], "colours": colours}


def state_index(cell, available, world: PreferencesWorld = WORLD):
    """Index of (free cell, availability bitmask) in 0..n_states-1 (0..303 in the paper's world)."""
    return cell * 2**world.n_objects + available


def transitions(instance, preferences, world: PreferencesWorld = WORLD):
    """Next state and reward of every (state, action): ``(next (n_states, 5) int32, reward (n_states, 5))``.

    Stepping onto a cell whose object is still available collects it (its bit is cleared) and earns
    the preference for its colour; action 0 ("terminate") is a zero-reward self-loop (App. C.3).
    """
    n_cells, n_objects = world.n_cells, world.n_objects
    target = jnp.asarray(world.next_cell)  # (cells, 5) cell after each action
    object_at = jnp.full(n_cells, -1).at[instance["cells"]].set(jnp.arange(n_objects))[target]  # (cells, 5)
    bit = jnp.where(object_at >= 0, 2**object_at, 0)
    gain = jnp.where(object_at >= 0, preferences[instance["colours"][object_at]], 0.0)
    available = jnp.arange(2**n_objects)[None, :, None]
    collected = ((available & bit[:, None, :]) > 0) & (jnp.arange(N_ACTIONS) > 0)  # (cells, 2^n, 5); never terminate
    reward = collected * gain[:, None, :]
    next_state = state_index(target[:, None, :], available - collected * bit[:, None, :], world)
    return next_state.reshape(world.n_states, N_ACTIONS).astype(jnp.int32), reward.reshape(world.n_states, N_ACTIONS)


def value_iteration(next_state, reward, backups=BACKUPS, gamma=GAMMA):
    """Q_{k+1}(s, a) = r(s, a) + γ max_a' Q_k(s', a') from Q_0 = 0, ``backups`` times: (n_states, 5)."""

    def backup(q, _):
        return reward + gamma * q.max(-1)[next_state], None

    q, _ = jax.lax.scan(backup, jnp.zeros_like(reward), None, length=backups)
    return q


def observation(instance, cell, available, world: PreferencesWorld = WORLD):
    """The observation, flattened to (obs_size,): colour one-hots of the available objects, the agent, the walls.

    "grid" (the paper's): the g×g×(colours + 2) tensor, 7×7×10 = (490,) in the paper's world; "free_cells": the
    colour and agent channels at the free cells only, (n_cells × (colours + 1),).
    """
    present = ((available >> jnp.arange(world.n_objects)) & 1).astype(jnp.float32)
    colours = jax.nn.one_hot(instance["colours"], world.n_colours) * present[:, None]  # (objects, colours)
    if world.observation == "free_cells":
        positions = jax.nn.one_hot(instance["cells"], world.n_cells)  # (objects, cells)
        agent = jax.nn.one_hot(cell, world.n_cells)
        return jnp.concatenate([positions.T @ colours, agent[:, None]], axis=1).reshape(-1)
    free, size = jnp.asarray(world.free_cells), world.grid * world.grid
    positions = jax.nn.one_hot(free[instance["cells"]], size)  # (objects, g²)
    agent = jax.nn.one_hot(free[cell], size)
    walls = jnp.asarray(world.walls.ravel(), jnp.float32)
    return jnp.concatenate([positions.T @ colours, agent[:, None], walls[:, None]], axis=1).reshape(-1)


def demonstration(instance, preferences, horizon=None, world: PreferencesWorld = WORLD):
    """The greedy rollout of Q (``world.backups`` backups: Q₈ in the paper's world) from the instance's start
    (App. C.3).

    The action is ``argmax Q(s, ·)`` with ties to the lowest index, so when nothing positive is reachable
    the agent terminates. Returns ``(obs (horizon, obs_size), q_targets (horizon, 5), mask (horizon,),
    actions (horizon,), cells (horizon + 1,))``; ``mask`` is "not done before acting", so the terminating
    step is included and the frozen steps after it are masked. ``horizon`` defaults to the world's.
    """
    horizon = world.horizon if horizon is None else horizon
    full = 2**world.n_objects
    next_state, reward = transitions(instance, preferences, world)
    q = value_iteration(next_state, reward, world.backups)
    start = state_index(instance["agent"], full - 1, world)

    def step(carry, _):
        state, done = carry
        cell, available = state // full, state % full
        action = jnp.argmax(q[state])
        new_state = jnp.where(done | (action == 0), state, next_state[state, action])
        out = (observation(instance, cell, available, world), q[state], ~done, action, cell)
        return (new_state, done | (action == 0)), out

    (last, _), (obs, targets, mask, actions, cells) = jax.lax.scan(
        step, (start, jnp.array(False)), None, length=horizon
    )
    cells = jnp.concatenate([cells, (last // full)[None]])
    return obs, targets, mask, actions.astype(jnp.int32), cells


def trajectories(preferences, key, num, horizon=None, world: PreferencesWorld = WORLD):
    """``num`` demonstrations of one task on fresh layouts, flattened over (trajectory, step):
    ``(obs (num·horizon, obs_size), (q_targets (num·horizon, 5), mask (num·horizon,)))``."""
    horizon = world.horizon if horizon is None else horizon
    obs, targets, mask, _, _ = jax.vmap(
        lambda k: demonstration(sample_instance(k, world), preferences, horizon, world)
    )(jax.random.split(key, num))
    return obs.reshape(num * horizon, world.obs_size), (targets.reshape(num * horizon, N_ACTIONS), mask.reshape(-1))


def task_data(templates, latent, key, n_support, n_query, horizon=None, world: PreferencesWorld = WORLD):
    """Support and query demonstrations of the task with latent z (M,): two ``(obs, (q, mask))`` sets."""
    k_support, k_query = jax.random.split(key)
    preferences = preferences_of(templates, latent)
    return (
        trajectories(preferences, k_support, n_support, horizon, world),
        trajectories(preferences, k_query, n_query, horizon, world),
    )


def masked_squared_error(prediction, target):
    """Σ_t mask_t Σ_a ½(Q̂ - Q)² / Σ_t mask_t (App. C.3); ``target`` = (q (N, 5), mask (N,))."""
    q, mask = target
    per_step = 0.5 * ((prediction - q) ** 2).sum(-1)
    return (per_step * mask).sum() / jnp.maximum(mask.sum(), 1)
