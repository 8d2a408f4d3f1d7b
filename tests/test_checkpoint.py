"""Checkpoints: atomic verified files, fallback to the previous one, and resuming a killed run exactly."""

import json
import os
import signal
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from compgen import checkpoint, results, runner
from compgen.experiments import teacher_student as ts
from compgen.section import make_config


def _state(seed):
    key = jax.random.key(seed)
    return {"w": jax.random.normal(key, (3, 2)), "count": jnp.int32(seed), "key": jax.random.split(key, 3)}


def test_keeps_the_last_two_and_falls_back_from_a_truncated_one(tmp_path):
    lines = []
    saver = checkpoint.Checkpointer(tmp_path, every=1, log=lines.append)
    for done in (1, 2, 3):
        progress = {
            "done": done,
            "steps": [{"loss": np.full((done, 3), done, np.float32)}],
            "evals": [{"acc": np.ones(3)}] * done,
            "eval_steps": list(range(done)),
        }
        saver.save(_state(done), progress)
    assert [p.name for p in saver.paths()] == ["step-0000000003.ckpt", "step-0000000002.ckpt"]
    newest = saver.paths()[0]
    newest.write_bytes(newest.read_bytes()[:-100])  # as if the disk filled up while writing
    state, progress = saver.restore(_state(0))
    assert any("ignoring step-0000000003.ckpt" in line for line in lines)
    assert progress["done"] == 2 and progress["eval_steps"] == [0, 1] and len(progress["evals"]) == 2
    expected = _state(2)
    assert np.array_equal(state["w"], expected["w"]) and int(state["count"]) == 2
    assert jax.dtypes.issubdtype(state["key"].dtype, jax.dtypes.prng_key)
    assert np.array_equal(jax.random.key_data(state["key"]), jax.random.key_data(expected["key"]))
    assert checkpoint.Checkpointer(tmp_path / "none").restore(_state(0)) is None


def _chunk(state, n):
    """A toy training loop: a random walk driven by the state's key; metrics (n, 2)."""

    def step(s):
        key, sub = jax.random.split(s["key"])
        x = s["x"] + jax.random.normal(sub, (2,))
        return {"x": x, "key": key}, {"x": x}

    return jax.lax.scan(lambda s, _: step(s), state, None, length=n)


def test_run_steps_resumes_with_identical_history(tmp_path):
    init = {"x": jnp.zeros(2), "key": jax.random.key(0)}
    evaluate = lambda s: {"norm": jnp.linalg.norm(s["x"])}
    reference = runner.run_steps(_chunk, init, 10, 2, runner.Hooks(evaluate, log=lambda _: None))

    calls = []

    def interrupted(state, n):
        calls.append(n)
        if len(calls) == 4:
            raise KeyboardInterrupt  # a kill after the third chunk (and its checkpoint)
        return _chunk(state, n)

    saver = checkpoint.Checkpointer(tmp_path, every=1, log=lambda _: None)
    with pytest.raises(KeyboardInterrupt):
        runner.run_steps(interrupted, init, 10, 2, runner.Hooks(evaluate, log=lambda _: None, saver=saver))
    lines = []
    resumed = runner.run_steps(_chunk, init, 10, 2, runner.Hooks(evaluate, log=lines.append, saver=saver))
    assert "resumed from step 6/10" in lines
    for a, b in zip(jax.tree.leaves(reference), jax.tree.leaves(resumed)):
        a, b = (jax.random.key_data(x) if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key) else x for x in (a, b))
        assert np.array_equal(a, b)


# A teacher-student run small enough to compile in seconds: 3 chunks of 2 steps, 3 seeds.
TINY = dict(
    masks="0;1",
    n_modules=2,
    n_in=4,
    teacher_hidden=4,
    n_out=2,
    hidden_factor=1,
    module_factor=1,
    outer_steps=6,
    eval_every=2,
    inner_steps=2,
    meta_batch=2,
    batch=4,
    eval_tasks=4,
    eval_inputs=8,
    seeds=(100, 101, 102),
)

CHILD = """
import json, os, signal, sys
from compgen import results, runner
from compgen.experiments import teacher_student as ts
from compgen.section import make_config

def log(line):
    print(line, flush=True)
    if sys.argv[1] == "kill" and line.startswith("[checkpoint] saved"):
        os.kill(os.getpid(), signal.SIGKILL)

config = make_config(ts.SECTION, "smoke", **json.loads(sys.argv[2]))
runner.train_and_store(ts.SECTION, [config], results.Store.default(), log, checkpoint_every=1)
"""


def test_killed_training_resumes_with_identical_results(tmp_path, monkeypatch):
    store = tmp_path / "store"
    env = {**os.environ, "COMPGEN_RESULTS": str(store)}
    env.pop("COMPGEN_CHECKPOINTS", None)
    args = [sys.executable, "-c", CHILD]
    killed = subprocess.run(args + ["kill", json.dumps(TINY)], env=env, capture_output=True, text=True, timeout=600)
    assert killed.returncode == -signal.SIGKILL, killed.stdout + killed.stderr
    config = make_config(ts.SECTION, "smoke", **TINY)
    monkeypatch.setenv("COMPGEN_RESULTS", str(store))
    monkeypatch.delenv("COMPGEN_CHECKPOINTS", raising=False)
    assert results.Store.default().load(ts.SECTION, config) is None
    folder = results.Store.default().checkpoint_dir(ts.SECTION, config)
    saved = sorted(p.name for p in folder.iterdir())
    assert saved == ["step-0000000002.ckpt"], saved
    # A newer checkpoint whose write was cut short (as a non-atomic writer could leave): must be skipped.
    (folder / "step-0000000004.ckpt").write_bytes((folder / saved[0]).read_bytes()[:1000])

    resumed = subprocess.run(args + ["resume", json.dumps(TINY)], env=env, capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "ignoring step-0000000004.ckpt" in resumed.stdout and "resumed from step 2/6" in resumed.stdout
    assert not folder.exists()  # removed once the results are stored
    arrays, _ = results.Store.default().load(ts.SECTION, config)

    monkeypatch.setenv("COMPGEN_RESULTS", str(tmp_path / "reference"))
    runner.train_and_store(ts.SECTION, [config], results.Store.default(), log=lambda _: None, checkpoint_every=0)
    reference, _ = results.Store.default().load(ts.SECTION, config)
    assert sorted(arrays) == sorted(reference)
    for name in reference:
        assert np.array_equal(arrays[name], reference[name], equal_nan=True), name


def test_a_save_stopped_mid_write_leaves_no_temporary_file(tmp_path, monkeypatch):
    """A worker told to stop (SIGTERM raises SystemExit) while it writes a checkpoint leaves the previous ones and
    no temporary file."""
    saver = checkpoint.Checkpointer(tmp_path, every=1)
    progress = {"done": 1, "steps": [{"loss": np.ones((1, 3))}], "evals": [], "eval_steps": []}
    saver.save(_state(1), progress)

    def stopped(_fd):
        raise SystemExit(143)

    monkeypatch.setattr(os, "fsync", stopped)
    with pytest.raises(SystemExit):
        saver.save(_state(2), {**progress, "done": 2})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step-0000000001.ckpt"]
