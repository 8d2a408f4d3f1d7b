"""Linear and nonlinear hypernetworks (App. D), as in the authors' code.

The base network is a ReLU MLP in NTK parameterisation (``out = in @ W / sqrt(fan_in) + b``) whose
weights *and biases* are generated. Its layers form three groups - input (D -> H), hidden (L-1
chunks H -> H) and output (H -> O) - and each group has one generator; the hidden group's generator
is shared by its chunks. Each chunk has its own embedding e in R^T, normalised to norm sqrt(T) with
the scale held constant in gradients. The embeddings are the fast parameters (plus, for the
linear hypernetwork, an output bias reset to 0 for every task); the generators and the
embeddings' initial values are the meta-parameters.

* linear (``hnet_linear``): chunk = ẽ @ B, a bank B (T, chunk size) of T modules, TN(1/sqrt(T));
* nonlinear (``hnet_deepmlp``): chunk = head(MLP(ẽ)) with LayerNorm -> [Linear(32) -> LayerNorm
  -> ELU] x 4 -> Linear(chunk size, no bias).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from compgen.initializers import truncated_normal
from compgen.models.base import Model

GENERATOR_WIDTH = 32
GENERATOR_DEPTH = 4
LAYER_NORM_EPS = 1e-5


def chunk_shapes(n_in, n_out, hidden, num_hidden):
    """{group: (number of chunks, (fan_in, fan_out))} of the base network."""
    return {"input": (1, (n_in, hidden)), "hidden": (num_hidden - 1, (hidden, hidden)), "output": (1, (hidden, n_out))}


def normalise_embedding(e):
    """ẽ = e · sqrt(T)/‖e‖ with the factor held constant in gradients: (..., T) -> (..., T)."""
    scale = jnp.sqrt(e.shape[-1]) / jnp.linalg.norm(e, axis=-1, keepdims=True)
    return e * jax.lax.stop_gradient(scale)


def _layer_norm(params, x):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) * jax.lax.rsqrt(var + LAYER_NORM_EPS) * params["scale"] + params["offset"]


def _init_layer_norm(size):
    return {"scale": jnp.ones(size), "offset": jnp.zeros(size)}


def init_linear_generator(key, n_templates, chunk_size):
    return {"bank": truncated_normal(key, (n_templates, chunk_size), 1.0 / jnp.sqrt(n_templates))}


def apply_linear_generator(params, e):
    return e @ params["bank"]


def init_mlp_generator(key, n_templates, chunk_size):
    keys = jax.random.split(key, GENERATOR_DEPTH + 1)
    layers, fan_in = [], n_templates
    for k in keys[:-1]:
        layers.append(
            {
                "w": truncated_normal(k, (fan_in, GENERATOR_WIDTH), 1.0 / jnp.sqrt(fan_in)),
                "b": jnp.zeros(GENERATOR_WIDTH),
                "norm": _init_layer_norm(GENERATOR_WIDTH),
            }
        )
        fan_in = GENERATOR_WIDTH
    head = truncated_normal(keys[-1], (GENERATOR_WIDTH, chunk_size), 1.0 / jnp.sqrt(GENERATOR_WIDTH))
    return {"input_norm": _init_layer_norm(n_templates), "layers": layers, "head": head}


def apply_mlp_generator(params, e):
    h = _layer_norm(params["input_norm"], e)
    for layer in params["layers"]:
        h = jax.nn.elu(_layer_norm(layer["norm"], h @ layer["w"] + layer["b"]))
    return h @ params["head"]


GENERATORS = {
    "hnet_linear": (init_linear_generator, apply_linear_generator),
    "hnet_deepmlp": (init_mlp_generator, apply_mlp_generator),
}


def hypernetwork(name, n_in, n_out, hidden, num_hidden, n_templates) -> Model:
    """The hypernetwork ``name`` (a key of :data:`GENERATORS`) with ``n_templates`` modules, generating a base MLP
    ``n_in -> hidden x num_hidden -> n_out`` (``num_hidden >= 2``)."""
    if int(n_templates) < 1:
        raise ValueError(f"n_templates must be a positive integer for {name}, got {n_templates!r}")
    if num_hidden < 2:
        raise ValueError(f"num_hidden must be >= 2 for a hypernetwork (it has a hidden group), got {num_hidden}")
    init_generator, apply_generator = GENERATORS[name]
    shapes = chunk_shapes(n_in, n_out, hidden, num_hidden)
    fast_bias = name == "hnet_linear"

    def init(key):
        meta = {"generators": {}, "embeddings": {}}
        for k, (group, (n_chunks, (fan_in, fan_out))) in zip(
            jax.random.split(key, 2 * len(shapes)).reshape(-1, 2), shapes.items()
        ):
            bound = jnp.sqrt(3.0 / n_chunks)
            meta["embeddings"][group] = jax.random.uniform(k[0], (n_chunks, n_templates), minval=-bound, maxval=bound)
            meta["generators"][group] = init_generator(k[1], n_templates, fan_in * fan_out + fan_out)
        return meta

    def fast_init(meta):
        fast = {"embeddings": meta["embeddings"]}
        if fast_bias:
            fast["bias"] = jnp.zeros(n_out)
        return fast

    def generate(meta, fast):
        """The base network's layers [(W, b), ...] from the current embeddings. A group's chunks, flattened, are
        cut into their weights and biases by one ``split``, whose derivative is one concatenation (slicing each
        piece would differentiate to a zero-padded array per piece and their sum: more operations per inner step)."""
        layers = []
        for group, (n_chunks, (fan_in, fan_out)) in shapes.items():
            chunks = apply_generator(meta["generators"][group], normalise_embedding(fast["embeddings"][group]))
            ends = np.cumsum([fan_in * fan_out, fan_out] * n_chunks)[:-1]
            pieces = jnp.split(chunks.reshape(-1), ends)
            layers += [(w.reshape(fan_in, fan_out), b) for w, b in zip(pieces[::2], pieces[1::2])]
        return layers

    def head(meta, fast, x):
        layers = generate(meta, fast)
        for i, (w, b) in enumerate(layers):
            x = x @ w / jnp.sqrt(w.shape[0]) + b
            if i < len(layers) - 1:
                x = jax.nn.relu(x)
        return x + fast["bias"] if fast_bias else x

    return Model(name=name, init=init, fast_init=fast_init, features=lambda meta, x: x, head=head)
