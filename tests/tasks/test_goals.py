from collections import deque

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from compgen.tasks import goals as gw

SEED = 2020


@pytest.fixture(scope="module")
def world():
    return gw.make_mazes(SEED), gw.make_tables(SEED)


@jax.jit
def draw(keys, tables, mazes, goals):
    """Instances and demonstrations of a batch of goals, one key each."""

    def one(key, goal):
        instance = gw.sample_instance(key, tables, goal)
        return instance, gw.demonstration(tables, mazes, instance, goal)

    return jax.vmap(one)(keys, goals)


GOALS = gw.goal_table()[np.arange(0, 200, 7)]


@pytest.fixture(scope="module")
def demos(world):
    mazes, tables = world
    out = draw(jax.random.split(jax.random.key(0), len(GOALS)), tables, mazes, jnp.asarray(GOALS))
    return jax.tree.map(np.asarray, out)


def pick(tree, n):
    return jax.tree.map(lambda x: x[n], tree)


def bfs(walls, source):
    """Plain breadth-first search distances from one cell (−1 where unreachable)."""
    size = walls.shape[0]
    dist = -np.ones(walls.shape, int)
    dist[divmod(source, size)] = 0
    queue = deque([divmod(source, size)])
    while queue:
        r, c = queue.popleft()
        for dr, dc in ((-1, 0), (0, 1), (1, 0), (0, -1)):
            rr, cc = r + dr, c + dc
            if 0 <= rr < size and 0 <= cc < size and not walls[rr, cc] and dist[rr, cc] < 0:
                dist[rr, cc] = dist[r, c] + 1
                queue.append((rr, cc))
    return dist.reshape(-1)


def test_mazes_are_deterministic_per_seed_and_differ_between_seeds():
    np.testing.assert_array_equal(gw.generate_maze(SEED), gw.generate_maze(SEED))
    mazes = gw.make_mazes(SEED)
    assert mazes.shape == (5, 11, 11) and mazes.dtype == bool
    assert len({m.tobytes() for m in mazes}) == 5
    np.testing.assert_array_equal(gw.make_mazes(SEED + 1)[0], mazes[1])  # maze i comes from default_rng(seed + i)
    for seed in range(10):
        walls = gw.generate_maze(seed)
        assert 0.3 < walls.mean() < 0.5
        assert not walls[::2, ::2].any()  # the odd nodes of the padded grid are never walls


def test_free_space_is_one_component():
    for seed in range(30):
        walls = gw.generate_maze(seed)
        free = np.flatnonzero(~walls.reshape(-1))
        assert (bfs(walls, free[0])[free] >= 0).all()


@pytest.mark.parametrize("seed", [0, 7, 2020, 2024])
def test_distances_agree_with_breadth_first_search(seed):
    walls = gw.generate_maze(seed)
    tables = gw.maze_tables(walls)
    free = ~walls.reshape(-1)
    for a in np.flatnonzero(free):
        expected = np.where(free, bfs(walls, a), gw.UNREACHABLE)
        np.testing.assert_array_equal(tables["distance"][a], expected)
    assert (tables["distance"][~free] == gw.UNREACHABLE).all()


def test_next_action_reaches_the_goal_in_exactly_distance_steps():
    walls = gw.generate_maze(SEED)
    tables = gw.maze_tables(walls)
    free = np.flatnonzero(~walls.reshape(-1))
    a, g = np.meshgrid(free, free, indexing="ij")
    a, g = a.ravel(), g.ravel()
    distance = tables["distance"][a, g]
    assert (distance < gw.UNREACHABLE).all()  # every free pair has a path
    step = jax.jit(jax.vmap(gw.step_cell, (None, 0, 0)))
    cell = a.copy()
    for t in range(distance.max()):
        moving = t < distance
        action = tables["next_action"][cell, g]
        assert (action[moving] >= 0).all() and (action[moving] < 4).all()
        new = np.asarray(step(walls, cell, np.maximum(action, 0)))
        cell = np.where(moving, new, cell)
        np.testing.assert_array_equal(tables["distance"][cell, g], np.maximum(distance - t - 1, 0))
    np.testing.assert_array_equal(cell, g)
    assert (tables["next_action"][free, free] == -1).all()


