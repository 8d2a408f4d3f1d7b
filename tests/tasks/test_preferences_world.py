"""The preferences world at sizes other than the paper's (PreferencesWorld): properties that must hold in any
world, checked on small ones; the paper's world is the default and is tested in test_preferences.py."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from compgen.tasks import preferences as pf
from compgen.tasks import support

SMALL = (
    pf.PreferencesWorld(layout="5x5", n_objects=2, n_colours=6, horizon=4, backups=4, observation="free_cells"),
    pf.PreferencesWorld(layout="6x6", n_objects=3, n_colours=4, horizon=6, backups=5),
    pf.PreferencesWorld(n_objects=3, n_colours=5, horizon=5, backups=7, observation="free_cells"),
)


def world_id(world):
    return f"{world.layout}-{world.n_objects}obj-{world.n_colours}col-{world.observation}"


def test_the_default_world_is_the_papers():
    w = pf.PreferencesWorld()
    assert w == pf.WORLD and hash(w) == hash(pf.WORLD)
    assert (w.grid, w.n_cells, w.n_states, w.obs_size, w.obs_channels) == (7, 19, 304, 490, 10)
    assert (w.n_objects, w.n_colours, w.horizon, w.backups) == (4, 8, 8, 8)
    assert (w.walls == pf.WALLS).all() and (w.next_cell == pf.NEXT_CELL).all()


@pytest.mark.parametrize("layout", sorted(pf.LAYOUTS))
def test_every_layout_is_one_closed_room(layout):
    w = pf.PreferencesWorld(layout=layout, n_objects=1)
    walls, nxt = w.walls, w.next_cell
    assert walls.shape == (w.grid, w.grid) and len(set(map(len, pf.LAYOUTS[layout]))) == 1
    assert walls[0].all() and walls[-1].all() and walls[:, 0].all() and walls[:, -1].all()
    assert (~walls.ravel()[w.free_cells]).all() and w.n_cells == (~walls).sum()
    assert (nxt[:, 0] == np.arange(w.n_cells)).all() and 0 <= nxt.min() and nxt.max() < w.n_cells
    rows, cols = np.divmod(w.free_cells, w.grid)
    for a, (dr, dc) in enumerate(pf.MOVES[1:], start=1):  # a move goes to the neighbour, or stays at a wall
        moved = nxt[:, a] != np.arange(w.n_cells)
        target = (rows + dr) * w.grid + cols + dc
        assert (w.free_cells[nxt[moved, a]] == target[moved]).all() and walls.ravel()[target[~moved]].all()
    seen, frontier = {0}, [0]
    while frontier:  # every free cell is reachable from every other
        for cell in map(int, nxt[frontier.pop()]):
            if cell not in seen:
                seen.add(cell)
                frontier.append(cell)
    assert len(seen) == w.n_cells


@pytest.mark.parametrize("world", SMALL, ids=world_id)
def test_demonstrations_are_greedy_in_the_value_iteration_q(world):
    num = 48
    keys = jax.random.split(jax.random.key(0), num)
    prefs = jax.random.normal(jax.random.key(1), (num, world.n_colours))

    def solve(key, pref):
        inst = pf.sample_instance(key, world)
        ns, r = pf.transitions(inst, pref, world)
        before = pf.value_iteration(ns, r, world.backups - 1)
        return inst, ns, r, before, pf.value_iteration(ns, r, world.backups), pf.demonstration(inst, pref, world=world)

    inst, ns, r, before, q, (obs, targets, mask, actions, cells) = jax.tree.map(
        np.asarray, jax.jit(jax.vmap(solve))(keys, prefs)
    )
    assert ns.shape == (num, world.n_states, 5) and obs.shape == (num, world.horizon, world.obs_size)
    # Q is the finite-horizon Bellman backup of the previous iterate; terminate is a zero-reward self-loop
    v = before.max(-1)
    backup = r + pf.GAMMA * np.take_along_axis(v, ns.reshape(num, -1), 1).reshape(ns.shape)
    np.testing.assert_allclose(q, backup, atol=1e-5)
    assert (r[..., 0] == 0).all() and (ns[..., 0] == np.arange(world.n_states)).all()
    placed = np.concatenate([inst["agent"][:, None], inst["cells"]], 1)
    assert all(len(set(row)) == world.n_objects + 1 for row in placed) and placed.max() < world.n_cells
    assert inst["colours"].max() < world.n_colours
    full = 2**world.n_objects
    for i in range(num):  # replay each demonstration in the tables: the targets are Q, the actions its argmax
        state = pf.state_index(inst["agent"][i], full - 1, world)
        for t in np.flatnonzero(mask[i]):
            np.testing.assert_array_equal(targets[i, t], q[i, state])
            assert actions[i, t] == np.argmax(q[i, state]) and cells[i, t] == state // full
            state = ns[i, state, actions[i, t]]
        assert mask[i, 0] and (np.diff(mask[i].astype(int)) <= 0).all()
        assert (actions[i][mask[i]][:-1] != 0).all()  # only the last unmasked step may terminate
    *_, (_, _, mask, actions, _) = jax.tree.map(np.asarray, jax.jit(jax.vmap(solve))(keys, -jnp.abs(prefs)))
    assert (actions[:, 0] == 0).all() and (mask.sum(1) == 1).all()  # nothing worth collecting: stop at once


def test_free_cell_observation_is_the_grid_observation_without_the_constant_inputs():
    grid = pf.PreferencesWorld(layout="6x6", n_objects=3, n_colours=4)
    free = pf.PreferencesWorld(layout="6x6", n_objects=3, n_colours=4, observation="free_cells")
    assert free.obs_size == free.n_cells * (4 + 1) and grid.obs_size == 36 * (4 + 2)
    inst = pf.sample_instance(jax.random.key(5), grid)
    for available in (7, 5, 0):
        g = np.asarray(pf.observation(inst, inst["agent"], available, grid)).reshape(-1, grid.obs_channels)
        f = np.asarray(pf.observation(inst, inst["agent"], available, free)).reshape(-1, free.obs_channels)
        np.testing.assert_array_equal(f, g[grid.free_cells, :-1])  # the same colour and agent channels
        assert (g[grid.free_cells, -1] == 0).all() and (g[:, :-1].sum(0) == f.sum(0)).all()  # nothing lost


@pytest.mark.parametrize("world", SMALL, ids=world_id)
def test_task_data_shapes_and_reproducibility(world):
    templates = pf.preference_templates(3, 6, world.n_colours)
    assert templates.shape == (6, world.n_colours)
    task = jax.jit(lambda key: pf.task_data(templates, jnp.ones(6) / 2, key, 3, 2, world=world))
    a, b = task(jax.random.key(0)), task(jax.random.key(0))
    jax.tree.map(np.testing.assert_array_equal, a, b)
    (x, (q, mask)), (xq, _) = a
    assert x.shape == (3 * world.horizon, world.obs_size) and q.shape == (3 * world.horizon, 5)
    assert mask.shape == (3 * world.horizon,) and xq.shape == (2 * world.horizon, world.obs_size)


@pytest.mark.parametrize("m", [5, 6, 7])
@pytest.mark.parametrize("seed", [2020, 7])
def test_splits_at_other_m_are_compositional(m, seed):
    masks = pf.task_masks(m, 3)
    train, ood, _ = pf.task_split(m, 3, "random", seed=seed)
    assert len(ood) == int(0.25 * len(masks)) and not set(train) & set(ood)
    assert support.is_compositional(masks[train], m)  # every module is trained
    train, ood, _ = pf.task_split(m, 3, "non_compositional", seed=seed)
    assert (masks[ood, m - 1] == 1).all() and (masks[train, m - 1] == 0).all()
    assert len(train) + len(ood) == len(masks)


@pytest.mark.parametrize("m", [6, 8, 10])
def test_connected_and_disconnected_support_at_other_m(m):
    masks = pf.task_masks(m, 2)
    con, ood, _ = pf.task_split(m, 2, "connected")
    dis, ood_d, _ = pf.task_split(m, 2, "disconnected")
    assert (ood == ood_d).all() and len(ood) > 0 and not set(ood) & (set(con) | set(dis))
    assert support.is_compositional(masks[con], m) and support.is_compositional(masks[dis], m)
    assert support.is_connected(masks[con]) and not support.is_connected(masks[dis])
    for pair in masks[ood]:  # held out: pairs in neither support
        i, j = np.flatnonzero(pair)
        assert min(j - i, m - (j - i)) >= 3 and (i < m // 2) != (j < m // 2)


@pytest.mark.parametrize(
    "fields, match",
    [
        (dict(layout="9x9"), "layout must be one of"),
        (dict(n_objects=0), "n_objects must be a positive integer"),
        (dict(n_colours=9), "n_colours must be at most 8"),
        (dict(horizon=0), "horizon"),
        (dict(backups=1.5), "backups"),
        (dict(observation="pixels"), "observation must be one of"),
        (dict(layout="5x5", n_objects=8), "n_objects must be at most 7 on layout '5x5'"),
        (dict(n_objects=11), "n_objects must be at most 10"),
    ],
)
def test_world_errors_name_the_size(fields, match):
    with pytest.raises(ValueError, match=match):
        pf.PreferencesWorld(**fields)
