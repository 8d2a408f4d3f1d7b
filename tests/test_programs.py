"""A run's key is what it computes: its lowered programs, inputs, config and libraries, not the source that wrote
them. A pure refactor (a helper renamed, a function moved to another module) keeps the key; a constant changed inside
a step changes it."""

import dataclasses
import importlib
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from compgen import catalog, params, programs, section
from compgen.section import Preset, Section


@dataclasses.dataclass(frozen=True)
class Toy(params.Config):
    size: int = 3
    lr: float = 0.1
    outer_steps: int = 10
    eval_every: int = 5
    seeds: tuple = (0, 1)


def _toy_section(loss, name="toy"):
    """A section whose step descends ``loss(w, x)`` on a fixed input."""

    def run_arrays(configs):
        seeds = [s for c in configs for s in c.seeds]
        return {"x": np.stack([np.arange(configs[0].size, dtype=np.float32) + s for s in seeds])}

    def init(cfg, run):
        return {"w": jnp.zeros(cfg.size)}

    def outer_step(cfg, run, state, mesh=None):
        value, grad = jax.value_and_grad(loss)(state["w"], run["x"])
        return {"w": state["w"] - cfg.lr * grad}, {"loss": value, "streak": jnp.int32(0)}

    def evaluate(cfg, run, state):
        return {"loss": loss(state["w"], run["x"])}

    return Section(
        name=name,
        config=Toy,
        presets={"paper": Preset("the toy's")},
        run_arrays=run_arrays,
        init=init,
        outer_step=outer_step,
        evaluate=evaluate,
        progress=lambda *a: "",
        label=lambda c: "toy",
        flops_per_step=lambda c: 1.0,
    )


def _half_square(d):
    return 0.5 * jnp.sum(d**2)


def loss_a(w, x):
    return _half_square(w - x)


@jax.jit
def _renamed_jitted_helper(d):  # a helper under another name, compiled as a function of its own
    return 0.5 * jnp.sum(d**2)


def loss_b(w, x):
    return _renamed_jitted_helper(w - x)


@jax.jit
def _jitted_helper(d):
    return 0.5 * jnp.sum(d**2)


def loss_jitted(w, x):
    return _jitted_helper(w - x)


def loss_changed(w, x):
    return 0.25 * jnp.sum((w - x) ** 2)  # the constant 0.5 changed


def test_a_renamed_or_moved_helper_keeps_the_key_and_a_changed_constant_changes_it(tmp_path, monkeypatch):
    cfg = Toy()
    (tmp_path / "moved_helpers.py").write_text(
        "import jax.numpy as jnp\n\ndef half_square(d):\n    return 0.5 * jnp.sum(d**2)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    moved = importlib.import_module("moved_helpers")

    def key(loss):  # the process's cache is per section and shape (a section's code is fixed in a process): cleared
        programs._PROGRAMS.clear()
        return programs.run_key(_toy_section(loss), cfg)

    keys = {
        name: key(loss)
        for name, loss in {
            "local helper": loss_a,
            "moved to another module": lambda w, x: moved.half_square(w - x),
            "inlined": lambda w, x: 0.5 * jnp.sum((w - x) ** 2),
            "changed constant": loss_changed,
        }.items()
    }
    assert len(set(list(keys.values())[:3])) == 1, keys
    assert keys["changed constant"] != keys["local helper"]
    sys.modules.pop("moved_helpers", None)


def test_function_names_inside_a_program_do_not_enter_the_key():
    cfg = Toy()
    one = programs.program_text(_toy_section(loss_jitted), cfg)
    other = programs.program_text(_toy_section(loss_b), cfg)
    assert "_jitted_helper" not in one and one == other


def test_the_key_follows_the_config_and_inputs_not_the_device_knobs():
    sec = catalog.SECTIONS["teacher_student"]
    cfg = section.figure_configs(sec, "fig2d", "smoke")[0]
    base = programs.run_key(sec, cfg)
    assert programs.run_key(sec, dataclasses.replace(cfg, xla_opt_level=2)) == base  # a device's choice
    assert programs.run_key(sec, dataclasses.replace(cfg, seeds=(7,))) != base  # another input
    assert programs.run_key(sec, dataclasses.replace(cfg, eval_every=10)) != base  # another history
    assert programs.run_key(sec, dataclasses.replace(cfg, inner_lr=0.5)) != base  # another program


def test_the_cache_keeps_keys_under_the_source_fingerprint(tmp_path, monkeypatch):
    sec = catalog.SECTIONS["teacher_student"]
    cfg = section.figure_configs(sec, "fig2d", "smoke")[0]
    cache = programs.KeyCache(tmp_path / "keys.json")
    key = cache.key(sec, cfg)
    calls = []
    monkeypatch.setattr(programs, "run_key", lambda *a: calls.append(a) or "recomputed")
    assert programs.KeyCache(tmp_path / "keys.json").key(sec, cfg) == key and calls == []
    (tmp_path / "keys.json").write_text("[damaged")
    assert programs.KeyCache(tmp_path / "keys.json").key(sec, cfg) == "recomputed"


@pytest.mark.parametrize("text", ["module @jit_f {\n  func.func public @main() {\n  call @helper_1()", "@a @b @a"])
def test_normalise_numbers_symbols_by_first_appearance(text):
    out = programs.normalise(text)
    assert "@jit_f" not in out and "helper" not in out
    assert programs.normalise(text.replace("helper_1", "other").replace("@b", "@c")) == out
