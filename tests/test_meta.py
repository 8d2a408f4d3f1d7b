import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from compgen import meta


def _tiny_problem():
    """A fast weight w adapted on a support loss that depends on the meta-parameter phi."""
    x_support = jnp.array([[1.0, 0.5], [-0.3, 2.0], [0.7, -1.2]])
    y_support = jnp.array([1.0, -2.0, 0.5])
    x_query = jnp.array([[0.2, 1.0], [1.5, -0.4]])
    y_query = jnp.array([0.3, 1.1])

    def meta_loss(phi, mode):
        def support_loss(w, _key):
            return jnp.mean((jnp.tanh(x_support @ (w * phi["scale"])) - y_support) ** 2)

        w, _ = meta.inner_adapt(support_loss, phi["init"], optax.sgd(0.3), 5, jax.random.key(0), mode)
        return jnp.mean((jnp.tanh(x_query @ (w * phi["scale"])) - y_query) ** 2)

    phi = {"init": jnp.array([0.1, -0.2]), "scale": jnp.array([1.3, 0.8])}
    return meta_loss, phi


def test_second_order_meta_gradient_matches_finite_differences():
    jax.config.update("jax_enable_x64", True)
    try:
        meta_loss, phi = _tiny_problem()
        phi = jax.tree.map(lambda a: a.astype(jnp.float64), phi)
        grad = jax.grad(lambda p: meta_loss(p, "second_order"))(phi)
        flat, unravel = jax.flatten_util.ravel_pytree(phi)
        eps = 1e-6
        numeric = np.array([
            (meta_loss(unravel(flat.at[i].add(eps)), "second_order")
             - meta_loss(unravel(flat.at[i].add(-eps)), "second_order")) / (2 * eps)
            for i in range(flat.size)])
        np.testing.assert_allclose(jax.flatten_util.ravel_pytree(grad)[0], numeric, rtol=1e-6, atol=1e-9)
        first = jax.grad(lambda p: meta_loss(p, "first_order"))(phi)
        assert not np.allclose(jax.flatten_util.ravel_pytree(first)[0], numeric, rtol=1e-3)
    finally:
        jax.config.update("jax_enable_x64", False)


def test_stop_gradient_blocks_the_path_through_adaptation():
    meta_loss, phi = _tiny_problem()
    grad = jax.grad(lambda p: meta_loss(p, "stop_gradient"))(phi)
    np.testing.assert_array_equal(grad["init"], 0.0)  # init only reaches the query loss through adaptation
    assert np.any(np.asarray(grad["scale"]) != 0.0)


def test_inner_adapt_lowers_loss_and_rejects_bad_mode():
    target = jnp.array([1.0, -2.0])
    loss = lambda w, _key: jnp.sum((w - target) ** 2)
    w, losses = meta.inner_adapt(loss, jnp.zeros(2), optax.adam(0.1), 100, jax.random.key(0))
    assert losses.shape == (100,) and losses[-1] < 1e-2 * losses[0]
    with pytest.raises(ValueError, match="mode"):
        meta.inner_adapt(loss, jnp.zeros(2), optax.adam(0.1), 3, jax.random.key(0), "zeroth_order")


def test_run_chunks_reports_every_chunk():
    lines = []
    step = lambda s: (s + 1, {"value": s})
    chunk = jax.jit(lambda s, n: meta.scan_steps(step, s, n), static_argnums=1)
    state, history = meta.run_chunks(chunk, jnp.array(0), 25, 10, evaluate=lambda s: {"s": s}, log=lines.append)
    assert int(state) == 25 and len(lines) == 3 and "25/25" in lines[-1]
    np.testing.assert_array_equal(history["steps"]["value"], np.arange(25))
    np.testing.assert_array_equal(history["eval_steps"], [0, 10, 20, 25])
    np.testing.assert_array_equal(history["eval"]["s"], [0, 10, 20, 25])
