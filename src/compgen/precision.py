"""The precision of float32 matrix products: the backend's default, unless ``$COMPGEN_MATMUL_PRECISION`` asks.

By default compgen leaves JAX's ``jax_default_matmul_precision`` alone, as the authors' code does. The backend
then picks the precision of float32 products and convolutions: a CPU computes them in full float32, an NVIDIA
GPU from Ampere on in TensorFloat-32 (10 bits of mantissa in the products, sums in float32), a TPU in bfloat16.

``COMPGEN_MATMUL_PRECISION`` asks for another one, for every process that imports compgen (the engine's worker
processes, the benchmark's cases and a notebook's kernel inherit the environment, so they run alike; a
``jax.config.update`` in code reaches only the process that calls it, not the workers). Blanks around the value are
ignored and a value of blanks only is refused, as for every ``COMPGEN_*`` variable (:func:`compgen.params.env_text`):

* unset, empty or ``default``: JAX's setting is left as it is (the backend's default, or what JAX's own
  ``JAX_DEFAULT_MATMUL_PRECISION`` or ``jax.config`` set);
* ``highest``: full float32 (``jax_default_matmul_precision = "highest"``);
* ``high``: JAX's intermediate level (bfloat16 in three passes on a TPU; what a GPU makes of it is XLA's choice).

The variable is read once, when ``compgen`` is imported, and only when it is set does compgen import JAX there
and change its configuration. Any other value, or one that contradicts a ``JAX_DEFAULT_MATMUL_PRECISION`` set
beside it, changes nothing there and is a :class:`compgen.params.ParameterError` naming the variable when the engine
checks its environment (:func:`compgen.dispatch.check_environment`: before anything loads or trains, so the command
line reports it in one line). The precision
a run was computed at is stored in its provenance (``matmul_precision``: JAX's setting where it ran, ``default``
when unset); it is not part of the run's key in the results store.
"""

from __future__ import annotations

import os

ENV = "COMPGEN_MATMUL_PRECISION"
JAX_ENV = "JAX_DEFAULT_MATMUL_PRECISION"  # JAX's own variable for the same setting
CHOICES = ("default", "high", "highest")


def requested(env=None) -> str | None:
    """The precision ``$COMPGEN_MATMUL_PRECISION`` of ``env`` (default: this process's environment) asks for:
    ``None`` when it is unset, empty or ``default`` (JAX's setting stays), else ``"high"`` or ``"highest"``.
    Anything else is a :class:`compgen.params.ParameterError`."""
    env = os.environ if env is None else env
    if not env.get(ENV):
        return None
    from compgen import params

    text = params.env_text(ENV, env)  # the rule of every COMPGEN_* variable: blanks around it ignored
    if text == "default":
        return None
    if text not in CHOICES:
        raise params.ParameterError(
            f"{ENV} must be one of {', '.join(CHOICES)} (or unset: the backend's default), "
            f"got {params._short(env[ENV])}"
        )
    theirs = env.get(JAX_ENV, "")
    if theirs and theirs.strip() != text:
        raise params.ParameterError(
            f"{ENV}={text} contradicts {JAX_ENV}={params._short(theirs)}; set one of them, or both alike"
        )
    return text


def apply(env=None) -> str | None:
    """Set JAX's default matmul precision to :func:`requested` if it asks for one; return what was set
    (``None``: nothing was changed, and JAX was not imported for it)."""
    value = requested(env)
    if value is not None:
        import jax

        jax.config.update("jax_default_matmul_precision", value)
    return value


def apply_at_import() -> None:
    """:func:`apply` as ``import compgen`` runs it: a bad value changes nothing here (the engine refuses it in one
    line before it trains, :func:`compgen.dispatch.check_environment`)."""
    from compgen import params

    try:
        apply()
    except params.ParameterError:
        pass


def current() -> str:
    """JAX's default matmul precision in this thread now (inside a ``jax.default_matmul_precision`` block, that
    block's), ``"default"`` when none is set: what a stored run's provenance records."""
    import jax

    return jax.config.jax_default_matmul_precision or "default"
