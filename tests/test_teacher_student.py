import dataclasses

import jax
import numpy as np
import pytest

from compgen import results
from compgen.experiments import teacher_student as ts

TINY = dict(outer_steps=60, outer_lr=1e-2, meta_batch=8, batch=32, inner_steps=40, inner_lr=5e-2, eval_every=30, eval_tasks=16,
            eval_inputs=64, seeds=(100,), input_sampler="hash", hidden_factor=1, module_factor=1)


def test_presets_and_errors_name_the_parameter():
    assert ts.make_config("paper") == ts.TeacherStudentConfig()
    assert ts.TeacherStudentConfig().outer_steps == 60_000 and ts.TeacherStudentConfig().inner_steps == 300
    with pytest.raises(ValueError, match="preset must be one of"):
        ts.make_config("fast")
    with pytest.raises(ValueError, match="hidden_factor"):
        ts.make_config("smoke", hidden_factor=0)
    with pytest.raises(ValueError, match="masks"):
        ts.make_config("smoke", masks="01;1234567")  # index 6 and 7 do not exist for M = 6
    with pytest.raises(ValueError, match="masks"):
        ts.make_config("smoke", masks="01;12;20;34;45;53", expect_connected=True)
    with pytest.raises(ValueError, match="disconnected"):
        ts.make_config("smoke", masks="01;12;23", expect_connected=False)


def test_fig2c_configs_follow_table_a9():
    configs = ts.fig2c_configs("smoke")
    assert [c.distribution for c in configs] == ["discrete"] * 2 + ["continuous"] * 5
    assert [c.expect_connected for c in configs] == [True, False, True, True, False, False, False]


def _teacher_as_student(cfg):
    runs = ts.run_arrays([cfg])
    state = jax.vmap(lambda r: ts.init_run(cfg, r))(runs)
    state = {**state, "student": state["teacher"]}
    return runs, state


def test_student_initialised_at_teacher_stays_at_near_zero_loss():
    cfg = ts.make_config("smoke", **{**TINY, "inner_steps": 200})
    runs, state = _teacher_as_student(cfg)
    evaluation = jax.vmap(lambda r, s: ts.evaluate_run(cfg, r, s))(runs, state)
    assert float(evaluation["relative_loss"].max()) < 1e-2
    assert float(evaluation["alignment"][0]) > 0.999
    state, step_metrics = jax.vmap(lambda r, s: ts.outer_step(cfg, r, s))(runs, state)
    assert float(step_metrics["loss"][0]) < 1e-3


def test_short_training_lowers_loss_and_is_reproducible(tmp_path, monkeypatch):
    monkeypatch.setenv("COMPGEN_RESULTS", str(tmp_path))
    cfg = ts.make_config("smoke", **TINY)
    lines = []
    (first,) = ts.run([cfg], log=lines.append)
    loss = first["steps/loss"][0]
    assert loss[-5:].mean() < 0.7 * loss[:5].mean()
    assert first["eval/alignment"].shape == (1, 3) and first["eval/r2"].shape == (1, 3, 7, 6)
    # the store is reused, and says so
    (again,) = ts.run([cfg], log=lines.append)
    assert any("reusing stored run" in line for line in lines)
    np.testing.assert_array_equal(again["steps/loss"], loss[None])
    # recomputing with force gives identical numbers
    (forced,) = ts.run([cfg], force=True, log=lines.append)
    for key in first:
        np.testing.assert_array_equal(forced[key], first[key])
    meta = results.load(ts.KIND, cfg, code=ts.code())[1]
    assert meta["config"]["outer_steps"] == 60 and meta["provenance"]["jax_version"] == jax.__version__


def test_grouped_runs_equal_separate_runs(tmp_path, monkeypatch):
    monkeypatch.setenv("COMPGEN_RESULTS", str(tmp_path))
    a = ts.make_config("smoke", **TINY)
    b = dataclasses.replace(a, masks="01;12;23;34;45;50", distribution="continuous", weight_decay=1e-3)
    grouped = ts.run([a, b], workers=1, log=lambda _: None)
    separate = ts.run([b], force=True, log=lambda _: None)
    np.testing.assert_allclose(grouped[1]["steps/loss"], separate[0]["steps/loss"], rtol=1e-4)


def test_parallel_workers_match_in_process_training(tmp_path, monkeypatch):
    monkeypatch.setenv("COMPGEN_RESULTS", str(tmp_path))
    a = ts.make_config("smoke", **{**TINY, "outer_steps": 10, "eval_every": 10})
    b = dataclasses.replace(a, masks="0;1;2;3;4;5", distribution="continuous")  # shares a's program
    c = dataclasses.replace(a, outer_steps=20)  # a program of its own
    lines = []
    in_workers = ts.run([a, b, c], workers=2, log=lines.append)
    # two jobs, {a, b} and c, one per slot
    assert sorted(line.split(" [train]")[0] for line in lines if " [train]" in line) == ["[worker 0]", "[worker 1]"]
    in_process = ts.run([a, b, c], force=True, workers=1, log=lambda _: None)
    for x, y in zip(in_workers, in_process):
        np.testing.assert_allclose(x["steps/loss"], y["steps/loss"], rtol=1e-5)
