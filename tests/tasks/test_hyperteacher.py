import jax
import jax.numpy as jnp
import numpy as np
import pytest

from compgen.tasks import hyperteacher as ht

# spec §2.3: (M, K) -> (random train, random OOD, non-compositional train, non-compositional OOD)
SPLIT_SIZES = {
    (4, 1): (12, 4, 12, 4),
    (4, 2): (75, 25, 60, 40),
    (4, 4): (169, 56, 105, 120),
    (6, 2): (331, 110, 315, 126),
    (8, 1): (48, 16, 56, 8),
    (8, 2): (972, 324, 1008, 288),
}


@pytest.mark.parametrize("mk", sorted(SPLIT_SIZES))
def test_split_sizes_follow_the_spec(mk):
    m, k = mk
    train, ood, _ = ht.task_split(m, k, "random", 0.25, seed=2020)
    nc_train, nc_ood, _ = ht.task_split(m, k, "non_compositional")
    assert (len(train), len(ood), len(nc_train), len(nc_ood)) == SPLIT_SIZES[mk]
    for a, b in ((train, ood), (nc_train, nc_ood)):
        assert not set(a) & set(b) and len(a) + len(b) == len(ht.task_codes(m, k))


@pytest.mark.parametrize("seed", range(2020, 2026))
def test_random_split_uses_every_module_in_training(seed):
    for m, k in ((4, 1), (8, 1), (4, 2)):
        train, _, _ = ht.task_split(m, k, "random", 0.25, seed)
        codes = ht.task_codes(m, k, train)
        assert codes.any(axis=0).all()  # every expert of every layer is active in some training task


def test_random_split_redraws_until_compositional():
    # at frac_ood 0.5 with M = 4, K = 1 many permutations miss a module; the split must not
    redraws = [ht.task_split(4, 1, "random", 0.5, seed)[2] for seed in range(20)]
    assert any(r > 0 for r in redraws)
    for seed in range(20):
        train, _, _ = ht.task_split(4, 1, "random", 0.5, seed)
        assert ht.task_codes(4, 1, train).any(axis=0).all()


def test_non_compositional_ood_always_contains_the_held_out_module():
    for m, k in ((4, 2), (6, 2), (8, 2)):
        train, ood, _ = ht.task_split(m, k, "non_compositional")
        assert (ht.task_codes(m, k, ood)[:, -1, m - 1] == 1).all()
        assert (ht.task_codes(m, k, train)[:, -1, m - 1] == 0).all()


def test_connected_and_disconnected_splits():
    connected, ood, _ = ht.task_split(8, 2, "connected")
    disconnected, ood_d, _ = ht.task_split(8, 2, "disconnected")
    assert (len(connected), len(disconnected), len(ood)) == (576, 104, 698)
    np.testing.assert_array_equal(ood, ood_d)
    codes = ht.task_codes(8, 2, disconnected)
    active = codes.reshape(len(codes), -1, 8).any(axis=1)
    assert all(a[:4].any() != a[4:].any() for a in active)  # one half of the experts only
    assert (codes.sum(-1)[:, 0] == codes.sum(-1)[:, 1]).all()  # both layers 1-hot or both 2-hot


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(n_modules=4, max_hot=5), "max_hot"),
        (dict(n_modules=8, max_hot=2, split="diagonal"), "split must be one of"),
        (dict(n_modules=8, max_hot=2, frac_ood=1.0), "frac_ood"),
        (dict(n_modules=8, max_hot=2, frac_ood=0.0), "frac_ood"),
        (dict(n_modules=8, max_hot=4, split="connected"), "K"),
        (dict(n_modules=7, max_hot=2, split="disconnected"), "even"),
        (dict(n_modules=4, max_hot=2, split="connected"), "> 4"),
    ],
)
def test_bad_split_parameters_name_the_parameter(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ht.task_split(**kwargs)


def test_teacher_outputs_are_standardised_per_unit_on_the_fixed_inputs():
    key = jax.random.key(2020)
    teacher = ht.init_teacher(key, n_modules=4)
    norm_inputs = ht.sample_inputs(key, 1000, 16)
    for code in ht.task_codes(4, 2)[[0, 17, 60]]:
        y = ht.standardised_logits(teacher, norm_inputs, jnp.asarray(code), norm_inputs)
        np.testing.assert_allclose(y.mean(0), 0.0, atol=1e-4)
        np.testing.assert_allclose(y.std(0), 1.0, rtol=1e-4)


def test_same_seed_gives_same_tasks_and_targets_are_distributions():
    def draw(seed):
        key = jax.random.key(seed)
        teacher = ht.init_teacher(key, n_modules=4)
        code = jnp.asarray(ht.task_codes(4, 2)[7])
        return ht.task_data(teacher, ht.sample_inputs(key, 1000, 16), code, jax.random.key(5), 8, 4)

    a, b, c = draw(2020), draw(2020), draw(2021)
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
        np.testing.assert_array_equal(x, y)
    assert not np.allclose(a[0][1], c[0][1])
    (x_s, y_s), (x_q, y_q) = a
    assert x_s.shape == (8, 16) and y_q.shape == (4, 8)
    np.testing.assert_allclose(y_s.sum(-1), 1.0, rtol=1e-5)
    assert float(jnp.abs(x_s).max()) <= 1.0


def test_kl_loss_is_zero_at_the_target_and_positive_elsewhere():
    target = jax.nn.softmax(jnp.array([[1.0, 2.0, 0.5]]))
    assert abs(float(ht.kl_loss(jnp.log(target), target))) < 1e-6
    assert float(ht.kl_loss(jnp.zeros((1, 3)), target)) > 0


def test_evaluation_sets():
    train, ood, _ = ht.task_split(4, 2, "random", 0.25, 2020)
    sets = ht.evaluation_codes(jax.random.key(0), 4, 2, train, ood, 64)
    assert set(sets) == {"valid", "test", "ood", "ood_1", "ood_2", "ood_4"}
    train_codes = {c.tobytes() for c in ht.task_codes(4, 2, train)}
    assert all(np.asarray(c).tobytes() in train_codes for c in sets["test"])
    assert all(np.asarray(c).tobytes() not in train_codes for c in sets["ood"])
    assert (np.asarray(sets["ood_1"]).sum(-1) == 1).all() and (np.asarray(sets["ood_4"]).sum(-1) == 4).all()
    # with K = 1 and M = 8 the OOD tasks are 1-hot: no 2-hot OOD task exists, k = 4, 8 are fresh k-hot codes
    train, ood, _ = ht.task_split(8, 1, "random", 0.25, 2020)
    sets = ht.evaluation_codes(jax.random.key(0), 8, 1, train, ood, 16)
    assert sets["ood_2"] is not None and (np.asarray(sets["ood_8"]) == 1).all()
