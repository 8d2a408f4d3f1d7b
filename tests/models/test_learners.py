"""A learner defined outside the library (tests/own_learner.py) runs like the paper's: by import path or by a
registered name, through configs, the command line, sweep files, worker processes and the results store."""

import importlib
import shutil
import sys
from pathlib import Path

import jax
import numpy as np
import pytest

from compgen import backends, catalog, cli, dispatch, models, results, sweeps
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
        ("own_learner:HEADS", "HEADS must be a Learner or a build\\(cfg\\) function defined in own_learner"),
        ("own_learner:Model", "Model must be a Learner or a build\\(cfg\\) function defined in own_learner"),
        ("os:system", "system must be a Learner or a build\\(cfg\\) function defined in os"),
        ("builtins:print", "print must be a Learner or a build\\(cfg\\) function defined in builtins"),
        ("own_learner:gated_heads:x", "import path must be package.module:learner"),
        ("", "model must be one of .* got ''"),
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


def test_a_learner_registered_by_name_is_keyed_by_its_code_and_trains_here(store, importable):
    own_learner = importlib.import_module("own_learner")
    models.register("gated", own_learner.gated_heads, label="Gated heads")
    cfg = make_config(S, "smoke", "gated", **TINY)
    assert S.fingerprint_of(cfg) != S.fingerprint  # its module's code joins the key (the same module as OWN's)
    assert not models.known_elsewhere("gated") and models.known_elsewhere(OWN) and models.known_elsewhere("maml")
    lines = []
    (output,) = dispatch.train_or_load(S, [cfg], results.Store(store), backend=backends.Workers(), log=lines.append)
    assert any("Workers -> Local" in line for line in lines)
    assert np.isfinite(output["steps/loss"]).all() and output["eval/accuracy"].shape[:2] == (1, 2)


def test_the_command_line_and_a_sweep_file_train_a_learner_named_by_import_path(store, importable, tmp_path):
    overrides = [f"--set={k}={v}" for k, v in {**TINY, "seeds": "[3]", "model": OWN}.items()]
    assert cli.main(["run", "hyperteacher", "fig3b", "--preset", "smoke", *overrides]) == 0
    store = results.Store(store)
    entries = store.entries("hyperteacher")
    assert len(entries) == 2 and {m.config["model"] for _, m in entries} == {OWN}
    sweep = tmp_path / "own.toml"
    fixed = "\n".join(f"{k} = {v!r}".replace("'", '"') for k, v in {**TINY, "model": OWN, "seeds": [4]}.items())
    sweep.write_text(f'section = "hyperteacher"\npreset = "smoke"\n[fixed]\n{fixed}\n[grid]\nsplit = ["random"]\n')
    report = sweeps.run_sweep(sweep, backends.Local(), log=lambda line: None)
    assert len(store.entries("hyperteacher")) == 3, report


def test_a_worker_that_cannot_import_the_learner_fails_in_one_line_naming_it(store, learner_copy, monkeypatch):
    monkeypatch.delenv("PYTHONPATH", raising=False)  # the copy is importable here, not in the worker
    # two configs, so that two workers run whatever cores this process may use (one config on one usable core would
    # train here, where the copy imports)
    cfgs = [make_config(S, "smoke", "copied_learner:gated_heads", **{**TINY, "seeds": [s]}) for s in (3, 4)]
    with pytest.raises(ParameterError, match="model 'copied_learner:gated_heads': cannot import copied_learner"):
        dispatch.train_or_load(S, cfgs, results.Store(store), backend=backends.Workers(2), log=lambda line: None)


# ------------------------------------------------------------------------ a user's learner is keyed by what it computes

NOTEBOOK = """
import jax
import jax.numpy as jnp
from compgen.models import Model

HEADS = 3


def mix(h, w):
    return h @ w


def build(cfg, scale=1.0):
    def init(key):
        return {"w": jax.random.normal(key, (HEADS, cfg.n_in, cfg.n_out)) * scale}

    def head(meta, fast, x):
        return mix(x, jnp.einsum("k,kij->ij", jax.nn.softmax(fast), meta["w"]))

    return Model("notebook", init, lambda meta: jnp.zeros(HEADS), lambda meta, x: x, head)
"""


