"""The in-context learners as models: order invariance, no leakage from query targets or other queries, masked
support tokens, and the bottleneck's code."""

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from compgen.experiments import goals as G
from compgen.models import incontext as I
from compgen.section import make_config
from compgen.tasks import goals as gl

LEARNERS = ("kv_memory", "transformer", "bottleneck")

# Every test compares two formulations of one prediction (an order, a padding, a written-out transformer) to
# float32 round-off: full float32 products on any backend (tests/conftest.py, full_precision).
pytestmark = pytest.mark.usefixtures("full_precision")


def _task(n_support=12, n_query=5, seed=0):
    keys = jax.random.split(jax.random.key(seed), 4)
    x_s = jax.random.uniform(keys[0], (n_support, 16), minval=-1, maxval=1)
    y_s = jax.nn.softmax(jax.random.normal(keys[1], (n_support, 8)) / 0.3)
    x_q = jax.random.uniform(keys[2], (n_query, 16), minval=-1, maxval=1)
    y_q = jax.nn.softmax(jax.random.normal(keys[3], (n_query, 8)) / 0.3)
    return (x_s, y_s), (x_q, y_q)


def _model(name, **sizes):
    """A small learner on hyperteacher-shaped inputs (16 in, 8 out) and its parameters."""
    spec = I.InContextSpec(
        name,
        16,
        8,
        **{**dict(d_model=32, num_layers=2, num_heads=4, d_ff=48, code_dim=8, hnet_hidden=16, n_templates=8), **sizes},
    )
    model = getattr(I, spec.model)(spec)
    return spec, model, model.init(jax.random.key(1))


@pytest.mark.parametrize("name", LEARNERS)
def test_predictions_do_not_depend_on_the_order_of_the_support_set(name):
    _, model, params = _model(name)
    (x_s, y_s), (x_q, _) = _task()
    perm = np.random.default_rng(0).permutation(len(x_s))
    a = model.apply(params, x_s, y_s, x_q)
    b = model.apply(params, x_s[perm], y_s[perm], x_q)
    np.testing.assert_allclose(a, b, atol=1e-5)
    np.testing.assert_allclose(
        model.task_representation(params, x_s, y_s), model.task_representation(params, x_s[perm], y_s[perm]), atol=1e-5
    )
    # but the pairing of inputs and targets matters: shuffling the targets alone changes the prediction
    assert not np.allclose(a, model.apply(params, x_s, y_s[perm], x_q), atol=1e-4)


@pytest.mark.parametrize("name", LEARNERS)
def test_queries_see_no_targets_and_not_each_other(name):
    _, model, params = _model(name)
    support_set, query_set = _task()
    prediction = model.apply(params, *support_set, query_set[0])  # the signature takes no query targets
    assert np.isfinite(prediction).all()
    # each query is answered alone: dropping or changing the other queries changes nothing
    np.testing.assert_allclose(prediction[:2], model.apply(params, *support_set, query_set[0][:2]), atol=1e-5)
    moved = query_set[0].at[2:].set(0.5)
    np.testing.assert_allclose(prediction[:2], model.apply(params, *support_set, moved)[:2], atol=1e-5)
    # the support set is read: other support targets change the answer
    assert not np.allclose(
        prediction, model.apply(params, support_set[0], support_set[1][::-1], query_set[0]), atol=1e-4
    )


def test_transformer_equals_a_masked_joint_sequence():
    """The transformer's two-stream blocks equal one sequence [support; queries] under the mask 'support
    tokens see the support; a query sees the support and itself'."""
    spec, model, params = _model("transformer")
    (x_s, y_s), (x_q, _) = _task()
    n, q = len(x_s), len(x_q)
    h = I.dense(params["embed"], jnp.concatenate([I.support_tokens(x_s, y_s), I.query_tokens(x_q, spec.n_out)]))
    allowed = np.zeros((n + q, n + q), bool)
    allowed[:, :n] = True
    allowed[np.arange(n, n + q), np.arange(n, n + q)] = True
    for block in params["blocks"]:
        att = block["attention"]
        normed = I.layer_norm(block["norm_att"], h)
        qh, kh, vh = (I._heads(I.dense(att[name], normed), spec.num_heads) for name in ("q", "k", "v"))
        scores = jnp.einsum("ihd,jhd->hij", qh, kh) / np.sqrt(qh.shape[-1])
        weights = jax.nn.softmax(jnp.where(allowed, scores, -jnp.inf), axis=-1)
        h = h + I.dense(att["o"], jnp.einsum("hij,jhd->ihd", weights, vh).reshape(n + q, -1))
        h = h + I.apply_mlp(block["ff"], I.layer_norm(block["norm_ff"], h))
    expected = I.dense(params["readout"], I.layer_norm(params["norm_out"], h[n:]))
    np.testing.assert_allclose(model.apply(params, x_s, y_s, x_q), expected, atol=1e-5)


