import dataclasses

import jax
import numpy as np
import pytest

from compgen import backends, dispatch, models, params, runner
from compgen.experiments import fewshot
from compgen.experiments import goals as G
from compgen.section import differences_from_paper, figure_configs, make_config
from compgen.tasks import goals as gl

S = G.SECTION
# spec §4.3, last row: the meta-parameter counts of the paper's models
PAPER_PARAM_COUNTS = {"hnet_deepmlp": 919_688, "hnet_linear": 227_144, "anil": 699_910, "maml": 475_782}


@pytest.mark.parametrize("model", fewshot.MODELS)
def test_paper_models_have_the_spec_parameter_counts(model):
    cfg = make_config(S, "paper", model)
    assert models.param_count(cfg) == PAPER_PARAM_COUNTS[model]  # derived from the shapes alone
    assert differences_from_paper(S, cfg) == []
    assert (cfg.meta_batch, cfg.outer_steps, cfg.demo_length, cfg.shots_support, cfg.shots_query) == (
        128,
        200_000,
        120,
        1,
        1,
    )


@pytest.mark.parametrize("preset", ["smoke", "quick", "paper"])
def test_presets_build_every_model_and_figure(preset):
    for model in fewshot.MODELS:
        cfg = make_config(S, preset, model)
        assert cfg.demo_length >= G.longest_demonstration(cfg.seeds, cfg.world)
    fig4ef = figure_configs(S, "fig4ef", preset)
    assert len(fig4ef) == 8 and {c.split for c in fig4ef} == set(gl.SPLITS)
    figa10 = figure_configs(S, "figa10", preset)
    assert all(c.model in fewshot.HNETS and c.split == "random" for c in figa10)
    if preset == "paper":
        assert len(figa10) == 2 * 4 * 3 * 3  # spec §4.4: hnets x hidden x T x lr_outer


def test_demo_length_none_pads_to_the_longest_demonstration_of_the_seeds():
    assert make_config(S, "smoke", "anil", seeds=(2020, 2021, 2022)).demo_length == 51  # the paper's world
    quick = make_config(S, "quick", "anil")
    assert quick.world == gl.GoalsWorld(**G.QUICK_WORLD) and (quick.n_in, quick.n_out) == (5 * 5 * 5, 6)
    assert quick.demo_length == G.longest_demonstration(quick.seeds, quick.world) < 25
    one = make_config(S, "quick", "anil", seeds=(2020,))
    assert one.demo_length == G.longest_demonstration((2020,), one.world) <= quick.demo_length


@pytest.mark.parametrize(
    "overrides, match",
    [
        (dict(split="diagonal"), "split must be one of"),
        (dict(demo_length=10), "demo_length must be between 17"),
        (dict(demo_length=25), "demo_length must be between 17 .* and 24"),
        (dict(grid=6), "grid"),
        (dict(grid=5, min_distance=30), "min_distance"),
        (dict(n_distractors=-1), "n_distractors"),
        (dict(n_distractors=2, n_object_types=1), "n_object_types"),
        (dict(n_mazes=0), "n_mazes"),
        (dict(shots_support=0), "shots_support"),
        (dict(hidden=0), "hidden"),
        (dict(seeds=()), "seeds"),
    ],
)
def test_bad_parameters_name_the_parameter(overrides, match):
    with pytest.raises(params.ParameterError, match=match):
        make_config(S, "quick", "hnet_linear", **overrides)


def test_evaluation_goals_come_from_the_right_split():
    train, ood = gl.goal_split("non_compositional", 2020)
    sets = G.evaluation_goals(2020, "non_compositional", 64)
    ids = {tuple(g): i for i, g in enumerate(gl.goal_table())}
    assert {ids[tuple(g)] for g in sets["ood"]} <= set(ood) and (sets["ood"][:, 0] == 3).all()
    assert {ids[tuple(g)] for g in sets["test"]} <= set(train) and {ids[tuple(g)] for g in sets["valid"]} <= set(train)
    assert not np.array_equal(sets["test"], sets["valid"])


