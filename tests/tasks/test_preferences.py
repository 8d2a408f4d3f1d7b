import jax
import jax.numpy as jnp
import numpy as np
import pytest

from compgen.tasks import preferences as pf


def random_instances(seed, num):
    keys = jax.random.split(jax.random.key(seed), num)
    instances = jax.vmap(pf.sample_instance)(keys)
    preferences = jax.random.normal(jax.random.key(seed + 1), (num, pf.N_COLOURS))
    return instances, preferences


def hand_instance():
    """Agent at (1,1); +1 object right of it at (1,2); -1 object below it at (2,1); two 0-valued objects far away."""
    cell = {int(c): i for i, c in enumerate(pf.FREE_CELLS)}
    at = lambda r, c: cell[r * pf.GRID + c]
    instance = {
        "agent": jnp.int32(at(1, 1)),
        "cells": jnp.array([at(1, 2), at(2, 1), at(5, 4), at(5, 5)], jnp.int32),
        "colours": jnp.array([0, 1, 2, 2], jnp.int32),
    }
    preferences = jnp.array([1.0, -1.0, 0, 0, 0, 0, 0, 0])
    return instance, preferences


def test_layout_has_19_free_cells_and_304_states():
    assert pf.N_CELLS == 19 and pf.N_STATES == 304 and pf.OBS_SIZE == 490
    # a move into a wall stays put; terminate never moves
    assert (pf.NEXT_CELL[:, 0] == np.arange(19)).all()
    top_left = list(pf.FREE_CELLS).index(1 * 7 + 1)
    assert pf.NEXT_CELL[top_left, 1] == top_left and pf.NEXT_CELL[top_left, 4] == top_left


def solve_one(instance, preferences):
    next_state, reward = pf.transitions(instance, preferences)
    q7, q8 = (pf.value_iteration(next_state, reward, backups=n) for n in (7, 8))
    return next_state, reward, q7, q8, pf.demonstration(instance, preferences)


def solve_all(instances, preferences):
    """Transitions, Q₇, Q₈ and the demonstration of each instance (vmapped), as numpy arrays."""
    return jax.tree.map(np.asarray, _solve_all(instances, preferences))


_solve_all = jax.jit(jax.vmap(solve_one))


def test_value_iteration_satisfies_the_finite_horizon_bellman_equation():
    next_state, reward, q7, q8, _ = solve_all(*random_instances(0, 64))
    v7 = q7.max(-1)
    backup = reward + pf.GAMMA * np.take_along_axis(v7, next_state.reshape(64, -1), 1).reshape(next_state.shape)
    np.testing.assert_allclose(q8, backup, rtol=0, atol=1e-6)
    np.testing.assert_allclose(q8[..., 0], pf.GAMMA * v7, atol=1e-6)  # terminate: a zero-reward self-loop
    assert (reward[..., 0] == 0).all() and (next_state[..., 0] == np.arange(pf.N_STATES)).all()


def test_transitions_collect_each_object_once():
    instance, preferences = hand_instance()
    next_state, reward = pf.transitions(instance, preferences)
    start = pf.state_index(instance["agent"], 15)
    right, down = 2, 3
    assert float(reward[start, right]) == 1.0 and float(reward[start, down]) == -1.0
    after = next_state[start, right]
    assert int(after) == pf.state_index(instance["cells"][0], 15 - 1)  # object 0's bit cleared
    back_and_forth = next_state[next_state[after, 4], right]  # left, then right again
    assert float(reward[next_state[after, 4], right]) == 0.0 and int(back_and_forth) == int(after)


def test_hand_built_instance_values_and_greedy_path():
    instance, preferences = hand_instance()
    next_state, reward = pf.transitions(instance, preferences)
    q = pf.value_iteration(next_state, reward)
    start = pf.state_index(instance["agent"], 15)
    g = pf.GAMMA
    # terminate/up/left stay (γ·1), right collects +1 then nothing positive is left, down collects -1 then
    # walks back up and right to the +1 object (2 steps)
    np.testing.assert_allclose(q[start], [g * 1.0, g * 1.0, 1.0, -1.0 + g * g * 1.0, g * 1.0], atol=1e-6)
    obs, targets, mask, actions, cells = pf.demonstration(instance, preferences)
    assert actions[0] == 2 and actions[1] == 0  # right, then terminate: nothing positive is left
    np.testing.assert_array_equal(mask, [True, True] + [False] * 6)
    assert int(cells[1]) == int(instance["cells"][0]) and (cells[1:] == cells[1]).all()  # frozen after termination
    np.testing.assert_allclose(targets[0], q[start], atol=1e-6)


def test_observation_channels():
    instance, preferences = hand_instance()
    obs, *_ = pf.demonstration(instance, preferences)
    grid = np.asarray(obs).reshape(8, 7, 7, pf.OBS_CHANNELS)
    np.testing.assert_array_equal(grid[0, ..., 9], pf.WALLS)
    assert grid[0, 1, 1, 8] == 1 and grid[0, ..., 8].sum() == 1  # the agent
    assert grid[0, 1, 2, 0] == 1 and grid[0, 2, 1, 1] == 1 and grid[0, 5, 4, 2] == 1  # colour one-hots
    assert grid[1, 1, 2, 0] == 0 and grid[1, 1, 2, 8] == 1  # collected object disappears; agent on its cell
    assert grid[0, ..., :8].sum() == 4 and grid[1, ..., :8].sum() == 3


