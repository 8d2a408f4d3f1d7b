"""The teacher-student task inference as one fused GPU kernel (Pallas, Triton): :func:`infer_latent`.

The theory section infers each task's latent ẑ with hundreds of Adam steps, each on a fresh batch of inputs
(App. C.1). Written with ``lax.scan`` (:func:`compgen.experiments.teacher_student.infer_latent`), every inner step
is a chain of small kernels whose intermediates (the batch, the hidden layers, their gradients) go through the GPU's
memory; at the paper's size the outer step is bound by that traffic and by launches, not by arithmetic. Here one
program instance runs one task's whole inner loop in registers: it draws the inputs with the same generator
(``jax.random.uniform``'s threefry bits, or :func:`compgen.rng.hash_uniform`), computes the teacher's targets, the
student's ½-MSE and its gradient in ẑ by hand, and applies Adam, for every inner step, then writes ẑ and two losses.

It computes what the ``lax.scan`` loop computes, up to float32 round-off (the same inputs bit for bit, the same
products at the same precision, sums in another order); ``tests/tasks/test_teacher_kernel.py`` checks it against
that loop in Pallas' interpreter on a CPU. Shapes are padded with zeros to powers of two of at least 16 (what a
Triton product needs): padded modules, units and outputs add nothing to the loss and get zero gradients.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from compgen import rng

ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))  # threefry2x32's rotations, alternating every four rounds
ADAM = dict(b1=0.9, b2=0.999, eps=1e-8)  # optax.adam's defaults
SCHEDULES = ("constant", "cosine")
COSINE_ALPHA = 0.01  # the cosine inner schedule decays to 1 % (compgen.experiments.teacher_student)


def threefry2x32(k0, k1, x0, x1):
    """The threefry-2x32 block cipher (20 rounds) as JAX computes it: uint32 keys and counters -> two uint32 words."""
    ks = (k0, k1, k0 ^ k1 ^ jnp.uint32(0x1BD11BDA))
    x0, x1 = x0 + ks[0], x1 + ks[1]
    for block in range(5):
        for r in ROTATIONS[block % 2]:
            x0 = x0 + x1
            x1 = (x1 << jnp.uint32(r)) | (x1 >> jnp.uint32(32 - r))
            x1 = x0 ^ x1
        x0 = x0 + ks[(block + 1) % 3]
        x1 = x1 + ks[(block + 2) % 3] + jnp.uint32(block + 1)
    return x0, x1


def split_key(k0, k1, index):
    """Key ``index`` of ``jax.random.split(key, n)`` (JAX's partitionable threefry): two uint32 words."""
    return threefry2x32(k0, k1, jnp.uint32(0), index)


def uniform_bits(k0, k1, flat_index):
    """``jax.random.bits(key, shape, uint32)`` at the entries whose flat (row-major) indices are ``flat_index``."""
    b0, b1 = threefry2x32(k0, k1, jnp.zeros_like(flat_index), flat_index)
    return b0 ^ b1


def uniform(k0, k1, flat_index, minval, maxval, sampler):
    """``compgen.rng.uniform(key, shape, minval, maxval, sampler)`` at the entries ``flat_index`` (uint32)."""
    if sampler == "threefry":  # jax.random.uniform: 23 random mantissa bits of a float in [1, 2)
        bits = (uniform_bits(k0, k1, flat_index) >> jnp.uint32(9)) | jnp.uint32(0x3F800000)
        unit = jax.lax.bitcast_convert_type(bits, jnp.float32) - 1.0
        return jnp.maximum(minval, unit * (maxval - minval) + minval)
    if sampler == "hash":  # compgen.rng.hash_uniform: its seed is one threefry word of the key
        seed = uniform_bits(k0, k1, jnp.uint32(0))
        counter = flat_index * jnp.uint32(0x9E3779B9) + rng._fmix32(seed)
        unit = ((rng._fmix32(counter) >> jnp.uint32(8)).astype(jnp.float32) + 0.5) / 16777216.0
        return minval + (maxval - minval) * unit
    raise ValueError(f"sampler must be one of {rng.SAMPLERS}, got {sampler!r}")


def fits(batch: int) -> bool:
    """Whether the kernel takes batches of ``batch`` inputs: a power of two of at least 16 (other sizes are padded)."""
    return batch >= 16 and not batch & (batch - 1)


def padded(n: int) -> int:
    """The size a dimension of ``n`` is padded to: the next power of two, at least 16."""
    return max(16, 1 << (int(n) - 1).bit_length())


class Loop(NamedTuple):
    """The inner loop the kernel runs: ``steps`` Adam steps at rate ``lr`` (``schedule``: constant or cosine), each on
    ``batch`` fresh inputs drawn by ``sampler``."""

    batch: int
    steps: int
    lr: float
    schedule: str = "constant"
    sampler: str = "threefry"


def _kernel(*refs, sizes, loop: Loop):
    """One task's inner loop. Refs (padded): key (2,) uint32, teacher weight (N, H_T), teacher readout (H_T, O),
    student modules (K, N, H), student readout (H, O), ẑ₀ (K,); outputs ẑ (K,), losses (16,) (first, last).
    ``sizes``: the real (batch, n_in, n_out)."""
    key_ref, w_t_ref, a_t_ref, theta_ref, a_s_ref, z0_ref, zhat_ref, losses_ref = refs
    steps, lr, schedule, sampler = loop.steps, loop.lr, loop.schedule, loop.sampler
    batch, n_in, n_out = sizes  # the real sizes
    bound, root_n, count = 3.0**0.5, float(np.sqrt(n_in)), float(batch * n_out)
    k0, k1 = key_ref[0], key_ref[1]
    w_t, a_t, theta, a_s = w_t_ref[...], a_t_ref[...], theta_ref[...], a_s_ref[...]
    rows = jnp.arange(batch, dtype=jnp.int32)[:, None]
    cols = jnp.arange(w_t.shape[0], dtype=jnp.int32)[None, :]
    flat = (rows * n_in + jnp.minimum(cols, n_in - 1)).astype(jnp.uint32)  # (B, N): the entries of a (B, n_in) batch
    real = cols < n_in
    target_of = lambda x: jnp.dot(jnp.maximum(jnp.dot(x, w_t) / root_n, 0.0), a_t)
    b1, b2, eps = ADAM["b1"], ADAM["b2"], ADAM["eps"]

    def step(t, carry):
        z, mu, nu, p1, p2, first, _ = carry
        s0, s1 = split_key(k0, k1, t.astype(jnp.uint32))
        x = jnp.where(real, uniform(s0, s1, flat, -bound, bound, sampler), 0.0)
        weight = jnp.sum(z[:, None, None] * theta, axis=0)  # W(ẑ) = Σ_k ẑ_k Θ̂_k: (N, H)
        pre = jnp.dot(x, weight) / root_n
        diff = jnp.dot(jnp.maximum(pre, 0.0), a_s) - target_of(x)  # (B, O), zero in the padded outputs
        loss = 0.5 * jnp.sum(diff * diff) / count
        d_hidden = jnp.dot(diff / count, a_s.T) * (pre > 0).astype(jnp.float32)
        d_weight = jnp.dot(x.T, d_hidden) / root_n  # (N, H)
        grad = jnp.sum(jnp.sum(theta * d_weight[None, :, :], axis=2), axis=1)  # (K,)
        mu = (1 - b1) * grad + b1 * mu
        nu = (1 - b2) * (grad * grad) + b2 * nu
        p1, p2 = p1 * b1, p2 * b2
        rate = lr
        if schedule == "cosine":
            progress = jnp.minimum(t, steps).astype(jnp.float32) / steps
            rate = lr * ((1 - COSINE_ALPHA) * 0.5 * (1 + jnp.cos(jnp.pi * progress)) + COSINE_ALPHA)
        z = z - rate * (mu / (1 - p1)) / (jnp.sqrt(nu / (1 - p2)) + eps)
        first = jnp.where(t == 0, loss, first)
        return z, mu, nu, p1, p2, first, loss

    z0 = z0_ref[...]
    zeros, one, nothing = jnp.zeros_like(z0), jnp.float32(1.0), jnp.float32(0.0)
    z, *_, first, last = jax.lax.fori_loop(0, steps, step, (z0, zeros, zeros, one, one, nothing, nothing))
    zhat_ref[...] = z
    index = jnp.arange(losses_ref.shape[0], dtype=jnp.int32)
    losses_ref[...] = jnp.where(index == 0, first, jnp.where(index == 1, last, 0.0))


def _pad_to(a, shape):
    return jnp.pad(a, [(0, s - d) for d, s in zip(a.shape, shape)])


def infer_latent(key, teacher, student, zhat_init, loop: Loop, interpret=False, num_warps=8):
    """``loop.steps`` Adam steps on ẑ from ``zhat_init``, each on ``loop.batch`` fresh inputs drawn from key ``t`` of
    ``jax.random.split(key, steps)``, against the ``teacher`` = (first layer (n, h_T), readout (h_T, o)); the
    ``student`` = (modules (M̂, n, ĥ), readout (ĥ, o)). Returns ``(ẑ (M̂,), losses (2,))``: the loss before the first
    step and before the last. ``interpret``: Pallas' interpreter (any backend; for tests). Vmap it over tasks and
    runs."""
    (teacher_weight, teacher_readout), (modules, readout) = teacher, student
    batch, schedule, sampler = loop.batch, loop.schedule, loop.sampler
    if schedule not in SCHEDULES:
        raise ValueError(f"schedule must be one of {SCHEDULES}, got {schedule!r}")
    if sampler not in rng.SAMPLERS:
        raise ValueError(f"sampler must be one of {rng.SAMPLERS}, got {sampler!r}")
    if not fits(batch):
        raise ValueError(f"batch must be a power of two of at least 16 for the fused kernel, got {batch}")
    n_modules, n_in, hidden = modules.shape
    n_out = readout.shape[1]
    k, n, h, h_t, o = (padded(s) for s in (n_modules, n_in, hidden, teacher_weight.shape[1], n_out))
    inputs = (
        jax.random.key_data(key).astype(jnp.uint32),
        _pad_to(teacher_weight, (n, h_t)),
        _pad_to(teacher_readout, (h_t, o)),
        _pad_to(modules, (k, n, h)),
        _pad_to(readout, (h, o)),
        _pad_to(zhat_init, (k,)),
    )
    kernel = functools.partial(_kernel, sizes=(batch, n_in, n_out), loop=loop)
    from jax.experimental import pallas as pl

    params = None
    if not interpret:
        from jax.experimental.pallas import triton as plt

        params = plt.CompilerParams(num_warps=num_warps)
    zhat, losses = pl.pallas_call(
        kernel,
        out_shape=(jax.ShapeDtypeStruct((k,), jnp.float32), jax.ShapeDtypeStruct((16,), jnp.float32)),
        interpret=interpret,
        compiler_params=params,
        name="teacher_student_inner_loop",
    )(*inputs)
    return zhat[:n_modules], losses[:2]