def test_every_quadrant_has_valid_starts_for_the_paper_seeds():
    for seed in range(2020, 2026):
        tables = gw.make_tables(seed)
        assert gw.max_demo_length(tables) <= gw.MAX_STEPS


def test_goal_table_and_quadrants():
    table = gw.goal_table()
    assert table.shape == (200, 4)
    np.testing.assert_array_equal(np.ravel_multi_index(table.T, gw.FACTOR_SIZES), np.arange(200))
    assert [int(gw.quadrant_of(r * 11 + c)) for r, c in ((0, 0), (5, 5), (0, 6), (5, 10), (6, 0), (10, 5), (6, 6))] == [
        0,
        0,
        1,
        1,
        2,
        2,
        3,
    ]
    assert (
        gw.describe_goal(table[199]) == "interaction 1 with the object of type 4 in quadrant 3 (bottom-right) of maze 4"
    )


@pytest.mark.parametrize("seed", range(2020, 2026))
def test_random_split_keeps_every_factor_value_in_training(seed):
    train, ood = gw.goal_split("random", seed)
    assert (len(train), len(ood)) == (150, 50)
    assert sorted(np.concatenate([train, ood])) == list(range(200))
    goals = gw.goal_table()[train]
    for f, size in enumerate(gw.FACTOR_SIZES):
        assert set(goals[:, f]) == set(range(size))
    np.testing.assert_array_equal(np.concatenate([train, ood]), jax.random.permutation(jax.random.key(seed), 200))


def test_non_compositional_split_holds_out_quadrant_3():
    train, ood = gw.goal_split("non_compositional", SEED)
    assert (len(train), len(ood)) == (150, 50)
    assert (gw.goal_table()[ood, 0] == 3).all() and (gw.goal_table()[train, 0] != 3).all()


def check_instance(tables, instance, goal):
    q, _, m, kind = (int(v) for v in goal)
    objects, types, agent = (np.asarray(instance[k]) for k in ("objects", "types", "agent"))
    free = np.asarray(tables["free"])[m]
    assert free[objects].all() and free[agent]
    assert gw.QUADRANT_OF_CELL[objects[0]] == q
    assert len(set(objects[1:])) == 4  # distractor cells are distinct (they may share the goal's or agent's cell)
    assert types[0] == kind and (types[1:] != kind).all()
    distance = int(np.asarray(tables["distance"])[m, agent, objects[0]])
    assert gw.MIN_DISTANCE <= distance < gw.UNREACHABLE
    return distance


def test_demonstrations_walk_to_the_goal_and_interact(world, demos):
    mazes, tables = world
    instances, (obs, actions, mask) = demos
    assert obs.shape == (len(GOALS), gw.MAX_STEPS, 847) and actions.dtype == np.int32
    for n, goal in enumerate(GOALS):
        instance = pick(instances, n)
        d = check_instance(tables, instance, goal)
        assert int(mask[n].sum()) == d + 1 and bool(mask[n, : d + 1].all())
        grid = np.asarray(obs[n]).reshape(gw.MAX_STEPS, 11, 11, 7)
        goal_cell = divmod(int(instance["objects"][0]), 11)
        assert grid[0, ..., 6].argmax() == int(instance["agent"])
        assert grid[d, goal_cell[0], goal_cell[1], 6] == 1  # on the goal object when interacting
        assert (np.asarray(actions[n, d:]) == 4 + goal[1]).all() and (np.asarray(actions[n, :d]) < 4).all()
        np.testing.assert_array_equal(grid[0, ..., 5], mazes[goal[2]])
        assert grid[0, goal_cell[0], goal_cell[1], goal[3]] == 1
        assert (grid[:, ..., 6].sum((1, 2)) == 1).all()


