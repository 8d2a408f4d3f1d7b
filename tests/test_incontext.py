import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from compgen import results
from compgen.experiments import hyperteacher as HT
from compgen.experiments import incontext as IC
from compgen.experiments import incontext_presets as P
from compgen.models import count_params
from compgen.models import incontext as I
from compgen.tasks import hyperteacher as ht


def _task(n_support=12, n_query=5, seed=0):
    keys = jax.random.split(jax.random.key(seed), 4)
    x_s = jax.random.uniform(keys[0], (n_support, 16), minval=-1, maxval=1)
    y_s = jax.nn.softmax(jax.random.normal(keys[1], (n_support, 8)) / 0.3)
    x_q = jax.random.uniform(keys[2], (n_query, 16), minval=-1, maxval=1)
    y_q = jax.nn.softmax(jax.random.normal(keys[3], (n_query, 8)) / 0.3)
    return (x_s, y_s), (x_q, y_q)


def _model(name, **sizes):
    spec = I.InContextSpec(name, 16, 8, **{**dict(d_model=32, num_layers=2, num_heads=4, d_ff=48, code_dim=8,
                                                  hnet_hidden=16, n_templates=8), **sizes})
    model = I.make_incontext_model(spec)
    return spec, model, model.init(jax.random.key(1))


@pytest.mark.parametrize("name", I.INCONTEXT_MODEL_NAMES)
def test_predictions_do_not_depend_on_the_order_of_the_support_set(name):
    _, model, params = _model(name)
    (x_s, y_s), (x_q, _) = _task()
    perm = np.random.default_rng(0).permutation(len(x_s))
    a = model.apply(params, x_s, y_s, x_q)
    b = model.apply(params, x_s[perm], y_s[perm], x_q)
    np.testing.assert_allclose(a, b, atol=1e-5)
    np.testing.assert_allclose(model.task_representation(params, x_s, y_s),
                               model.task_representation(params, x_s[perm], y_s[perm]), atol=1e-5)
    # but the pairing of inputs and targets matters: shuffling the targets alone changes the prediction
    assert not np.allclose(a, model.apply(params, x_s, y_s[perm], x_q), atol=1e-4)


@pytest.mark.parametrize("name", I.INCONTEXT_MODEL_NAMES)
def test_queries_see_no_targets_and_not_each_other(name):
    _, model, params = _model(name)
    support_set, query_set = _task()
    prediction = IC.predict(model, params, support_set, query_set)
    # NaN query targets would poison every prediction they reached
    poisoned = (query_set[0], jnp.full_like(query_set[1], jnp.nan))
    np.testing.assert_array_equal(prediction, IC.predict(model, params, support_set, poisoned))
    assert np.isfinite(prediction).all()
    # each query is answered alone: dropping or changing the other queries changes nothing
    np.testing.assert_allclose(prediction[:2], model.apply(params, *support_set, query_set[0][:2]), atol=1e-5)
    moved = query_set[0].at[2:].set(0.5)
    np.testing.assert_allclose(prediction[:2], model.apply(params, *support_set, moved)[:2], atol=1e-5)
    # the support set is read: other support targets change the answer
    assert not np.allclose(prediction, model.apply(params, support_set[0], support_set[1][::-1], query_set[0]),
                           atol=1e-4)


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


@pytest.mark.parametrize("preset", P.PRESET_NAMES)
def test_presets_copy_the_hyperteacher_task_setup(preset):
    for model in P.MODELS:
        cfg = P.make_config(preset, model)
        reference = P.hyperteacher_reference(preset)
        for name in ("n_modules", "max_hot", "teacher_hidden", "shots_support", "shots_query", "meta_batch",
                     "outer_steps", "eval_every", "eval_tasks", "norm_inputs", "temperature", "seeds"):
            assert getattr(cfg, name) == getattr(reference, name), name
    configs = P.comparison_configs(preset)
    assert len(configs) == 6 and {c.split for c in configs} == set(P.SPLITS)
    assert {c.split for c in P.paper_model_configs(preset)} == set(P.SPLITS)
    if preset == "paper":
        assert (P.make_config(preset).n_modules, P.make_config(preset).max_hot) == (8, 2)
        assert P.make_config(preset).meta_batch == 128 and P.make_config(preset).outer_steps == 200_000


