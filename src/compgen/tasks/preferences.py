"""The compositional-preferences grid world (paper §4.2, spec §3).

An agent on a fixed 7×7 grid collects coloured objects. A task is a hidden preference vector over
the 8 colours, a weighted sum of a few of the M = 8 preference modules (rows of a template matrix);
the agent's optimal action values come from finite-horizon value iteration over (cell, which objects
are left) and a demonstration is the greedy rollout of those values. A meta-learner sees 16
demonstrations of a task and must predict the action values in new layouts.

Everything per instance is a pure JAX function of explicit arrays, so a meta-batch of tasks and
their demonstrations is generated inside the compiled training step. The few static tables
(layout, moves) are numpy constants.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from compgen.tasks import support, teacher

LAYOUT = ("wwwwwww", "w  w  w", "w  w  w", "ww   ww", "w  w  w", "w  w  w", "wwwwwww")
GRID = 7
WALLS = np.array([[c == "w" for c in row] for row in LAYOUT])
FREE_CELLS = np.flatnonzero(~WALLS.ravel())  # grid index (row * 7 + col) of each of the 19 free cells
N_CELLS = len(FREE_CELLS)
N_OBJECTS = 4
N_COLOURS = 8
N_MODULES = 8
N_STATES = N_CELLS * 2**N_OBJECTS  # (free cell, availability bitmask): 304
ACTIONS = ("terminate", "up", "right", "down", "left")
N_ACTIONS = len(ACTIONS)
MOVES = ((0, 0), (-1, 0), (0, 1), (1, 0), (0, -1))  # (row, col) change of each action
GAMMA = 0.9
BACKUPS = 8
HORIZON = 8  # steps of a demonstration
OBS_CHANNELS = N_COLOURS + 2  # colours, agent, walls
OBS_SIZE = GRID * GRID * OBS_CHANNELS  # 490
SPLITS = support.SPLITS


def _move_table():
    """(N_CELLS, N_ACTIONS) free-cell index after each action; a move into a wall stays put."""
    index = {cell: i for i, cell in enumerate(FREE_CELLS)}
    table = np.zeros((N_CELLS, N_ACTIONS), np.int32)
    for i, cell in enumerate(FREE_CELLS):
        row, col = divmod(int(cell), GRID)
        for a, (dr, dc) in enumerate(MOVES):
            target = (row + dr) * GRID + col + dc
            table[i, a] = index.get(target, i)
    return table


NEXT_CELL = _move_table()


# --------------------------------------------------------------------------------------------- tasks


def preference_templates(seed: int, n_modules: int = N_MODULES):
    """The template matrix P (n_modules, 8 colours), entries N(0, 1) from ``key(seed)`` (spec §3.2)."""
    return jax.random.normal(jax.random.key(seed), (n_modules, N_COLOURS))


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
    """Colour preferences Pᵀz of task latents (..., M): (..., 8)."""
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
    """Training and OOD mask ids of a split (spec §3.4): ``(train (n,), ood (m,), redraws)``.

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
    """The k of the auxiliary ``ood_k`` sets: K+1..M (spec §3.4)."""
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
    """The fixed evaluation sets (spec §3.4): ``{name: latents (num, M)}`` for valid, test, ood and
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


def sample_instance(key):
    """A layout: agent and 4 objects on 5 distinct free cells, colours uniform with replacement.

    Returns ``{"agent": () int32, "cells": (4,) int32, "colours": (4,) int32}`` (free-cell indices).
    """
    k_cells, k_colours = jax.random.split(key)
    cells = jax.random.choice(k_cells, N_CELLS, (N_OBJECTS + 1,), replace=False).astype(jnp.int32)
    colours = jax.random.randint(k_colours, (N_OBJECTS,), 0, N_COLOURS, dtype=jnp.int32)
    return {"agent": cells[0], "cells": cells[1:], "colours": colours}


def state_index(cell, available):
    """Index of (free cell, availability bitmask) in 0..303."""
    return cell * 2**N_OBJECTS + available


def transitions(instance, preferences):
    """Next state and reward of every (state, action): ``(next (304, 5) int32, reward (304, 5))``.

    Stepping onto a cell whose object is still available collects it (its bit is cleared) and earns
    the preference for its colour; action 0 ("terminate") is a zero-reward self-loop (spec §3.3).
    """
    target = jnp.asarray(NEXT_CELL)  # (19, 5) cell after each action
    object_at = jnp.full(N_CELLS, -1).at[instance["cells"]].set(jnp.arange(N_OBJECTS))[target]  # (19, 5)
    bit = jnp.where(object_at >= 0, 2**object_at, 0)
    gain = jnp.where(object_at >= 0, preferences[instance["colours"][object_at]], 0.0)
    available = jnp.arange(2**N_OBJECTS)[None, :, None]
    collected = ((available & bit[:, None, :]) > 0) & (jnp.arange(N_ACTIONS) > 0)  # (19, 16, 5); terminate: never
    reward = collected * gain[:, None, :]
    next_state = state_index(target[:, None, :], available - collected * bit[:, None, :])
    return next_state.reshape(N_STATES, N_ACTIONS).astype(jnp.int32), reward.reshape(N_STATES, N_ACTIONS)


def value_iteration(next_state, reward, backups=BACKUPS, gamma=GAMMA):
    """Q_{k+1}(s, a) = r(s, a) + γ max_a' Q_k(s', a') from Q_0 = 0, ``backups`` times: (304, 5)."""

    def backup(q, _):
        return reward + gamma * q.max(-1)[next_state], None

    q, _ = jax.lax.scan(backup, jnp.zeros_like(reward), None, length=backups)
    return q


