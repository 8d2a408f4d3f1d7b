"""A learner defined outside the library (tests/own_learner.py) runs like the paper's: by import path or by a
registered name, through configs, the command line, sweep files, worker processes and the results store."""

import importlib
import shutil
import sys
from pathlib import Path

import jax
import numpy as np
import pytest

from compgen import catalog, cli, dispatch, models, results, sweeps
from compgen.experiments import hyperteacher as HT
from compgen.params import ParameterError
from compgen.section import figure_configs, make_config

TESTS = Path(__file__).resolve().parents[1]
OWN = "own_learner:gated_heads"
S = catalog.get("hyperteacher")
TINY = dict(outer_steps=2, eval_every=2, seeds=[3], eval_tasks=4, hidden=8, num_hidden=2)


@pytest.fixture
def learner_copy(tmp_path, monkeypatch):
    """A copy of own_learner.py as module ``copied_learner``, to be edited by the test."""
    path = tmp_path / "copied_learner.py"
    shutil.copy(TESTS / "own_learner.py", path)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield path
    sys.modules.pop("copied_learner", None)


def test_an_import_path_names_a_learner_that_trains_through_the_paper_sections_code(importable):
    cfg = make_config(S, "smoke", OWN, **TINY)
    assert cfg.model == OWN and models.get(OWN).label == "gated_heads"
    params_ = cfg.build_model().init(jax.random.key(0))
    assert models.param_count(cfg) == sum(leaf.size for leaf in jax.tree.leaves(params_))
    assert HT.flops_per_step(cfg) > HT.teacher_flops(cfg) > 0  # derived from XLA's count, no declaration
    assert "gated_heads (hidden 2x8)" in HT.label(cfg)


@pytest.mark.parametrize("section", ["hyperteacher", "preferences", "goals"])
def test_a_users_learner_builds_in_every_few_shot_section_with_derived_costs(importable, section):
    sec = catalog.get(section)
    cfg = make_config(sec, "smoke", OWN, hidden=8, num_hidden=2)
    model = cfg.build_model()
    assert model.name == "gated_heads" and models.param_count(cfg) > 0 and sec.flops_per_step(cfg) > 0
    assert models.known_elsewhere(OWN)  # worker processes and Ray tasks import it by its path


def test_a_bad_import_path_fails_in_one_line_naming_it(importable):
    for name, message in (
        ("no_such_package.mod:learner", "model 'no_such_package.mod:learner': cannot import no_such_package.mod"),
        ("own_learner:missing", "module own_learner has no attribute 'missing'"),
        ("own_learner:HEADS", "HEADS is neither a Learner nor a build"),
        ("nope", "model must be one of .* or an import path package.module:learner, got 'nope'"),
    ):
        with pytest.raises(ParameterError, match=message) as error:
            make_config(S, "smoke", name)
        assert "\n" not in str(error.value)


def test_a_figure_takes_a_users_learner_at_every_point_of_its_grid(importable):
    configs = figure_configs(S, "fig3b", "smoke", model=OWN)
    assert {c.model for c in configs} == {OWN} and {c.split for c in configs} == {"random", "non_compositional"}
    with pytest.raises(ParameterError, match="the experiment's models"):  # a paper learner the figure leaves out
        figure_configs(S, "fig3f", "smoke", model="anil")


def test_editing_a_users_learner_changes_its_runs_key_and_no_other(learner_copy):
    paper = make_config(S, "smoke", "hnet_linear", **TINY)
    own = lambda: make_config(S, "smoke", "copied_learner:gated_heads", **TINY)
    before = (S.fingerprint_of(paper), S.fingerprint_of(own()))
    assert before[0] == S.fingerprint and before[1] != S.fingerprint
    learner_copy.write_text(learner_copy.read_text().replace("HEADS = 3", "HEADS = 4"))
    importlib.reload(importlib.import_module("copied_learner"))
    after = (S.fingerprint_of(paper), S.fingerprint_of(own()))
    assert after[0] == before[0] and after[1] != before[1]


