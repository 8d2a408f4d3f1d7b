"""Tests of compgen.tasks.support: mask parsing, Table A9 labels, compositional/connected predicates."""

from math import comb

import numpy as np
import pytest

from compgen.tasks import support

# ------------------------------------------------------------------ parsing and validation


def test_parse_masks_digit_and_comma_forms():
    expected = np.array([[1, 0, 0], [0, 1, 0], [1, 1, 0], [0, 1, 1]])
    np.testing.assert_array_equal(support.parse_masks("0;1;01;12", 3), expected)
    np.testing.assert_array_equal(support.parse_masks("0,0;1;0,1;1, 2", 3), expected)
    np.testing.assert_array_equal(support.parse_masks("0;1 + 01;12", 3), expected)


def test_parse_masks_repeated_index_is_one_hot():
    np.testing.assert_array_equal(support.parse_masks("00;11", 2), np.eye(2, dtype=int))


def test_parse_masks_multi_digit_indices_with_commas():
    masks = support.parse_masks("0,11;10,;3", 12)
    assert masks.shape == (3, 12)
    assert np.flatnonzero(masks[0]).tolist() == [0, 11]
    assert np.flatnonzero(masks[1]).tolist() == [10]
    assert np.flatnonzero(masks[2]).tolist() == [3]
    for spec in ("0,11;10,;3", "0,1;5;10,11"):
        masks = support.parse_masks(spec, 12)
        np.testing.assert_array_equal(support.parse_masks(support.masks_to_string(masks), 12), masks)
    with pytest.raises(ValueError, match="spec entry '10' .* ambiguous"):
        support.parse_masks("10", 12)


def test_parse_masks_round_trip():
    spec = "012;234;450;5"
    assert support.masks_to_string(support.parse_masks(spec, 6)) == "012;234;045;5"
    masks = support.parse_masks(spec, 6)
    np.testing.assert_array_equal(support.parse_masks(support.masks_to_string(masks), 6), masks)


@pytest.mark.parametrize(
    "spec, n_modules, fragment",
    [
        ("0;6", 6, "n_modules=6"),  # index out of range
        ("0;;1", 6, "empty mask"),
        ("0;a1", 6, "module indices"),
        ("", 6, "at least one mask"),
        ("0;1", 0, "n_modules"),
    ],
)
def test_parse_masks_errors_name_the_parameter(spec, n_modules, fragment):
    with pytest.raises(ValueError) as error:
        support.parse_masks(spec, n_modules)
    message = str(error.value)
    assert fragment in message
    assert "spec" in message or "n_modules" in message


def test_parse_masks_rejects_non_string():
    with pytest.raises(ValueError, match="spec must be a string"):
        support.parse_masks([[1, 0]], 2)


def test_validate_masks_errors():
    with pytest.raises(ValueError, match=r"masks must have one entry per module.*\(num_masks, 6\)"):
        support.validate_masks(np.ones((2, 5)), 6)
    with pytest.raises(ValueError, match=r"masks must not contain an all-zero mask.*\[1\]"):
        support.validate_masks([[1, 0], [0, 0]], 2)
    with pytest.raises(ValueError, match="masks must contain only 0 and 1"):
        support.validate_masks([[2, 0]], 2)
    with pytest.raises(ValueError, match="masks must be a 2-D array"):
        support.validate_masks([1, 0], 2)
    with pytest.raises(ValueError, match="masks must contain at least one mask"):
        support.validate_masks(np.zeros((0, 3)), 3)
    with pytest.raises(ValueError, match="train_masks must"):
        support.validate_masks([[0, 0]], 2, name="train_masks")


def test_validate_masks_returns_int_array():
    masks = support.validate_masks(np.array([[True, False], [True, True]]), 2)
    assert masks.dtype == np.int32
    np.testing.assert_array_equal(masks, [[1, 0], [1, 1]])


# ------------------------------------------------------------------ standard sets


@pytest.mark.parametrize("n_modules, k", [(6, 1), (6, 2), (6, 3), (8, 4), (5, 5)])
def test_all_khot_masks(n_modules, k):
    masks = support.all_khot_masks(n_modules, k)
    assert masks.shape == (comb(n_modules, k), n_modules)
    assert (masks.sum(axis=1) == k).all()
    assert len({tuple(row) for row in masks.tolist()}) == masks.shape[0]


def test_masks_up_to_k():
    masks = support.masks_up_to_k(6, 3)
    assert masks.shape == (6 + 15 + 20, 6)
    assert (np.diff(masks.sum(axis=1)) >= 0).all()  # ordered by k
    with pytest.raises(ValueError, match="k must be an integer in 1..n_modules=6"):
        support.masks_up_to_k(6, 7)
    with pytest.raises(ValueError, match="k must be"):
        support.all_khot_masks(6, 0)


# ------------------------------------------------------------------ Table A9


def test_table_a9_labels_match_computed_connectivity():
    assert [s.column for s in support.TABLE_A9] == list(range(1, 8))
    for setting in support.TABLE_A9:
        masks = setting.masks
        assert support.is_connected(masks) == setting.connected, setting
        assert support.is_compositional(masks, 6), setting


def test_table_a9_sizes_and_distributions():
    sizes = [support.table_a9_masks(c).shape[0] for c in range(1, 8)]
    assert sizes == [12, 12, 6, 3, 6, 6, 8]
    assert [s.distribution for s in support.TABLE_A9] == ["discrete"] * 2 + ["continuous"] * 5
    assert [s.connected for s in support.TABLE_A9] == [True, False, True, True, False, False, False]


