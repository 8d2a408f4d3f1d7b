"""Task-support mask sets and their predicates (paper §3.2, Definitions 3.1-3.2, Table A9).

A *task family* is a binary mask ``m`` in ``{0, 1}^M`` saying which of the ``M`` modules a task
combines. A training distribution is a set of masks, stored as an integer array
``masks: (num_masks, M)``. This module builds mask sets and checks the two support conditions of
the paper's theory:

* **compositional support** (Def. 3.1): every module is active in at least one mask;
* **connected support** (Def. 3.2): the graph whose nodes are the masks, with an edge wherever two
  masks share an active module, is connected.

Everything here is plain numpy on small arrays; nothing depends on JAX.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

__all__ = [
    "parse_masks",
    "validate_masks",
    "mask_to_string",
    "masks_to_string",
    "all_khot_masks",
    "masks_up_to_k",
    "is_compositional",
    "missing_modules",
    "support_graph",
    "connected_components",
    "module_components",
    "is_connected",
    "require_connected",
    "require_compositional",
    "random_split",
    "ring_combinations",
    "half_split",
    "check_ring_split",
    "SupportSetting",
    "TABLE_A9",
    "table_a9",
    "table_a9_masks",
]


def _check_n_modules(n_modules):
    if isinstance(n_modules, bool) or not isinstance(n_modules, (int, np.integer)) or n_modules < 1:
        raise ValueError(f"n_modules must be a positive integer, got {n_modules!r}")
    return int(n_modules)


# --------------------------------------------------------------------------------------------------
# Parsing, validation, printing
# --------------------------------------------------------------------------------------------------


def parse_masks(spec: str, n_modules: int) -> np.ndarray:
    """Masks from a string such as ``"0;1;01;12"`` or ``"012;234;450"``: -> (num_masks, M) int32.

    Masks are separated by ``;`` (``+`` is accepted too, as in the paper's "{012, 345} + {01, ...}").
    Inside a mask, either every character is one module index (``"012"``), or the indices are
    separated by commas (``"0,1"``). With ``n_modules > 10`` the comma form is required for any mask of
    more than one character (a single index 10 is ``"10,"``). A repeated index is the same module, so
    ``"00"`` is the one-hot mask of module 0. Whitespace is ignored.
    """
    n_modules = _check_n_modules(n_modules)
    if not isinstance(spec, str):
        raise ValueError(f"spec must be a string such as '0;1;01', got {type(spec).__name__}")
    parts = spec.replace("+", ";").replace(" ", "").split(";")
    if not spec.strip() or all(not p for p in parts):
        raise ValueError(f"spec must list at least one mask, got {spec!r}")
    rows = []
    for number, part in enumerate(parts):
        if not part:
            raise ValueError(f"spec has an empty mask (entry {number} of {spec!r}); every mask needs an index")
        if "," in part:
            tokens = [t for t in part.split(",") if t]
        elif len(part) > 1 and n_modules > 10:
            raise ValueError(
                f"spec entry {part!r} of {spec!r} is ambiguous with n_modules={n_modules} > 10: separate the "
                f"indices by commas (e.g. '1,0'; a single index as '10,')"
            )
        else:
            tokens = list(part)
        if not tokens or any(not (t.isascii() and t.isdigit()) or len(t) > 6 for t in tokens):
            raise ValueError(
                f"spec entry {part[:20]!r} must contain only module indices (ASCII digits 0-9, optionally "
                "comma-separated)"
            )
        row = np.zeros(n_modules, dtype=np.int32)
        for token in tokens:
            index = int(token)
            if index >= n_modules:
                raise ValueError(
                    f"spec entry {part!r} of {spec!r} uses module {index}, but n_modules={n_modules} "
                    f"allows indices 0..{n_modules - 1}"
                )
            row[index] = 1
        rows.append(row)
    return np.stack(rows)


def validate_masks(masks, n_modules: int | None = None, name: str = "masks") -> np.ndarray:
    """Check a mask set and return it as an int32 array (num_masks, M).

    Raises ``ValueError`` naming ``name`` if ``masks`` is not 2-D, has no rows, has entries other than
    0/1, has rows of the wrong length (when ``n_modules`` is given) or contains an all-zero mask.
    """
    array = np.asarray(masks)
    if array.ndim != 2:
        raise ValueError(f"{name} must be a 2-D array (num_masks, n_modules), got shape {array.shape}")
    if array.shape[0] == 0:
        raise ValueError(f"{name} must contain at least one mask, got shape {array.shape}")
    if n_modules is not None:
        n_modules = _check_n_modules(n_modules)
        if array.shape[1] != n_modules:
            raise ValueError(
                f"{name} must have one entry per module, i.e. shape (num_masks, {n_modules}), got {array.shape}"
            )
    if not np.isin(array, (0, 1)).all():
        raise ValueError(f"{name} must contain only 0 and 1, got values {np.unique(array).tolist()}")
    empty = np.flatnonzero(array.sum(axis=1) == 0)
    if empty.size:
        raise ValueError(
            f"{name} must not contain an all-zero mask (a task with no module); rows {empty.tolist()} are empty"
        )
    return array.astype(np.int32)


def mask_to_string(mask) -> str:
    """Active indices of one mask, e.g. ``[1, 1, 0]`` -> ``"01"``; comma form if it has more than 10 entries."""
    mask = np.asarray(mask)
    active = np.flatnonzero(mask).tolist()
    if mask.shape[-1] > 10:
        return ",".join(str(i) for i in active) + ("," if len(active) == 1 and active[0] > 9 else "")
    return "".join(str(i) for i in active)


def masks_to_string(masks) -> str:
    """Inverse of :func:`parse_masks`: (num_masks, M) -> ``"0;1;01"``."""
    return ";".join(mask_to_string(m) for m in validate_masks(masks))


# --------------------------------------------------------------------------------------------------
# Standard mask sets
# --------------------------------------------------------------------------------------------------


def all_khot_masks(n_modules: int, k: int) -> np.ndarray:
    """All masks with exactly ``k`` active modules, lexicographic: -> (C(M, k), M) int32."""
    n_modules = _check_n_modules(n_modules)
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k <= n_modules:
        raise ValueError(f"k must be an integer in 1..n_modules={n_modules}, got {k!r}")
    combos = list(itertools.combinations(range(n_modules), int(k)))
    masks = np.zeros((len(combos), n_modules), dtype=np.int32)
    for row, combo in enumerate(combos):
        masks[row, list(combo)] = 1
    return masks


def masks_up_to_k(n_modules: int, k: int) -> np.ndarray:
    """All masks with 1..k active modules, ordered by k then lexicographically: -> (sum_j C(M, j), M)."""
    n_modules = _check_n_modules(n_modules)
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k <= n_modules:
        raise ValueError(f"k must be an integer in 1..n_modules={n_modules}, got {k!r}")
    return np.concatenate([all_khot_masks(n_modules, j) for j in range(1, int(k) + 1)])


# --------------------------------------------------------------------------------------------------
# Predicates
# --------------------------------------------------------------------------------------------------


def missing_modules(masks, n_modules: int | None = None, target=None) -> list[int]:
    """Modules that no mask uses (and, if ``target`` masks are given, that some target mask needs)."""
    masks = validate_masks(masks, n_modules)
    unseen = ~masks.any(axis=0)
    if target is not None:
        target = validate_masks(target, masks.shape[1], name="target")
        unseen &= target.any(axis=0)
    return np.flatnonzero(unseen).tolist()


def is_compositional(masks, n_modules: int | None = None, target=None) -> bool:
    """Definition 3.1: every module (or every module used by ``target``) is active in some mask."""
    return not missing_modules(masks, n_modules, target)


def support_graph(masks) -> np.ndarray:
    """Adjacency of the task-family graph: (num_masks, num_masks) bool, edge iff masks share a module.

    The diagonal is False (no self loops).
    """
    masks = validate_masks(masks)
    adjacency = (masks @ masks.T) > 0
    np.fill_diagonal(adjacency, False)
    return adjacency


def connected_components(masks) -> list[tuple[int, ...]]:
    """Connected components of :func:`support_graph`, as sorted tuples of mask (row) indices.

    Components are ordered by their smallest mask index.
    """
    adjacency = support_graph(masks)
    unvisited = set(range(adjacency.shape[0]))
    components = []
    while unvisited:
        start = min(unvisited)
        frontier, component = [start], {start}
        while frontier:
            node = frontier.pop()
            for neighbour in np.flatnonzero(adjacency[node]).tolist():
                if neighbour not in component:
                    component.add(neighbour)
                    frontier.append(neighbour)
        unvisited -= component
        components.append(tuple(sorted(component)))
    return components


def module_components(masks) -> list[tuple[int, ...]]:
    """The modules used by each component of the task-family graph (sorted tuples).

    Modules that appear in no mask are left out. A student can permute its hidden units
    independently within each of these module groups without changing any training task.
    """
    masks = validate_masks(masks)
    return [tuple(np.flatnonzero(masks[list(c)].any(axis=0)).tolist()) for c in connected_components(masks)]


def is_connected(masks) -> bool:
    """Definition 3.2: the task-family graph is connected (a single mask is connected)."""
    return len(connected_components(masks)) == 1


def _describe_components(masks) -> str:
    masks = validate_masks(masks)
    pieces = []
    for component, modules in zip(connected_components(masks), module_components(masks)):
        families = ", ".join(mask_to_string(masks[i]) for i in component)
        pieces.append(f"{{{families}}} using modules {list(modules)}")
    return "; ".join(pieces)


def require_connected(masks, name: str = "masks") -> np.ndarray:
    """Return the validated masks, or raise ``ValueError`` naming ``name`` and listing the components."""
    masks = validate_masks(masks, name=name)
    components = connected_components(masks)
    if len(components) > 1:
        raise ValueError(
            f"{name} must have connected support (every pair of task families linked by a chain of masks "
            f"that share a module), but it splits into {len(components)} components: {_describe_components(masks)}"
        )
    return masks


def require_compositional(masks, n_modules: int | None = None, name: str = "masks", target=None) -> np.ndarray:
    """Return the validated masks, or raise ``ValueError`` naming ``name`` and the unseen modules."""
    masks = validate_masks(masks, n_modules, name=name)
    missing = missing_modules(masks, n_modules, target)
    if missing:
        raise ValueError(
            f"{name} must have compositional support (every module active in some mask), "
            f"but modules {missing} never appear"
        )
    return masks


# --------------------------------------------------------------------------------------------------
# Splits of a task universe into training and out-of-distribution tasks (App. C.2, App. C.3)
# --------------------------------------------------------------------------------------------------


def random_split(usage, frac_ood: float, seed: int, max_redraws: int = 100, what: str = "tasks"):
    """A random split of the task universe that keeps compositional support: ``(train, ood, redraws)``.

    ``usage`` (n_tasks, ...) holds 0/1 entries saying which modules (per layer, for the hyperteacher) each
    task uses. The ids are permuted with ``key(seed)`` and the last ⌊frac_ood·n⌋ are OOD, as in the
    authors' code; the permutation is re-drawn with ``fold_in(key, r)`` (``redraws`` = r) until every
    module used by some task is used by a training task. ``train``/``ood`` are sorted id arrays.
    """
    import jax  # the permutation is jax's, as in the authors' code

    if not 0.0 < frac_ood < 1.0:
        raise ValueError(f"frac_ood must lie strictly between 0 and 1, got {frac_ood!r}")
    usage = np.asarray(usage).reshape(len(usage), -1)
    n = len(usage)
    n_ood = int(np.floor(frac_ood * n))
    if n_ood == 0 or n_ood == n:
        raise ValueError(
            f"frac_ood={frac_ood} leaves {n_ood} of {n} {what} out of distribution; choose frac_ood "
            "so that both sets are non-empty"
        )
    key = jax.random.key(seed)
    needed = usage.any(axis=0)
    for redraws in range(max_redraws + 1):
        order = np.asarray(jax.random.permutation(jax.random.fold_in(key, redraws) if redraws else key, n))
        train, ood = order[: n - n_ood], order[n - n_ood :]
        if (usage[train].any(axis=0) >= needed).all():
            return np.sort(train), np.sort(ood), redraws
    raise ValueError(
        f"no compositional random split of {n} {what} in {max_redraws} draws (frac_ood={frac_ood}); lower frac_ood"
    )


SPLITS = ("random", "non_compositional", "connected", "disconnected")


def layered_split(layers, max_hot: int, split: str, frac_ood: float, seed: int, max_redraws: int, what: str):
    """Training and OOD ids of a split of tasks given by per-layer module combinations (App. C.2, App. C.3).

    ``layers`` (n_tasks, L, M) 0/1: the modules each task uses in each of its L layers (L = 2 for the
    hyperteacher's generated layers, L = 1 for a preference mask). Returns ``(train (n,), ood (m,), redraws)``:

    * ``random``: :func:`random_split` (re-drawn until every module of every layer is trained).
    * ``non_compositional``: OOD = every task whose last layer uses module M-1.
    * ``connected`` / ``disconnected`` (K = 2, M even and > 4): training tasks whose every layer is a one-hot or
      a ring pair at distance 1 or 2 / whose layers all have one size and together stay inside one half of
      the modules; OOD = the tasks in neither set.
    """
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    if not 0.0 < frac_ood < 1.0:
        raise ValueError(f"frac_ood must lie strictly between 0 and 1, got {frac_ood!r}")
    layers = np.asarray(layers)
    n_modules = layers.shape[-1]
    if split == "random":
        return random_split(layers, frac_ood, seed, max_redraws, what=what)
    if split == "non_compositional":
        held_out = layers[:, -1, n_modules - 1] == 1
        return np.flatnonzero(~held_out), np.flatnonzero(held_out), 0
    check_ring_split(n_modules, max_hot, split)
    sets = [[frozenset(np.flatnonzero(layer)) for layer in task] for task in layers]
    ring, halves = ring_combinations(n_modules), half_split(n_modules)
    connected = np.array([all(c in ring for c in task) for task in sets])
    disconnected = np.array(
        [len({len(c) for c in task}) == 1 and any(frozenset().union(*task) <= h for h in halves) for task in sets]
    )
    train = connected if split == "connected" else disconnected
    return np.flatnonzero(train), np.flatnonzero(~(connected | disconnected)), 0


def check_ring_split(n_modules: int, max_hot: int, split: str):
    """Raise unless the connected/disconnected ``split`` can be built: K = 2 and an even M > 4 (App. C.2)."""
    if max_hot != 2 or n_modules % 2 or n_modules <= 4:
        raise ValueError(
            f"split={split!r} needs max_hot (K) = 2 and an even n_modules (M) > 4, got K={max_hot}, M={n_modules}"
        )


def ring_combinations(n_modules: int) -> set:
    """The "connected" combinations of App. C.2, App. C.3: the M one-hots and the pairs (i, i+1) and (i, i+2) mod M
    (3M sets of module indices)."""
    rows = [{i} for i in range(n_modules)]
    rows += [{i, (i + d) % n_modules} for d in (1, 2) for i in range(n_modules)]
    return {frozenset(r) for r in rows}


def half_split(n_modules: int) -> tuple:
    """The two halves {0..M/2-1} and {M/2..M-1} of the modules that the "disconnected" support keeps apart."""
    return frozenset(range(n_modules // 2)), frozenset(range(n_modules // 2, n_modules))


# --------------------------------------------------------------------------------------------------
# Table A9 (App. C.1): the task distributions of Fig. 2C
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SupportSetting:
    """One column of the paper's Table A9.

    ``connected`` is the paper's label; ``spec`` lists the masks in :func:`parse_masks` syntax.
    """

    column: int
    distribution: str
    connected: bool
    spec: str
    name: str
    n_modules: int = 6

    def __post_init__(self):
        if self.distribution not in ("discrete", "continuous"):
            raise ValueError(f"distribution must be 'discrete' or 'continuous', got {self.distribution!r}")

    @property
    def masks(self) -> np.ndarray:
        """The column's masks: (num_masks, n_modules) int32."""
        return parse_masks(self.spec, self.n_modules)


_ONE_HOTS = "0;1;2;3;4;5"
_RING = "01;12;23;34;45;50"
_TRIANGLES = "01;12;20;34;45;53"

TABLE_A9: tuple[SupportSetting, ...] = (
    SupportSetting(1, "discrete", True, f"{_ONE_HOTS};{_RING}", "one-hots + ring pairs"),
    SupportSetting(2, "discrete", False, f"{_ONE_HOTS};{_TRIANGLES}", "one-hots + two triangles"),
    SupportSetting(3, "continuous", True, _RING, "ring pairs"),
    SupportSetting(4, "continuous", True, "012;234;450", "overlapping triples"),
    SupportSetting(5, "continuous", False, _TRIANGLES, "two triangles"),
    SupportSetting(6, "continuous", False, _ONE_HOTS, "one-hots"),
    SupportSetting(7, "continuous", False, f"012;345;{_TRIANGLES}", "two triples + two triangles"),
)


def table_a9(column: int) -> SupportSetting:
    """The :class:`SupportSetting` of Table A9 column ``column`` (1..7)."""
    for setting in TABLE_A9:
        if setting.column == column:
            return setting
    raise ValueError(f"column must be one of {[s.column for s in TABLE_A9]}, got {column!r}")


def table_a9_masks(column: int) -> np.ndarray:
    """Masks of Table A9 column ``column`` (1..7): (num_masks, 6) int32."""
    return table_a9(column).masks
