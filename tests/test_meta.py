import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from compgen import meta

# Meta-gradients against finite differences and fast paths against naive ones, to float32 round-off: full
# float32 products on any backend (tests/conftest.py, full_precision).
pytestmark = pytest.mark.usefixtures("full_precision")


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
        numeric = np.array(
            [
                (
                    meta_loss(unravel(flat.at[i].add(eps)), "second_order")
                    - meta_loss(unravel(flat.at[i].add(-eps)), "second_order")
                )
                / (2 * eps)
                for i in range(flat.size)
            ]
        )
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


def _tiny_fewshot(model_name):
    from types import SimpleNamespace

    from compgen import models

    sizes = SimpleNamespace(n_in=3, n_out=2, hidden=4, num_hidden=2, n_templates=3)
    model = models.get(model_name).build(sizes)
    key = jax.random.key(0)
    params = model.init(key)
    # move zero-initialised biases off ReLU kinks, where finite differences are one-sided
    leaves, treedef = jax.tree.flatten(params)
    noise = [0.1 * jax.random.normal(k, leaf.shape) for k, leaf in zip(jax.random.split(key, len(leaves)), leaves)]
    params = jax.tree.unflatten(treedef, [leaf + n for leaf, n in zip(leaves, noise)])
    k_s, k_q = jax.random.split(jax.random.key(1))
    support = (jax.random.normal(k_s, (6, 3)), jax.random.normal(k_s, (6, 2)))
    query = (jax.random.normal(k_q, (5, 3)), jax.random.normal(k_q, (5, 2)))
    mse = lambda prediction, target: jnp.mean((prediction - target) ** 2)
    return model, params, support, query, mse


@pytest.mark.parametrize("model_name", ["hnet_linear", "hnet_deepmlp", "anil", "maml"])
def test_fewshot_second_order_gradient_matches_finite_differences(model_name, monkeypatch):
    """Through an unrolled AdamW (eps_root), for every model, in float64.

    The hypernetworks hold the embedding's normalising scale constant in gradients on purpose (the
    authors' choice), so their gradient is not the derivative of the loss; here the scale is made a
    plain function of the embedding, and the check is of the unroll itself.
    """
    from compgen.models import hypernetwork

    monkeypatch.setattr(
        hypernetwork,
        "normalise_embedding",
        lambda e: e * jnp.sqrt(e.shape[-1]) / jnp.linalg.norm(e, axis=-1, keepdims=True),
    )
    jax.config.update("jax_enable_x64", True)
    try:
        model, params, support, query, mse = _tiny_fewshot(model_name)
        params = jax.tree.map(lambda a: a.astype(jnp.float64), params)
        support, query = jax.tree.map(lambda a: a.astype(jnp.float64), (support, query))
        opt = meta.inner_optimizer(0.05)

        def loss(p, mode="second_order"):
            loop = meta.InnerLoop(opt, 4, batch=3, mode=mode)
            return meta.fewshot_loss(model, p, support, query, mse, loop, jax.random.key(2))[0]

        flat, unravel = jax.flatten_util.ravel_pytree(params)
        grad = jax.flatten_util.ravel_pytree(jax.jit(jax.grad(loss))(params))[0]
        loss_of_flat = jax.jit(lambda f: loss(unravel(f)))
        rng = np.random.default_rng(0)
        eps = 1e-6
        for i in rng.choice(flat.size, size=min(12, flat.size), replace=False):
            numeric = (loss_of_flat(flat.at[i].add(eps)) - loss_of_flat(flat.at[i].add(-eps))) / (2 * eps)
            np.testing.assert_allclose(grad[i], numeric, rtol=1e-5, atol=1e-8)
        first = jax.flatten_util.ravel_pytree(jax.grad(lambda p: loss(p, "first_order"))(params))[0]
        assert not np.allclose(first, grad, rtol=1e-3, atol=1e-6)
    finally:
        jax.config.update("jax_enable_x64", False)


