"""The bilevel meta-learning loop shared by every section.

The inner loop adapts a task's fast parameters with any optax optimiser, unrolled by
``lax.scan``; the outer loop differentiates the query loss through it. How gradients flow
through the unroll is a mode:

* ``"second_order"`` - the exact meta-gradient through every inner step (paper Alg. 2);
* ``"first_order"``  - inner gradients are treated as constants (the first-order MAML approximation);
* ``"stop_gradient"`` - the adapted fast parameters are constants (the theory section, App. C.1).

The outer step (:func:`outer_step`) averages the task losses and their meta-gradient over a batch of
tasks (:func:`mean_over_tasks`) and applies the outer optimiser, never with a non-finite gradient or
update (:func:`outer_update`). Training runs these steps in compiled chunks of ``lax.scan``
(:func:`scan_steps`; driven by :mod:`compgen.runner`).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax

GRADIENT_MODES = ("second_order", "first_order", "stop_gradient")


def inner_adapt(
    loss_fn, fast_init, optimizer: optax.GradientTransformation, num_steps, key, mode="second_order", remat=False
):
    """Run ``num_steps`` of ``optimizer`` on ``loss_fn(fast, key) -> scalar`` from ``fast_init``.

    The optimiser state starts fresh. ``key`` is split into one key per step, so ``loss_fn`` can
    draw a fresh batch (infinite data) or a minibatch each step, or ignore its key (full batch).
    With ``remat`` the meta-backward recomputes each inner step instead of storing its intermediates
    (only the fast parameters and optimiser state are kept per step): the same gradient in about half
    the memory, for some extra compute.
    Returns ``(fast, losses)`` with ``losses`` (num_steps,) the loss before each step.
    """
    if mode not in GRADIENT_MODES:
        raise ValueError(f"mode must be one of {GRADIENT_MODES}, got {mode!r}")

    def step(carry, step_key):
        fast, opt_state = carry
        loss, grads = jax.value_and_grad(loss_fn)(fast, step_key)
        if mode == "first_order":
            grads = jax.lax.stop_gradient(grads)
        updates, opt_state = optimizer.update(grads, opt_state, fast)
        return (optax.apply_updates(fast, updates), opt_state), loss

    keys = jax.random.split(key, num_steps)
    if remat:
        step = jax.checkpoint(step)
    (fast, _), losses = jax.lax.scan(step, (fast_init, optimizer.init(fast_init)), keys)
    if mode == "stop_gradient":
        fast = jax.lax.stop_gradient(fast)
    return fast, losses


def scan_steps(step_fn, state, num_steps):
    """Apply ``step_fn(state) -> (state, metrics)`` ``num_steps`` times; metrics stacked on axis 0."""
    return jax.lax.scan(lambda s, _: step_fn(s), state, None, length=num_steps)


# --------------------------------------------------------------------------------------------- few-shot


class InnerLoop(NamedTuple):
    """How a task's fast parameters are adapted, as one value (in optax's manner): ``num_steps`` of ``optimizer``,
    each on the whole support set or, with ``batch``, on a minibatch drawn with replacement; the meta-gradient
    through it by ``mode`` (:data:`GRADIENT_MODES`), recomputing each step in the backward pass with ``remat``
    (:func:`inner_adapt`); with ``precompute_features`` the fast-independent part of the model (ANIL's body) runs
    once on the support set instead of once per step (the gradient is the same)."""

    optimizer: optax.GradientTransformation
    num_steps: int
    batch: int | None = None
    mode: str = "second_order"
    remat: bool = False
    precompute_features: bool = True


def adapt(model, meta_params, support, loss_fn, loop: InnerLoop, key):
    """Adapt a task's fast parameters on its support set (the paper's Alg. 2) by the inner ``loop``.

    ``support`` = (x (N, n_in), y) with ``y`` an array or pytree of arrays with leading axis N (e.g.
    targets and a mask); ``loss_fn(prediction, y) -> scalar``. Returns ``(fast, inner_losses (num_steps,))``.
    """
    x, y = support
    inputs = model.features(meta_params, x) if loop.precompute_features else x
    forward = (
        (lambda fast, h: model.head(meta_params, fast, h))
        if loop.precompute_features
        else (lambda fast, h: model.apply(meta_params, fast, h))
    )

    def inner_loss(fast, step_key):
        if loop.batch is None:
            return loss_fn(forward(fast, inputs), y)
        idx = jax.random.randint(step_key, (loop.batch,), 0, x.shape[0])
        return loss_fn(forward(fast, inputs[idx]), jax.tree.map(lambda a: a[idx], y))

    fast_init = model.fast_init(meta_params)
    return inner_adapt(inner_loss, fast_init, loop.optimizer, loop.num_steps, key, loop.mode, loop.remat)


def fewshot_loss(model, meta_params, support, query, loss_fn, loop: InnerLoop, key):
    """Query loss of one task after adaptation on its support set by the inner ``loop`` (:func:`adapt`);
    differentiable w.r.t. ``meta_params``. ``query`` = (x, y) like ``support``. Returns ``(loss, (fast, query
    prediction))``."""
    fast, _ = adapt(model, meta_params, support, loss_fn, loop, key)
    prediction = model.apply(meta_params, fast, query[0])
    return loss_fn(prediction, query[1]), (fast, prediction)


def mean_over_tasks(task_loss, params, tasks, keys, fixed=None, chunk=None, mesh=None):
    """Value and gradient in ``params`` of the mean over tasks of ``task_loss(params, task, key, fixed) -> (loss,
    aux)``.

    ``tasks`` and ``keys`` are pytrees with a leading task axis; the tasks are vmapped. ``fixed`` is a pytree every
    task reads but nothing is differentiated in (a teacher, an initial latent); it is passed as an argument, not
    closed over, so that a split (below) replicates it onto each device. Returns ``((mean loss, aux averaged over
    tasks), gradient)``. With ``chunk`` the tasks are taken ``chunk`` at a time, one chunk after another
    (``lax.map``), and the chunks' means averaged: the same result up to float32 round-off, with one chunk's inner
    loops in memory at a time instead of all of them, which on a CPU also keeps them in its caches. With a ``mesh``
    (a one-axis :class:`jax.sharding.Mesh`, :func:`compgen.devices.shard_tasks`) the task axis is sharded over its
    devices (each device chunks its share): each device differentiates its share of the tasks and one all-reduce
    averages the results, which equal the single-device ones up to float32 round-off.
    """

    def local(params, tasks, keys, fixed):
        def mean_loss(p, tasks, keys):
            losses, aux = jax.vmap(task_loss, (None, 0, 0, None))(p, tasks, keys, jax.lax.stop_gradient(fixed))
            return losses.mean(), jax.tree.map(jnp.mean, aux)

        n_local = len(jax.tree.leaves(keys)[0])
        if chunk is None or chunk >= n_local:
            return jax.value_and_grad(mean_loss, has_aux=True)(params, tasks, keys)
        if n_local % chunk:
            raise ValueError(
                f"train_chunk ({chunk}) must divide the tasks each device adapts ({n_local} of the meta-batch)"
            )
        in_chunks = lambda a: a.reshape((n_local // chunk, chunk) + a.shape[1:])
        per_chunk = jax.lax.map(
            lambda chunk_of: jax.value_and_grad(mean_loss, has_aux=True)(params, *chunk_of),
            (jax.tree.map(in_chunks, tasks), jax.tree.map(in_chunks, keys)),
        )
        return jax.tree.map(lambda a: a.mean(0), per_chunk)

    if mesh is None:
        return local(params, tasks, keys, fixed)
    n_tasks, axis = len(jax.tree.leaves(keys)[0]), mesh.axis_names[0]
    if n_tasks % mesh.size:
        raise ValueError(
            f"meta_batch ({n_tasks}) must be a multiple of the devices the tasks are sharded over ({mesh.size})"
        )
    split, whole = jax.sharding.PartitionSpec(axis), jax.sharding.PartitionSpec()
    # Each shard's gradient is complete before the single pmean (check_vma off: no per-step collectives
    # are inserted in the differentiated inner loops).
    sharded = jax.shard_map(
        lambda p, t, k, f: jax.lax.pmean(local(p, t, k, f), axis),
        mesh=mesh,
        in_specs=(whole, split, split, whole),
        out_specs=whole,
        check_vma=False,
    )
    return sharded(params, tasks, keys, fixed)


# --------------------------------------------------------------------------------------------- outer loop


def outer_optimizer(learning_rate, clip_norm, weight_decay):
    """Global-norm clipping then AdamW (the few-shot sections, App. D); ``learning_rate`` is a float or an
    optax schedule."""
    return optax.chain(optax.clip_by_global_norm(clip_norm), optax.adamw(learning_rate, weight_decay=weight_decay))


def outer_init(optimizer: optax.GradientTransformation, params):
    """The outer optimiser's state with the counters of :func:`outer_update`."""
    return {
        "optimizer": optimizer.init(params),
        "skipped": jnp.zeros((), jnp.int32),
        "streak": jnp.zeros((), jnp.int32),
    }


