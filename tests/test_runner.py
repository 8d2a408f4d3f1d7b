"""The training loop (compgen.runner), through compgen.dispatch.train_or_load: a config's stored numbers do not
depend on how it was trained; lanes; non-finite training stops; locks and unusable stores."""

import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest

from compgen import backends, devices, dispatch, params, results, runner, section, storage
from compgen.experiments import hyperteacher as HT
from compgen.experiments import teacher_student as ts
from compgen.section import make_config

S = ts.SECTION


def test_stored_numbers_do_not_depend_on_what_else_was_trained_or_how(store, monkeypatch, tiny, stored_bytes):
    """Alone, beside another config of the same program, beside one of another program, in 1 or 2 worker
    processes: the bytes stored for a config are the same, one program per config (lanes off, a CPU's default;
    lanes keep the numbers up to round-off, below)."""
    monkeypatch.setenv("COMPGEN_LANES", "0")
    a = tiny()
    siblings = [tiny(masks="01", distribution="continuous"), tiny(outer_steps=9, eval_every=3)]
    dispatch.train_or_load(S, [a], backend=backends.Workers(1), log=lambda _: None)
    alone = stored_bytes(S, a)
    for together, workers in (([a, *siblings], 1), ([siblings[0], a, siblings[1]], 2)):
        dispatch.train_or_load(S, together, backend=backends.Workers(workers), force=True, log=lambda _: None)
        assert stored_bytes(S, a) == alone, (len(together), workers)


def test_configs_of_one_shape_train_as_lanes_with_each_ones_numbers_up_to_round_off(store, monkeypatch, tiny):
    """As on an accelerator (``lanes=True``; a CPU trains one config per program): two configs that differ only in
    data train as lanes of one program, a third of another shape apart; each is stored under its own key with the
    numbers of its training alone up to float32 round-off (rtol 1e-4: the vmapped sums may add in another order)."""
    a, b, other = tiny(), tiny(masks="0;1", distribution="continuous", weight_decay=1e-3), tiny(outer_steps=9)
    assert runner.lane_groups(S, [a, other, b], lanes=True) == [[a, b], [other]]
    assert runner.lane_groups(S, [a, other, b], lanes=False) == [[a], [other], [b]]
    monkeypatch.delenv("COMPGEN_LANES", raising=False)
    assert runner.use_lanes("cpu") is False and runner.use_lanes("gpu") is True  # the backend's default
    monkeypatch.setenv("COMPGEN_LANES", "0")
    assert runner.lane_groups(S, [a, b]) == [[a], [b]] and runner.use_lanes("gpu") is False
    monkeypatch.setenv("COMPGEN_LANES", "1")
    assert runner.lane_groups(S, [a, b]) == [[a, b]] and runner.use_lanes("cpu") is True
    monkeypatch.setenv("COMPGEN_LANES", "yes")
    with pytest.raises(params.ParameterError, match="COMPGEN_LANES must be 0 .off. or 1 .on."):
        runner.use_lanes()
    monkeypatch.delenv("COMPGEN_LANES")
    alone = {c: runner.flatten_history(runner.train(S, c, log=lambda _: None)[0]) for c in (a, b, other)}
    lines = []
    runner.train_and_store(S, [a, other, b], results.Store.default(), log=lines.append, lanes=True)
    assert any("2 lanes; first:" in line for line in lines)
    for c in (a, b, other):
        arrays, meta = results.Store.default().load(S, c)
        assert sorted(arrays) == sorted(alone[c])
        for name in alone[c]:
            np.testing.assert_allclose(arrays[name], alone[c][name], rtol=1e-4, atol=1e-6, err_msg=name)
        assert meta.provenance["seconds"].get("lanes") == (None if c is other else 2)
    assert not np.allclose(runner.load(S, a)["steps/loss"], runner.load(S, b)["steps/loss"])


