"""A learner defined outside the library, as a user would write one (tests/models/test_learners.py names it
``own_learner:gated_heads``): an MLP body and ``HEADS`` linear heads (meta-parameters) mixed by a task gate,
the fast parameters the inner loop adapts."""

import jax
import jax.numpy as jnp

from compgen.models import Model

HEADS = 3


def gated_heads(cfg) -> Model:
    """Body ``n_in -> hidden x (num_hidden - 1)`` (ReLU), heads ``hidden -> n_out``, gate logits (HEADS,)."""
    sizes = (cfg.n_in,) + (cfg.hidden,) * (cfg.num_hidden - 1)

    def init(key):
        keys = jax.random.split(key, len(sizes))
        body = [jax.random.normal(k, (a, b)) / jnp.sqrt(a) for k, a, b in zip(keys, sizes[:-1], sizes[1:])]
        heads = jax.random.normal(keys[-1], (HEADS, sizes[-1], cfg.n_out)) / jnp.sqrt(sizes[-1])
        return {"body": body, "heads": heads, "gate": jnp.zeros(HEADS)}

    def features(meta, x):
        for w in meta["body"]:
            x = jax.nn.relu(x @ w)
        return x

    def head(meta, fast, h):
        return jnp.einsum("k,nkj->nj", jax.nn.softmax(fast), jnp.einsum("ni,kij->nkj", h, meta["heads"]))

    return Model("gated_heads", init, lambda meta: meta["gate"], features, head)