def test_table_a9_components():
    assert support.module_components(support.table_a9_masks(5)) == [(0, 1, 2), (3, 4, 5)]
    assert support.module_components(support.table_a9_masks(6)) == [(m,) for m in range(6)]
    assert len(support.connected_components(support.table_a9_masks(2))) == 2
    with pytest.raises(ValueError, match="column must be one of"):
        support.table_a9(8)


def test_table_a9_settings_are_frozen():
    with pytest.raises(AttributeError):
        support.TABLE_A9[0].connected = False


# ------------------------------------------------------------------ hand-made cases


def test_single_mask_is_connected():
    assert support.is_connected([[1, 0, 0]])
    assert support.connected_components([[0, 1]]) == [(0,)]


def test_hand_made_connectivity():
    assert not support.is_connected(support.parse_masks("0;1", 2))
    assert support.is_connected(support.parse_masks("01;12", 3))
    assert support.is_connected(support.parse_masks("01;12;23;34", 5))  # a chain
    assert not support.is_connected(support.parse_masks("01;23", 4))
    # duplicated families share modules with each other
    assert support.is_connected(support.parse_masks("0;0", 3))


def test_support_graph_adjacency():
    adjacency = support.support_graph(support.parse_masks("01;12;3", 4))
    expected = np.array([[0, 1, 0], [1, 0, 0], [0, 0, 0]], dtype=bool)
    np.testing.assert_array_equal(adjacency, expected)


def test_compositional_hand_made_and_target():
    masks = support.parse_masks("01;12", 4)
    assert not support.is_compositional(masks, 4)
    assert support.missing_modules(masks) == [3]
    # relative to target tasks that only use modules 0..2 the support is compositional
    assert support.is_compositional(masks, 4, target=support.parse_masks("02", 4))
    assert not support.is_compositional(masks, 4, target=support.parse_masks("03", 4))
    with pytest.raises(ValueError, match=r"masks must have compositional support.*\[3\]"):
        support.require_compositional(masks, 4)


def test_require_connected_names_parameter_and_components():
    masks = support.table_a9_masks(5)
    with pytest.raises(ValueError) as error:
        support.require_connected(masks, name="train_masks")
    message = str(error.value)
    assert message.startswith("train_masks must have connected support")
    assert "2 components" in message
    assert "[0, 1, 2]" in message and "[3, 4, 5]" in message
    np.testing.assert_array_equal(support.require_connected(support.table_a9_masks(3)), support.table_a9_masks(3))


# ------------------------------------------------------------------ property tests on random mask sets


def _union_find_connected(masks):
    """Reference check without graph search: union the modules of each mask, then compare roots."""
    parent = list(range(masks.shape[1]))

    def find(i):
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for row in masks:
        active = np.flatnonzero(row)
        for j in active[1:]:
            parent[find(j)] = find(active[0])
    roots = {find(int(np.flatnonzero(row)[0])) for row in masks}
    return len(roots) == 1


def _random_masks(rng):
    n_modules = int(rng.integers(2, 9))
    num = int(rng.integers(1, 7))
    density = rng.uniform(0.1, 0.5)
    masks = (rng.random((num, n_modules)) < density).astype(int)
    masks[np.arange(num), rng.integers(0, n_modules, num)] = 1  # no empty mask
    return masks


def test_random_sets_agree_with_union_find():
    rng = np.random.default_rng(0)
    seen = {True: 0, False: 0}
    for _ in range(300):
        masks = _random_masks(rng)
        connected = support.is_connected(masks)
        assert connected == _union_find_connected(masks), masks
        components = support.connected_components(masks)
        assert sorted(i for c in components for i in c) == list(range(masks.shape[0]))
        assert (len(components) == 1) == connected
        # masks in different components never share a module
        groups = support.module_components(masks)
        assert len(set(m for g in groups for m in g)) == sum(len(g) for g in groups)
        seen[connected] += 1
    assert min(seen.values()) > 30  # both outcomes were exercised


def test_bridging_mask_connects_components():
    rng = np.random.default_rng(1)
    bridged = 0
    for _ in range(200):
        masks = _random_masks(rng)
        groups = support.module_components(masks)
        if len(groups) < 2:
            continue
        bridge = np.zeros(masks.shape[1], dtype=int)
        bridge[[g[0] for g in groups]] = 1  # one module from every component
        assert support.is_connected(np.vstack([masks, bridge]))
        # a bridge that skips one component does not connect it
        partial_bridge = np.zeros(masks.shape[1], dtype=int)
        partial_bridge[[g[0] for g in groups[1:]]] = 1
        assert not support.is_connected(np.vstack([masks, partial_bridge]))
        bridged += 1
    assert bridged > 30


def test_removing_a_module_breaks_compositionality():
    rng = np.random.default_rng(2)
    for _ in range(200):
        n_modules = int(rng.integers(2, 9))
        masks = support.masks_up_to_k(n_modules, 2)
        masks = masks[rng.random(masks.shape[0]) < 0.5]
        if masks.shape[0] == 0 or not support.is_compositional(masks, n_modules):
            continue
        removed = int(rng.integers(0, n_modules))
        reduced = masks.copy()
        reduced[:, removed] = 0
        reduced = reduced[reduced.sum(axis=1) > 0]
        if reduced.shape[0] == 0:
            continue
        assert not support.is_compositional(reduced, n_modules)
        assert support.missing_modules(reduced, n_modules) == [removed]