def test_lanes_resume_from_their_checkpoint_and_a_diverged_lane_is_not_stored(store, monkeypatch, tiny):
    """Lanes save one checkpoint for their group and resume from it with the uninterrupted numbers; a lane whose
    updates stay non-finite (a weight decay that overflows the parameters) is reported, the others are stored."""
    good, bad = tiny(outer_steps=120, eval_every=60), tiny(outer_steps=120, eval_every=60, weight_decay=1e30)
    lines = []
    with pytest.raises(runner.TrainingDiverged, match=r"weight decay 1e\+30"):
        runner.train_and_store(S, [good, bad], results.Store.default(), log=lines.append, lanes=True)
    assert runner.load(S, bad) is None and runner.load(S, good) is not None
    store_ = results.Store.default()
    a, b = tiny(), tiny(masks="01", distribution="continuous")
    for c in (a, b):
        runner.train_and_store(S, [c], store_, lambda _: None)
    reference = {c: runner.load(S, c) for c in (a, b)}
    calls = []
    steps = runner.run_steps

    def interrupted(*args, **kwargs):  # a kill after the first chunk and its checkpoint
        steps_fn = args[0]

        def stopping(state, n):
            calls.append(n)
            if len(calls) == 2:
                raise KeyboardInterrupt
            return steps_fn(state, n)

        return steps(stopping, *args[1:], **kwargs)

    monkeypatch.setattr(runner, "run_steps", interrupted)
    with pytest.raises(KeyboardInterrupt):
        runner.train_and_store(S, [a, b], store_, lambda _: None, checkpoint_every=1, force=True, lanes=True)
    monkeypatch.setattr(runner, "run_steps", steps)
    folder = store_.lanes_checkpoint_dir(S, [a, b])
    assert [p.name for p in folder.iterdir()] == ["step-0000000003.ckpt"]
    lines = []
    runner.train_and_store(S, [a, b], store_, lines.append, checkpoint_every=1, force=True, lanes=True)
    assert "resumed from step 3/6" in lines and not folder.exists()
    for c in (a, b):
        for name, value in reference[c].items():
            np.testing.assert_allclose(runner.load(S, c)[name], value, rtol=1e-4, atol=1e-6, err_msg=name)


def test_hyperteacher_split_alone_and_beside_its_sibling_store_the_same_bytes(store, monkeypatch, stored_bytes):
    """The case of the issue: the random split trained alone and beside its non-compositional sibling (one program
    per config)."""
    monkeypatch.setenv("COMPGEN_LANES", "0")
    cfg = make_config(HT.SECTION, "smoke", "hnet_linear", outer_steps=6, eval_every=3)
    sibling = dataclasses.replace(cfg, split="non_compositional")
    dispatch.train_or_load(HT.SECTION, [cfg], backend=backends.Workers(1), log=lambda _: None)
    alone = stored_bytes(HT.SECTION, cfg)
    dispatch.train_or_load(HT.SECTION, [sibling, cfg], force=True, backend=backends.Workers(1), log=lambda _: None)
    assert stored_bytes(HT.SECTION, cfg) == alone


def test_a_run_whose_updates_stay_non_finite_stops_and_is_not_stored(store, tiny):
    cfg = tiny(outer_lr=1e30, outer_steps=120, eval_every=60)  # Adam's step of 1e30 overflows the parameters
    lines = []
    with pytest.raises(runner.TrainingDiverged, match=r"diverged at step .*outer_lr"):
        dispatch.train_or_load(S, [cfg], backend=backends.Workers(1), log=lines.append)
    assert runner.load(S, cfg) is None


def test_a_run_whose_loss_explodes_is_stopped_and_not_stored(store, tiny):
    """inner_lr=1e12: the updates stay finite while the loss reaches ~1e22; it was stored as a result."""
    cfg = tiny(inner_lr=1e12, outer_steps=120, eval_every=60)
    with pytest.raises(runner.TrainingDiverged, match=r"diverged at step 60 .*training loss reached .*bound 1e\+06"):
        dispatch.train_or_load(S, [cfg], backend=backends.Workers(1), log=lambda _: None)
    assert runner.load(S, cfg) is None


def test_a_loss_that_turns_nan_is_divergence_a_degenerate_metric_is_not(tiny):
    a, b = tiny(seeds=(1,)), tiny(seeds=(2, 3), masks="0;1", distribution="continuous")
    diverged = {}
    check = runner.divergence_check(S, [a, b], diverged)
    steps = {"streak": np.zeros((1, 3)), "loss": np.full((1, 3), 0.5)}
    first = {"loss": np.array([[0.2, np.nan]] * 3), "alignment": np.array([0.2, 0.3, 0.4])}
    check(steps, 10, {"loss": np.array([[0.1, np.nan]] * 3), "alignment": np.array([0.5, np.nan, 0.7])}, first)
    assert diverged == {}  # a loss without a value from the start (an empty set), an alignment lost: no divergence
    check(
        steps,
        20,
        {"loss": np.array([[0.1, np.nan], [np.inf, np.nan], [0.1, np.nan]]), "alignment": first["alignment"]},
        first,
    )
    assert list(diverged) == [b] and "seed 2: its evaluated loss is no longer finite" in diverged[b]
    with pytest.raises(runner.TrainingDiverged):
        check({**steps, "loss": np.array([[np.inf, 0.5, 0.5]])}, 30, None, None)
    assert list(diverged) == [b, a]