def test_run_is_stored_reproducible_finite_and_keeps_parameters(store):
    cfg = make_config(S, "smoke", "anil", outer_steps=2, eval_every=2, meta_batch=4, outer_lr=3e-3)
    other = dataclasses.replace(cfg, split="non_compositional")
    first = dispatch.train_or_load(S, [cfg, other], backend=backends.Workers(1), log=lambda line: None)
    out = first[0]
    for key in ("loss", "acc", "acc_all", "acc_first", "acc_last", "skipped"):
        assert out[f"steps/{key}"].shape == (1, 2) and np.isfinite(out[f"steps/{key}"]).all()
    for key in ("loss", "acc", "acc_all", "acc_first", "acc_last", "inner_loss_init", "inner_loss_final"):
        assert out[f"eval/{key}"].shape == (1, 2, len(G.EVAL_SETS)) and np.isfinite(out[f"eval/{key}"]).all()
    assert out["eval/r2_ood"].shape == (1, 2, 16)  # the probe decodes the goal's four factors
    assert ((0 <= out["eval/acc"]) & (out["eval/acc"] <= 1)).all() and list(out["eval_steps"]) == [0, 2]
    flat = out["final/meta"]
    assert flat.shape == (1, models.count_params(cfg.build_model().init(jax.random.key(0))))
    assert not np.array_equal(flat, first[1]["final/meta"])  # the splits differ, so the runs do too
    # same seeds, same numbers: the program reproduces the stored run's first steps, twice; 60 steps lower the loss
    runs, program = S.run_arrays([cfg]), runner.program(S, cfg)
    losses = []
    for _ in range(2):
        _, metrics = program.steps(runs, program.init(runs), 60)
        losses.append(np.asarray(metrics["loss"])[:, 0])
        np.testing.assert_array_equal(losses[-1][:2], out["steps/loss"][0])
        np.testing.assert_array_equal(np.asarray(metrics["acc"])[:2, 0], out["steps/acc"][0])
        assert int(np.asarray(metrics["skipped"])[-1].max()) == 0
    np.testing.assert_array_equal(losses[0], losses[1])
    early, late = losses[0][:20], losses[0][-20:]  # the query loss of fresh tasks is noisy: 3 standard errors
    stderr = np.sqrt(early.var() / len(early) + late.var() / len(late))
    assert early.mean() - late.mean() > 3 * stderr, (early.mean(), late.mean(), stderr)
    # the restored parameters drive a rollout
    rollout = G.imitate(cfg, flat[0], 2020, gl.goal_table()[[7, 150]], jax.random.key(3))
    assert rollout["cells"].shape == (2, cfg.demo_length + 1) and rollout["optimal_cells"].shape == (2, cfg.demo_length)
    assert (rollout["optimal_cells"][:, 0] == rollout["instance"]["agent"]).all()
    assert (rollout["cells"][:, 0] == rollout["instance"]["agent"]).all() and rollout["success"].shape == (2,)
    assert (rollout["support_cells"][:, 0, 0] == rollout["support_instances"]["agent"][:, 0]).all()


def test_small_world_config_trains_and_imitates(store):
    world = dict(grid=5, n_mazes=2, n_object_types=3, n_distractors=2, min_distance=2)
    cfg = make_config(G.SECTION, "smoke", "hnet_linear", outer_steps=2, eval_every=2, meta_batch=2, **world)
    assert cfg.world == gl.GoalsWorld(**world) and cfg.n_in == 5 * 5 * 5 and cfg.n_out == 6
    assert cfg.demo_length == G.shortest_demonstration_bound(2020, cfg.world) < 25
    out = dispatch.train_or_load(G.SECTION, [cfg], backend=backends.Workers(1), log=lambda line: None)[0]
    assert np.isfinite(out["eval/loss"]).all() and out["eval/acc"].shape == (1, 2, 3)
    assert out["eval/r2_ood"].shape == (1, 2, 4 + 2 + 2 + 3)  # one one-hot per factor of this world
    rollout = G.imitate(cfg, out["final/meta"][0], 2020, gl.goal_table(cfg.world)[[0, 40]], jax.random.key(0))
    assert rollout["cells"].shape == (2, cfg.demo_length + 1)
    assert (rollout["cells"] < 25).all() and (rollout["cells"][:, 0] == rollout["instance"]["agent"]).all()
