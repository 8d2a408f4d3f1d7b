import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from compgen import results
from compgen.experiments import fewshot
from compgen.experiments import goals as G
from compgen.experiments import goals_presets as GP
from compgen.experiments import hyperteacher as HT
from compgen.experiments import incontext as IC
from compgen.experiments import incontext_presets as P
from compgen.models import count_params
from compgen.models import incontext as I
from compgen.tasks import goals as gl
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
        pinned = P.get_preset(preset).common  # what the preset sets itself (quick pins the outer steps)
        for name in ("n_modules", "max_hot", "teacher_hidden", "shots_support", "shots_query", "meta_batch",
                     "outer_steps", "eval_every", "eval_tasks", "norm_inputs", "temperature", "seeds"):
            assert getattr(cfg, name) == pinned.get(name, getattr(reference, name)), name
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
    runs = HT.run_arrays([cfg])
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


# --------------------------------------------------------------------------------------------- goals world


@pytest.fixture(scope="module")
def goals_task():
    """A goals task as the learners see it: the smoke config's mazes, two support demonstrations (padded
    steps inside the sequence), one query demonstration."""
    cfg = P.make_config("smoke", "transformer", environment="goals", shots_support=2)
    world = IC.WORLDS["goals"]
    run = jax.tree.map(lambda a: a[0], world.run_arrays([cfg]))
    goal = jnp.asarray(gl.goal_table()[int(run["train_ids"][0])])
    support, query_set = jax.jit(lambda r, k: world.task_data(cfg, r, None, goal, k))(run, jax.random.key(0))
    assert support[0].shape == (2 * cfg.demo_length, gl.OBS_SIZE) and support[1].shape[-1] == gl.N_ACTIONS
    assert 0 < int(support[2].sum()) < len(support[2])  # some steps are padding
    return cfg, support, query_set


@functools.lru_cache(maxsize=None)
def _goals_model(name):
    """A small learner for goals-shaped inputs, jitted and shared by the tests (one compilation per shape)."""
    spec = I.InContextSpec(name, gl.OBS_SIZE, gl.N_ACTIONS, d_model=16, num_layers=2, num_heads=2, d_ff=32,
                           code_dim=8, hnet_hidden=16, hnet_num_hidden=2, n_templates=4)
    model = I.make_incontext_model(spec)
    model = dataclasses.replace(model, apply=jax.jit(model.apply),
                                task_representation=jax.jit(model.task_representation))
    return model, model.init(jax.random.key(1))


@pytest.mark.parametrize("name", I.INCONTEXT_MODEL_NAMES)
def test_goals_predictions_do_not_depend_on_the_order_of_the_support_steps(name, goals_task):
    model, params = _goals_model(name)
    _, (x_s, y_s, mask), (x_q, _) = goals_task
    perm = np.random.default_rng(0).permutation(len(x_s))
    np.testing.assert_allclose(model.apply(params, x_s, y_s, x_q, mask),
                               model.apply(params, x_s[perm], y_s[perm], x_q, mask[perm]), atol=1e-5)
    np.testing.assert_allclose(model.task_representation(params, x_s, y_s, mask),
                               model.task_representation(params, x_s[perm], y_s[perm], mask[perm]), atol=1e-5)


@pytest.mark.parametrize("name", I.INCONTEXT_MODEL_NAMES)
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


@pytest.mark.parametrize("name", I.INCONTEXT_MODEL_NAMES)
def test_goals_query_targets_change_no_prediction(name, goals_task):
    cfg, support, (x_q, (actions, query_mask)) = goals_task
    model, params = _goals_model(name)
    prediction = IC.predict(model, params, support, (x_q, (actions, query_mask)))
    changed = (x_q, ((actions + 1) % gl.N_ACTIONS, ~query_mask))
    np.testing.assert_array_equal(prediction, IC.predict(model, params, support, changed))
    world = IC.WORLDS["goals"]  # the targets do reach the loss
    assert world.loss(prediction, (actions, query_mask)) != world.loss(prediction, changed[1])


def test_goals_task_stream_is_the_goals_sections():
    cfg = P.make_config("smoke", "kv_memory", environment="goals", split="non_compositional")
    reference = P.goals_reference("smoke", split="non_compositional")
    ours = IC.WORLDS["goals"].run_arrays([cfg])
    theirs = G.run_arrays([reference])
    raw = lambda a: jax.random.key_data(a) if jnp.issubdtype(a.dtype, jax.dtypes.prng_key) else a
    for a, b in zip(jax.tree.leaves(ours), jax.tree.leaves(theirs)):
        np.testing.assert_array_equal(raw(a), raw(b))
    run = jax.tree.map(lambda a: a[0], ours)
    state = IC.init_run(cfg, run)
    np.testing.assert_array_equal(jax.random.key_data(state["key"]),
                                  jax.random.key_data(fewshot.init_run(reference, run)["key"]))
    key = jax.random.key(5)
    goals = G.ENV.sample_tasks(reference, run, key, 4)
    np.testing.assert_array_equal(IC.WORLDS["goals"].sample_tasks(cfg, run, key, 4), goals)
    (x_s, y_s, mask), query_set = jax.jit(lambda r: IC.WORLDS["goals"].task_data(cfg, r, state, goals[0], key))(run)
    (x_ref, (a_ref, m_ref)), query_ref = jax.jit(
        lambda r: G.ENV.task_data(reference, r, goals[0], key, reference.shots_query))(run)
    np.testing.assert_array_equal(x_s, x_ref)
    np.testing.assert_array_equal(mask, m_ref)
    np.testing.assert_array_equal(jnp.argmax(y_s, -1), a_ref)
    for a, b in zip(jax.tree.leaves(query_set), jax.tree.leaves(query_ref)):
        np.testing.assert_array_equal(a, b)
    # the probe decodes the goal's factors, one one-hot each
    np.testing.assert_array_equal(IC.goal_latent(jnp.array([3, 1, 4, 0])),
                                  np.eye(4)[3].tolist() + [0, 1] + np.eye(5)[4].tolist() + np.eye(5)[0].tolist())