def test_checkpoint_interval_is_checked_before_training(store, monkeypatch, tiny):
    monkeypatch.setenv("COMPGEN_CHECKPOINT_EVERY", "abc")
    with pytest.raises(params.ParameterError, match="COMPGEN_CHECKPOINT_EVERY"):
        dispatch.train_or_load(S, [tiny()], backend=backends.Workers(1), log=lambda _: None)
    monkeypatch.delenv("COMPGEN_CHECKPOINT_EVERY")
    with pytest.raises(params.ParameterError, match="checkpoint_every"):
        backends.Workers(1, checkpoint_every=-5)


def test_a_program_compiles_its_training_chunk_once_for_every_config_of_its_shape(tiny):
    """Configs that differ only in their data (masks, distribution, seeds; run arrays of equal shapes) share one
    compiled chunk: the outer step is traced once however many of them run and however often the chunk is called."""
    traces = []

    def counted_step(cfg, run, state, mesh=None):
        traces.append(cfg)
        return S.outer_step(cfg, run, state, mesh)

    traced = dataclasses.replace(S, name="teacher_student_trace_count", outer_step=counted_step)
    configs = [tiny(), tiny(masks="1;01;0", distribution="continuous"), tiny(seeds=(7, 8))]
    for cfg in configs:
        program = runner.program(traced, cfg)
        assert program is runner.program(traced, configs[0])
        runs = traced.run_arrays([cfg])
        state = program.init(runs)
        for _ in range(2):
            state, _ = program.steps(runs, state, 3)
    assert len(traces) == 1
    assert runner.program(traced, tiny(hidden_factor=2)) is not runner.program(traced, configs[0])  # another shape


def test_a_stored_run_says_where_its_wall_time_went(store, tiny):
    cfg = tiny(seeds=(103,))
    dispatch.train_or_load(S, [cfg], backend=backends.Workers(1), log=lambda _: None)
    prov = results.Store.default().load(S, cfg)[1].provenance
    seconds = prov["seconds"]
    assert set(seconds) == {"wall", "compile", "setup", "train", "evaluate"}
    assert seconds["wall"] == prov["wall_time_s"] and min(seconds.values()) >= 0
    parts = sum(v for k, v in seconds.items() if k != "wall")
    assert 0.7 * seconds["wall"] <= parts <= seconds["wall"] + 0.01


def test_a_configs_xla_level_reaches_its_programs_and_separates_them(tiny):
    """``xla_opt_level`` becomes the XLA compile option of the config's programs (a CPU's choice when None,
    compgen.devices.resolve): configs that differ in it are different programs, each training to finite numbers."""
    fast, default = tiny(xla_opt_level=1), tiny(xla_opt_level=3)
    assert section.compiler_options(fast) == {"xla_backend_optimization_level": 1}
    assert section.compiler_options(devices.resolve(S, tiny(), backend="cpu")) == section.compiler_options(fast)
    assert section.compiler_options(devices.resolve(S, tiny(), backend="gpu")) is None
    assert runner.program(S, fast) is not runner.program(S, default)
    for cfg in (fast, default):
        history, _ = runner.train(S, cfg, log=lambda _: None)
        assert np.isfinite(history["steps"]["loss"]).all()
    with pytest.raises(params.ParameterError, match="xla_opt_level"):
        tiny(xla_opt_level=4)


# --------------------------------------------------------------------------------------------- faults

CHILD = """
import json, sys
from compgen import backends, dispatch
from compgen.experiments import teacher_student as ts
from compgen.section import make_config

configs = [make_config(ts.SECTION, "smoke", **fields) for fields in json.loads(sys.argv[1])]
backend = backends.Workers(checkpoint_every=int(sys.argv[2]))
dispatch.train_or_load(ts.SECTION, configs, backend=backend, log=lambda line: print(line, flush=True))
"""


def _child(fields: list, store, checkpoint_every=0, **env):
    env = {**os.environ, "COMPGEN_RESULTS": str(store), **env}
    env.pop("COMPGEN_CHECKPOINTS", None)
    args = [sys.executable, "-c", CHILD, json.dumps(fields), str(checkpoint_every)]
    return subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def test_two_processes_asked_for_the_same_config_train_it_once(tmp_path, tiny_fields):
    fields = [{**tiny_fields, "outer_steps": 600, "eval_every": 60}]
    children = [_child(fields, tmp_path / "store", COMPGEN_WORKERS="1") for _ in range(2)]
    outputs = [child.communicate(timeout=600)[0] for child in children]
    assert [child.returncode for child in children] == [0, 0], outputs
    assert sum(out.count("[train]") for out in outputs) == 1, outputs
    other = next(out for out in outputs if "[train]" not in out)
    assert "is being trained by another process" in other or "[results] reusing" in other, other
    assert list((tmp_path / "store").rglob("*.lock")) == []