def observation(instance, cell, available):
    """The 7×7×10 observation, flattened to (490,): colour one-hots of the available objects, agent, walls."""
    positions = jax.nn.one_hot(jnp.asarray(FREE_CELLS)[instance["cells"]], GRID * GRID)  # (4, 49)
    present = ((available >> jnp.arange(N_OBJECTS)) & 1).astype(jnp.float32)
    colours = jax.nn.one_hot(instance["colours"], N_COLOURS) * present[:, None]  # (4, 8)
    agent = jax.nn.one_hot(jnp.asarray(FREE_CELLS)[cell], GRID * GRID)
    walls = jnp.asarray(WALLS.ravel(), jnp.float32)
    return jnp.concatenate([positions.T @ colours, agent[:, None], walls[:, None]], axis=1).reshape(-1)


def demonstration(instance, preferences, horizon=HORIZON):
    """The greedy rollout of Q₈ from the instance's start (spec §3.3).

    The action is ``argmax Q₈(s, ·)`` with ties to the lowest index, so when nothing positive is
    reachable the agent terminates. Returns ``(obs (horizon, 490), q_targets (horizon, 5), mask (horizon,),
    actions (horizon,), cells (horizon + 1,))``; ``mask`` is "not done before acting", so the terminating
    step is included and the frozen steps after it are masked.
    """
    next_state, reward = transitions(instance, preferences)
    q = value_iteration(next_state, reward)
    start = state_index(instance["agent"], 2**N_OBJECTS - 1)

    def step(carry, _):
        state, done = carry
        cell, available = state // 2**N_OBJECTS, state % 2**N_OBJECTS
        action = jnp.argmax(q[state])
        new_state = jnp.where(done | (action == 0), state, next_state[state, action])
        out = (observation(instance, cell, available), q[state], ~done, action, cell)
        return (new_state, done | (action == 0)), out

    (last, _), (obs, targets, mask, actions, cells) = jax.lax.scan(
        step, (start, jnp.array(False)), None, length=horizon
    )
    cells = jnp.concatenate([cells, (last // 2**N_OBJECTS)[None]])
    return obs, targets, mask, actions.astype(jnp.int32), cells


def trajectories(preferences, key, num, horizon=HORIZON):
    """``num`` demonstrations of one task on fresh layouts, flattened over (trajectory, step):
    ``(obs (num·horizon, 490), (q_targets (num·horizon, 5), mask (num·horizon,)))``."""
    obs, targets, mask, _, _ = jax.vmap(lambda k: demonstration(sample_instance(k), preferences, horizon))(
        jax.random.split(key, num)
    )
    return obs.reshape(num * horizon, OBS_SIZE), (targets.reshape(num * horizon, N_ACTIONS), mask.reshape(-1))


def task_data(templates, latent, key, n_support, n_query, horizon=HORIZON):
    """Support and query demonstrations of the task with latent z (M,): two ``(obs, (q, mask))`` sets."""
    k_support, k_query = jax.random.split(key)
    preferences = preferences_of(templates, latent)
    return trajectories(preferences, k_support, n_support, horizon), trajectories(
        preferences, k_query, n_query, horizon
    )


def masked_squared_error(prediction, target):
    """Σ_t mask_t Σ_a ½(Q̂ - Q)² / Σ_t mask_t (spec §3.4); ``target`` = (q (N, 5), mask (N,))."""
    q, mask = target
    per_step = 0.5 * ((prediction - q) ** 2).sum(-1)
    return (per_step * mask).sum() / jnp.maximum(mask.sum(), 1)