def test_a_learner_registered_as_a_partial_is_keyed_by_its_functions_module(learner_copy):
    """``functools.partial(build, ...)`` has no module of its own: its code is the code of ``build``'s module."""
    import functools

    copied = importlib.import_module("copied_learner")
    models.register("partial_gated", functools.partial(copied.gated_heads), label="Gated heads (partial)")
    code = models.code_of("partial_gated")
    assert code is not None and "HEADS = 3" in code
    cfg = make_config(S, "smoke", "partial_gated", **TINY)
    before = S.fingerprint_of(cfg)
    learner_copy.write_text(learner_copy.read_text().replace("HEADS = 3", "HEADS = 4"))
    importlib.reload(copied)
    assert S.fingerprint_of(cfg) != before
    library = models.register("partial_anil", functools.partial(models.get("anil").build), label="ANIL (partial)")
    assert models.is_library(library) and models.code_of("partial_anil") is None


def test_a_learner_registered_by_name_is_keyed_by_its_code_and_trains_here(store, importable):
    own_learner = importlib.import_module("own_learner")
    models.register("gated", own_learner.gated_heads, label="Gated heads")
    cfg = make_config(S, "smoke", "gated", **TINY)
    assert S.fingerprint_of(cfg) != S.fingerprint  # its module's code joins the key (the same module as OWN's)
    assert not models.known_elsewhere("gated") and models.known_elsewhere(OWN) and models.known_elsewhere("maml")
    lines = []
    (output,) = dispatch.train_or_load(S, [cfg], results.Store(store), backend="workers", log=lines.append)
    assert any("workers -> local" in line for line in lines)
    assert np.isfinite(output["steps/loss"]).all() and output["eval/accuracy"].shape[:2] == (1, 2)


def test_the_command_line_and_a_sweep_file_train_a_learner_named_by_import_path(store, importable, tmp_path):
    overrides = [f"--set={k}={v}" for k, v in {**TINY, "seeds": "[3]", "model": OWN}.items()]
    assert cli.main(["run", "hyperteacher", "fig3b", "--preset", "smoke", *overrides]) == 0
    store = results.Store(store)
    entries = store.entries("hyperteacher")
    assert len(entries) == 2 and {m["config"]["model"] for _, m in entries} == {OWN}
    sweep = tmp_path / "own.toml"
    fixed = "\n".join(f"{k} = {v!r}".replace("'", '"') for k, v in {**TINY, "model": OWN, "seeds": [4]}.items())
    sweep.write_text(f'section = "hyperteacher"\npreset = "smoke"\n[fixed]\n{fixed}\n[grid]\nsplit = ["random"]\n')
    report = sweeps.run_sweep(sweep, "local", log=lambda line: None)
    assert len(store.entries("hyperteacher")) == 3, report


def test_a_worker_that_cannot_import_the_learner_fails_in_one_line_naming_it(store, learner_copy, monkeypatch):
    monkeypatch.delenv("PYTHONPATH", raising=False)  # the copy is importable here, not in the worker
    cfg = make_config(S, "smoke", "copied_learner:gated_heads", **TINY)
    with pytest.raises(ParameterError, match="model 'copied_learner:gated_heads': cannot import copied_learner"):
        dispatch.train_or_load(S, [cfg], results.Store(store), backend="workers", workers=2, log=lambda line: None)


def _helper(x):
    return x + 1


def _unrelated(x):
    return x - 1


def _notebook_build(cfg):
    return _helper(cfg)


def test_a_notebook_learners_code_is_its_build_and_what_it_names():
    """In a notebook (``__main__``, no file) the key holds the source of ``build`` and of the functions it names."""
    from compgen.models import learners

    text = learners._namespace_source(_notebook_build)
    assert "def _notebook_build" in text and "def _helper" in text and "_unrelated" not in text
