import jax
import jax.numpy as jnp
import numpy as np
import pytest

from compgen import rng
from compgen.tasks import support, teacher


def test_continuous_latents_follow_algorithm_1():
    masks = support.parse_masks("0;01;234;012345", 6)
    z = np.asarray(teacher.sample_latents(jax.random.key(0), masks, 4000, "continuous"))
    active = z > 0
    chosen_masks = {tuple(m) for m in active.astype(int)}
    assert chosen_masks <= {tuple(m) for m in masks}  # zeros exactly outside the drawn mask
    assert len(chosen_masks) == 4
    assert np.all(z[active] > 0.5) and np.all(z[active] < 1.0)
    # code normalisation: sum of w = 2 z - m over active entries is below 1
    assert np.all((2 * z - active).sum(-1) < 1.0)


def test_paper_normalisation_sums_to_one():
    masks = support.parse_masks("01;234", 6)
    z = np.asarray(teacher.sample_latents(jax.random.key(1), masks, 500, "continuous", "paper"))
    m = (z > 0).astype(float)
    np.testing.assert_allclose((2 * z - m).sum(-1), 1.0, atol=1e-5)


def test_discrete_latents_are_unit_norm_masks():
    masks = support.parse_masks("0;01;234", 6)
    z = np.asarray(teacher.sample_latents(jax.random.key(2), masks, 300, "discrete"))
    np.testing.assert_allclose(np.linalg.norm(z, axis=-1), 1.0, atol=1e-6)
    assert {tuple((z_ > 0).astype(int)) for z_ in z} == {tuple(m) for m in masks}


def test_bad_distribution_is_named():
    with pytest.raises(ValueError, match="distribution"):
        teacher.sample_latents(jax.random.key(0), np.eye(6), 2, "gaussian")


@pytest.mark.parametrize("sampler", rng.SAMPLERS)
def test_inputs_are_uniform_with_unit_variance(sampler):
    x = np.asarray(teacher.sample_inputs(jax.random.key(3), 20000, 16, sampler))
    assert x.shape == (20000, 16)
    assert np.abs(x).max() <= np.sqrt(3.0)
    assert abs(x.mean()) < 0.01 and abs(x.var() - 1.0) < 0.01
    # columns uncorrelated, and different keys give different numbers
    corr = np.corrcoef(x[:, :4].T)
    assert np.abs(corr - np.eye(4)).max() < 0.03
    y = np.asarray(teacher.sample_inputs(jax.random.key(4), 20000, 16, sampler))
    assert not np.allclose(x, y)


@pytest.mark.usefixtures("full_precision")  # compares two formulations: full float32 on any backend
def test_teacher_is_reproducible_and_matches_equation():
    params = teacher.init_teacher(jax.random.key(100))
    again = teacher.init_teacher(jax.random.key(100))
    jax.tree.map(np.testing.assert_array_equal, params, again)
    assert params["modules"].shape == (6, 16, 16) and params["readout"].shape == (16, 4)
    # truncated normal: |entries| <= 2 std
    assert np.abs(params["modules"]).max() <= 2 / np.sqrt(6) + 1e-6
    z = jnp.array([0.7, 0.0, 0.6, 0.0, 0.0, 0.9])
    x = teacher.sample_inputs(jax.random.key(5), 8, 16)
    weight = sum(z[m] * params["modules"][m] for m in range(6))
    expected = np.maximum(x @ weight / 4.0, 0) @ params["readout"]
    np.testing.assert_allclose(teacher.apply_teacher(params, z, x), expected, rtol=1e-5, atol=1e-6)


def test_init_rejects_non_positive_sizes():
    with pytest.raises(ValueError, match="n_hidden"):
        teacher.init_teacher(jax.random.key(0), n_hidden=0)
