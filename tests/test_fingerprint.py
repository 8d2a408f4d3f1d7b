"""The code fingerprint: it follows the code a section's step runs, ignores prose, and nothing outside it."""

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import jax
import pytest

from compgen import catalog, fingerprint, section

SECTIONS = tuple(catalog.SECTIONS)
# Code that never runs inside a training step: editing it must leave every stored run valid.
OUTSIDE = (
    "compgen.runner",
    "compgen.dispatch",
    "compgen.backends",
    "compgen.backends.workers",
    "compgen.backends.ray",
    "compgen.notebook",
    "compgen.catalog",
    "compgen.results",
    "compgen.storage",
    "compgen.checkpoint",
    "compgen.cli",
    "compgen.bench",
)


def test_prose_comments_and_presets_do_not_count_but_code_does():
    text = lambda source: fingerprint.source_code_text(textwrap.dedent(source))
    base = text('''
        """A module."""
        PRESETS = {"quick": 1}
        def f(x):
            """Twice x."""
            return 2 * x  # double
        ''')
    same = text('''
        """A module, described at more length."""
        PRESETS = {"quick": 2, "paper": 3}
        def f(x):
            """Two times x."""
            return 2 * x
        ''')
    other = text('''
        """A module."""
        PRESETS = {"quick": 1}
        def f(x):
            """Twice x."""
            return 3 * x
        ''')
    assert base == same != other


def test_the_text_is_the_same_on_every_python_version():
    """ast.dump differs between versions (3.12 adds ``type_params=[]``, 3.13 leaves out empty fields), which made a
    run stored under Python 3.12 invisible to 3.11; the text leaves out every empty field, so it is this on all."""
    assert fingerprint.source_code_text("def f(x: int = 1, *a, **k):\n    'doc'\n    return x\n") == (
        "Module(body=[FunctionDef(name='f', args=arguments(args=[arg(arg='x', annotation=Name(id='int', ctx=Load()))]"
        ", vararg=arg(arg='a'), kwarg=arg(arg='k'), defaults=[Constant(value=1)]), body=[Return(value=Name(id='x', "
        "ctx=Load()))])])"
    )


@pytest.mark.parametrize("name", SECTIONS)
def test_the_engine_store_and_figures_are_outside_every_section(name):
    closure = fingerprint.closure(catalog.get(name).module)
    assert not [m for m in closure if m in OUTSIDE or m.startswith(("compgen.figures", "compgen.sweeps"))], closure


def _executed_library_modules(fn) -> set:
    """The library modules whose Python code runs while ``fn()`` runs."""
    files = set()

    def profile(frame, event, _arg):
        caller = frame.f_back.f_code.co_filename if frame.f_back else ""
        if event == "call" and "monitoring" not in caller:  # JAX's compile-time listeners (compgen.timing) aside
            files.add(frame.f_code.co_filename)

    sys.setprofile(profile)
    try:
        fn()
    finally:
        sys.setprofile(None)
    package = fingerprint.PACKAGE.resolve()
    names = set()
    for f in files:
        path = Path(f).resolve()
        if path.is_relative_to(package) and path.suffix == ".py":
            parts = path.relative_to(package.parent).with_suffix("").parts
            names.add(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


@pytest.mark.parametrize("name", SECTIONS)
def test_every_module_a_training_step_runs_is_in_the_fingerprint(name):
    """Trace a smoke config of every model: its per-run arrays, initial state, outer step and evaluation, and check
    that every library module whose code ran is in the section's import closure (a module left out would let its
    edits go unseen)."""
    sec = catalog.get(name)
    configs = section.figure_configs(sec, sec.figures("smoke")[0], "smoke", models=sec.models or None)
    by_model = {getattr(c, "model", None): c for c in reversed(configs)}

    def trace():
        jax.clear_caches()  # inner jitted functions traced by earlier tests would not run their Python again
        for cfg in by_model.values():
            runs = sec.run_arrays([cfg])
            state = jax.eval_shape(lambda r, cfg=cfg: jax.vmap(lambda x: sec.init(cfg, x))(r), runs)
            step = lambda r, s, cfg=cfg: jax.vmap(lambda x, y: sec.outer_step(cfg, x, y))(r, s)
            jax.make_jaxpr(step)(runs, state)
            jax.make_jaxpr(lambda r, s, cfg=cfg: jax.vmap(lambda x, y: sec.evaluate(cfg, x, y))(r, s))(runs, state)

    executed = _executed_library_modules(trace)
    assert "compgen.meta" in executed or name == "teacher_student"  # the trace saw the learners' code
    missing = executed - set(fingerprint.closure(sec.module))
    assert not missing, f"{name}'s step runs code of {sorted(missing)}, which its fingerprint leaves out"


def test_editing_the_engine_or_figures_keeps_the_fingerprint_and_editing_the_step_changes_it(tmp_path):
    """On a copy of the library: an edit to the engine (runner.py, dispatch.py, backends/) or figures/ leaves every
    section's fingerprint (so its stored runs stay valid); an edit to meta.py changes every section's that
    meta-learns."""
    source = fingerprint.PACKAGE
    copy = tmp_path / "src" / "compgen"
    shutil.copytree(source, copy, ignore=shutil.ignore_patterns("__pycache__"))
    script = (
        "from compgen import fingerprint\n"
        f"print(' '.join(fingerprint.of_section(m) for m in {[s.module for s in catalog.SECTIONS.values()]!r}))"
    )

    def fingerprints():
        out = subprocess.run(
            [sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, env={"PYTHONPATH": "src"}
        )
        assert out.returncode == 0, out.stderr
        return out.stdout.split()

    before = fingerprints()
    assert before == [catalog.get(n).fingerprint for n in SECTIONS]
    engine = [copy / "runner.py", copy / "dispatch.py", *(copy / "backends").glob("*.py")]
    for path in (*engine, copy / "figures" / "__init__.py", copy / "results.py"):
        path.write_text(path.read_text() + "\n\ndef an_edit():\n    return 'a different progress line'\n")
    assert fingerprints() == before
    meta = copy / "meta.py"
    meta.write_text(meta.read_text() + "\n\ndef an_edit():\n    return 1\n")
    after = fingerprints()
    changed = {n for n, a, b in zip(SECTIONS, before, after) if a != b}
    assert changed == set(SECTIONS), changed