def test_bottleneck_reads_the_support_set_only_through_its_code():
    spec, model, params = _model("bottleneck")
    support_set, (x_q, _) = _task()
    code = model.task_representation(params, *support_set)
    assert code.shape == (spec.code_dim,)
    # a support set with another code changes the prediction; the prediction is a function of the code
    other = _task(seed=3)[0]
    assert not np.allclose(model.apply(params, *support_set, x_q), model.apply(params, *other, x_q), atol=1e-4)
    grads = jax.grad(lambda p: model.apply(p, *support_set, x_q).sum())(params)
    assert float(jnp.abs(grads["to_code"]["w"]).sum()) > 0  # the code path is trained


# --------------------------------------------------------------------------------------------- goals-shaped inputs


@pytest.fixture(scope="module")
def goals_task():
    """A goals task as the learners read it: two support demonstrations (padded steps inside the sequence) as
    tokens, one query demonstration."""
    cfg = make_config(G.SECTION, "smoke", "hnet_linear", shots_support=2)
    run = jax.tree.map(lambda a: a[0], G.SECTION.run_arrays([cfg]))
    goal = jnp.asarray(gl.goal_table()[int(run["train_ids"][0])])
    support_set, query_set = jax.jit(lambda r, k: G.ENV.task_data(cfg, r, {}, goal, k, 1))(run, jax.random.key(0))
    tokens = G.support_tokens(cfg, support_set)
    assert tokens[0].shape == (2 * cfg.demo_length, gl.OBS_SIZE) and tokens[1].shape[-1] == gl.N_ACTIONS
    assert 0 < int(tokens[2].sum()) < len(tokens[2])  # some steps are padding
    return cfg, tokens, query_set


@functools.cache
def _goals_model(name):
    """A small learner for goals-shaped inputs, jitted and shared by the tests (one compilation per shape)."""
    spec = I.InContextSpec(
        name,
        gl.OBS_SIZE,
        gl.N_ACTIONS,
        d_model=16,
        num_layers=2,
        num_heads=2,
        d_ff=32,
        code_dim=8,
        hnet_hidden=16,
        hnet_num_hidden=2,
        n_templates=4,
    )
    model = getattr(I, spec.model)(spec)
    model = dataclasses.replace(
        model, apply=jax.jit(model.apply), task_representation=jax.jit(model.task_representation)
    )
    return model, model.init(jax.random.key(1))


@pytest.mark.parametrize("name", LEARNERS)
def test_goals_predictions_do_not_depend_on_the_order_of_the_support_steps(name, goals_task):
    model, params = _goals_model(name)
    _, (x_s, y_s, mask), (x_q, _) = goals_task
    perm = np.random.default_rng(0).permutation(len(x_s))
    np.testing.assert_allclose(
        model.apply(params, x_s, y_s, x_q, mask), model.apply(params, x_s[perm], y_s[perm], x_q, mask[perm]), atol=1e-5
    )
    np.testing.assert_allclose(
        model.task_representation(params, x_s, y_s, mask),
        model.task_representation(params, x_s[perm], y_s[perm], mask[perm]),
        atol=1e-5,
    )


@pytest.mark.parametrize("name", LEARNERS)
def test_padded_support_steps_change_no_prediction(name, goals_task):
    model, params = _goals_model(name)
    _, (x_s, y_s, mask), (x_q, _) = goals_task
    prediction = model.apply(params, x_s, y_s, x_q, mask)
    code = model.task_representation(params, x_s, y_s, mask)
    pad = ~np.asarray(mask)
    rng = np.random.default_rng(1)
    for junk in (rng.normal(size=x_s.shape) * 100, np.full(x_s.shape, np.nan)):
        x_junk = jnp.where(pad[:, None], jnp.asarray(junk, jnp.float32), x_s)
        y_junk = jnp.where(pad[:, None], jnp.asarray(rng.normal(size=y_s.shape), jnp.float32), y_s)
        np.testing.assert_array_equal(prediction, model.apply(params, x_junk, y_junk, x_q, mask))
        np.testing.assert_array_equal(code, model.task_representation(params, x_junk, y_junk, mask))
    # dropping the padding altogether changes nothing either; the mask matters: read as valid, padding does
    valid = np.flatnonzero(~pad)
    np.testing.assert_allclose(prediction, model.apply(params, x_s[valid], y_s[valid], x_q), atol=1e-5)
    assert not np.allclose(prediction, model.apply(params, x_s, y_s, x_q), atol=1e-4)
