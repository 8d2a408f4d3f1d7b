"""The compositional-goals grid world (paper §4.3, spec §4).

An agent in one of 5 random 11×11 mazes must walk to an object and interact with it. A task (a
*goal*) combines four factors: the quadrant the object lies in (4), which of the 2 interaction
actions to use, the maze (5) and the object's type (5), giving 200 goals. A demonstration follows
a shortest path to the goal object and then takes the goal's interaction; a meta-learner sees one
demonstration of a goal and must imitate the optimal policy in a new instance of it.

Cells are numbered ``row * 11 + col``. A goal is an int vector ``(quadrant, interaction, maze,
object type)``; goal ids index :func:`goal_table`. Actions: 0 up, 1 right, 2 down, 3 left (the
authors' ``MOVES`` order), 4 and 5 the two interactions. Mazes, shortest paths and the goal table
are numpy tables built once; sampling instances, demonstrations, observations, rollouts and the
metrics are pure jittable JAX functions that vmap over keys and goals.

Free space of every maze is one connected component: the generator only ever draws a wall segment
from an existing wall into an *empty* node, so the walls are the border plus trees that each hang
from it at most once and never enclose a region (checked for seeds 0-2999). Tables still treat an unreachable pair as distance :data:`UNREACHABLE`
(never a valid start) and :func:`maze_tables` checks that every possible goal cell has a start at
distance >= 11, so a maze for which sampling could fail raises when it is built.
"""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import numpy as np
from scipy.sparse.csgraph import shortest_path

GRID = 11
N_CELLS = GRID * GRID
N_MAZES = 5
N_QUADRANTS = 4
N_INTERACTIONS = 2
N_OBJECT_TYPES = 5
N_MOVES = 4
N_ACTIONS = N_MOVES + N_INTERACTIONS  # 0 up, 1 right, 2 down, 3 left, 4/5 interactions
ACTIONS = ("up", "right", "down", "left", "interaction 0", "interaction 1")
MOVES = np.array([[-1, 0], [0, 1], [1, 0], [0, -1], [0, 0], [0, 0]])  # (row, col) change per action
MAX_STEPS = 120  # 11² − 1: length of a padded demonstration
OBS_CHANNELS = N_OBJECT_TYPES + 2  # object types, walls, agent
OBS_SIZE = GRID * GRID * OBS_CHANNELS  # 847
N_DISTRACTORS = 4
MIN_DISTANCE = 11  # the agent starts at least this many steps from the goal object
UNREACHABLE = 1_000_000  # distance sentinel for walls and disconnected pairs
SPLITS = ("random", "non_compositional")
FACTORS = ("quadrant", "interaction", "maze", "object type")
FACTOR_SIZES = (N_QUADRANTS, N_INTERACTIONS, N_MAZES, N_OBJECT_TYPES)
N_GOALS = int(np.prod(FACTOR_SIZES))  # 200
FRAC_OOD = 0.25
QUADRANT_NAMES = ("top-left", "top-right", "bottom-left", "bottom-right")