def test_demonstration_follows_the_authors_start_rooted_scipy_path(world, demos):
    _, tables = world
    predecessor = np.asarray(tables["predecessor"])
    instances, (_, actions, _) = demos
    for n, goal in enumerate(GOALS):
        a, g = int(instances["agent"][n]), int(instances["objects"][n, 0])
        path = [g]
        while path[-1] != a:
            path.append(predecessor[goal[2], a, path[-1]])
        path = path[::-1]
        moves = [{-11: 0, 1: 1, 11: 2, -1: 3}[int(y - x)] for x, y in zip(path, path[1:])]
        assert list(np.asarray(actions[n, : len(moves)])) == moves
        # scipy breaks ties consistently here: the demonstration is also the step-by-step next_action policy
        assert list(np.asarray(tables["next_action"])[goal[2], path[:-1], g]) == moves


def test_rollout_of_the_demonstration_succeeds(world, demos):
    mazes, tables = world
    instances, (_, actions, mask) = demos
    n = 11
    goal, instance, actions, mask = GOALS[n], pick(instances, n), actions[n], mask[n]
    path = gw.optimal_path(tables, instance, goal)
    # a policy that reads the agent's cell off the observation and looks up the demonstrated action
    lookup = jnp.zeros(121, jnp.int32).at[path].set(actions)

    def policy(obs):
        return lookup[jnp.argmax(obs.reshape(121, 7)[:, 6])]

    def run(policy, length=gw.MAX_STEPS):
        return jax.jit(lambda inst: gw.rollout(policy, tables, mazes, inst, goal, length))(instance)

    cells, taken, success = run(policy)
    d = int(mask.sum()) - 1
    assert bool(success) and cells.shape == (gw.MAX_STEPS + 1,)
    np.testing.assert_array_equal(cells[: d + 1], path[: d + 1])
    assert (np.asarray(cells[d:]) == int(instance["objects"][0])).all()
    np.testing.assert_array_equal(taken[: d + 1], actions[: d + 1])
    # the wrong interaction on the goal, or walking into walls, never succeeds
    wrong = 5 - goal[1]
    _, _, fail = run(lambda obs: jnp.where(policy(obs) >= 4, wrong, policy(obs)))
    assert not bool(fail)
    cells, _, fail = run(lambda obs: 0, length=30)
    assert not bool(fail) and (np.diff(np.asarray(cells)) <= 0).all()


def test_same_key_gives_same_instance_and_task_data(world, demos):
    mazes, tables = world
    keys = jax.random.split(jax.random.key(0), len(GOALS))
    again = draw(keys, tables, mazes, jnp.asarray(GOALS))
    for x, y in zip(jax.tree.leaves(demos), jax.tree.leaves(again)):
        np.testing.assert_array_equal(x, y)
    other = draw(jax.random.split(jax.random.key(1), len(GOALS)), tables, mazes, jnp.asarray(GOALS))
    assert not np.array_equal(demos[0]["agent"], np.asarray(other[0]["agent"]))
    length = gw.max_demo_length(tables)
    data = jax.jit(gw.task_data, static_argnums=(4, 5, 6))
    support, query = data(tables, mazes, GOALS[3], jax.random.key(1), 2, 1, length)
    assert support[0].shape == (2 * length, 847) and query[1][0].shape == (length,)
    repeat, _ = data(tables, mazes, GOALS[3], jax.random.key(1), 2, 1, length)
    np.testing.assert_array_equal(support[1][0], repeat[1][0])
    assert int(query[1][1].sum()) >= gw.MIN_DISTANCE + 1


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda t, m: gw.goal_split("diagonal", 0), "split must be one of"),
        (lambda t, m: gw.sample_instance(jax.random.key(0), t, np.array([4, 0, 0, 0])), "quadrant"),
        (lambda t, m: gw.sample_instance(jax.random.key(0), t, np.array([0, 2, 0, 0])), "interaction"),
        (lambda t, m: gw.sample_instance(jax.random.key(0), t, np.array([0, 0, 5, 0])), "maze"),
        (lambda t, m: gw.describe_goal(np.array([0, 0, 0, -1])), "object type"),
        (
            lambda t, m: gw.task_data(
                t, m, np.array([0, 0, 0, 0]), jax.random.key(0), length=gw.max_demo_length(t) - 1
            ),
            "length",
        ),
        (lambda t, m: gw.task_data(t, m, np.array([0, 0, 0, 0]), jax.random.key(0), n_support=0), "n_support"),
        (lambda t, m: gw.make_mazes(SEED, n_mazes=0), "n_mazes"),
    ],
)
def test_bad_arguments_name_the_parameter(world, call, match):
    mazes, tables = world
    with pytest.raises(ValueError, match=match):
        call(tables, mazes)