def test_anil_fast_path_gives_the_naive_meta_gradient():
    """Computing ANIL's body once per task equals recomputing it every inner step (minibatches too)."""
    model, params, support, query, mse = _tiny_fewshot("anil")
    opt = meta.inner_optimizer(0.1)

    def loss(p, precompute):
        loop = meta.InnerLoop(opt, 7, batch=4, precompute_features=precompute)
        return meta.fewshot_loss(model, p, support, query, mse, loop, jax.random.key(3))[0]

    fast = jax.grad(lambda p: loss(p, True))(params)
    naive = jax.grad(lambda p: loss(p, False))(params)
    np.testing.assert_allclose(loss(params, True), loss(params, False), rtol=1e-6)
    for a, b in zip(jax.tree.leaves(fast), jax.tree.leaves(naive)):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)
    assert np.any(np.abs(fast["body"][0]["w"]) > 0)  # the body gets a meta-gradient through the features


@pytest.mark.parametrize("model_name", ["hnet_linear", "anil"])  # full batch; minibatches of precomputed features
def test_rematerialised_inner_loop_gives_the_same_meta_gradient(model_name):
    """Recomputing each inner step in the backward pass (remat) changes memory, not the gradient."""
    model, params, support, query, mse = _tiny_fewshot(model_name)
    opt = meta.inner_optimizer(0.05)

    def loss(p, remat):
        loop = meta.InnerLoop(opt, 6, batch=3, remat=remat)
        return meta.fewshot_loss(model, p, support, query, mse, loop, jax.random.key(4))[0]

    plain, remat = (jax.jit(jax.value_and_grad(lambda p, r=r: loss(p, r)))(params) for r in (False, True))
    np.testing.assert_allclose(remat[0], plain[0], rtol=1e-6)
    for a, b in zip(jax.tree.leaves(remat[1]), jax.tree.leaves(plain[1])):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)
    assert any(np.any(np.asarray(g) != 0) for g in jax.tree.leaves(plain[1]))


def test_mean_over_tasks_averages_losses_aux_and_gradients():
    w = {"a": jnp.array([1.0, -2.0])}
    tasks = jnp.array([[1.0, 0.0], [0.0, 1.0], [2.0, 2.0]])
    keys = jax.random.split(jax.random.key(0), 3)
    task_loss = lambda p, t, k, fixed: (jnp.sum(p["a"] * t) ** 2, {"t0": t[0]})
    (loss, aux), grads = meta.mean_over_tasks(task_loss, w, tasks, keys)
    np.testing.assert_allclose(loss, (1.0 + 4.0 + 4.0) / 3)
    np.testing.assert_allclose(aux["t0"], 1.0)
    np.testing.assert_allclose(grads["a"], (2 * 1.0 * tasks[0] + 2 * -2.0 * tasks[1] + 2 * -2.0 * tasks[2]) / 3)


def test_mean_over_tasks_passes_fixed_arrays_to_every_task_without_differentiating_them():
    w = {"a": jnp.array([1.0, -2.0])}
    tasks = jnp.array([[1.0, 0.0], [0.0, 1.0]])
    keys = jax.random.split(jax.random.key(0), 2)
    scale = jnp.array(3.0)
    task_loss = lambda p, t, k, fixed: (fixed * jnp.sum(p["a"] * t), {"fixed": fixed})
    (loss, aux), grads = meta.mean_over_tasks(task_loss, w, tasks, keys, fixed=scale)
    np.testing.assert_allclose(loss, 3.0 * (1.0 - 2.0) / 2)
    np.testing.assert_allclose(aux["fixed"], 3.0)
    np.testing.assert_allclose(grads["a"], 3.0 * tasks.mean(0))
    assert jax.tree.structure(grads) == jax.tree.structure(w)  # a gradient for the parameters only
    # fixed arrays are constants: differentiating the whole step in them gives zero
    d_scale = jax.grad(lambda s: meta.mean_over_tasks(task_loss, w, tasks, keys, fixed=s)[0][0])(scale)
    assert float(d_scale) == 0.0