_ROWS, _COLS = np.divmod(np.arange(N_CELLS), GRID)
# quadrant of each cell: rows 0-5 / 6-10 × cols 0-5 / 6-10 (the split is at 6 | 5 cells)
QUADRANT_OF_CELL = 2 * (_ROWS >= (GRID + 1) // 2) + (_COLS >= (GRID + 1) // 2)
QUADRANT_MASKS = np.stack([QUADRANT_OF_CELL == q for q in range(N_QUADRANTS)])  # (4, 121) bool
# move code of a step between neighbouring cells, indexed by (cell_to − cell_from + GRID)
_STEP_ACTION = np.full(2 * GRID + 1, -1, np.int32)
_STEP_ACTION[[0, GRID + 1, 2 * GRID, GRID - 1]] = [0, 1, 2, 3]


# --------------------------------------------------------------------------------------------- mazes


def _check_count(value, name):
    if isinstance(value, bool) or int(value) != value or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")


def generate_maze(seed, size=GRID, complexity=0.75, density=0.75):
    """One random maze, walls True: (size, size) bool (spec §4.1, the authors' mazelab variant).

    On a padded (size+2)² grid with border walls, ⌊density·(⌊(size+2)/2⌋)²⌋ islands each start at
    a random even node (x drawn before y) and take ⌊complexity·5·2(size+2)⌋ random steps to an
    even node two cells away (left, right, up, down if in bounds), walling it and the cell between
    only if it is empty; the padding is cropped. For size 11 that is 27 islands × 97 steps.
    """
    if isinstance(size, bool) or int(size) != size or size < 5 or size % 2 == 0:
        raise ValueError(f"size must be an odd integer >= 5, got {size!r}")
    rng = np.random.default_rng(int(seed))
    pad = size + 2
    complexity = int(complexity * (5 * (pad + pad)))
    density = int(density * ((pad // 2) * (pad // 2)))
    grid = np.zeros((pad, pad), dtype=bool)
    grid[0, :] = grid[-1, :] = True
    grid[:, 0] = grid[:, -1] = True
    for _ in range(density):
        x = rng.integers(0, pad // 2 + 1) * 2
        y = rng.integers(0, pad // 2 + 1) * 2
        grid[y, x] = True
        for _ in range(complexity):
            neighbours = []
            if x > 1:
                neighbours.append((y, x - 2))
            if x < pad - 2:
                neighbours.append((y, x + 2))
            if y > 1:
                neighbours.append((y - 2, x))
            if y < pad - 2:
                neighbours.append((y + 2, x))
            y_, x_ = neighbours[rng.integers(0, len(neighbours))]
            if not grid[y_, x_]:
                grid[y_, x_] = True
                grid[y_ + (y - y_) // 2, x_ + (x - x_) // 2] = True
                x, y = x_, y_
    return grid[1:-1, 1:-1]


def make_mazes(seed, n_mazes=N_MAZES):
    """The run's mazes, maze i from ``default_rng(seed + i)``: (n_mazes, 11, 11) bool."""
    _check_count(n_mazes, "n_mazes")
    return np.stack([generate_maze(seed + i) for i in range(n_mazes)])


# --------------------------------------------------------------------------------------------- shortest paths


def _adjacency(walls):
    """Dense 0/1 matrix of the free-cell 4-neighbour graph, built as the authors build it."""
    free = ~walls
    adjacency = np.zeros((N_CELLS, N_CELLS))
    for r, c in np.argwhere(free):
        for dr, dc in MOVES[:N_MOVES]:
            rr, cc = r + dr, c + dc
            if 0 <= rr < GRID and 0 <= cc < GRID and free[rr, cc]:
                adjacency[r * GRID + c, rr * GRID + cc] = 1.0
    return adjacency


def maze_tables(walls):
    """Shortest-path tables of one maze (11, 11) bool, for use inside jit.

    * ``free`` (121,) bool;
    * ``distance`` (121, 121) int32: path length a -> g, :data:`UNREACHABLE` for walls and
      disconnected pairs;
    * ``predecessor`` (121, 121) int32: scipy's predecessor of cell c on the shortest path from a
      (c itself where there is none), so the path a -> g is read backwards from g;
    * ``next_action`` (121, 121) int32: the first move (0-3) of that path, −1 where a == g or no
      path exists.

    Paths come from ``scipy.sparse.csgraph.shortest_path`` on the same dense graph as the authors',
    so ties between equally short paths break the same way. Raises a ValueError if a quadrant has
    no free cell or some free cell has no start at distance >= 11 (sampling would then fail).
    """
    walls = np.asarray(walls, dtype=bool)
    if walls.shape != (GRID, GRID):
        raise ValueError(f"walls must have shape ({GRID}, {GRID}), got {walls.shape}")
    free = ~walls.reshape(-1)
    dist, pred = shortest_path(_adjacency(walls), return_predecessors=True)
    reachable = np.isfinite(dist) & free[:, None] & free[None, :]
    distance = np.where(reachable, dist, UNREACHABLE).astype(np.int32)
    cells = np.broadcast_to(np.arange(N_CELLS), (N_CELLS, N_CELLS))
    predecessor = np.where(pred >= 0, pred, cells).astype(np.int32)

    # first step of each path: walk back from g until the predecessor is the start a
    start = cells.T
    node = cells.copy()
    for _ in range(N_CELLS):
        back = predecessor[start, node]
        step = (back != start) & (back != node)
        if not step.any():
            break
        node = np.where(step, back, node)
    moving = reachable & (start != cells)
    next_action = np.where(moving, _STEP_ACTION[np.clip(node - start + GRID, 0, 2 * GRID)], -1).astype(np.int32)

    for q in range(N_QUADRANTS):
        goal_cells = np.flatnonzero(free & QUADRANT_MASKS[q])
        if len(goal_cells) == 0:
            raise ValueError(f"maze has no free cell in quadrant {q}")
        starts = ((distance[goal_cells] >= MIN_DISTANCE) & reachable[goal_cells]).sum(1)
        if (starts == 0).any():
            g = goal_cells[np.argmax(starts == 0)]
            raise ValueError(f"goal cell (row {g // GRID}, col {g % GRID}) in quadrant {q} has no free cell at "
                             f"shortest-path distance >= {MIN_DISTANCE}; choose another maze seed")
    return {"free": free, "distance": distance, "predecessor": predecessor, "next_action": next_action}


def make_tables(seed, n_mazes=N_MAZES):
    """Tables of :func:`maze_tables` for the run's mazes, stacked on a leading maze axis (jnp arrays)."""
    mazes = make_mazes(seed, n_mazes)
    tables = []
    for i, walls in enumerate(mazes):
        try:
            tables.append(maze_tables(walls))
        except ValueError as err:
            raise ValueError(f"maze {i} of seed {seed} (default_rng({seed + i})): {err}") from None
    return {k: jnp.asarray(np.stack([t[k] for t in tables])) for k in tables[0]}


def max_demo_length(tables):
    """Steps of the longest possible demonstration: the longest shortest path + 1 (the interaction)."""
    distance = np.asarray(tables["distance"])
    return int(distance[distance < UNREACHABLE].max()) + 1


# --------------------------------------------------------------------------------------------- goals


def goal_table():
    """All goals as (quadrant, interaction, maze, object type) rows in itertools.product order: (200, 4).

    Goal id = ((quadrant · 2 + interaction) · 5 + maze) · 5 + object type.
    """
    return np.array(list(itertools.product(*(range(n) for n in FACTOR_SIZES))), dtype=np.int32)


def quadrant_of(cell):
    """Quadrant of a cell index (row * 11 + col): 0 top-left, 1 top-right, 2 bottom-left, 3 bottom-right."""
    return jnp.asarray(QUADRANT_OF_CELL)[cell]


def check_goal(goal, n_mazes=N_MAZES):
    """Raise a ValueError naming the factor if a concrete goal (4,) is out of range; tracers pass."""
    try:
        values = np.asarray(goal)
    except jax.errors.TracerArrayConversionError:
        return
    if values.shape != (4,) or not np.issubdtype(values.dtype, np.integer):
        raise ValueError(f"goal must be 4 integers (quadrant, interaction, maze, object type), got {goal!r}")
    for name, size, value in zip(FACTORS, (N_QUADRANTS, N_INTERACTIONS, n_mazes, N_OBJECT_TYPES), values):
        if not 0 <= value < size:
            raise ValueError(f"goal {name} must be in 0..{size - 1}, got {int(value)}")


def _n_mazes(tables):
    return np.shape(tables["distance"])[0]


def goal_split(split="random", seed=0):
    """Training and OOD goal ids (spec §4.2): ``(train (150,), ood (50,))``.

    * ``random``: ``jax.random.permutation(key(seed), 200)``; the last 50 are OOD. The ids keep the
      permutation order (as the authors' task arrays do). As in the authors' code, which asserts it,
      a seed whose training goals miss some value of a factor raises a ValueError (no redraw).
    * ``non_compositional``: OOD = every goal in quadrant 3 (bottom-right).
    """
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    goals = goal_table()
    if split == "non_compositional":
        held_out = goals[:, 0] == N_QUADRANTS - 1
        return np.flatnonzero(~held_out), np.flatnonzero(held_out)
    order = np.asarray(jax.random.permutation(jax.random.key(seed), N_GOALS))
    n_ood = int(N_GOALS * FRAC_OOD)
    train, ood = order[:-n_ood], order[-n_ood:]
    for f, (name, size) in enumerate(zip(FACTORS, FACTOR_SIZES)):
        if len(np.unique(goals[train, f])) != size:
            raise ValueError(f"random split with seed={seed} leaves a value of the {name} factor out of training; "
                             "choose another seed")
    return train, ood


def sample_goal(key, goal_ids):
    """A goal drawn uniformly from ``goal_ids`` (as the authors' ``reset_goal``): (4,) int32."""
    return jnp.asarray(goal_table())[jax.random.choice(key, jnp.asarray(goal_ids))]


def goal_one_hot(goal):
    """Decoding targets: a one-hot per factor, (4, 5) float32."""
    return jax.nn.one_hot(goal, max(FACTOR_SIZES))


def describe_goal(goal):
    """The goal in words, e.g. 'interaction 1 with the object of type 3 in quadrant 2 (bottom-left) of maze 4'."""
    check_goal(goal)
    q, i, m, o = (int(v) for v in np.asarray(goal))
    return f"interaction {i} with the object of type {o} in quadrant {q} ({QUADRANT_NAMES[q]}) of maze {m}"


# --------------------------------------------------------------------------------------------- instances


def sample_instance(key, tables, goal):
    """Object and agent placement for ``goal``: ``{"agent": (), "objects": (5,), "types": (5,)}`` int32 cells/types.

    Object 0 is the goal object, 1-4 the distractors. Draws follow the authors' ``reset``: the key is
    split into (distractor types, agent cell, goal cell, distractor cells, unused) and each is one
    ``jax.random.choice``: distractor types with replacement from the 4 other types; the goal cell
    uniform over free cells of the goal quadrant; the agent uniform over free cells at shortest-path
    distance >= 11 from it; 4 distinct free distractor cells (they may share the goal or agent cell).
    """
    check_goal(goal, _n_mazes(tables))
    goal = jnp.asarray(goal, jnp.int32)
    quadrant, _, maze, kind = goal[0], goal[1], goal[2], goal[3]
    k_types, k_agent, k_goal, k_cells, _ = jax.random.split(key, 5)
    types = jax.random.choice(k_types, N_OBJECT_TYPES, (N_DISTRACTORS,), replace=True,
                              p=1.0 - (jnp.arange(N_OBJECT_TYPES) == kind))
    free = jnp.asarray(tables["free"])[maze]
    in_quadrant = free & jnp.asarray(QUADRANT_MASKS)[quadrant]
    goal_cell = jax.random.choice(k_goal, N_CELLS, (1,), p=in_quadrant.astype(jnp.float32))
    distance = jnp.asarray(tables["distance"])[maze, goal_cell[0]]
    start_ok = free & (distance >= MIN_DISTANCE) & (distance < UNREACHABLE)
    agent = jax.random.choice(k_agent, N_CELLS, (1,), p=start_ok.astype(jnp.float32))
    cells = jax.random.choice(k_cells, N_CELLS, (N_DISTRACTORS,), replace=False, p=free.astype(jnp.float32))
    return {"agent": agent[0].astype(jnp.int32),
            "objects": jnp.concatenate([goal_cell, cells]).astype(jnp.int32),
            "types": jnp.concatenate([kind[None], types]).astype(jnp.int32)}


def observation(walls, agent_cell, object_cells, object_types):
    """The agent's view (spec §4.1), flattened (H, W, C) row-major: (847,) float32.

    Channels 0-4: a one-hot of each object's type at its cell (where objects share a cell their
    one-hots add up as a union); 5: walls; 6: the agent.
    """
    grid = jnp.zeros((N_CELLS, OBS_CHANNELS), jnp.float32)
    grid = grid.at[object_cells, object_types].set(1.0)
    grid = grid.at[:, N_OBJECT_TYPES].set(jnp.asarray(walls, jnp.float32).reshape(-1))
    grid = grid.at[agent_cell, N_OBJECT_TYPES + 1].set(1.0)
    return grid.reshape(-1)


def step_cell(walls, cell, action):
    """The agent's cell after ``action``: moves into walls or off the grid and interactions stay put."""
    row, col = cell // GRID + jnp.asarray(MOVES)[action, 0], cell % GRID + jnp.asarray(MOVES)[action, 1]
    inside = (row >= 0) & (row < GRID) & (col >= 0) & (col < GRID)
    blocked = jnp.asarray(walls)[jnp.clip(row, 0, GRID - 1), jnp.clip(col, 0, GRID - 1)]
    return jnp.where(inside & ~blocked, row * GRID + col, cell).astype(jnp.int32)


def _check_length(tables, length):
    if isinstance(length, bool) or int(length) != length:
        raise ValueError(f"length must be an integer, got {length!r}")
    try:
        needed = max_demo_length(tables)
    except jax.errors.TracerArrayConversionError:
        return
    if length < needed:
        raise ValueError(f"length must be >= the longest demonstration of these mazes ({needed} steps), got {length}")


def optimal_path(tables, instance, goal, length=MAX_STEPS):
    """Cells of the demonstration (start-rooted scipy shortest path, then staying on the goal): (length,) int32.

    Cell t is the agent's cell before step t. ``length`` must exceed the path length (unchecked here).
    """
    maze = jnp.asarray(goal)[2]
    start, target = instance["agent"], instance["objects"][0]
    back = jnp.asarray(tables["predecessor"])[maze, start]

    def walk(node, _):
        return jnp.where(node == start, node, back[node]), node

    _, reverse = jax.lax.scan(walk, target, None, length=length)  # reverse[k]: k steps back from the goal
    d = jnp.asarray(tables["distance"])[maze, start, target]
    return reverse[jnp.clip(d - jnp.arange(length), 0, length - 1)]


def demonstration(tables, mazes, instance, goal, length=MAX_STEPS):
    """The optimal trajectory of an instance: ``(obs (length, 847), actions (length,) int32, mask (length,) bool)``.

    The agent follows scipy's shortest path from its start (the authors' precomputed action
    sequence), then takes the goal's interaction on the goal cell. That step is the last unmasked
    one: mask.sum() == distance + 1. Padding repeats the interaction on the goal cell, masked.
    """
    check_goal(goal, _n_mazes(tables))
    _check_length(tables, length)
    goal = jnp.asarray(goal, jnp.int32)
    cells = optimal_path(tables, instance, goal, length)
    d = jnp.asarray(tables["distance"])[goal[2], instance["agent"], instance["objects"][0]]
    t = jnp.arange(length)
    step = jnp.asarray(_STEP_ACTION)[jnp.clip(jnp.roll(cells, -1) - cells + GRID, 0, 2 * GRID)]
    actions = jnp.where(t < d, step, N_MOVES + goal[1]).astype(jnp.int32)
    walls = jnp.asarray(mazes)[goal[2]]
    obs = jax.vmap(observation, (None, 0, None, None))(walls, cells, instance["objects"], instance["types"])
    return obs, actions, t <= d


def task_data(tables, mazes, goal, key, n_support=1, n_query=1, length=MAX_STEPS):
    """Support and query demonstrations of one goal, each ``(obs (n·length, 847), (actions (n·length,), mask))``.

    Instance keys follow the authors' loader: ``key`` is split into n_support + n_query keys and
    each instance is drawn from the first half of ``split(key_i)``.
    """
    for name, n in (("n_support", n_support), ("n_query", n_query)):
        _check_count(n, name)
    check_goal(goal, _n_mazes(tables))
    _check_length(tables, length)

    def one(k):
        instance = sample_instance(jax.random.split(k)[0], tables, goal)
        return demonstration(tables, mazes, instance, goal, length)

    obs, actions, mask = jax.vmap(one)(jax.random.split(key, n_support + n_query))

    def part(s):
        return obs[s].reshape(-1, OBS_SIZE), (actions[s].reshape(-1), mask[s].reshape(-1))

    return part(slice(0, n_support)), part(slice(n_support, None))


def rollout(policy, tables, mazes, instance, goal, length=MAX_STEPS):
    """Run ``policy(obs (847,)) -> action`` from the instance's start for ``length`` steps.

    Returns ``(cells (length+1,), actions (length,), success ())``: the cells visited (starting
    cell first), the actions the policy chose, and whether it took the goal's interaction on the goal
    cell. After that the episode is done and the agent stays put.
    """
    check_goal(goal, _n_mazes(tables))
    goal = jnp.asarray(goal, jnp.int32)
    walls = jnp.asarray(mazes)[goal[2]]
    target = instance["objects"][0]

    def step(carry, _):
        cell, done = carry
        action = jnp.asarray(policy(observation(walls, cell, instance["objects"], instance["types"])), jnp.int32)
        success = ~done & (cell == target) & (action == N_MOVES + goal[1])
        cell = jnp.where(done, cell, step_cell(walls, cell, action))
        return (cell, done | success), (cell, action)

    (_, done), (cells, actions) = jax.lax.scan(step, (instance["agent"], jnp.array(False)), None, length=length)
    return jnp.concatenate([instance["agent"][None], cells]), actions, done


# --------------------------------------------------------------------------------------------- loss and metrics


def masked_cross_entropy(logits, target):
    """Softmax cross-entropy with the optimal action, averaged over unmasked steps.

    ``logits`` (N, 6), ``target = (actions (N,), mask (N,))``; 0 if nothing is unmasked.
    """
    actions, mask = target
    nll = -jnp.take_along_axis(jax.nn.log_softmax(logits), actions[:, None], axis=-1)[:, 0]
    mask = mask.astype(nll.dtype)
    return jnp.sum(nll * mask) / jnp.maximum(mask.sum(), 1.0)


def step_accuracy(logits, target):
    """Fraction of unmasked steps whose argmax is the optimal action (pooled over all steps)."""
    actions, mask = target
    correct = (jnp.argmax(logits, -1) == actions).astype(jnp.float32)
    mask = mask.astype(jnp.float32)
    return jnp.sum(correct * mask) / jnp.maximum(mask.sum(), 1.0)


def episode_metrics(logits, actions, mask):
    """Per-trajectory metrics of logits (n, length, 6), averaged over the n trajectories.

    ``acc``: masked step accuracy of each trajectory; ``acc_all``: every unmasked step correct (the
    fraction of optimal episodes); ``acc_first`` / ``acc_last``: the first / last unmasked step
    (the last is the interaction). Trajectories are assumed to have at least one unmasked step.
    """
    correct = jnp.argmax(logits, -1) == actions
    maskf = mask.astype(jnp.float32)
    acc = jnp.sum(correct * maskf, 1) / jnp.maximum(maskf.sum(1), 1.0)
    first = jnp.argmax(mask, axis=1)
    last = mask.shape[1] - 1 - jnp.argmax(mask[:, ::-1], axis=1)
    pick = lambda idx: jnp.take_along_axis(correct, idx[:, None], axis=1)[:, 0].astype(jnp.float32)  # noqa: E731
    return {"acc": acc.mean(), "acc_all": jnp.all(correct | ~mask, axis=1).astype(jnp.float32).mean(),
            "acc_first": pick(first).mean(), "acc_last": pick(last).mean()}
