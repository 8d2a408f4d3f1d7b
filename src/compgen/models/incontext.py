"""In-context learners: read a task's support set and answer its queries in one forward pass.

The paper's learners (:mod:`compgen.models`) adapt fast parameters by gradient descent on the support
set. The learners here have no inner loop: trained episodically on the same task distributions, they
map ``(support inputs, support targets, query inputs)`` to query predictions directly. They are the
comparison the paper's related work points to: Lake's meta seq2seq {cite}`lake2019compositional`
(a key-value memory over the support set) and the transformer studies of Kobayashi et al. 2024, who
find that a transformer learning in context generalises compositionally only when a bottleneck
separates task inference from task execution.

Three learners, each a :class:`InContextModel` (pure functions over an explicit parameter pytree):

* ``kv_memory`` - Lake's meta seq2seq for vectors. Support inputs are encoded as keys, support
  targets (alone) as values; each query's encoding attends over the memory (multi-head, scaled
  dot-product) and a decoder MLP maps ``[query encoding, retrieved value]`` to logits.
* ``transformer`` - a pre-LayerNorm transformer over support tokens ``[x, y, 1]`` followed by query
  tokens ``[x, 0, 0]``. Support tokens attend to every support token; each query token attends to the
  support tokens and to itself only, so queries never see each other (no mask over a joint sequence is
  needed: the query's scores over the support keys and its own key are concatenated).
* ``bottleneck`` - a transformer encoder over the support tokens, mean-pooled and projected to a
  low-dimensional task code ``c``; the paper's linear hypernetwork (:mod:`compgen.models.hypernetwork`)
  turns ``c`` into the weights of a small MLP, which answers the queries. The queries reach the
  support set only through ``c``.

None has a positional encoding, so every prediction is invariant to the order of the support
examples (up to float rounding), and no learner receives query targets.

Support tokens may carry a boolean ``mask`` (N,), False for padding (the padded steps of a grid-world
demonstration). A masked token has no influence at all: its content is zeroed before it is encoded,
its key is masked out of every attention, and pooled means run over the valid tokens only, so that
its content and its number change no prediction (at least one token must be valid). ``mask=None``
means every token is valid and computes exactly what the learners computed before masks existed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import jax
import jax.numpy as jnp

from compgen.initializers import truncated_normal
from compgen.models import hypernetwork
from compgen.models.mlp import apply_mlp, init_dense, init_mlp

LAYER_NORM_EPS = 1e-5
GROUPS = ("input", "hidden", "output")  # the hypernetwork's chunk groups, in layer order


@dataclass(frozen=True)
class InContextModel:
    name: str
    init: Callable  # key -> params
    apply: Callable  # (params, x_s (N, n_in), y_s (N, n_out), x_q (Q, n_in), mask=None (N,)) -> logits (Q, n_out)
    task_representation: Callable  # (params, x_s, y_s, mask=None) -> (D,): the task code or a pooled summary


@dataclass(frozen=True)
class InContextSpec:
    """Sizes of an in-context learner; every field must be a positive integer."""

    model: str
    n_in: int
    n_out: int
    d_model: int = 64
    num_layers: int = 2  # transformer blocks (transformer, bottleneck encoder) or decoder layers (kv_memory)
    num_heads: int = 4
    d_ff: int = 128  # MLP width inside blocks, encoders and decoders
    code_dim: int = 16  # bottleneck: dimension of the task code
    hnet_hidden: int = 32  # bottleneck: width of the generated MLP
    hnet_num_hidden: int = 3  # bottleneck: hidden layers of the generated MLP (>= 2, as the paper's hypernetwork)
    n_templates: int = 16  # bottleneck: modules T of the linear hypernetwork

    def __post_init__(self):
        for name in (
            "n_in",
            "n_out",
            "d_model",
            "num_layers",
            "num_heads",
            "d_ff",
            "code_dim",
            "hnet_hidden",
            "hnet_num_hidden",
            "n_templates",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or int(value) != value or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if self.d_model % self.num_heads:
            raise ValueError(
                f"d_model must be divisible by num_heads, got d_model={self.d_model}, num_heads={self.num_heads}"
            )
        if self.hnet_num_hidden < 2:
            raise ValueError(
                f"hnet_num_hidden must be >= 2 (the hypernetwork has a hidden group), got {self.hnet_num_hidden}"
            )


# --------------------------------------------------------------------------------------------- layers


def init_layer_norm(size):
    return {"scale": jnp.ones(size), "offset": jnp.zeros(size)}


def layer_norm(params, x):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) * jax.lax.rsqrt(var + LAYER_NORM_EPS) * params["scale"] + params["offset"]


def dense(params, x):
    return x @ params["w"] + params["b"]


def init_attention(key, d_model):
    keys = jax.random.split(key, 4)
    return {name: init_dense(k, d_model, d_model) for name, k in zip(("q", "k", "v", "o"), keys)}


def _heads(x, num_heads):
    return x.reshape(x.shape[:-1] + (num_heads, x.shape[-1] // num_heads))  # (..., H, d_head)


def _project(params, x, num_heads):
    """Queries, keys and values of tokens ``x`` (T, d), each (T, H, d_head)."""
    return tuple(_heads(dense(params[name], x), num_heads) for name in ("q", "k", "v"))


def attend(params, q, k, v, self_kv=None, mask=None):
    """Multi-head scaled dot-product attention of queries ``q`` (Q, H, dh) over keys/values ``k``, ``v``
    (N, H, dh), then the output projection: (Q, d). Keys where ``mask`` (N,) is False get zero weight.

    With ``self_kv`` = (k_self, v_self), each (Q, H, dh), query ``i`` also attends to its own key and value:
    the equivalent of a joint sequence where each query sees the memory and itself, without a (Q, Q) mask.
    """
    scale = 1.0 / jnp.sqrt(q.shape[-1])
    scores = jnp.einsum("qhd,nhd->hqn", q, k) * scale  # (H, Q, N)
    if mask is not None:
        scores = jnp.where(mask, scores, -jnp.inf)
    if self_kv is None:
        out = jnp.einsum("hqn,nhd->qhd", jax.nn.softmax(scores, axis=-1), v)
    else:
        k_self, v_self = self_kv
        own = jnp.einsum("qhd,qhd->hq", q, k_self)[..., None] * scale  # (H, Q, 1)
        weights = jax.nn.softmax(jnp.concatenate([scores, own], axis=-1), axis=-1)
        out = jnp.einsum("hqn,nhd->qhd", weights[..., :-1], v) + weights[..., -1].T[..., None] * v_self
    return dense(params["o"], out.reshape(out.shape[0], -1))


def init_block(key, d_model, d_ff):
    k_att, k_ff = jax.random.split(key)
    return {
        "norm_att": init_layer_norm(d_model),
        "attention": init_attention(k_att, d_model),
        "norm_ff": init_layer_norm(d_model),
        "ff": init_mlp(k_ff, (d_model, d_ff, d_model)),
    }


def _feed_forward(block, h):
    return h + apply_mlp(block["ff"], layer_norm(block["norm_ff"], h))


def block_apply(block, h_s, h_q, num_heads, mask=None):
    """One pre-LN transformer block. Support tokens ``h_s`` (N, d) attend to every valid support token
    (``mask``); query tokens ``h_q`` (Q, d) or None attend to the valid support tokens and to themselves.
    Returns ``(h_s, h_q)``."""
    q_s, k_s, v_s = _project(block["attention"], layer_norm(block["norm_att"], h_s), num_heads)
    new_s = _feed_forward(block, h_s + attend(block["attention"], q_s, k_s, v_s, mask=mask))
    if h_q is None:
        return new_s, None
    q_q, k_q, v_q = _project(block["attention"], layer_norm(block["norm_att"], h_q), num_heads)
    return new_s, _feed_forward(block, h_q + attend(block["attention"], q_q, k_s, v_s, self_kv=(k_q, v_q), mask=mask))


def clear_padding(mask, *arrays):
    """``arrays`` (each (N, k)) with the rows of masked support tokens set to 0, so that not even a NaN in a
    padded token can reach a prediction; unchanged when ``mask`` is None."""
    if mask is None:
        return arrays
    return tuple(jnp.where(mask[:, None], a, 0.0) for a in arrays)


def pooled_mean(h, mask=None):
    """Mean of token states ``h`` (N, d) over the valid tokens (all of them when ``mask`` is None)."""
    if mask is None:
        return h.mean(0)
    return jnp.where(mask[:, None], h, 0.0).sum(0) / jnp.maximum(mask.sum(), 1)


def support_tokens(x_s, y_s):
    """``[x, y, 1]`` per support example: (N, n_in + n_out + 1)."""
    return jnp.concatenate([x_s, y_s, jnp.ones(x_s.shape[:-1] + (1,))], axis=-1)


def query_tokens(x_q, n_out):
    """``[x, 0, 0]`` per query: the input only, (Q, n_in + n_out + 1)."""
    return jnp.concatenate([x_q, jnp.zeros(x_q.shape[:-1] + (n_out + 1,))], axis=-1)


# --------------------------------------------------------------------------------------------- learners


def kv_memory(spec: InContextSpec) -> InContextModel:
    """Key-value memory (meta seq2seq for vectors): keys from support inputs, values from support targets."""

    def init(key):
        k_key, k_value, k_att, k_dec = jax.random.split(key, 4)
        return {
            "key_encoder": init_mlp(k_key, (spec.n_in, spec.d_ff, spec.d_model)),
            "value_encoder": init_mlp(k_value, (spec.n_out, spec.d_ff, spec.d_model)),
            "attention": init_attention(k_att, spec.d_model),
            "decoder": init_mlp(k_dec, (2 * spec.d_model,) + (spec.d_ff,) * spec.num_layers + (spec.n_out,)),
        }

    def apply(params, x_s, y_s, x_q, mask=None):
        x_s, y_s = clear_padding(mask, x_s, y_s)
        keys = apply_mlp(params["key_encoder"], x_s)
        values = apply_mlp(params["value_encoder"], y_s)
        query = apply_mlp(params["key_encoder"], x_q)  # the input encoder is shared, as in meta seq2seq
        att = params["attention"]
        q = _heads(dense(att["q"], query), spec.num_heads)
        k = _heads(dense(att["k"], keys), spec.num_heads)
        v = _heads(dense(att["v"], values), spec.num_heads)
        retrieved = attend(att, q, k, v, mask=mask)
        return apply_mlp(params["decoder"], jnp.concatenate([query, retrieved], axis=-1))

    def task_representation(params, x_s, y_s, mask=None):
        """Mean of the memory's keys and values: a crude summary (the task lives in their pairing)."""
        x_s, y_s = clear_padding(mask, x_s, y_s)
        return jnp.concatenate(
            [
                pooled_mean(apply_mlp(params["key_encoder"], x_s), mask),
                pooled_mean(apply_mlp(params["value_encoder"], y_s), mask),
            ]
        )

    return InContextModel("kv_memory", init, apply, task_representation)


