"""Where a run's time goes: compilation is counted once and taken out of the part it fell in."""

import contextlib
import time

import jax
import jax.numpy as jnp
import pytest

from compgen import timing


def test_covered_counts_overlapping_and_nested_spans_once():
    assert timing.covered([], 0.0, 10.0) == 0.0
    assert timing.covered([(1, 3), (2, 4), (2.5, 2.7)], 0.0, 10.0) == pytest.approx(3.0)  # union [1, 4]
    assert timing.covered([(1, 2), (5, 6)], 0.0, 10.0) == pytest.approx(2.0)
    assert timing.covered([(-5, 1), (9, 20), (30, 40)], 0.0, 10.0) == pytest.approx(2.0)  # clipped to [0, 10]


def test_a_first_call_is_compilation_and_a_second_is_not():
    f = jax.jit(lambda x: jnp.tanh(x @ x.T).sum())  # a fresh function: traced and compiled on its first call
    x = jnp.ones((64, 64))
    clock = timing.Stopwatch()
    with clock.measure("train"):
        f(x).block_until_ready()
    first = clock.seconds()
    assert first["compile"] > 0
    with clock.measure("train"):
        time.sleep(0.05)
        f(x).block_until_ready()
    second = clock.seconds()
    assert second["compile"] == first["compile"]  # nothing compiled the second time
    assert second["train"] - first["train"] >= 0.045  # the sleep (seconds are rounded to ms)
    assert set(second) == {"compile", "train"}


def test_the_parts_add_up_to_the_measured_time():
    """Each block's wall time is split between its part and compilation, none lost and none counted twice.

    Every block is timed from just outside it, so the time between blocks (which a loaded machine stretches)
    is no part of the comparison."""
    clock = timing.Stopwatch()
    walls = []

    @contextlib.contextmanager
    def timed():
        start = time.time()
        yield
        walls.append(time.time() - start)

    with timed(), clock.measure("setup"):
        jax.jit(lambda x: x * 3 + 1)(jnp.arange(5.0)).block_until_ready()
    with timed(), clock.measure("evaluate"):
        time.sleep(0.02)
    parts = clock.seconds()
    assert parts["compile"] > 0
    assert sum(parts.values()) <= sum(walls) + 0.002  # rounding to ms, three parts
    assert sum(parts.values()) == pytest.approx(sum(walls), abs=0.01)


def test_the_gemm_reading_is_the_median_of_several_taken_once(monkeypatch):
    readings = iter([90.0, 400.0, 310.0, 330.0, 320.0])  # a slow first reading, then steadier ones
    monkeypatch.setattr(timing, "jit_gflops", lambda *a, **k: next(readings))
    monkeypatch.setattr(timing, "_gemm_reading", [])
    assert timing.GEMM_READINGS == 5
    assert timing.gemm_gflops() == 320.0  # not the first reading, nor the mean
    assert timing.gemm_gflops() == 320.0  # taken once per process


def test_a_given_gemm_reading_is_kept(monkeypatch):
    monkeypatch.setattr(timing, "jit_gflops", lambda *a, **k: pytest.fail("a given reading is not measured again"))
    monkeypatch.setattr(timing, "_gemm_reading", [])
    assert timing.gemm_gflops(250.0) == 250.0
    assert timing.gemm_gflops(400.0) == 250.0  # the first reading stays