def _finite(tree):
    """Whether every entry of ``tree`` is finite: one reduction over its leaves concatenated. (Reducing each leaf
    and combining the flags compiles to a chain of one ``and`` per leaf, which XLA then copies into the update of
    every leaf: a program quadratic in the number of leaves, the largest part of a hypernetwork's step on a CPU.)"""
    return jnp.all(jnp.isfinite(jnp.concatenate([jnp.ravel(leaf) for leaf in jax.tree.leaves(tree)])))


def outer_update(optimizer: optax.GradientTransformation, params, state, grads):
    """One outer update, applied only if the gradient and the update are finite everywhere.

    A non-finite step leaves the parameters and the optimiser state as they were and is counted:
    ``state["skipped"]`` (all so far) and ``state["streak"]`` (consecutive, reset by a finite step).
    Returns ``(params, state, {"grad_norm", "skipped", "streak"})``.
    """
    updates, inner = optimizer.update(grads, state["optimizer"], params)
    new_params = optax.apply_updates(params, updates)
    finite = _finite(grads) & _finite(updates)
    keep = lambda new, old: jnp.where(finite, new, old)
    skipped = state["skipped"] + (~finite).astype(jnp.int32)
    streak = jnp.where(finite, 0, state["streak"] + 1).astype(jnp.int32)
    state = {"optimizer": jax.tree.map(keep, inner, state["optimizer"]), "skipped": skipped, "streak": streak}
    return (
        jax.tree.map(keep, new_params, params),
        state,
        {"grad_norm": optax.tree.norm(grads), "skipped": skipped, "streak": streak},
    )