@pytest.mark.parametrize("preset, low, high", [("quick", 9_000, 110_000), ("paper", 300_000, 700_000)])
def test_parameter_counts_are_comparable_to_the_paper_models(preset, low, high):
    # the paper's four models at M = 8: 305k (MAML) to 645k (nonlinear hnet); at quick 10k to 73k
    for model in P.MODELS:
        assert low <= IC.count_params(P.make_config(preset, model)) <= high, model


def test_same_teacher_tasks_and_keys_as_the_hyperteacher():
    cfg = P.make_config("smoke", "transformer")
    reference = P.hyperteacher_reference("smoke")
    runs = HT._run_arrays([cfg])
    run = jax.tree.map(lambda a: a[0], runs)
    ours, theirs = IC.init_run(cfg, run), HT.init_run(reference, run)
    for a, b in zip(jax.tree.leaves(ours["teacher"]), jax.tree.leaves(theirs["teacher"])):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(jax.random.key_data(ours["key"]), jax.random.key_data(theirs["key"]))
    assert count_params(ours["meta"]) == IC.count_params(cfg)


@pytest.mark.parametrize("overrides, match", [
    (dict(d_model=0), "d_model"),
    (dict(d_model=30, num_heads=4), "divisible"),
    (dict(num_layers=0), "num_layers"),
    (dict(code_dim=-1), "code_dim"),
    (dict(hnet_num_hidden=1), "hnet_num_hidden"),
    (dict(shots_support=0), "shots_support"),
    (dict(outer_lr=0.0), "outer_lr"),
    (dict(outer_schedule="linear"), "outer_schedule"),
    (dict(split="diagonal"), "split must be one of"),
    (dict(max_hot=5), "max_hot"),
    (dict(environment="maze"), "environment"),
    (dict(seeds=()), "seeds"),
])
def test_bad_parameters_name_the_parameter(overrides, match):
    with pytest.raises(ValueError, match=match):
        P.make_config("smoke", "bottleneck", **overrides)


def test_unknown_model_and_preset_are_rejected():
    with pytest.raises(ValueError, match="model must be one of"):
        P.make_config("smoke", "lstm")
    with pytest.raises(ValueError, match="model must be one of"):
        I.InContextSpec("lstm", 16, 8)
    with pytest.raises(ValueError, match="preset must be one of"):
        P.make_config("fast", "transformer")


@pytest.mark.parametrize("name", I.INCONTEXT_MODEL_NAMES)
def test_short_training_lowers_the_loss(name):
    cfg = P.make_config("smoke", name, outer_steps=100, meta_batch=8, shots_support=32, shots_query=32)
    _, init, chunk, _ = IC.make_train([cfg])
    _, metrics = chunk(init(), cfg.outer_steps)
    loss = np.asarray(metrics["loss"])[:, 0]
    assert np.isfinite(loss).all() and int(np.asarray(metrics["skipped"])[-1, 0]) == 0
    # the query loss of fresh tasks is noisy: require the drop to exceed three standard errors
    first, last = loss[:25], loss[-25:]
    stderr = np.sqrt(first.var() / len(first) + last.var() / len(last))
    assert first.mean() - last.mean() > 3 * stderr, (first.mean(), last.mean(), stderr)


def test_run_is_stored_and_has_the_hyperteacher_layout(tmp_path, monkeypatch):
    monkeypatch.setenv("COMPGEN_RESULTS", str(tmp_path))
    cfg = P.make_config("smoke", "bottleneck", outer_steps=4, eval_every=2)
    other = dataclasses.replace(cfg, split="non_compositional")
    first = IC.run([cfg, other], workers=1, log=lambda line: None)
    names = cfg.eval_set_names()
    for out in first:
        assert out["eval/accuracy"].shape == (1, 3, len(names)) and list(out["eval_steps"]) == [0, 2, 4]
        assert np.isfinite(out["eval/accuracy"]).all() and np.isfinite(out["eval/loss"]).all()
        assert out["eval/r2_ood"].shape == (1, 3, 2 * cfg.n_modules) and out["steps/loss"].shape == (1, 4)
    assert not np.array_equal(first[0]["eval/accuracy"], first[1]["eval/accuracy"])
    lines = []
    again = IC.run([cfg, other], workers=1, log=lines.append)
    assert all(line.startswith("[results] reusing") for line in lines) and len(lines) == 2
    for a, b in zip(first, again):
        for key in a:
            np.testing.assert_array_equal(a[key], b[key])
    assert results.load(IC.KIND, cfg, code=IC.code())[1]["config"]["model"] == "bottleneck"
    table = P.summarize([cfg, other], first)
    assert "| Bottleneck transformer + hnet | random |" in table and "non_compositional" in table