@pytest.mark.parametrize("model_name", ["hnet_linear", "anil"])
def test_mean_over_tasks_in_chunks_equals_all_tasks_at_once(model_name):
    """Adapting the tasks a chunk at a time (lax.map over chunks) changes float round-off only, and a chunk that
    does not divide the tasks is refused."""
    model, params, support, query, mse = _tiny_fewshot(model_name)
    opt = meta.inner_optimizer(0.05)
    shift = jnp.arange(8.0)[:, None, None] / 8  # 8 tasks: the tiny task with its inputs shifted
    stack = lambda x, y: (x + shift, jnp.broadcast_to(y, (8, *y.shape)))
    tasks = (stack(*support), stack(*query))
    keys = jax.random.split(jax.random.key(5), 8)

    def task_loss(p, task, key, fixed):
        loss, _ = meta.fewshot_loss(model, p, task[0], task[1], mse, meta.InnerLoop(opt, 4, batch=3), key)
        return loss, {"loss": loss}

    at_once = jax.jit(lambda p: meta.mean_over_tasks(task_loss, p, tasks, keys))(params)
    for chunk in (2, 4):
        chunked = jax.jit(lambda p, c=chunk: meta.mean_over_tasks(task_loss, p, tasks, keys, chunk=c))(params)
        for a, b in zip(jax.tree.leaves(chunked), jax.tree.leaves(at_once)):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)
    assert any(np.any(np.asarray(g) != 0) for g in jax.tree.leaves(at_once[1]))
    with pytest.raises(ValueError, match=r"train_chunk \(3\) must divide the tasks each device adapts \(8"):
        meta.mean_over_tasks(task_loss, params, tasks, keys, chunk=3)


def test_outer_update_never_applies_a_non_finite_step_and_counts_them():
    opt = meta.outer_optimizer(0.1, clip_norm=1.0, weight_decay=0.0)
    params = {"w": jnp.ones(3)}
    state = meta.outer_init(opt, params)
    # two non-finite gradients in a row: neither is applied (optax.apply_if_finite would apply the second)
    for count in (1, 2):
        new, state, stats = meta.outer_update(opt, params, state, {"w": jnp.array([jnp.nan, 1.0, 1.0])})
        np.testing.assert_array_equal(new["w"], params["w"])
        assert int(stats["skipped"]) == count and int(stats["streak"]) == count
    new, state, stats = meta.outer_update(opt, params, state, {"w": jnp.array([10.0, 0.0, 0.0])})
    np.testing.assert_allclose(float(jnp.abs(new["w"][0] - 1.0)), 0.1, rtol=1e-3)  # clipped, Adam-normalised
    assert int(stats["skipped"]) == 2 and int(stats["streak"]) == 0  # the streak resets, the total stays
    assert int(state["optimizer"][1][0].count) == 1  # Adam saw only the finite step


def test_the_compiled_outer_update_grows_linearly_with_the_number_of_leaves():
    """One finiteness flag for the whole update, not a chain of one flag per leaf that XLA copies into every leaf's
    update (which made a hypernetwork's step program quadratic in its leaves and doubled its compile time)."""
    opt = meta.outer_optimizer(0.1, clip_norm=1.0, weight_decay=0.01)

    def ands(n_leaves):
        params = {f"w{i}": jnp.ones((3, 4, 4)) for i in range(n_leaves)}  # 3 runs (seeds), vmapped as in training
        state = jax.vmap(lambda p: meta.outer_init(opt, p))(params)
        update = jax.vmap(lambda p, s, g: meta.outer_update(opt, p, s, g)[:2])
        return jax.jit(update).lower(params, state, params).compile().as_text().count(" and(")

    few, many = ands(10), ands(40)
    assert many <= 4 * few + 8, (few, many)


def test_outer_step_averages_tasks_and_updates():
    opt = optax.sgd(0.5)
    params = {"a": jnp.array([1.0, -2.0])}
    tasks = jnp.array([[1.0, 0.0], [0.0, 1.0]])
    keys = jax.random.split(jax.random.key(0), 2)
    loss = lambda p, t, k, fixed: (jnp.sum(p["a"] * t), {"first": t[0]})
    new, _, out = meta.outer_step(loss, params, meta.outer_init(opt, params), opt, meta.TaskBatch(tasks, keys))
    np.testing.assert_allclose(new["a"], params["a"] - 0.5 * 0.5)
    assert float(out["loss"]) == -0.5 and float(out["first"]) == 0.5 and int(out["skipped"]) == 0
