"""A fast counter-based uniform sampler for the hot inner loops on CPU.

``jax.random.uniform`` (threefry, 20 rounds per word) dominates the theory section's inner loop
on a CPU, where a fresh batch of inputs is drawn at every one of hundreds of inner steps. Here a
single threefry word derived from the key seeds a counter hashed by the murmur3 finaliser, which
costs a few integer operations per number. The numbers are uniform with 24-bit resolution and
statistically independent enough for drawing network inputs; the same key gives the same numbers.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

SAMPLERS = ("threefry", "hash")


def _fmix32(z):
    z = (z ^ (z >> 16)) * jnp.uint32(0x85EBCA6B)
    z = (z ^ (z >> 13)) * jnp.uint32(0xC2B2AE35)
    return z ^ (z >> 16)


def hash_uniform(key, shape, minval=0.0, maxval=1.0):
    """Uniform floats in [minval, maxval) of ``shape`` from a hashed counter seeded by ``key``."""
    seed = jax.random.bits(key, (), jnp.uint32)
    size = 1
    for dim in shape:
        size *= dim
    counter = jnp.arange(size, dtype=jnp.uint32) * jnp.uint32(0x9E3779B9) + _fmix32(seed)
    unit = ((_fmix32(counter) >> 8).astype(jnp.float32) + 0.5) / 16777216.0
    return (minval + (maxval - minval) * unit).reshape(shape)


def uniform(key, shape, minval=0.0, maxval=1.0, sampler="threefry"):
    """Uniform floats from ``jax.random.uniform`` ("threefry") or :func:`hash_uniform` ("hash")."""
    if sampler == "threefry":
        return jax.random.uniform(key, shape, minval=minval, maxval=maxval)
    if sampler == "hash":
        return hash_uniform(key, shape, minval, maxval)
    raise ValueError(f"sampler must be one of {SAMPLERS}, got {sampler!r}")