def test_greedy_rollout_never_prefers_a_worse_negative_step_and_terminates_when_nothing_is_positive():
    instances, preferences = random_instances(1, 64)
    next_state, reward, _, q, (_, targets, mask, actions, _) = solve_all(instances, preferences)
    agents = np.asarray(instances["agent"])
    for i in range(64):
        state = pf.state_index(agents[i], 15)
        for t in np.flatnonzero(mask[i]):  # replay the rollout in the tables
            a = int(actions[i, t])
            np.testing.assert_array_equal(targets[i, t], q[i, state])
            assert q[i, state, a] == q[i, state].max() and (a == 0 or q[i, state, a] > q[i, state, 0])
            if reward[i, state, a] < 0:  # a negative object is only collected when stopping is worse still
                assert q[i, state, a] > q[i, state, 0]
            state = next_state[i, state, a]
        assert mask[i, 0] and (np.diff(mask[i].astype(int)) <= 0).all()  # masked only after termination
    negative = -jnp.abs(preferences)  # nothing positive anywhere: terminate at once and stay
    *_, (_, _, mask, actions, cells) = solve_all(instances, negative)
    assert (actions[:, 0] == 0).all() and (mask.sum(1) == 1).all() and (cells == agents[:, None]).all()


def test_instances_are_valid_and_reproducible():
    keys = jax.random.split(jax.random.key(3), 200)
    instances = jax.jit(jax.vmap(pf.sample_instance))(keys)
    cells = np.concatenate([np.asarray(instances["agent"])[:, None], np.asarray(instances["cells"])], axis=1)
    assert all(len(set(row)) == 5 for row in cells) and cells.max() < 19 and cells.min() >= 0
    assert np.asarray(instances["colours"]).max() < 8
    again = jax.jit(jax.vmap(pf.sample_instance))(keys)
    jax.tree.map(np.testing.assert_array_equal, instances, again)
    templates = pf.preference_templates(2020)
    task = jax.jit(lambda key: pf.task_data(templates, jnp.ones(8) / 2, key, 4, 2))
    a, b = task(jax.random.key(0)), task(jax.random.key(0))
    jax.tree.map(np.testing.assert_array_equal, a, b)
    (x, (q, mask)), (xq, _) = a
    assert x.shape == (32, 490) and q.shape == (32, 5) and mask.shape == (32,) and xq.shape == (16, 490)


@pytest.mark.parametrize(
    "split, k, sizes",
    [
        ("random", 3, (69, 23)),
        ("non_compositional", 3, (63, 29)),
        ("connected", 2, (24, 10)),
        ("disconnected", 2, (20, 10)),
    ],
)
def test_split_sizes_follow_the_spec(split, k, sizes):
    train, ood, redraws = pf.task_split(8, k, split, seed=2020)
    assert (len(train), len(ood)) == sizes and not set(train) & set(ood)
    masks = pf.task_masks(8, k)
    if split == "non_compositional":
        assert (masks[ood, 7] == 1).all() and (masks[train, 7] == 0).all()
    if split in ("connected", "disconnected"):
        pairs = {tuple(np.flatnonzero(m)) for m in masks[ood]}
        assert all(len(p) == 2 and min((p[1] - p[0]) % 8, (p[0] - p[1]) % 8) in (3, 4) for p in pairs)
        assert (0, 3) not in pairs and (4, 7) not in pairs


def test_random_split_trains_every_module():
    for seed in range(2020, 2030):
        train, _, _ = pf.task_split(8, 3, "random", seed=seed)
        assert pf.task_masks(8, 3)[train].any(axis=0).all()


def test_evaluation_sets():
    train, ood, _ = pf.task_split(8, 3, "random", seed=2020)
    sets = pf.evaluation_latents(jax.random.key(2020), 8, 3, train, ood, 64)
    assert set(sets) == {"valid", "test", "ood"} | {f"ood_{k}" for k in range(4, 9)}
    masks = pf.task_masks(8, 3)
    ood_masks = {tuple(m) for m in masks[ood]}
    assert all(tuple((np.asarray(z) > 0).astype(int)) in ood_masks for z in sets["ood"])
    for k in range(4, 9):
        assert ((np.asarray(sets[f"ood_{k}"]) > 0).sum(-1) == k).all()
    active = np.asarray(sets["test"])[np.asarray(sets["test"]) > 0]
    assert (active > 0.5).all() and (active < 1).all()  # continuous Algorithm 1 weights, code version


def test_masked_loss_ignores_masked_steps():
    q = jnp.ones((6, 5))
    mask = jnp.array([1, 1, 0, 0, 0, 0], bool)
    pred = jnp.zeros((6, 5)).at[2:].set(100.0)
    assert float(pf.masked_squared_error(pred, (q, mask))) == pytest.approx(2.5)
    assert float(pf.masked_squared_error(pred, (q, jnp.zeros(6, bool)))) == 0.0


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: pf.task_split(8, 3, "ring"), "split must be one of"),
        (lambda: pf.task_split(8, 9, "random"), "max_hot"),
        (lambda: pf.task_split(8, 0, "random"), "max_hot"),
        (lambda: pf.task_split(8, 3, "connected"), "max_hot"),
        (lambda: pf.check_masks(np.ones(7)), "length n_modules=8"),
        (lambda: pf.check_masks(np.full(8, 2)), "0 or 1"),
    ],
)
def test_errors_name_the_parameter(call, match):
    with pytest.raises(ValueError, match=match):
        call()
