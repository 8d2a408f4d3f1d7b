import dataclasses

import numpy as np
import pytest

from compgen import backends, dispatch, models, params, runner
from compgen.experiments import fewshot
from compgen.experiments import preferences as P
from compgen.section import differences_from_paper, figure_configs, make_config

S = P.SECTION
# spec §3.5: meta-parameters of the paper's models in the preferences world
PAPER_PARAMS = {"hnet_deepmlp": 1_162_816, "hnet_linear": 1_149_216, "anil": 1_041_925, "maml": 454_117}


@pytest.mark.parametrize("model", sorted(PAPER_PARAMS))
def test_paper_models_have_the_spec_parameter_counts(model):
    cfg = make_config(S, "paper", model)
    assert models.param_count(cfg) == PAPER_PARAMS[model]  # derived from the shapes alone


def test_presets_and_paper_values():
    anil = make_config(S, "paper", "anil")
    assert (anil.num_hidden, anil.hidden, anil.inner_steps, anil.inner_batch, anil.inner_lr) == (4, 512, 100, 64, 0.01)
    assert (anil.meta_batch, anil.outer_steps, anil.shots_support, anil.shots_query, anil.eval_shots_query) == (
        128,
        100_000,
        16,
        16,
        1,
    )
    assert differences_from_paper(S, make_config(S, "paper", "maml")) == []
    assert len(figure_configs(S, "fig4c", "paper")) == 8
    assert all(len(c.seeds) == 6 for c in figure_configs(S, "fig4c", "paper"))
    assert {(c.split, c.max_hot) for c in figure_configs(S, "fig4b", "paper")} == {
        ("connected", 2),
        ("disconnected", 2),
    }
    assert len(figure_configs(S, "figa8", "paper")) == 2 * 3 * 4 * 3  # spec §3.6 overparam sweep
    for preset in S.presets:
        for model in fewshot.MODELS:
            make_config(S, preset, model)


@pytest.mark.parametrize(
    "overrides, match",
    [
        (dict(max_hot=9), "max_hot"),
        (dict(split="ring"), "split must be one of"),
        (dict(split="connected"), "max_hot"),  # K = 3
        (dict(n_colours=9), "n_colours"),  # was n_modules=6, refused before the world's sizes became fields
        (dict(shots_support=0), "shots_support"),
        (dict(eval_shots_query=0), "eval_shots_query"),
        (dict(inner_batch=0), "inner_batch"),
        (dict(outer_schedule="linear"), "outer_schedule"),
    ],
)
def test_bad_parameters_name_the_parameter(overrides, match):
    with pytest.raises(params.ParameterError, match=match):
        make_config(S, "smoke", "hnet_linear", **overrides)


def test_flop_estimate_is_in_the_range_of_the_spec():
    # spec §7.1: preferences hnet ~140-150 GFLOP per outer step, MAML-368 ~1,400
    hnet = P.flops_per_step(make_config(S, "paper", "hnet_linear"))
    maml = P.flops_per_step(make_config(S, "paper", "maml"))
    assert 50e9 < hnet < 400e9 and 700e9 < maml < 3000e9


@pytest.mark.parametrize("model", ["hnet_linear", "anil"])
def test_short_training_lowers_the_evaluation_loss(model):
    cfg = make_config(
        S,
        "smoke",
        model,
        outer_steps=200,
        meta_batch=8,
        shots_support=2,
        shots_query=2,
        outer_lr=3e-3,
        eval_tasks=64,
        eval_chunk=64,
    )
    runs = S.run_arrays([cfg])
    program = runner.program(S, cfg)
    state = program.init(runs)
    before = np.asarray(program.evaluate(runs, state)["loss"])[0]
    state, metrics = program.steps(runs, state, cfg.outer_steps)
    after = np.asarray(program.evaluate(runs, state)["loss"])[0]
    assert np.isfinite(np.asarray(metrics["loss"])).all() and int(np.asarray(metrics["skipped"])[-1, 0]) == 0
    in_distribution = [cfg.eval_set_names().index(name) for name in ("valid", "test")]
    # fixed tasks, so no sampling noise between the two evaluations
    assert (after[in_distribution] < 0.9 * before[in_distribution]).all(), (before, after)


