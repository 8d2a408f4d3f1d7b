import dataclasses

import jax
import numpy as np
import pytest

from compgen import models
from compgen.experiments import goals as G
from compgen.experiments import goals_presets as P
from compgen.tasks import goals as gl


@pytest.mark.parametrize("model", P.MODELS)
def test_paper_models_have_the_spec_parameter_counts(model):
    cfg = P.make_config("paper", model)
    assert models.count_params(cfg.build_model().init(jax.random.key(0))) == P.PAPER_PARAM_COUNTS[model]
    assert P.differences_from_paper(cfg) == []
    assert (cfg.meta_batch, cfg.outer_steps, cfg.demo_length, cfg.shots_support, cfg.shots_query) == (128, 200_000, 120,
                                                                                                       1, 1)


@pytest.mark.parametrize("preset", ["smoke", "quick", "paper"])
def test_presets_build_every_model_and_figure(preset):
    for model in P.MODELS:
        cfg = P.make_config(preset, model)
        assert cfg.demo_length >= max(G.shortest_demonstration_bound(s) for s in cfg.seeds)
    fig4ef = P.fig4ef_configs(preset)
    assert len(fig4ef) == 8 and {c.split for c in fig4ef} == set(gl.SPLITS)
    figa10 = P.figa10_configs(preset)
    assert all(c.model in P.HNETS and c.split == "random" for c in figa10)
    if preset == "paper":
        assert len(figa10) == 2 * 4 * 3 * 3  # spec §4.4: hnets x hidden x T x lr_outer
    # the quick preset pads to the longest demonstration of its seeds' mazes (51 steps for 2020-2022)
    assert P.make_config("quick", "anil").demo_length == 51


@pytest.mark.parametrize("overrides, match", [
    (dict(split="diagonal"), "split must be one of"),
    (dict(n_mazes=4), "n_mazes must be 5"),
    (dict(demo_length=40), "demo_length must be between 51"),
    (dict(demo_length=121), "demo_length"),
    (dict(shots_support=0), "shots_support"),
    (dict(hidden=0), "hidden"),
    (dict(seeds=()), "seeds"),
])
def test_bad_parameters_name_the_parameter(overrides, match):
    with pytest.raises(ValueError, match=match):
        P.make_config("smoke", "hnet_linear", **overrides)


def test_unknown_model_and_preset_are_rejected():
    with pytest.raises(ValueError, match="model must be one of"):
        P.make_config("smoke", "transformer")
    with pytest.raises(ValueError, match="preset must be one of"):
        P.make_config("fast", "anil")
    with pytest.raises(ValueError, match="preset must be one of"):
        P.figa10_configs("fast")


def test_evaluation_goals_come_from_the_right_split():
    train, ood = gl.goal_split("non_compositional", 2020)
    sets = G.evaluation_goals(2020, "non_compositional", 64)
    ids = {tuple(g): i for i, g in enumerate(gl.goal_table())}
    assert {ids[tuple(g)] for g in sets["ood"]} <= set(ood) and (sets["ood"][:, 0] == 3).all()
    assert {ids[tuple(g)] for g in sets["test"]} <= set(train) and {ids[tuple(g)] for g in sets["valid"]} <= set(train)
    assert not np.array_equal(sets["test"], sets["valid"])


def test_run_is_stored_reproducible_finite_and_keeps_parameters(tmp_path, monkeypatch):
    monkeypatch.setenv("COMPGEN_RESULTS", str(tmp_path))
    cfg = P.make_config("smoke", "anil", outer_steps=2, eval_every=2, meta_batch=4, outer_lr=3e-3)
    other = dataclasses.replace(cfg, split="non_compositional")
    first = G.run([cfg, other], workers=1, log=lambda line: None)
    out = first[0]
    for key in ("loss", "acc", "acc_all", "acc_first", "acc_last", "skipped"):
        assert out[f"steps/{key}"].shape == (1, 2) and np.isfinite(out[f"steps/{key}"]).all()
    for key in ("loss", "acc", "acc_all", "acc_first", "acc_last", "inner_loss_init", "inner_loss_final"):
        assert out[f"eval/{key}"].shape == (1, 2, len(G.EVAL_SETS)) and np.isfinite(out[f"eval/{key}"]).all()
    assert ((0 <= out["eval/acc"]) & (out["eval/acc"] <= 1)).all() and list(out["eval_steps"]) == [0, 2]
    flat = out["final/meta"]
    assert flat.shape == (1, models.count_params(cfg.build_model().init(jax.random.key(0))))
    assert not np.array_equal(flat, first[1]["final/meta"])  # the splits differ, so the runs do too
    assert G.training_cost(cfg) > 0
    # same seeds, same numbers: a fresh program reproduces the stored runs' first steps, twice; 60 steps lower the loss
    _, init, chunk, _ = G.make_train([cfg, other])
    losses = []
    for _ in range(2):
        _, metrics = chunk(init(), 60)
        losses.append(np.asarray(metrics["loss"]).T)
        np.testing.assert_array_equal(losses[-1][:, :2], np.concatenate([o["steps/loss"] for o in first]))
        stored_acc = np.concatenate([o["steps/acc"] for o in first])
        np.testing.assert_array_equal(np.asarray(metrics["acc"]).T[:, :2], stored_acc)
        assert int(np.asarray(metrics["skipped"])[-1].max()) == 0
    np.testing.assert_array_equal(losses[0], losses[1])
    for loss in losses[0]:  # the query loss of fresh tasks is noisy: the drop must exceed three standard errors
        early, late = loss[:20], loss[-20:]
        stderr = np.sqrt(early.var() / len(early) + late.var() / len(late))
        assert early.mean() - late.mean() > 3 * stderr, (early.mean(), late.mean(), stderr)
    # the restored parameters drive a rollout
    rollout = G.imitate(cfg, flat[0], 2020, gl.goal_table()[[7, 150]], jax.random.key(3))
    assert rollout["cells"].shape == (2, cfg.demo_length + 1) and rollout["optimal_cells"].shape == (2, cfg.demo_length)
    assert (rollout["optimal_cells"][:, 0] == rollout["instance"]["agent"]).all()
    assert (rollout["cells"][:, 0] == rollout["instance"]["agent"]).all() and rollout["success"].shape == (2,)
    assert (rollout["support_cells"][:, 0, 0] == rollout["support_instances"]["agent"][:, 0]).all()
