"""The matmul precision policy (compgen.precision): the backend's default unless COMPGEN_MATMUL_PRECISION asks, read
strictly when compgen is imported, and recorded in a stored run's provenance."""

import os
import subprocess
import sys

import jax
import pytest

from compgen import params, precision, results

SHOW = "import compgen, jax; print(repr(jax.config.jax_default_matmul_precision))"


def _python(code, **env):
    """Run ``code`` in a fresh interpreter whose environment has neither precision variable, plus ``env``."""
    base = {k: v for k, v in os.environ.items() if k not in (precision.ENV, precision.JAX_ENV)}
    return subprocess.run(
        [sys.executable, "-c", code], env={**base, **env}, capture_output=True, text=True, timeout=120
    )


def test_unset_or_default_leaves_jax_alone_and_does_not_import_it():
    for env in ({}, {precision.ENV: ""}, {precision.ENV: "default"}):
        out = _python("import sys, compgen; print('jax' in sys.modules)", **env)
        assert out.returncode == 0 and out.stdout.split() == ["False"], (env, out.stderr)
    assert _python(SHOW).stdout.split() == ["None"]
    # JAX's own variable still works: compgen's `default` does not undo it
    out = _python(SHOW, **{precision.ENV: "default", precision.JAX_ENV: "highest"})
    assert out.stdout.split() == ["'highest'"], out.stderr


@pytest.mark.parametrize("value", ["highest", "high"])
def test_a_precision_asked_for_is_jax_default_in_every_process_that_imports_compgen(value):
    out = _python(SHOW, **{precision.ENV: value})
    assert out.returncode == 0 and out.stdout.split() == [repr(value)], out.stderr


@pytest.mark.parametrize("value", ["HIGHEST", "tf32", "float32", "high est", "1"])
def test_a_bad_value_is_a_one_line_error_naming_the_variable(value):
    with pytest.raises(params.ParameterError) as error:
        precision.requested({precision.ENV: value})
    message = str(error.value)
    assert "\n" not in message and message.startswith(f"{precision.ENV} must be one of default, high, highest")
    assert repr(value) in message
    # ... which changes nothing at import and is refused in one line before anything trains
    out = _python(SHOW, **{precision.ENV: value})
    assert out.returncode == 0 and out.stdout.split() == ["None"], out.stderr
    out = subprocess.run(
        [sys.executable, "-m", "compgen", "run", "teacher_student", "fig2c", "--preset", "smoke"],
        env={**os.environ, precision.ENV: value},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 2 and out.stderr.strip() == f"error: {message}", out.stderr


def test_blanks_follow_the_rule_of_every_compgen_variable(monkeypatch):
    """Blanks around a value were refused here but ignored in COMPGEN_LANES: now one rule (params.env_text) reads
    both, blanks around a value ignored and blanks only refused."""
    assert precision.requested({precision.ENV: " highest\t"}) == "highest"
    assert precision.requested({precision.ENV: " default "}) is None
    monkeypatch.setenv("COMPGEN_LANES", " 1 ")
    assert params.env_flag("COMPGEN_LANES", False) is True
    with pytest.raises(params.ParameterError, match=f"^{precision.ENV} is blank"):
        precision.requested({precision.ENV: " \t"})
    monkeypatch.setenv("COMPGEN_LANES", " \t")
    with pytest.raises(params.ParameterError, match="^COMPGEN_LANES is blank"):
        params.env_flag("COMPGEN_LANES")
    out = _python(SHOW, **{precision.ENV: " highest "})  # applied at import alike
    assert out.returncode == 0 and out.stdout.split() == ["'highest'"], out.stderr


def test_a_contradicting_jax_variable_is_refused():
    with pytest.raises(params.ParameterError, match="COMPGEN_MATMUL_PRECISION=highest contradicts"):
        precision.requested({precision.ENV: "highest", precision.JAX_ENV: "bfloat16"})
    assert precision.requested({precision.ENV: "highest", precision.JAX_ENV: "highest"}) == "highest"


def test_apply_changes_jax_only_when_asked():
    before = jax.config.jax_default_matmul_precision
    assert precision.apply({}) is None and jax.config.jax_default_matmul_precision == before
    try:
        assert precision.apply({precision.ENV: "highest"}) == "highest"
        assert jax.config.jax_default_matmul_precision == "highest"
    finally:
        jax.config.update("jax_default_matmul_precision", before)


def test_provenance_records_the_precision_it_ran_at():
    assert precision.current() == (jax.config.jax_default_matmul_precision or "default")
    with jax.default_matmul_precision("highest"):
        assert results.provenance(1.0, "c0de00000001")["matmul_precision"] == precision.current() == "highest"
    if jax.config.jax_default_matmul_precision is None:
        assert results.provenance(1.0, "c0de00000001")["matmul_precision"] == "default"


def test_full_precision_fixture_sets_highest(full_precision):
    assert jax.config.jax_default_matmul_precision == "highest"
