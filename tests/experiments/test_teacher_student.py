import jax
import jax.numpy as jnp
import numpy as np
import pytest

from compgen import dispatch, params, results, runner
from compgen.experiments import teacher_student as ts
from compgen.section import figure_configs, make_config

S = ts.SECTION
TINY = dict(
    outer_steps=60,
    outer_lr=1e-2,
    meta_batch=8,
    batch=32,
    inner_steps=40,
    inner_lr=5e-2,
    eval_every=30,
    eval_tasks=16,
    eval_inputs=64,
    seeds=(100,),
    input_sampler="hash",
    hidden_factor=1,
    module_factor=1,
)


def test_presets_and_errors_name_the_parameter():
    assert make_config(S, "paper") == ts.TeacherStudentConfig()
    assert ts.TeacherStudentConfig().outer_steps == 60_000 and ts.TeacherStudentConfig().inner_steps == 300
    with pytest.raises(params.ParameterError, match="preset must be one of"):
        make_config(S, "fast")
    with pytest.raises(params.ParameterError, match="hidden_factor"):
        make_config(S, "smoke", hidden_factor=0)
    with pytest.raises(params.ParameterError, match="masks"):
        make_config(S, "smoke", masks="01;1234567")  # index 6 and 7 do not exist for M = 6
    with pytest.raises(ValueError, match="masks"):
        make_config(S, "smoke", masks="01;12;20;34;45;53", expect_connected=True)
    with pytest.raises(params.ParameterError, match="disconnected"):
        make_config(S, "smoke", masks="01;12;23", expect_connected=False)
    with pytest.raises(params.ParameterError, match="warmup_steps"):
        make_config(S, "smoke", warmup_steps=40)  # smoke trains 40 outer steps


def test_outer_schedule_warms_up_then_decays():
    cfg = make_config(S, "smoke", outer_steps=100, warmup_steps=10, outer_lr=1e-2, lr_final_fraction=0.1)
    params_ = {"w": jnp.zeros(3)}
    opt = ts._outer_optimizer(cfg, 0.0)
    state = opt.init(params_)
    steps = []
    for _ in range(100):  # Adam's first step moves each coordinate by about the learning rate
        update, state = opt.update({"w": jnp.ones(3)}, state, params_)
        steps.append(-float(update["w"][0]))
    assert steps[0] < 1e-3 and abs(steps[10] - 1e-2) < 1e-3 and steps[-1] < 2e-3
    assert all(a <= b + 1e-9 for a, b in zip(steps[:10], steps[1:11]))  # rising during the warm-up


def test_fig2c_configs_follow_table_a9():
    configs = figure_configs(S, "fig2c", "smoke")
    assert [c.distribution for c in configs] == ["discrete"] * 2 + ["continuous"] * 5
    assert [c.expect_connected for c in configs] == [True, False, True, True, False, False, False]
    assert len(figure_configs(S, "fig2d", "paper")) == 2 * 25  # spec §1.7: 5 x 5 factors x 2 distributions


def _teacher_as_student(cfg):
    runs = S.run_arrays([cfg])
    state = jax.vmap(lambda r: S.init(cfg, r))(runs)
    return runs, {**state, "student": state["teacher"]}


def test_student_initialised_at_teacher_stays_at_near_zero_loss():
    cfg = make_config(S, "smoke", **{**TINY, "inner_steps": 200})
    runs, state = _teacher_as_student(cfg)
    evaluation = jax.vmap(lambda r, s: S.evaluate(cfg, r, s))(runs, state)
    assert float(evaluation["relative_loss"].max()) < 1e-2
    assert float(evaluation["alignment"][0]) > 0.999
    state, step_metrics = jax.vmap(lambda r, s: S.outer_step(cfg, r, s))(runs, state)
    assert float(step_metrics["loss"][0]) < 1e-3


def test_short_training_lowers_loss_and_is_reproducible(store):
    cfg = make_config(S, "smoke", **TINY)
    lines = []
    (first,) = dispatch.train_or_load(S, [cfg], log=lines.append)
    loss = first["steps/loss"][0]
    assert loss[-5:].mean() < 0.7 * loss[:5].mean()
    assert first["eval/alignment"].shape == (1, 3) and first["eval/r2"].shape == (1, 3, 7, 6)
    # the store is reused, and says so
    (again,) = dispatch.train_or_load(S, [cfg], log=lines.append)
    assert any("reusing" in line for line in lines)
    np.testing.assert_array_equal(again["steps/loss"], loss[None])
    # recomputing with force gives identical numbers
    (forced,) = dispatch.train_or_load(S, [cfg], force=True, log=lines.append)
    for key in first:
        np.testing.assert_array_equal(forced[key], first[key])
    meta = results.Store.default().load(S, cfg)[1]
    assert meta.config["outer_steps"] == 60 and meta.provenance["jax_version"] == jax.__version__


def test_configs_that_differ_only_in_their_data_share_one_program():
    a = make_config(S, "smoke", **TINY)
    b = make_config(
        S, "smoke", **{**TINY, "masks": "01;12;23;34;45;50", "distribution": "continuous", "weight_decay": 1e-3}
    )
    c = make_config(S, "smoke", **{**TINY, "outer_lr": 2e-2})
    assert runner.program(S, a) is runner.program(S, b)
    assert runner.program(S, a) is not runner.program(S, c)