def transformer(spec: InContextSpec) -> InContextModel:
    """Transformer over support tokens then query tokens; queries see the support set and themselves."""
    n_token = spec.n_in + spec.n_out + 1

    def init(key):
        keys = jax.random.split(key, spec.num_layers + 2)
        return {
            "embed": init_dense(keys[0], n_token, spec.d_model),
            "blocks": [init_block(k, spec.d_model, spec.d_ff) for k in keys[1:-1]],
            "norm_out": init_layer_norm(spec.d_model),
            "readout": init_dense(keys[-1], spec.d_model, spec.n_out),
        }

    def encode(params, x_s, y_s, x_q=None, mask=None):
        h_s = dense(params["embed"], support_tokens(*clear_padding(mask, x_s, y_s)))
        h_q = None if x_q is None else dense(params["embed"], query_tokens(x_q, spec.n_out))
        for block in params["blocks"]:
            h_s, h_q = block_apply(block, h_s, h_q, spec.num_heads, mask)
        return h_s, h_q

    def apply(params, x_s, y_s, x_q, mask=None):
        _, h_q = encode(params, x_s, y_s, x_q, mask)
        return dense(params["readout"], layer_norm(params["norm_out"], h_q))

    def task_representation(params, x_s, y_s, mask=None):
        """The mean of the last layer's (valid) support tokens."""
        h_s, _ = encode(params, x_s, y_s, mask=mask)
        return pooled_mean(layer_norm(params["norm_out"], h_s), mask)

    return InContextModel("transformer", init, apply, task_representation)


