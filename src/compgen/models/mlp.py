"""ANIL and MAML: a ReLU MLP in standard parameterisation (App. D).

Weights start TN(1/sqrt(fan_in)), biases 0. ANIL adapts only the linear head; its body is a
meta-parameter, so the body's output is :attr:`Model.features`. MAML adapts every parameter.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from compgen.initializers import truncated_normal
from compgen.models.base import Model


def init_dense(key, fan_in, fan_out):
    return {"w": truncated_normal(key, (fan_in, fan_out), 1.0 / jnp.sqrt(fan_in)), "b": jnp.zeros(fan_out)}


def init_mlp(key, sizes):
    """Dense layers for ``sizes`` = (n_in, h_1, ..., n_out): a list of {"w", "b"}."""
    keys = jax.random.split(key, len(sizes) - 1)
    return [init_dense(k, a, b) for k, a, b in zip(keys, sizes[:-1], sizes[1:])]


def apply_mlp(layers, x, final_activation=False):
    """ReLU after every layer but the last (unless ``final_activation``): x (N, n_in) -> (N, n_out)."""
    for i, layer in enumerate(layers):
        x = x @ layer["w"] + layer["b"]
        if i < len(layers) - 1 or final_activation:
            x = jax.nn.relu(x)
    return x


def anil(n_in, n_out, hidden, num_hidden) -> Model:
    """Body: ``num_hidden`` ReLU layers of ``hidden`` units (meta); head Linear(hidden -> n_out) (fast)."""

    def init(key):
        k_body, k_head = jax.random.split(key)
        return {"body": init_mlp(k_body, (n_in,) + (hidden,) * num_hidden), "head": init_dense(k_head, hidden, n_out)}

    return Model(
        name="anil",
        init=init,
        fast_init=lambda meta: meta["head"],
        features=lambda meta, x: apply_mlp(meta["body"], x, final_activation=True),
        head=lambda meta, fast, h: h @ fast["w"] + fast["b"],
    )


def maml(n_in, n_out, hidden, num_hidden) -> Model:
    """An MLP whose every parameter is fast; the meta-parameters are its initial values."""
    return Model(
        name="maml",
        init=lambda key: init_mlp(key, (n_in,) + (hidden,) * num_hidden + (n_out,)),
        fast_init=lambda meta: meta,
        features=lambda meta, x: x,
        head=lambda meta, fast, x: apply_mlp(fast, x),
    )