def test_run_is_stored_reproducible_and_probed(store):
    cfg = make_config(S, "smoke", "hnet_linear", outer_steps=6, eval_every=3)
    other = dataclasses.replace(cfg, split="non_compositional")
    first = dispatch.train_or_load(S, [cfg, other], backend=backends.Workers(1), log=lambda _: None)
    again = dispatch.train_or_load(S, [cfg, other], force=True, backend=backends.Workers(1), log=lambda _: None)
    for a, b in zip(first, again):
        for key in a:
            np.testing.assert_array_equal(a[key], b[key])
    names = cfg.eval_set_names()
    assert names == ("valid", "test", "ood", "ood_4", "ood_5", "ood_6", "ood_7", "ood_8")
    assert first[0]["eval/loss"].shape == (1, 3, len(names)) and np.isfinite(first[0]["eval/loss"]).all()
    assert first[0]["eval/r2_ood"].shape == (1, 3, 8)  # the probe decodes the preference latent z
    assert not np.array_equal(first[0]["eval/loss"], first[1]["eval/loss"])  # the splits' sets differ


# --------------------------------------------------------------------------------------------- the world's sizes


@pytest.mark.parametrize(
    "overrides, match",
    [
        (dict(layout="9x9"), r"layout must be one of \('paper', '6x6', '5x5'\), got '9x9'"),
        (dict(observation="pixels"), "observation must be one of"),
        (dict(n_colours=0), "n_colours must be an integer >= 1 and <= 8"),
        (dict(n_objects=0), "n_objects must be an integer >= 1"),
        (dict(layout="5x5", n_objects=8), "n_objects must be at most 7 on layout '5x5'"),
        (dict(horizon=2.5), "horizon must be an integer"),
        (dict(backups=0), "backups"),
        (dict(n_modules=5, max_hot=2, split="connected"), "even n_modules"),
    ],
)
def test_bad_world_sizes_name_the_field(overrides, match):
    with pytest.raises(params.ParameterError, match=match):
        make_config(S, "smoke", "hnet_linear", **overrides)


def test_the_paper_world_is_the_default_and_quick_runs_a_smaller_one():
    for model in fewshot.MODELS:
        paper = make_config(S, "paper", model)
        assert paper.world == P.pf.WORLD and paper.n_modules == 8 and paper.n_in == 490
        assert P.is_paper_world(paper) and "world" not in P.label(paper)
    for figure in S.figures("quick"):
        for cfg in figure_configs(S, figure, "quick"):
            assert cfg.world == P.pf.PreferencesWorld(**{k: P.QUICK_WORLD[k] for k in P.WORLD_FIELDS})
            assert cfg.n_modules == P.QUICK_WORLD["n_modules"] and cfg.n_in == 8 * (6 + 1)
            assert "5x5 layout (8 free cells)" in P.label(cfg)


@pytest.mark.parametrize("preset", ["quick", "paper"])
def test_every_model_of_a_comparison_gets_the_same_budget(preset):
    for figure in S.figures(preset):
        budgets = {
            (c.outer_steps, c.meta_batch, c.shots_support, c.shots_query) for c in figure_configs(S, figure, preset)
        }
        assert len(budgets) == 1, (figure, budgets)


def test_tiny_run_in_a_small_world(store):
    world = dict(layout="5x5", n_objects=2, n_modules=6, n_colours=6, horizon=4, backups=4, observation="free_cells")
    cfg = make_config(S, "smoke", "hnet_deepmlp", outer_steps=4, eval_every=2, **world)
    out = dispatch.train_or_load(S, [cfg], backend=backends.Workers(1), log=lambda _: None)[0]
    assert cfg.eval_set_names() == ("valid", "test", "ood", "ood_4", "ood_5", "ood_6")
    assert out["eval/loss"].shape == (1, 3, 6) and np.isfinite(out["eval/loss"]).all()
    assert out["eval/r2_ood"].shape == (1, 3, 6)  # the probe decodes the 6 module weights
    assert int(np.asarray(out["steps/skipped"])[0, -1]) == 0