def _notebook(source=NOTEBOOK, **assign):
    """The namespace of a notebook that ran ``source`` (module ``__main__``, no file), then ``assign``."""
    namespace = {"__name__": "__main__"}
    exec(compile(source, "<cell>", "exec"), namespace)
    namespace.update(assign)
    return namespace


def _key(build, name="keyed"):
    models.register(name, build, replace=True)
    return S.fingerprint_of(make_config(S, "smoke", name, **TINY))


def test_a_notebook_learner_is_keyed_by_the_constants_partials_and_helpers_it_computes_with():
    import functools

    notebook = _notebook()
    base = _key(notebook["build"])
    assert base != S.fingerprint and _key(_notebook()["build"]) == base  # the same code: the same key
    notebook["HEADS"] = 4  # a module-level constant, changed in another cell
    assert _key(notebook["build"]) != base
    assert _key(functools.partial(_notebook()["build"], scale=2.0)) not in (base, _key(_notebook()["build"]))
    assert _key(_notebook(mix=lambda h, w: h @ w + 1.0)["build"]) != base  # a helper it calls
    commented = NOTEBOOK.replace("def mix(h, w):", "def mix(h, w):\n    '''h (N, n_in) times w.'''  # a comment")
    assert _key(_notebook(commented)["build"]) == base  # comments and docstrings compute nothing
    assert S.fingerprint_of(make_config(S, "smoke", "hnet_linear", **TINY)) == S.fingerprint  # the paper's: unchanged


