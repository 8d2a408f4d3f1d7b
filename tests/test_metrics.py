import jax
import jax.numpy as jnp
import numpy as np
import pytest

from compgen import metrics
from compgen.tasks import teacher


@pytest.mark.usefixtures("full_precision")  # compares two formulations: full float32 on any backend
def test_alignment_is_one_for_remixed_and_permuted_teacher():
    params = teacher.init_teacher(jax.random.key(0), n_modules=6, n_hidden=16)
    modules = params["modules"]
    mix = jax.random.normal(jax.random.key(1), (6, 6))  # student module k = sum_m mix[k, m] teacher module m
    perm = jax.random.permutation(jax.random.key(2), 16)
    student = jnp.einsum("km,mnh->knh", mix, modules)[:, :, perm]
    # the teacher latent z is produced by student latent zhat = inv(mix)ᵀ z, so z = mixᵀ... ≈ F zhat with F = mixᵀ
    decoder = mix.T
    assert float(metrics.module_alignment(modules, student, decoder)) > 0.999


@pytest.mark.usefixtures("full_precision")  # compares two formulations: full float32 on any backend
def test_alignment_with_extra_student_units_and_modules():
    params = teacher.init_teacher(jax.random.key(0), n_modules=6, n_hidden=16)
    modules = params["modules"]
    extra = jax.random.normal(jax.random.key(3), (6, 16, 16))
    wide = jnp.concatenate([modules, extra], axis=2)  # twice the hidden units
    student = jnp.concatenate([wide, jnp.zeros((6, 16, 32))], axis=0)  # twice the modules
    decoder = jnp.concatenate([jnp.eye(6), jnp.zeros((6, 6))], axis=1)
    assert float(metrics.module_alignment(modules, student, decoder)) > 0.999


def test_alignment_is_low_for_random_student():
    modules = teacher.init_teacher(jax.random.key(0))["modules"]
    student = teacher.init_teacher(jax.random.key(9), n_hidden=32, n_modules=12)["modules"]
    decoder = jax.random.normal(jax.random.key(4), (6, 12))
    assert float(metrics.module_alignment(modules, student, decoder)) < 0.6


@pytest.mark.usefixtures("full_precision")  # compares two formulations: full float32 on any backend
def test_r2_is_one_for_exactly_linear_features():
    features = jax.random.normal(jax.random.key(0), (200, 12))
    true_map = jax.random.normal(jax.random.key(1), (12, 6))
    targets = features @ true_map
    for cg_iters in (None, 50):
        r2, weights = metrics.linear_decoding(features, targets, features, targets, 1e-6, cg_iters)
        np.testing.assert_allclose(r2, 1.0, atol=1e-4)
    np.testing.assert_allclose(weights, true_map, atol=1e-2)


def test_r2_is_about_zero_for_unrelated_features():
    features = jax.random.normal(jax.random.key(0), (400, 4))
    targets = jax.random.normal(jax.random.key(1), (400, 2))
    test_features = jax.random.normal(jax.random.key(2), (400, 4))
    test_targets = jax.random.normal(jax.random.key(3), (400, 2))
    r2, _ = metrics.linear_decoding(features, targets, test_features, test_targets, 1.0, intercept=True)
    assert np.all(np.asarray(r2) < 0.05)


@pytest.mark.usefixtures("full_precision")  # compares two formulations: full float32 on any backend
def test_ridge_intercept_recovers_offset():
    features = jax.random.normal(jax.random.key(0), (300, 3))
    targets = features @ jnp.array([[1.0], [2.0], [-1.0]]) + 5.0
    weights, bias = metrics.ridge_fit(features, targets, 1e-6, intercept=True)
    np.testing.assert_allclose(bias, [5.0], atol=1e-3)


def test_half_mse():
    assert float(metrics.half_mse(np.array([1.0, 3.0]), np.array([0.0, 1.0]))) == 0.5 * (1 + 4) / 2


def test_effective_dimensions_count_the_directions_the_rows_differ_in():
    key_a, key_b = jax.random.split(jax.random.key(0))
    # a look-up table: one coordinate per task, 12 tasks, differ in 11 directions (the centred one-hots)
    assert float(metrics.effective_dimensions(jnp.eye(12))) == pytest.approx(11.0, rel=1e-5)
    # isotropic latents in 3 of 20 dimensions, mixed by an orthogonal map: about 3
    z = jax.random.normal(key_a, (4000, 3))
    basis = jnp.linalg.qr(jax.random.normal(key_b, (20, 20)))[0][:3]
    assert float(metrics.effective_dimensions(z @ basis + 5.0)) == pytest.approx(3.0, rel=0.05)
    # one direction carries everything
    assert float(metrics.effective_dimensions(jnp.outer(jnp.arange(10.0), jnp.ones(4)))) == pytest.approx(1.0)


def test_nonaffine_share_is_zero_for_an_affine_map_and_large_for_a_lookup():
    key_a, key_b = jax.random.split(jax.random.key(1))
    z = jax.random.normal(key_a, (200, 6))
    affine = z @ jax.random.normal(key_b, (6, 48)) + 3.0
    assert float(metrics.nonaffine_share(z, affine)) == pytest.approx(0.0, abs=1e-4)
    # twelve tasks with six-dimensional latents, each inferred as its own one-hot: an affine map of z explains
    # at most 6 of the 11 directions
    z12 = jax.random.normal(key_a, (12, 6))
    share = float(metrics.nonaffine_share(z12, jnp.eye(12)))
    assert share == pytest.approx(5.0 / 11.0, rel=1e-3)


def test_r2_of_a_column_without_variance_is_nan_not_inf():
    """A constant target column has no variance to explain: its R² is NaN (undefined), never ±inf; the other
    columns keep their R²; pooled R² is NaN only when every column is constant."""
    target = jax.random.normal(jax.random.key(0), (50, 3))
    prediction = target + 0.1 * jax.random.normal(jax.random.key(1), (50, 3))
    regular = np.asarray(metrics.r2_score(prediction, target))
    constant = target.at[:, 1].set(0.7)  # e.g. a task latent entry that never varies on the held-out set
    r2 = np.asarray(metrics.r2_score(prediction, constant))
    assert np.isnan(r2[1]) and not np.isinf(r2).any()
    np.testing.assert_array_equal(r2[[0, 2]], regular[[0, 2]])
    assert np.isnan(metrics.r2_score(prediction[:, 1:2] * 0 + 0.7, constant[:, 1:2])[0])  # exact: 0 / 0
    assert np.isnan(metrics.r2_score(prediction[:1], target[:1])).all()  # one sample: no variance either
    assert np.isfinite(metrics.pooled_r2(prediction, constant))
    assert np.isnan(metrics.pooled_r2(prediction, jnp.full((50, 3), 2.0)))
