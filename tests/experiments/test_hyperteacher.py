import dataclasses

import numpy as np
import pytest

from compgen import backends, dispatch, params, runner
from compgen.experiments import fewshot
from compgen.experiments import hyperteacher as HT
from compgen.section import differences_from_paper, figure_configs, make_config

S = HT.SECTION


def test_presets_and_paper_values():
    paper = make_config(S, "paper", "anil")
    assert (paper.hidden, paper.inner_steps, paper.inner_batch, paper.inner_lr) == (512, 100, 64, 0.03)
    assert (paper.meta_batch, paper.shots_support, paper.outer_steps, paper.temperature) == (128, 256, 200_000, 0.1)
    assert make_config(S, "paper", "hnet_deepmlp").outer_lr == 3e-3
    assert make_config(S, "paper", "hnet_linear").n_templates == 32  # T = 4 M at M = 8
    assert differences_from_paper(S, make_config(S, "paper", "maml")) == []
    assert len(figure_configs(S, "fig3e", "paper")) == 4 * 12  # (M, K) cells with K <= M, spec §2.8
    assert {c.split for c in figure_configs(S, "fig3cd", "paper")} == {"connected", "disconnected"}
    assert all((c.n_modules, c.max_hot) == (8, 2) for c in figure_configs(S, "fig3b", "paper"))


@pytest.mark.parametrize(
    "overrides, match",
    [
        (dict(max_hot=5), "max_hot"),
        (dict(split="diagonal"), "split must be one of"),
        (dict(frac_ood=1.5), "frac_ood"),
        (dict(split="connected", max_hot=4, n_modules=8), "K"),
        (dict(split="connected", n_modules=7), "even"),
        (dict(inner_batch=0), "inner_batch"),
        (dict(gradient="zeroth"), "gradient"),
        (dict(outer_schedule="linear"), "outer_schedule"),
        (dict(hidden=0), "hidden"),
        (dict(meta_batch=8, train_chunk=3), r"train_chunk \(3\) must divide meta_batch \(8\)"),
    ],
)
def test_bad_parameters_name_the_parameter(overrides, match):
    with pytest.raises(params.ParameterError, match=match):
        make_config(S, "smoke", "hnet_linear", **overrides)


def test_unknown_model_and_preset_are_rejected():
    with pytest.raises(params.ParameterError, match="model must be one of"):
        make_config(S, "smoke", "lstm")
    with pytest.raises(
        params.ParameterError, match="'transformer' is an in-context learner; this section trains inner-loop learners"
    ):
        make_config(S, "smoke", "transformer")
    with pytest.raises(params.ParameterError, match="preset must be one of"):
        make_config(S, "fast", "anil")


def test_flop_estimate_orders_the_models_as_the_spec():
    flops = {m: HT.flops_per_step(make_config(S, "paper", m)) for m in fewshot.MODELS}
    # spec §7.1 at M = 8: hnets ~250 GFLOP, MAML ~1,850, ANIL ~2,700 (with the body re-run per minibatch)
    assert 100e9 < flops["hnet_linear"] < 500e9 and 1000e9 < flops["maml"] < 3000e9
    assert flops["anil"] < flops["maml"]  # the fast path computes ANIL's body once per task


def train_steps(cfg, steps):
    """``steps`` outer steps of ``cfg``'s program from its initial state: (state, per-step metrics)."""
    runs = S.run_arrays([cfg])
    program = runner.program(S, cfg)
    return program.steps(runs, program.init(runs), steps)


@pytest.mark.parametrize("model", fewshot.MODELS)
def test_short_training_lowers_the_loss(model):
    cfg = make_config(S, "smoke", model, outer_steps=100, meta_batch=8, shots_support=32, shots_query=32, outer_lr=5e-3)
    _, metrics = train_steps(cfg, cfg.outer_steps)
    loss = np.asarray(metrics["loss"])[:, 0]
    assert np.isfinite(loss).all() and int(np.asarray(metrics["skipped"])[-1, 0]) == 0
    # the query loss of fresh tasks is noisy: require the drop to exceed three standard errors
    first, last = loss[:25], loss[-25:]
    stderr = np.sqrt(first.var() / len(first) + last.var() / len(last))
    assert first.mean() - last.mean() > 3 * stderr, (first.mean(), last.mean(), stderr)


def test_run_is_stored_reproducible_and_probed(store):
    cfg = make_config(S, "smoke", "hnet_linear", outer_steps=10, eval_every=10)
    other = dataclasses.replace(cfg, split="non_compositional")
    first = dispatch.train_or_load(S, [cfg, other], backend=backends.Workers(1), log=lambda _: None)
    again = dispatch.train_or_load(S, [cfg, other], force=True, backend=backends.Workers(1), log=lambda _: None)
    for a, b in zip(first, again):
        for key in a:
            np.testing.assert_array_equal(a[key], b[key])
    names = cfg.eval_set_names()
    assert first[0]["eval/accuracy"].shape == (1, 2, len(names)) and first[0]["eval/r2_ood"].shape == (1, 2, 8)
    # evaluation sets: in-distribution tasks differ between the splits
    assert not np.array_equal(first[0]["eval/accuracy"], first[1]["eval/accuracy"])
    assert runner.load(S, cfg) is not None