def test_masked_cross_entropy_ignores_masked_steps():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(40, 6)).astype(np.float32)
    actions = rng.integers(0, 6, 40)
    mask = np.arange(40) < 17
    loss, accuracy = jax.jit(gw.masked_cross_entropy), jax.jit(gw.step_accuracy)
    base = loss(logits, (actions, mask))
    noisy = np.where(mask[:, None], logits, 100 * rng.normal(size=(40, 6))).astype(np.float32)
    np.testing.assert_allclose(loss(noisy, (actions, mask)), base, rtol=1e-6)
    np.testing.assert_allclose(accuracy(noisy, (actions, mask)), accuracy(logits, (actions, mask)))
    log_p = logits[:17] - np.log(np.exp(logits[:17]).sum(1, keepdims=True))
    np.testing.assert_allclose(base, -log_p[np.arange(17), actions[:17]].mean(), rtol=1e-5)
    assert float(loss(logits, (actions, np.zeros(40, bool)))) == 0.0


def test_episode_metrics():
    actions = jnp.array([[0, 1, 4, 4, 4], [2, 2, 3, 5, 5]])
    mask = jnp.array([[True, True, True, False, False], [True, True, True, True, False]])
    perfect = 10.0 * jax.nn.one_hot(actions, 6)
    metrics = jax.jit(gw.episode_metrics)
    assert {k: float(v) for k, v in metrics(perfect, actions, mask).items()} == {
        "acc": 1.0,
        "acc_all": 1.0,
        "acc_first": 1.0,
        "acc_last": 1.0,
    }
    # wrong on trajectory 1's last unmasked step and on masked padding of trajectory 0
    wrong = perfect.at[1, 3].set(10.0 * jax.nn.one_hot(4, 6)).at[0, 4].set(10.0 * jax.nn.one_hot(0, 6))
    metrics = {k: float(v) for k, v in metrics(wrong, actions, mask).items()}
    assert metrics == pytest.approx({"acc": (1 + 0.75) / 2, "acc_all": 0.5, "acc_first": 1.0, "acc_last": 0.5})


# --------------------------------------------------------------------------------------------- smaller worlds

WORLDS = [
    gw.GoalsWorld(grid=5, n_mazes=2, n_object_types=3, n_distractors=2, min_distance=2),
    gw.GoalsWorld(grid=7, n_mazes=3, n_object_types=3, n_interactions=3, n_distractors=2, min_distance=4),
    gw.GoalsWorld(grid=9, n_mazes=3, n_object_types=4, n_distractors=3, min_distance=7),
]


def test_paper_world_is_the_default():
    w = gw.WORLD
    assert (w.grid, w.n_mazes, w.n_object_types, w.n_interactions, w.n_distractors, w.min_distance) == (
        gw.GRID,
        gw.N_MAZES,
        gw.N_OBJECT_TYPES,
        gw.N_INTERACTIONS,
        gw.N_DISTRACTORS,
        gw.MIN_DISTANCE,
    )
    assert (w.obs_size, w.n_actions, w.max_steps, w.n_goals, w.factor_sizes) == (
        gw.OBS_SIZE,
        gw.N_ACTIONS,
        gw.MAX_STEPS,
        gw.N_GOALS,
        gw.FACTOR_SIZES,
    )
    np.testing.assert_array_equal(w.quadrant_masks, gw.QUADRANT_MASKS)
    np.testing.assert_array_equal(w.moves, gw.MOVES)
    assert hash(w) == hash(gw.GoalsWorld()) and w == gw.GoalsWorld()


