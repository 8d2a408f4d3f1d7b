"""Weight initialisers shared by the teachers and the learners."""

from __future__ import annotations

import jax


def truncated_normal(key, shape, std):
    """Haiku-style truncated normal: N(0, 1) truncated to [-2, 2], times ``std`` (no variance fix, so the
    effective standard deviation is about 0.88 ``std``; spec, notation)."""
    return std * jax.random.truncated_normal(key, -2.0, 2.0, shape)