def test_a_packaged_learner_is_keyed_by_helpers_and_constants_of_any_module_or_package(tmp_path, monkeypatch):
    """A learner whose ``build`` imports a helper module of its package inside the function, a constant imported by
    name from a sibling module, and a function of another top-level package: editing any of them gives a new key."""
    files = {
        "pkg/__init__.py": "",
        "pkg/sizes.py": "WIDTH = 2\n",
        "pkg/helpers.py": "def scale(x):\n    return 2.0 * x\n",
        "other/__init__.py": "",
        "other/ops.py": "import jax.numpy as jnp\n\ndef act(x):\n    return jnp.tanh(x)\n",
        "pkg/learner.py": (
            "import jax\nimport jax.numpy as jnp\nfrom compgen.models import Model\nfrom pkg.sizes import WIDTH\n"
            "from other.ops import act\n\n\ndef build(cfg):\n    from pkg import helpers\n\n"
            "    def init(key):\n        return jax.random.normal(key, (cfg.n_in, WIDTH, cfg.n_out))\n\n"
            "    def head(meta, fast, x):\n"
            "        return helpers.scale(act(jnp.einsum('ni,iwo,w->no', x, meta, fast)))\n\n"
            "    return Model('pkg', init, lambda meta: jnp.ones(WIDTH), lambda meta, x: x, head)\n"
        ),
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text(text)
    monkeypatch.syspath_prepend(str(tmp_path))

    def key():
        for cache in tmp_path.rglob("__pycache__"):  # an edit within the same second keeps the size: no stale bytecode
            shutil.rmtree(cache)
        for module in ("pkg", "pkg.sizes", "pkg.helpers", "other", "other.ops", "pkg.learner"):
            sys.modules.pop(module, None)
        return S.fingerprint_of(make_config(S, "smoke", "pkg.learner:build", **TINY))

    try:
        keys = [key()]
        for name, old, new in (
            ("pkg/helpers.py", "2.0 * x", "3.0 * x"),
            ("pkg/sizes.py", "WIDTH = 2", "WIDTH = 3"),
            ("other/ops.py", "jnp.tanh(x)", "jnp.sin(x)"),
        ):
            (tmp_path / name).write_text((tmp_path / name).read_text().replace(old, new))
            keys.append(key())
        assert len(set(keys)) == 4
        (tmp_path / "other/ops.py").write_text("# a comment\n" + (tmp_path / "other/ops.py").read_text())
        assert key() == keys[-1]
    finally:
        for module in ("pkg", "pkg.sizes", "pkg.helpers", "other", "other.ops", "pkg.learner"):
            sys.modules.pop(module, None)


def test_an_edited_notebook_learner_trains_again_instead_of_loading_its_old_run(store):
    notebook, lines = _notebook(), []
    models.register("edited", notebook["build"], replace=True)
    cfg = lambda: make_config(S, "smoke", "edited", **TINY)
    dispatch.train_or_load(S, [cfg()], results.Store(store), log=lines.append)
    notebook["HEADS"] = 5
    lines.clear()
    (output,) = dispatch.train_or_load(S, [cfg()], results.Store(store), log=lines.append)
    assert not any("reusing" in line for line in lines) and len(results.Store(store).entries("hyperteacher")) == 2
    assert np.isfinite(output["steps/loss"]).all()


# ----------------------------------------------------------------------- the registry refuses what it cannot honour


def _gated(cfg):
    return importlib.import_module("own_learner").gated_heads(cfg)


@pytest.mark.parametrize(
    "call, expected",
    [
        (lambda: models.register("anil", _gated), "'anil' is the library's and cannot be registered again"),
        (lambda: models.register("anil", _gated, replace=True), "'anil' is the library's"),
        (lambda: models.register("", _gated), "a learner's name must be a non-empty string, got ''"),
        (lambda: models.register("my learner", _gated), "no blanks.*got 'my learner'"),
        (lambda: models.register("pkg:mine", _gated), "':' marks an import path.*got 'pkg:mine'"),
        (lambda: models.register("mine", None), "learner 'mine': build must be a function build\\(cfg\\), got None"),
        (lambda: models.register("mine", _gated, kind="other"), "kind must be one of \\('fewshot', 'incontext'\\)"),
        (lambda: models.register("mine", _gated, sized_by="hidden"), "sized_by must be a tuple of field names"),
    ],
)
def test_the_registry_refuses_names_and_builds_it_cannot_honour_in_one_line(importable, call, expected):
    with pytest.raises(ParameterError, match=expected) as error:
        call()
    assert "\n" not in str(error.value)


def test_registering_a_name_again_needs_replace_unless_it_is_the_same_definition(importable):
    first = models.register("twice", _gated, replace=True)
    assert models.register("twice", _gated) is not first  # the same function again (a notebook cell run twice)
    with pytest.raises(ParameterError, match="'twice' is registered already.*replace=True"):
        models.register("twice", _notebook()["build"])
    assert models.register("twice", _notebook()["build"], replace=True).build is not _gated


# --------------------------------------------------------------------------- a learner's failure is one line naming it


def _build_raising(error):
    def build(cfg):
        raise error

    return build


def _returning(value):
    return lambda cfg: value


def _bad_head(n_out=None, dtype=None):
    def build(cfg):
        import jax.numpy as jnp

        model = importlib.import_module("own_learner").gated_heads(cfg)
        head = lambda meta, fast, h: jnp.zeros((h.shape[0], n_out or cfg.n_out), dtype or jnp.float32)
        return models.Model("bad", model.init, model.fast_init, model.features, head)

    return build


def _callback_head():
    """A head whose outputs come from the host through ``jax.pure_callback``: no derivative."""

    def build(cfg):
        import jax
        import jax.numpy as jnp
        import numpy as np

        model = importlib.import_module("own_learner").gated_heads(cfg)

        def head(meta, fast, h):
            out = jax.ShapeDtypeStruct((h.shape[0], cfg.n_out), jnp.float32)
            return jax.pure_callback(lambda a: np.zeros((a.shape[0], cfg.n_out), np.float32), out, h)

        return models.Model("callback", model.init, model.fast_init, model.features, head)

    return build


def _random_build():
    """A build that draws a constant anew each time: its programs differ from one build to the next."""

    def build(cfg):
        import jax.numpy as jnp
        import numpy as np

        model = importlib.import_module("own_learner").gated_heads(cfg)
        offset = float(np.random.default_rng().normal())
        head = lambda meta, fast, h: model.head(meta, fast, h) + jnp.float32(offset)  # noqa: E731
        return models.Model("random", model.init, model.fast_init, model.features, head)

    return build


@pytest.mark.parametrize(
    "build, expected",
    [
        (
            _callback_head(),
            "the gradient of its outputs in its parameters \\(the meta-learning step needs one\\) raised",
        ),
        (_random_build(), "two builds of it for the same config lower to different programs"),
    ],
)
def test_a_learner_that_cannot_be_differentiated_or_keyed_is_refused_when_it_is_checked(importable, build, expected):
    models.register("unkeyable", build, replace=True)
    with pytest.raises(ParameterError, match=f"model 'unkeyable': {expected}") as error:
        make_config(S, "smoke", "unkeyable", **TINY)
    assert "\n" not in str(error.value)


def test_a_learner_is_keyed_at_two_sizes_of_support_so_a_branch_on_its_size_changes_the_key(importable):
    """Two learners that agree on 3 support points and differ on 5 (a branch on the number of points) have different
    keys: the probes cover two sizes."""

    def branching(scale_on_five):
        def build(cfg):
            model = importlib.import_module("own_learner").gated_heads(cfg)

            def head(meta, fast, h):
                out = model.head(meta, fast, h)
                return out * scale_on_five if h.shape[0] == 5 else out

            return models.Model("branching", model.init, model.fast_init, model.features, head)

        return build

    assert models.learners.PROBE_SIZES[0][0] == 3 and models.learners.PROBE_SIZES[1][0] == 5
    assert _key(branching(1.0), "branch-a") != _key(branching(2.0), "branch-b")


@pytest.mark.parametrize(
    "build, expected",
    [
        (_build_raising(RuntimeError("out of experts")), "build\\(cfg\\) raised RuntimeError: out of experts"),
        (_build_raising(KeyError("hidden")), "build\\(cfg\\) raised KeyError: 'hidden'"),
        (_build_raising(TypeError("takes 2 positional")), "build\\(cfg\\) raised TypeError: takes 2 positional"),
        (_returning(None), "build\\(cfg\\) must return a compgen.models.base.Model, got NoneType"),
        (_returning("a model"), "build\\(cfg\\) must return a compgen.models.base.Model, got str"),
        (_bad_head(n_out=7), "outputs must have shape \\(points, n_out\\) = \\(3, \\d+\\), got \\(3, 7\\)"),
        (_bad_head(dtype="int32"), "its outputs must be floating-point arrays, got dtype int32"),
    ],
)
def test_a_learners_failure_is_one_line_naming_it(importable, build, expected):
    models.register("failing", build, replace=True)
    with pytest.raises(ParameterError, match=f"model 'failing': {expected}") as error:
        make_config(S, "smoke", "failing", **TINY)
    assert "\n" not in str(error.value)


def test_a_module_that_exits_or_raises_on_import_is_reported_as_such(tmp_path, monkeypatch, capsys):
    (tmp_path / "exits_on_import.py").write_text("import sys\nsys.exit(3)\n")
    (tmp_path / "raises_on_import.py").write_text("raise RuntimeError('no GPU here')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ParameterError, match="importing exits_on_import exited \\(SystemExit 3\\)"):
        make_config(S, "smoke", "exits_on_import:build", **TINY)
    with pytest.raises(ParameterError, match="cannot import raises_on_import \\(RuntimeError: no GPU here\\)"):
        make_config(S, "smoke", "raises_on_import:build", **TINY)
    with pytest.raises(SystemExit) as status:
        cli.main(["show", "hyperteacher", "fig3b", "--preset", "smoke", "--set", "model=exits_on_import:b"])
    assert status.value.code == 2
    assert "exited (SystemExit 3)" in capsys.readouterr().err


@pytest.mark.parametrize("name", ["", "   ", "no_such_learner"])
def test_a_blank_or_unknown_learner_name_is_one_line_naming_the_choices(name):
    """What ``own_learner.py -p learner ''`` passes to ``models.get``: refused before anything is built."""
    with pytest.raises(ParameterError, match="model must be one of .*or an import path") as error:
        models.get(name)
    assert "\n" not in str(error.value)