class TaskBatch(NamedTuple):
    """An outer step's tasks: ``tasks`` and ``keys`` with a leading task axis, and what every task reads but nothing is
    differentiated in (``fixed``: a teacher, a world; :func:`mean_over_tasks`)."""

    tasks: object
    keys: object
    fixed: object = None


def outer_step(task_loss, params, state, optimizer, batch: TaskBatch, chunk=None, mesh=None):
    """Mean task loss over a ``batch`` of tasks, its meta-gradient (:func:`mean_over_tasks`, ``chunk`` tasks at a
    time, sharded over ``mesh``) and one guarded outer update (:func:`outer_update`).
    ``task_loss(params, task, key, fixed) -> (loss, aux dict)``.

    Returns ``(params, state, metrics)`` with ``metrics`` the mean loss, the mean of each aux entry, the
    gradient norm and the skip counters.
    """
    (loss, aux), grads = mean_over_tasks(task_loss, params, *batch, chunk, mesh)
    params, state, stats = outer_update(optimizer, params, state, grads)
    return params, state, {"loss": loss, **aux, **stats}


def inner_optimizer(learning_rate, weight_decay=1e-4):
    """The inner AdamW of the few-shot sections: optax defaults with eps_root for a finite second-order gradient."""
    return optax.adamw(learning_rate, eps_root=1.19e-7, weight_decay=weight_decay)
