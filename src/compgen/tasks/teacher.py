"""The multi-task teacher of the theory section (paper §3, App. C.1).

A teacher is a one-hidden-layer ReLU network without biases whose first-layer weight is
generated linearly from a task latent ``z``: ``W(z) = sum_m z_m modules[m]``. The student of
the theory section has the same architecture, so every function here serves both.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from compgen import rng
from compgen.initializers import truncated_normal

DISTRIBUTIONS = ("continuous", "discrete")
NORMALISATIONS = ("code", "paper")


def init_teacher(key, n_in=16, n_hidden=16, n_out=4, n_modules=6):
    """Teacher (or student) parameters.

    Returns ``{"modules": (M, n_in, n_hidden), "readout": (n_hidden, n_out)}`` with module entries
    TN(1/sqrt(M)) and readout entries TN(1/sqrt(n_hidden)) (App. C.1).
    """
    for name, value in (("n_in", n_in), ("n_hidden", n_hidden), ("n_out", n_out), ("n_modules", n_modules)):
        if int(value) < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    key_modules, key_readout = jax.random.split(key)
    return {
        "modules": truncated_normal(key_modules, (n_modules, n_in, n_hidden), 1.0 / jnp.sqrt(n_modules)),
        "readout": truncated_normal(key_readout, (n_hidden, n_out), 1.0 / jnp.sqrt(n_hidden)),
    }


def generated_weight(modules, z):
    """First-layer weight ``W(z) = sum_m z_m modules[m]``: modules (M, n, h), z (M,) -> (n, h)."""
    return jnp.einsum("m,mnh->nh", z, modules)


def apply_teacher(params, z, x):
    """Network output ``readout^T relu(W(z)^T x / sqrt(n))``: x (..., n), z (M,) -> (..., n_out)."""
    weight = generated_weight(params["modules"], z)
    hidden = jax.nn.relu(x @ weight / jnp.sqrt(x.shape[-1]))
    return hidden @ params["readout"]


def sample_inputs(key, num, n_in, sampler="threefry"):
    """Inputs i.i.d. Uniform[-sqrt(3), sqrt(3)] (mean 0, variance 1): (num, n_in).

    ``sampler`` is "threefry" (``jax.random.uniform``) or "hash" (:func:`compgen.rng.hash_uniform`,
    several times cheaper on a CPU).
    """
    bound = 3.0**0.5
    return rng.uniform(key, (num, n_in), -bound, bound, sampler)


def continuous_latents(key, masks, normalisation="code"):
    """Algorithm 1 of the paper for each mask: masks (num, M) in {0, 1} -> z (num, M).

    ``w = E * m`` with ``E ~ Exp(1)``; the authors' code divides by ``sum(w) + 1`` ("code"), the
    paper by ``sum(w)`` ("paper"); then ``z = (w + m) / 2``, so active entries lie in (0.5, 1).
    """
    if normalisation not in NORMALISATIONS:
        raise ValueError(f"normalisation must be one of {NORMALISATIONS}, got {normalisation!r}")
    masks = jnp.asarray(masks, jnp.float32)
    w = jax.random.exponential(key, masks.shape) * masks
    total = w.sum(-1, keepdims=True)
    w = w / (total + 1.0) if normalisation == "code" else w / total
    return 0.5 * (w + masks)


def discrete_latents(masks):
    """The discrete task latent ``m / ||m||_2`` for each mask: (num, M) -> (num, M)."""
    masks = jnp.asarray(masks, jnp.float32)
    return masks / jnp.linalg.norm(masks, axis=-1, keepdims=True)


def sample_latents(key, masks, num, distribution="continuous", normalisation="code"):
    """``num`` task latents, each from a mask drawn uniformly from ``masks`` (n_masks, M) -> (num, M)."""
    if distribution not in DISTRIBUTIONS:
        raise ValueError(f"distribution must be one of {DISTRIBUTIONS}, got {distribution!r}")
    masks = jnp.asarray(masks, jnp.float32)
    return sample_latents_padded(key, masks, masks.shape[0], distribution == "discrete", num, normalisation)


def sample_latents_padded(key, masks, n_masks, discrete, num, normalisation="code"):
    """Jittable :func:`sample_latents` over a padded mask list.

    Only the first ``n_masks`` rows of ``masks`` (N_max, M) are drawn from; ``n_masks`` and the
    boolean ``discrete`` may be traced, so runs with different mask sets and distributions can
    share one compiled (and vmapped) program.
    """
    key_mask, key_weights = jax.random.split(key)
    chosen = masks[jax.random.randint(key_mask, (num,), 0, n_masks)]
    return jnp.where(discrete, discrete_latents(chosen), continuous_latents(key_weights, chosen, normalisation))
