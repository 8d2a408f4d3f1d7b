"""The in-context section: its presets copy the task setups of the hyperteacher and goals sections, its learners
see exactly their task streams, and they train."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from compgen import backends, dispatch, models, params, runner
from compgen.experiments import fewshot
from compgen.experiments import goals as G
from compgen.experiments import hyperteacher as HT
from compgen.experiments import incontext as IC
from compgen.models import count_params
from compgen.section import PRESET_NAMES, figure_configs, make_config
from compgen.tasks import goals as gl

S = IC.SECTION


@pytest.mark.parametrize("preset", PRESET_NAMES)
def test_presets_copy_the_hyperteacher_task_setup(preset):
    reference = IC.reference_config(preset)
    grid = S.preset(preset).figures["comparison"].fixed  # what the preset sets itself (quick pins the steps)
    for cfg in figure_configs(S, "comparison", preset):
        for name in (
            "n_modules",
            "max_hot",
            "teacher_hidden",
            "shots_support",
            "shots_query",
            "meta_batch",
            "outer_steps",
            "eval_every",
            "eval_tasks",
            "norm_inputs",
            "temperature",
            "seeds",
        ):
            assert getattr(cfg, name) == grid.get(name, getattr(reference, name)), name
    configs = figure_configs(S, "comparison", preset)
    assert len(configs) == 6 and {c.split for c in configs} == set(IC.SPLITS)
    if preset == "paper":
        assert (configs[0].n_modules, configs[0].max_hot, configs[0].meta_batch) == (8, 2, 128)
        assert configs[0].outer_steps == 200_000


@pytest.mark.parametrize("preset, low, high", [("quick", 9_000, 110_000), ("paper", 300_000, 700_000)])
def test_parameter_counts_are_comparable_to_the_paper_models(preset, low, high):
    # the paper's four models at M = 8: 305k (MAML) to 645k (nonlinear hnet); at quick 10k to 73k
    for cfg in figure_configs(S, "comparison", preset):
        assert low <= models.param_count(cfg) <= high, cfg.model


def test_same_teacher_tasks_and_keys_as_the_hyperteacher():
    cfg = figure_configs(S, "comparison", "smoke")[0]
    reference = IC.reference_config("smoke")
    run = jax.tree.map(lambda a: a[0], S.run_arrays([cfg]))
    theirs_run = jax.tree.map(lambda a: a[0], HT.SECTION.run_arrays([reference]))
    for a, b in zip(jax.tree.leaves(run), jax.tree.leaves(theirs_run)):
        raw = lambda x: jax.random.key_data(x) if jnp.issubdtype(x.dtype, jax.dtypes.prng_key) else x
        np.testing.assert_array_equal(raw(a), raw(b))
    ours, theirs = S.init(cfg, run), HT.SECTION.init(reference, run)
    for a, b in zip(jax.tree.leaves(ours["world"]), jax.tree.leaves(theirs["world"])):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(jax.random.key_data(ours["key"]), jax.random.key_data(theirs["key"]))
    assert count_params(ours["meta"]) == models.param_count(cfg)


@pytest.mark.parametrize(
    "overrides, match",
    [
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
    ],
)
def test_bad_parameters_name_the_parameter(overrides, match):
    with pytest.raises(params.ParameterError, match=match):
        make_config(S, "smoke", "bottleneck", **overrides)


def test_unknown_model_and_preset_are_rejected():
    with pytest.raises(params.ParameterError, match="model must be one of"):
        make_config(S, "smoke", "lstm")
    with pytest.raises(
        params.ParameterError, match="'maml' is an inner-loop learner; this section trains in-context learners"
    ):
        make_config(S, "smoke", "maml")
    with pytest.raises(params.ParameterError, match="preset must be one of"):
        make_config(S, "fast", "transformer")


def _train(cfg, steps):
    runs, program = S.run_arrays([cfg]), runner.program(S, cfg)
    return program.steps(runs, program.init(runs), steps)


def _drops(loss):
    """The query loss of fresh tasks is noisy: the drop must exceed three standard errors."""
    first, last = loss[:25], loss[-25:]
    stderr = np.sqrt(first.var() / len(first) + last.var() / len(last))
    return first.mean() - last.mean() > 3 * stderr


@pytest.mark.parametrize("name", IC.LEARNERS)
def test_short_training_lowers_the_loss(name):
    cfg = make_config(S, "smoke", name, outer_steps=100, meta_batch=8, shots_support=32, shots_query=32)
    _, metrics = _train(cfg, cfg.outer_steps)
    loss = np.asarray(metrics["loss"])[:, 0]
    assert np.isfinite(loss).all() and int(np.asarray(metrics["skipped"])[-1, 0]) == 0 and _drops(loss)


def test_run_is_stored_and_has_the_hyperteacher_layout(store):
    cfg = make_config(S, "smoke", "bottleneck", outer_steps=4, eval_every=2)
    other = dataclasses.replace(cfg, split="non_compositional")
    first = dispatch.train_or_load(S, [cfg, other], backend=backends.Workers(1), log=lambda line: None)
    names = cfg.eval_set_names()
    for out in first:
        assert out["eval/accuracy"].shape == (1, 3, len(names)) and list(out["eval_steps"]) == [0, 2, 4]
        assert np.isfinite(out["eval/accuracy"]).all() and np.isfinite(out["eval/loss"]).all()
        assert out["eval/r2_ood"].shape == (1, 3, 2 * cfg.n_modules) and out["steps/loss"].shape == (1, 4)
    assert not np.array_equal(first[0]["eval/accuracy"], first[1]["eval/accuracy"])
    lines = []
    again = dispatch.train_or_load(S, [cfg, other], backend=backends.Workers(1), log=lines.append)
    assert all(line.startswith("[results] reusing") for line in lines) and len(lines) == 2
    for a, b in zip(first, again):
        for key in a:
            np.testing.assert_array_equal(a[key], b[key])


def test_query_targets_never_reach_the_learner():
    cfg = make_config(S, "smoke", "transformer")
    run = jax.tree.map(lambda a: a[0], S.run_arrays([cfg]))
    state, model = S.init(cfg, run), cfg.build_model()
    code = run["train_codes"][0]
    poisoned = dataclasses.replace(
        HT.ENV, task_data=lambda *a: (lambda s, q: (s, (q[0], jnp.full_like(q[1], jnp.nan))))(*HT.ENV.task_data(*a))
    )
    key = jax.random.key(0)
    task = (run, state["world"], code, key, cfg.shots_query)
    clean = fewshot.solve_task(fewshot.Solver(HT.ENV, cfg, model), state["meta"], *task)
    dirty = fewshot.solve_task(fewshot.Solver(poisoned, cfg, model), state["meta"], *task)
    np.testing.assert_array_equal(clean[1][4], dirty[1][4])  # the same prediction
    np.testing.assert_array_equal(clean[1][1], dirty[1][1])  # and the same task representation
    assert np.isfinite(clean[0]) and np.isnan(dirty[0])  # while the loss does read the targets


# --------------------------------------------------------------------------------------------- goals world


def test_goals_task_stream_is_the_goals_sections():
    cfg = make_config(S, "smoke", "kv_memory", environment="goals", split="non_compositional")
    reference = make_config(G.SECTION, "smoke", "hnet_linear", split="non_compositional")
    ours, theirs = S.run_arrays([cfg]), G.SECTION.run_arrays([reference])
    raw = lambda a: jax.random.key_data(a) if jnp.issubdtype(a.dtype, jax.dtypes.prng_key) else a
    for a, b in zip(jax.tree.leaves(ours), jax.tree.leaves(theirs)):
        np.testing.assert_array_equal(raw(a), raw(b))
    run = jax.tree.map(lambda a: a[0], ours)
    np.testing.assert_array_equal(
        jax.random.key_data(S.init(cfg, run)["key"]), jax.random.key_data(G.SECTION.init(reference, run)["key"])
    )
    # the probe decodes the goal's factors, one one-hot each
    np.testing.assert_array_equal(
        G.goal_latent(reference, jnp.array([3, 1, 4, 0])),
        np.eye(4)[3].tolist() + [0, 1] + np.eye(5)[4].tolist() + np.eye(5)[0].tolist(),
    )


@pytest.mark.parametrize("preset", PRESET_NAMES)
def test_goals_presets_copy_the_goals_task_setup(preset):
    reference = IC.reference_config(preset, "goals")
    configs = figure_configs(S, "goals", preset)
    for cfg in configs:
        assert cfg.world == reference.world and (cfg.n_in, cfg.n_out) == (reference.n_in, reference.n_out)
        for name in IC.GOALS_TASK_FIELDS:
            assert getattr(cfg, name) == getattr(reference, name), name
        assert (cfg.hnet_hidden, cfg.hnet_num_hidden, cfg.n_templates) == (
            reference.hidden,
            reference.num_hidden,
            reference.templates,
        )
    assert len(configs) == 6 and {c.split for c in configs} == set(gl.SPLITS)
    # seeds fix the padded demonstration length, as in the goals presets
    one = figure_configs(S, "goals", preset, seeds=(2021,))[0]
    assert one.demo_length == make_config(G.SECTION, preset, "hnet_linear", seeds=(2021,)).demo_length


@pytest.mark.parametrize(
    "overrides, match",
    [
        (dict(split="diagonal"), "split must be one of"),
        (dict(demo_length=10), "demo_length"),
        (dict(n_in=16), "n_in must be 847"),
        (dict(shots_support=0), "shots_support"),
    ],
)
def test_bad_goals_parameters_name_the_parameter(overrides, match):
    with pytest.raises(params.ParameterError, match=match):
        make_config(S, "smoke", "transformer", environment="goals", **overrides)


def test_short_goals_training_lowers_the_loss_and_is_stored(store):
    cfg = make_config(S, "smoke", "transformer", environment="goals", outer_steps=100, meta_batch=8, eval_every=50)
    out = dispatch.train_or_load(S, [cfg], backend=backends.Workers(1), log=lambda line: None)[0]
    loss = np.asarray(out["steps/loss"])[0]
    assert np.isfinite(loss).all() and int(np.asarray(out["steps/skipped"])[0, -1]) == 0 and _drops(loss)
    for key in ("loss", "acc", "acc_all", "acc_first", "acc_last"):
        assert out[f"eval/{key}"].shape == (1, 3, len(G.EVAL_SETS)) and np.isfinite(out[f"eval/{key}"]).all()
    assert out["eval/r2_ood"].shape == (1, 3, 16) and np.isfinite(out["eval/r2_ood_pooled"]).all()
    assert IC.accuracy_key(cfg) == "acc"
