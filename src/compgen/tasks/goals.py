"""The compositional-goals grid world (paper §4.3, App. C.4).

The sizes below are the paper's; a smaller world is a :class:`GoalsWorld` (grid, number of mazes,
object types, interactions, distractors, minimum start distance) passed as ``world=`` to the functions
(a frozen, hashable value, static under jit). At the default sizes every function behaves exactly as
the paper's world.

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
from it at most once and never enclose a region (checked for seeds 0-2999). Tables still treat an
unreachable pair as distance :data:`UNREACHABLE` (never a valid start) and :func:`maze_tables` checks
that every possible goal cell has a start at distance >= 11, so a maze for which sampling could fail
raises when it is built.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

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
MAX_GRID = 31  # the largest side a world may have: all-pairs shortest paths grow as side**4
UNREACHABLE = 1_000_000  # distance sentinel for walls and disconnected pairs
SPLITS = ("random", "non_compositional")
FACTORS = ("quadrant", "interaction", "maze", "object type")
FACTOR_SIZES = (N_QUADRANTS, N_INTERACTIONS, N_MAZES, N_OBJECT_TYPES)
N_GOALS = int(np.prod(FACTOR_SIZES))  # 200
FRAC_OOD = 0.25
QUADRANT_NAMES = ("top-left", "top-right", "bottom-left", "bottom-right")


@dataclass(frozen=True)
class GoalsWorld:
    """The sizes of a goals world; the defaults are the paper's (App. C.4). Frozen and hashable, so it can be
    a static argument of jitted functions and a key of cached tables.

    * ``grid``: side of the (square) grid, odd and >= 5; mazes come from :func:`generate_maze` at this size
      (the authors' algorithm, whose complexity and density scale with the size); quadrants split at
      ``(grid + 1) // 2`` (6 | 5 cells at 11);
    * ``n_mazes``, ``n_object_types``, ``n_interactions``: the sizes of the goal factors other than the
      quadrant (always 4, the factor held out by the non-compositional split);
    * ``n_distractors``: objects of other types placed beside the goal object;
    * ``min_distance``: the agent starts at least this many steps from the goal object.

    Derived: ``n_cells``, ``n_actions`` (4 moves + the interactions), ``obs_channels`` (object types, walls,
    agent), ``obs_size``, ``max_steps`` (grid² − 1, the paper's padded demonstration length),
    ``factor_sizes`` and ``n_goals``.
    """

    grid: int = GRID
    n_mazes: int = N_MAZES
    n_object_types: int = N_OBJECT_TYPES
    n_interactions: int = N_INTERACTIONS
    n_distractors: int = N_DISTRACTORS
    min_distance: int = MIN_DISTANCE

    def __post_init__(self):
        _check_grid(self.grid)
        for name in ("n_mazes", "n_object_types", "n_interactions", "min_distance"):
            _check_count(getattr(self, name), name)
        if (
            isinstance(self.n_distractors, bool)
            or int(self.n_distractors) != self.n_distractors
            or self.n_distractors < 0
        ):
            raise ValueError(f"n_distractors must be a non-negative integer, got {self.n_distractors!r}")
        if self.n_distractors > 0 and self.n_object_types < 2:
            raise ValueError(
                f"n_object_types must be >= 2 when there are distractors (they take the other types), "
                f"got {self.n_object_types}"
            )
        if self.n_distractors >= self.n_cells // 4:
            raise ValueError(
                f"n_distractors must be < {self.n_cells // 4} for a {self.grid}x{self.grid} grid, "
                f"got {self.n_distractors}"
            )
        if self.min_distance > self.max_steps:
            raise ValueError(
                f"min_distance must be <= {self.max_steps} for a {self.grid}x{self.grid} grid, got {self.min_distance}"
            )

    @property
    def n_cells(self):
        return self.grid * self.grid

    @property
    def n_actions(self):
        return N_MOVES + self.n_interactions

    @property
    def obs_channels(self):
        return self.n_object_types + 2

    @property
    def obs_size(self):
        return self.n_cells * self.obs_channels

    @property
    def max_steps(self):
        return self.n_cells - 1

    @property
    def factor_sizes(self):
        return (N_QUADRANTS, self.n_interactions, self.n_mazes, self.n_object_types)

    @property
    def n_goals(self):
        return int(np.prod(self.factor_sizes))

    @property
    def actions(self):
        return ACTIONS[:N_MOVES] + tuple(f"interaction {i}" for i in range(self.n_interactions))

    @property
    def moves(self):
        """(row, col) change per action: (n_actions, 2) int (interactions stay put)."""
        return np.concatenate([MOVES[:N_MOVES], np.zeros((self.n_interactions, 2), MOVES.dtype)])

    @property
    def quadrant_of_cell(self):
        """Quadrant of each cell: rows/cols split at (grid + 1) // 2: (n_cells,) int."""
        rows, cols = np.divmod(np.arange(self.n_cells), self.grid)
        half = (self.grid + 1) // 2
        return 2 * (rows >= half) + (cols >= half)

    @property
    def quadrant_masks(self):
        return np.stack([self.quadrant_of_cell == q for q in range(N_QUADRANTS)])  # (4, n_cells) bool

    @property
    def step_action(self):
        """Move code of a step between neighbouring cells, indexed by (cell_to − cell_from + grid)."""
        table = np.full(2 * self.grid + 1, -1, np.int32)
        table[[0, self.grid + 1, 2 * self.grid, self.grid - 1]] = [0, 1, 2, 3]
        return table


def _check_grid(size):
    if isinstance(size, bool) or int(size) != size or not 5 <= size <= MAX_GRID or size % 2 == 0:
        raise ValueError(f"grid (the side of the maze) must be an odd integer from 5 to {MAX_GRID}, got {size!r}")


def _check_count(value, name):
    if isinstance(value, bool) or int(value) != value or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")


WORLD = GoalsWorld()  # the paper's world (App. C.4)
QUADRANT_OF_CELL = WORLD.quadrant_of_cell  # rows 0-5 / 6-10 × cols 0-5 / 6-10 (the split is at 6 | 5 cells)
QUADRANT_MASKS = WORLD.quadrant_masks  # (4, 121) bool
_STEP_ACTION = WORLD.step_action


# --------------------------------------------------------------------------------------------- mazes


def generate_maze(seed, size=GRID, complexity=0.75, density=0.75):
    """One random maze, walls True: (size, size) bool (App. C.4, the authors' mazelab variant).

    On a padded (size+2)² grid with border walls, ⌊density·(⌊(size+2)/2⌋)²⌋ islands each start at
    a random even node (x drawn before y) and take ⌊complexity·5·2(size+2)⌋ random steps to an
    even node two cells away (left, right, up, down if in bounds), walling it and the cell between
    only if it is empty; the padding is cropped. For size 11 that is 27 islands × 97 steps.
    """
    _check_grid(size)
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


def make_mazes(seed, n_mazes=None, world=WORLD):
    """The run's mazes, maze i from ``default_rng(seed + i)``: (n_mazes, grid, grid) bool (n_mazes: the world's)."""
    n_mazes = world.n_mazes if n_mazes is None else n_mazes
    _check_count(n_mazes, "n_mazes")
    return np.stack([generate_maze(seed + i, world.grid) for i in range(n_mazes)])


# --------------------------------------------------------------------------------------------- shortest paths


def _adjacency(walls):
    """Dense 0/1 matrix of the free-cell 4-neighbour graph, built as the authors build it."""
    free = ~walls
    size = walls.shape[0]
    adjacency = np.zeros((size * size, size * size))
    for r, c in np.argwhere(free):
        for dr, dc in MOVES[:N_MOVES]:
            rr, cc = r + dr, c + dc
            if 0 <= rr < size and 0 <= cc < size and free[rr, cc]:
                adjacency[r * size + c, rr * size + cc] = 1.0
    return adjacency


def maze_tables(walls, world=WORLD):
    """Shortest-path tables of one maze (grid, grid) bool, for use inside jit (C = grid² cells; 121 in the paper).

    * ``free`` (C,) bool;
    * ``distance`` (C, C) int32: path length a -> g, :data:`UNREACHABLE` for walls and
      disconnected pairs;
    * ``predecessor`` (C, C) int32: scipy's predecessor of cell c on the shortest path from a
      (c itself where there is none), so the path a -> g is read backwards from g;
    * ``next_action`` (C, C) int32: the first move (0-3) of that path, −1 where a == g or no
      path exists.

    Paths come from ``scipy.sparse.csgraph.shortest_path`` on the same dense graph as the authors',
    so ties between equally short paths break the same way. Raises a ValueError if a quadrant has
    no free cell or some free cell has no start at distance >= ``world.min_distance`` (sampling would
    then fail).
    """
    walls = np.asarray(walls, dtype=bool)
    grid, n_cells = world.grid, world.n_cells
    if walls.shape != (grid, grid):
        raise ValueError(f"walls must have shape ({grid}, {grid}), got {walls.shape}")
    free = ~walls.reshape(-1)
    dist, pred = shortest_path(_adjacency(walls), return_predecessors=True)
    reachable = np.isfinite(dist) & free[:, None] & free[None, :]
    distance = np.where(reachable, dist, UNREACHABLE).astype(np.int32)
    cells = np.broadcast_to(np.arange(n_cells), (n_cells, n_cells))
    predecessor = np.where(pred >= 0, pred, cells).astype(np.int32)

    # first step of each path: walk back from g until the predecessor is the start a
    start = cells.T
    node = cells.copy()
    for _ in range(n_cells):
        back = predecessor[start, node]
        step = (back != start) & (back != node)
        if not step.any():
            break
        node = np.where(step, back, node)
    moving = reachable & (start != cells)
    next_action = np.where(moving, world.step_action[np.clip(node - start + grid, 0, 2 * grid)], -1).astype(np.int32)

    masks = world.quadrant_masks
    for q in range(N_QUADRANTS):
        goal_cells = np.flatnonzero(free & masks[q])
        if len(goal_cells) == 0:
            raise ValueError(f"maze has no free cell in quadrant {q}")
        starts = ((distance[goal_cells] >= world.min_distance) & reachable[goal_cells]).sum(1)
        if (starts == 0).any():
            g = goal_cells[np.argmax(starts == 0)]
            raise ValueError(
                f"min_distance={world.min_distance} is too far: goal cell (row {g // grid}, col {g % grid}) in "
                f"quadrant {q} has no free cell that many steps away; lower min_distance or choose another maze seed"
            )
    if free.sum() < world.n_distractors:
        raise ValueError(f"maze has {free.sum()} free cells, fewer than the {world.n_distractors} distractors")
    return {"free": free, "distance": distance, "predecessor": predecessor, "next_action": next_action}


def make_tables(seed, n_mazes=None, world=WORLD):
    """Tables of :func:`maze_tables` for the run's mazes, stacked on a leading maze axis (jnp arrays)."""
    mazes = make_mazes(seed, n_mazes, world)
    tables = []
    for i, walls in enumerate(mazes):
        try:
            tables.append(maze_tables(walls, world))
        except ValueError as err:
            raise ValueError(f"maze {i} of seed {seed} (default_rng({seed + i})): {err}") from None
    return {k: jnp.asarray(np.stack([t[k] for t in tables])) for k in tables[0]}


def max_demo_length(tables):
    """Steps of the longest possible demonstration: the longest shortest path + 1 (the interaction)."""
    distance = np.asarray(tables["distance"])
    return int(distance[distance < UNREACHABLE].max()) + 1


# --------------------------------------------------------------------------------------------- goals


def goal_table(world=WORLD):
    """All goals as (quadrant, interaction, maze, object type) rows in itertools.product order: (n_goals, 4).

    Goal id = ((quadrant · n_interactions + interaction) · n_mazes + maze) · n_object_types + object type
    (200 goals in the paper's world).
    """
    return np.array(list(itertools.product(*(range(n) for n in world.factor_sizes))), dtype=np.int32)


def quadrant_of(cell, world=WORLD):
    """Quadrant of a cell index (row * grid + col): 0 top-left, 1 top-right, 2 bottom-left, 3 bottom-right."""
    return jnp.asarray(world.quadrant_of_cell)[cell]


def check_goal(goal, n_mazes=None, world=WORLD):
    """Raise a ValueError naming the factor if a concrete goal (4,) is out of range; tracers pass."""
    try:
        values = np.asarray(goal)
    except jax.errors.TracerArrayConversionError:
        return
    if values.shape != (4,) or not np.issubdtype(values.dtype, np.integer):
        raise ValueError(f"goal must be 4 integers (quadrant, interaction, maze, object type), got {goal!r}")
    sizes = list(world.factor_sizes)
    if n_mazes is not None:
        sizes[2] = n_mazes
    for name, size, value in zip(FACTORS, sizes, values):
        if not 0 <= value < size:
            raise ValueError(f"goal {name} must be in 0..{size - 1}, got {int(value)}")


def _n_mazes(tables):
    return np.shape(tables["distance"])[0]


def goal_split(split="random", seed=0, world=WORLD):
    """Training and OOD goal ids (App. C.4): ``(train, ood)``, (150,) and (50,) in the paper's world.

    * ``random``: ``jax.random.permutation(key(seed), n_goals)``; the last ⌊n_goals/4⌋ are OOD. The ids keep
      the permutation order (as the authors' task arrays do). As in the authors' code, which asserts it,
      a seed whose training goals miss some value of a factor raises a ValueError (no redraw).
    * ``non_compositional``: OOD = every goal in quadrant 3 (bottom-right).
    """
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    goals = goal_table(world)
    if split == "non_compositional":
        held_out = goals[:, 0] == N_QUADRANTS - 1
        return np.flatnonzero(~held_out), np.flatnonzero(held_out)
    order = np.asarray(jax.random.permutation(jax.random.key(seed), world.n_goals))
    n_ood = int(world.n_goals * FRAC_OOD)
    train, ood = order[:-n_ood], order[-n_ood:]
    for f, (name, size) in enumerate(zip(FACTORS, world.factor_sizes)):
        if len(np.unique(goals[train, f])) != size:
            raise ValueError(
                f"random split with seed={seed} leaves a value of the {name} factor out of training; "
                "choose another seed"
            )
    return train, ood


def sample_goal(key, goal_ids, world=WORLD):
    """A goal drawn uniformly from ``goal_ids`` (as the authors' ``reset_goal``): (4,) int32."""
    return jnp.asarray(goal_table(world))[jax.random.choice(key, jnp.asarray(goal_ids))]


def goal_one_hot(goal, world=WORLD):
    """Decoding targets: a one-hot per factor, (4, max factor size) float32 ((4, 5) in the paper's world)."""
    return jax.nn.one_hot(goal, max(world.factor_sizes))


def describe_goal(goal, world=WORLD):
    """The goal in words, e.g. 'interaction 1 with the object of type 3 in quadrant 2 (bottom-left) of maze 4'."""
    check_goal(goal, world=world)
    q, i, m, o = (int(v) for v in np.asarray(goal))
    return f"interaction {i} with the object of type {o} in quadrant {q} ({QUADRANT_NAMES[q]}) of maze {m}"


# --------------------------------------------------------------------------------------------- instances


def sample_instance(key, tables, goal, world=WORLD):
    """Object and agent placement for ``goal``: ``{"agent": (), "objects": (1 + n_distractors,), "types": (same,)}``
    int32 cells/types.

    Object 0 is the goal object, the others the distractors (4 in the paper's world). Draws follow the
    authors' ``reset``: the key is split into (distractor types, agent cell, goal cell, distractor cells,
    unused) and each is one ``jax.random.choice``: distractor types with replacement from the other types;
    the goal cell uniform over free cells of the goal quadrant; the agent uniform over free cells at
    shortest-path distance >= ``world.min_distance`` (11) from it; distinct free distractor cells (they may
    share the goal or agent cell).
    """
    check_goal(goal, _n_mazes(tables), world)
    goal = jnp.asarray(goal, jnp.int32)
    quadrant, _, maze, kind = goal[0], goal[1], goal[2], goal[3]
    n_types, n_cells = world.n_object_types, world.n_cells
    k_types, k_agent, k_goal, k_cells, _ = jax.random.split(key, 5)
    types = jax.random.choice(
        k_types, n_types, (world.n_distractors,), replace=True, p=1.0 - (jnp.arange(n_types) == kind)
    )
    free = jnp.asarray(tables["free"])[maze]
    in_quadrant = free & jnp.asarray(world.quadrant_masks)[quadrant]
    goal_cell = jax.random.choice(k_goal, n_cells, (1,), p=in_quadrant.astype(jnp.float32))
    distance = jnp.asarray(tables["distance"])[maze, goal_cell[0]]
    start_ok = free & (distance >= world.min_distance) & (distance < UNREACHABLE)
    agent = jax.random.choice(k_agent, n_cells, (1,), p=start_ok.astype(jnp.float32))
    cells = jax.random.choice(k_cells, n_cells, (world.n_distractors,), replace=False, p=free.astype(jnp.float32))
    return {
        "agent": agent[0].astype(jnp.int32),
        "objects": jnp.concatenate([goal_cell, cells]).astype(jnp.int32),
        "types": jnp.concatenate([kind[None], types]).astype(jnp.int32),
    }


def observation(walls, agent_cell, object_cells, object_types, world=WORLD):
    """The agent's view (App. C.4), flattened (H, W, C) row-major: (obs_size,) float32, (847,) in the paper.

    Channels 0..n_object_types−1: a one-hot of each object's type at its cell (where objects share a cell
    their one-hots add up as a union); then walls; then the agent.
    """
    n_types = world.n_object_types
    grid = jnp.zeros((world.n_cells, world.obs_channels), jnp.float32)
    grid = grid.at[object_cells, object_types].set(1.0)
    grid = grid.at[:, n_types].set(jnp.asarray(walls, jnp.float32).reshape(-1))
    grid = grid.at[agent_cell, n_types + 1].set(1.0)
    return grid.reshape(-1)


def step_cell(walls, cell, action, world=WORLD):
    """The agent's cell after ``action``: moves into walls or off the grid and interactions stay put."""
    size, moves = world.grid, jnp.asarray(world.moves)
    row, col = cell // size + moves[action, 0], cell % size + moves[action, 1]
    inside = (row >= 0) & (row < size) & (col >= 0) & (col < size)
    blocked = jnp.asarray(walls)[jnp.clip(row, 0, size - 1), jnp.clip(col, 0, size - 1)]
    return jnp.where(inside & ~blocked, row * size + col, cell).astype(jnp.int32)


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


def demonstration(tables, mazes, instance, goal, length=MAX_STEPS, world=WORLD):
    """The optimal trajectory of an instance: ``(obs (length, obs_size), actions (length,), mask (length,))``.

    The agent follows scipy's shortest path from its start (the authors' precomputed action
    sequence), then takes the goal's interaction on the goal cell. That step is the last unmasked
    one: mask.sum() == distance + 1. Padding repeats the interaction on the goal cell, masked.
    """
    check_goal(goal, _n_mazes(tables), world)
    _check_length(tables, length)
    goal = jnp.asarray(goal, jnp.int32)
    cells = optimal_path(tables, instance, goal, length)
    d = jnp.asarray(tables["distance"])[goal[2], instance["agent"], instance["objects"][0]]
    t = jnp.arange(length)
    size = world.grid
    step = jnp.asarray(world.step_action)[jnp.clip(jnp.roll(cells, -1) - cells + size, 0, 2 * size)]
    actions = jnp.where(t < d, step, N_MOVES + goal[1]).astype(jnp.int32)
    walls = jnp.asarray(mazes)[goal[2]]
    obs = jax.vmap(lambda c: observation(walls, c, instance["objects"], instance["types"], world))(cells)
    return obs, actions, t <= d


def task_data(tables, mazes, goal, key, n_support=1, n_query=1, length=MAX_STEPS, world=WORLD):
    """Support and query demonstrations of one goal, each ``(obs (n·length, obs_size), (actions (n·length,), mask))``.

    Instance keys follow the authors' loader: ``key`` is split into n_support + n_query keys and
    each instance is drawn from the first half of ``split(key_i)``.
    """
    for name, n in (("n_support", n_support), ("n_query", n_query)):
        _check_count(n, name)
    check_goal(goal, _n_mazes(tables), world)
    _check_length(tables, length)

    def one(k):
        instance = sample_instance(jax.random.split(k)[0], tables, goal, world)
        return demonstration(tables, mazes, instance, goal, length, world)

    obs, actions, mask = jax.vmap(one)(jax.random.split(key, n_support + n_query))

    def part(s):
        return obs[s].reshape(-1, world.obs_size), (actions[s].reshape(-1), mask[s].reshape(-1))

    return part(slice(0, n_support)), part(slice(n_support, None))


def rollout(policy, tables, mazes, instance, goal, length=MAX_STEPS, world=WORLD):
    """Run ``policy(obs (obs_size,)) -> action`` from the instance's start for ``length`` steps.

    Returns ``(cells (length+1,), actions (length,), success ())``: the cells visited (starting
    cell first), the actions the policy chose, and whether it took the goal's interaction on the goal
    cell. After that the episode is done and the agent stays put.
    """
    check_goal(goal, _n_mazes(tables), world)
    goal = jnp.asarray(goal, jnp.int32)
    walls = jnp.asarray(mazes)[goal[2]]
    target = instance["objects"][0]

    def step(carry, _):
        cell, done = carry
        obs = observation(walls, cell, instance["objects"], instance["types"], world)
        action = jnp.asarray(policy(obs), jnp.int32)
        success = ~done & (cell == target) & (action == N_MOVES + goal[1])
        cell = jnp.where(done, cell, step_cell(walls, cell, action, world))
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
    return {
        "acc": acc.mean(),
        "acc_all": jnp.all(correct | ~mask, axis=1).astype(jnp.float32).mean(),
        "acc_first": pick(first).mean(),
        "acc_last": pick(last).mean(),
    }