def bottleneck(spec: InContextSpec) -> InContextModel:
    """Transformer encoder -> pooled task code (code_dim) -> linear hypernetwork -> MLP on the queries."""
    n_token = spec.n_in + spec.n_out + 1
    hnet = hypernetwork.hypernetwork(
        "hnet_linear", spec.n_in, spec.n_out, spec.hnet_hidden, spec.hnet_num_hidden, spec.n_templates
    )
    n_chunks = spec.hnet_num_hidden + 1  # input, hidden (num_hidden - 1), output

    def init(key):
        keys = jax.random.split(key, spec.num_layers + 4)
        hnet_meta = hnet.init(keys[-1])
        return {
            "embed": init_dense(keys[0], n_token, spec.d_model),
            "blocks": [init_block(k, spec.d_model, spec.d_ff) for k in keys[1:-3]],
            "norm_out": init_layer_norm(spec.d_model),
            "to_code": init_dense(keys[-2], spec.d_model, spec.code_dim),
            # the code sets the hypernetwork's chunk embeddings: e = code @ W + b, b starting at the paper's init
            "to_embeddings": {
                "w": truncated_normal(
                    keys[-3], (spec.code_dim, n_chunks * spec.n_templates), 1.0 / jnp.sqrt(spec.code_dim)
                ),
                "b": jnp.concatenate([hnet_meta["embeddings"][g] for g in GROUPS]).reshape(-1),
            },
            "generators": hnet_meta["generators"],
        }

    def task_code(params, x_s, y_s, mask=None):
        h = dense(params["embed"], support_tokens(*clear_padding(mask, x_s, y_s)))
        for block in params["blocks"]:
            h, _ = block_apply(block, h, None, spec.num_heads, mask)
        return dense(params["to_code"], pooled_mean(layer_norm(params["norm_out"], h), mask))

    def apply(params, x_s, y_s, x_q, mask=None):
        code = task_code(params, x_s, y_s, mask)
        flat = dense(params["to_embeddings"], code).reshape(n_chunks, spec.n_templates)
        fast = {
            "embeddings": {"input": flat[:1], "hidden": flat[1:-1], "output": flat[-1:]},
            "bias": jnp.zeros(spec.n_out),
        }
        return hnet.head({"generators": params["generators"]}, fast, x_q)

    return InContextModel("bottleneck", init, apply, task_code)