def test_storage_lock_makes_a_second_holder_wait(tmp_path):
    path, order = tmp_path / "x.lock", []
    with storage.lock(path, lambda: order.append("waited")):
        child = subprocess.Popen(
            [
                sys.executable,
                "-c",
                f"from compgen import storage\nwith storage.lock({str(path)!r}, lambda: "
                "print('waiting', flush=True)):\n    print('acquired', flush=True)",
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert child.stdout.readline().strip() == "waiting"
        time.sleep(0.5)
        assert child.poll() is None  # still waiting
    assert child.communicate(timeout=60)[0].strip() == "acquired" and order == []
    assert not path.exists()


def test_an_unusable_store_or_checkpoint_folder_fails_before_training(tmp_path, monkeypatch, tiny):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    lines, cfg = [], tiny()
    for variable, path in (("COMPGEN_RESULTS", blocker), ("COMPGEN_RESULTS", blocker / "sub")):
        monkeypatch.setenv(variable, str(path))
        with pytest.raises(params.ParameterError, match=f"{variable}: cannot write in .*a-file is a file"):
            dispatch.train_or_load(S, [cfg], backend=backends.Workers(1), log=lines.append)
    monkeypatch.setenv("COMPGEN_RESULTS", str(tmp_path / "store"))
    monkeypatch.setenv("COMPGEN_CHECKPOINTS", str(blocker))
    with pytest.raises(params.ParameterError, match="COMPGEN_CHECKPOINTS: .*a-file is a file"):
        dispatch.train_or_load(S, [cfg], backend=backends.Workers(1, checkpoint_every=1), log=lines.append)
    assert not any("[train]" in line for line in lines)
    dispatch.train_or_load(S, [cfg], backend=backends.Workers(1), log=lines.append)  # no checkpoints: no folder
    dispatch.train_or_load(S, [cfg], backend=backends.Workers(1, checkpoint_every=1), log=lines.append)  # stored


READ_ONLY_CHILD = """
import json, sys
from compgen import backends, dispatch, params, section
from compgen.experiments import teacher_student as ts
tiny = json.loads(sys.argv[1])
lines = []
config = section.make_config(ts.SECTION, "smoke", **tiny)
dispatch.train_or_load(ts.SECTION, [config], backend=backends.Workers(1), log=lines.append)
print("trained" if any("[train]" in line for line in lines) else "loaded")
if sys.argv[2:] == ["first"]:
    sys.exit(0)
try:
    other = section.make_config(ts.SECTION, "smoke", **{**tiny, "outer_steps": 3})
    dispatch.train_or_load(ts.SECTION, [other], backend=backends.Workers(1), log=lines.append)
    print("trained")
except params.ParameterError as error:
    print("refused:", error)
"""


def test_a_read_only_store_loads_what_it_holds_and_refuses_a_new_run_before_training(tiny_fields):
    """The store's folders made read-only, written to by a process that really cannot write there: an unprivileged
    user (``setpriv``) when the tests run as root, who writes anywhere (CI does), else this user."""
    tiny = {**tiny_fields, "seeds": [100]}
    with tempfile.TemporaryDirectory() as root:
        os.chmod(root, 0o755)  # traversable by the unprivileged user
        store = Path(root) / "store"
        env = {**os.environ, "COMPGEN_RESULTS": str(store), "HOME": root, "MPLCONFIGDIR": root}
        env.pop("JAX_COMPILATION_CACHE_DIR", None)
        env.pop("COMPGEN_CHECKPOINTS", None)
        command = [sys.executable, "-c", READ_ONLY_CHILD, json.dumps(tiny)]
        first = subprocess.run([*command, "first"], env=env, capture_output=True, text=True, timeout=300)
        assert first.stdout.split("\n")[0] == "trained", first.stdout + first.stderr
        for folder in (store, store / S.name):
            folder.chmod(0o555)
        if os.geteuid() == 0:
            command = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *command]
        second = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
        for folder in (store, store / S.name):
            folder.chmod(0o755)
    lines = second.stdout.splitlines()
    assert lines[0] == "loaded", second.stdout + second.stderr
    assert lines[1].startswith("refused: COMPGEN_RESULTS: cannot write in") and "Permission denied" in lines[1]