@pytest.mark.parametrize("small_world", WORLDS, ids=lambda w: f"grid{w.grid}")
def test_mazes_scale_with_the_grid(small_world):
    for seed in range(20):
        walls = gw.generate_maze(seed, small_world.grid)
        assert walls.shape == (small_world.grid, small_world.grid) and 0.2 < walls.mean() < 0.6
        assert not walls[::2, ::2].any()  # the odd nodes of the padded grid are never walls
        free = np.flatnonzero(~walls.reshape(-1))
        assert (bfs(walls, free[0])[free] >= 0).all()  # free space is one component
    mazes = gw.make_mazes(7, world=small_world)
    assert mazes.shape == (small_world.n_mazes, small_world.grid, small_world.grid)
    np.testing.assert_array_equal(mazes[1], gw.generate_maze(8, small_world.grid))  # maze i from default_rng(seed + i)


@pytest.mark.parametrize("small_world", WORLDS, ids=lambda w: f"grid{w.grid}")
def test_quadrants_goals_and_splits(small_world):
    half = (small_world.grid + 1) // 2
    q = small_world.quadrant_of_cell.reshape(small_world.grid, small_world.grid)
    assert (
        (q[:half, :half] == 0).all()
        and (q[:half, half:] == 1).all()
        and (q[half:, :half] == 2).all()
        and (q[half:, half:] == 3).all()
    )
    table = gw.goal_table(small_world)
    assert table.shape == (small_world.n_goals, 4) and small_world.factor_sizes[0] == 4
    np.testing.assert_array_equal(
        np.ravel_multi_index(table.T, small_world.factor_sizes), np.arange(small_world.n_goals)
    )
    for seed in (2020, 2021, 2022, 31, 32, 33, 7, 8, 9):
        try:
            train, ood = gw.goal_split("random", seed, small_world)
        except ValueError as err:
            assert "leaves a value" in str(err)
            continue
        assert len(ood) == small_world.n_goals // 4 and sorted(np.concatenate([train, ood])) == list(
            range(small_world.n_goals)
        )
        for f, size in enumerate(small_world.factor_sizes):
            assert set(table[train, f]) == set(range(size))  # every factor value appears in training
    train, ood = gw.goal_split("non_compositional", 0, small_world)
    assert (table[ood, 0] == 3).all() and (table[train, 0] != 3).all()


@pytest.mark.parametrize("small_world", WORLDS, ids=lambda w: f"grid{w.grid}")
def test_demonstrations_are_shortest_paths_from_far_enough(small_world):
    seed = 2020
    tables, mazes = gw.make_tables(seed, world=small_world), gw.make_mazes(seed, world=small_world)
    distance = np.asarray(tables["distance"])
    length = gw.max_demo_length(tables)
    assert length <= small_world.max_steps
    goals = gw.goal_table(small_world)
    keys = jax.random.split(jax.random.key(0), len(goals))

    @jax.jit
    def draw(key, goal):
        inst = gw.sample_instance(key, tables, goal, small_world)
        return inst, gw.demonstration(tables, mazes, inst, goal, length, small_world)

    inst, (obs, actions, mask) = jax.device_get(jax.vmap(draw)(keys, jnp.asarray(goals)))
    assert obs.shape == (len(goals), length, small_world.obs_size)
    for n, (q, i, m, kind) in enumerate(goals):
        agent, objects, types = inst["agent"][n], inst["objects"][n], inst["types"][n]
        assert objects.shape == (1 + small_world.n_distractors,) and types[0] == kind and (types[1:] != kind).all()
        assert small_world.quadrant_of_cell[objects[0]] == q and not mazes[m].reshape(-1)[objects].any()
        d = distance[m, agent, objects[0]]
        assert d == bfs(mazes[m], agent)[objects[0]] and small_world.min_distance <= d < gw.UNREACHABLE
        assert mask[n].sum() == d + 1 and actions[n, d] == gw.N_MOVES + i and (actions[n, :d] < gw.N_MOVES).all()
        grid = obs[n].reshape(length, small_world.grid, small_world.grid, small_world.obs_channels)
        assert (grid[:, ..., -1].sum((1, 2)) == 1).all()  # one agent
        np.testing.assert_array_equal(grid[0, ..., small_world.n_object_types], mazes[m])
        # walking the demonstrated moves reaches the goal object
        cell = int(agent)
        for a in actions[n, :d]:
            cell = int(gw.step_cell(mazes[m], cell, a, small_world))
        assert cell == objects[0]