@pytest.mark.parametrize("preset", P.PRESET_NAMES)
def test_goals_presets_copy_the_goals_task_setup(preset):
    reference = P.goals_reference(preset)
    for model in P.MODELS:
        cfg = P.make_config(preset, model, environment="goals")
        assert (cfg.n_in, cfg.n_out) == (gl.OBS_SIZE, gl.N_ACTIONS)
        for name in P.GOALS_TASK_FIELDS:
            assert getattr(cfg, name) == getattr(reference, name), name
        assert cfg.shots_query == reference.eval_shots_query  # evaluation uses shots_query query demonstrations
        assert (cfg.hnet_hidden, cfg.hnet_num_hidden, cfg.n_templates) == (reference.hidden, reference.num_hidden,
                                                                          reference.templates)
    configs = P.comparison_configs(preset, environment="goals")
    assert len(configs) == 6 and {c.split for c in configs} == set(gl.SPLITS)
    assert all(c.environment == "goals" for c in configs) and configs == P.goals_comparison_configs(preset)
    assert P.paper_model_configs(preset, environment="goals") == GP.fig4ef_configs(preset)
    # seeds fix the padded demonstration length, as in the goals presets
    assert P.make_config(preset, environment="goals", seeds=(2021,)).demo_length == \
        GP.make_config(preset, "hnet_linear", seeds=(2021,)).demo_length


@pytest.mark.parametrize("preset", ["quick", "paper"])
def test_goals_parameter_counts_are_comparable_to_the_paper_models(preset):
    paper = [count_params(jax.eval_shape(c.build_model().init, jax.random.key(0)))
             for c in GP.fig4ef_configs(preset)]
    if preset == "paper":
        assert sorted(set(paper)) == sorted(GP.PAPER_PARAM_COUNTS.values())
    for model in P.MODELS:
        assert min(paper) <= IC.count_params(P.make_config(preset, model, environment="goals")) <= max(paper), model


@pytest.mark.parametrize("overrides, match", [
    (dict(split="diagonal"), "split must be one of"),
    (dict(demo_length=10), "demo_length"),
    (dict(n_in=16), "n_in must be 847"),
    (dict(shots_support=0), "shots_support"),
])
def test_bad_goals_parameters_name_the_parameter(overrides, match):
    with pytest.raises(ValueError, match=match):
        P.make_config("smoke", "transformer", environment="goals", **overrides)


def test_unknown_environment_is_rejected_everywhere():
    message = r"environment must be one of \('hyperteacher', 'goals'\), got 'maze'"
    with pytest.raises(ValueError, match=message):
        IC.InContextConfig(environment="maze")
    with pytest.raises(ValueError, match=message):
        P.make_config("smoke", environment="maze")
    with pytest.raises(ValueError, match=message):
        P.paper_model_configs("smoke", environment="maze")
    with pytest.raises(ValueError, match=message):
        P.get_preset("smoke", "maze")


def test_short_goals_training_lowers_the_loss_and_is_stored(tmp_path, monkeypatch):
    monkeypatch.setenv("COMPGEN_RESULTS", str(tmp_path))
    cfg = P.make_config("smoke", "transformer", environment="goals", outer_steps=100, meta_batch=8, eval_every=50)
    out = IC.run([cfg], workers=1, log=lambda line: None)[0]
    loss = np.asarray(out["steps/loss"])[0]
    assert np.isfinite(loss).all() and int(np.asarray(out["steps/skipped"])[0, -1]) == 0
    first, last = loss[:25], loss[-25:]
    stderr = np.sqrt(first.var() / len(first) + last.var() / len(last))
    assert first.mean() - last.mean() > 3 * stderr, (first.mean(), last.mean(), stderr)
    # the goals section's metrics and evaluation sets, and the probe of the goal's 16 factor entries
    for key in ("loss", "acc", "acc_all", "acc_first", "acc_last"):
        assert out[f"eval/{key}"].shape == (1, 3, len(G.EVAL_SETS)) and np.isfinite(out[f"eval/{key}"]).all()
    assert out["eval/r2_ood"].shape == (1, 3, 16) and np.isfinite(out["eval/r2_ood_pooled"]).all()
    assert IC.accuracy_key(cfg) == "acc" and "| Transformer | random | goals |" in P.summarize([cfg], [out])
