"""Spread one compiled training program over the local devices, by runs or by tasks.

Every section trains the seeds of same-shape configs as one program vmapped over a leading run
axis (:func:`compgen.experiments.compile_runs`).

* Inside :func:`use_devices` (the ``devices`` sweep backend) that axis is padded to a multiple of the
  device count (with copies of the first run, dropped again afterwards) and sharded over a
  one-dimensional :class:`jax.sharding.Mesh`, so each device trains its share of the runs. The runs
  are independent, so the numbers are those of training them on one device.
* Inside :func:`split_tasks` every run's meta-batch is split over the devices instead
  (:func:`compgen.meta.mean_over_tasks`): each device adapts its share of the tasks and the
  meta-gradients are averaged. This helps one large run, e.g. the paper's configuration on a
  multi-core CPU, where XLA otherwise runs most of a step's small per-task products on one core.

On a CPU, ``XLA_FLAGS=--xla_force_host_platform_device_count=N`` (set before jax is imported;
:func:`host_devices_flag`) makes N host devices, which is also how the tests check this without
accelerators.
"""

from __future__ import annotations

import contextlib
import contextvars

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

_MESH = contextvars.ContextVar("compgen_mesh", default=None)
_TASK_MESH = contextvars.ContextVar("compgen_task_mesh", default=None)


def current_mesh():
    """The mesh set by the enclosing :func:`use_devices`, or ``None``."""
    return _MESH.get()


def task_mesh():
    """The mesh set by the enclosing :func:`split_tasks`, or ``None``."""
    return _TASK_MESH.get()


def host_devices_flag(n: int) -> str:
    """The XLA flag that makes ``n`` CPU devices; it must be in ``XLA_FLAGS`` before jax starts its backend."""
    return f"--xla_force_host_platform_device_count={int(n)}"


@contextlib.contextmanager
def split_tasks(devices=None):
    """Training programs traced within the block split each meta-batch over ``devices`` (default: all local ones).

    The meta-batch must be a multiple of the device count; with one device nothing changes.
    """
    devices = jax.local_devices() if devices is None else list(devices)
    if not devices:
        raise ValueError("split_tasks needs at least one device")
    if current_mesh() is not None:
        raise ValueError("split_tasks cannot be combined with use_devices (the runs are already sharded)")
    token = _TASK_MESH.set(Mesh(np.array(devices), ("tasks",)) if len(devices) > 1 else None)
    try:
        yield _TASK_MESH.get()
    finally:
        _TASK_MESH.reset(token)


@contextlib.contextmanager
def use_devices(devices=None):
    """Within the block, training programs shard their run axis over ``devices`` (default: all local ones)."""
    devices = jax.local_devices() if devices is None else list(devices)
    if not devices:
        raise ValueError("use_devices needs at least one device")
    if task_mesh() is not None:
        raise ValueError("use_devices cannot be combined with split_tasks (the tasks are already split)")
    token = _MESH.set(Mesh(np.array(devices), ("runs",)))
    try:
        yield _MESH.get()
    finally:
        _MESH.reset(token)


def pad_runs(runs, multiple: int):
    """``runs`` (arrays with a leading run axis R) padded with copies of run 0 to a multiple of ``multiple``."""
    n = len(jax.tree.leaves(runs)[0])
    pad = -n % multiple
    if pad == 0:
        return runs
    index = jnp.concatenate([jnp.arange(n), jnp.zeros(pad, jnp.int32)])
    return jax.tree.map(lambda a: a[index], runs)


def compile_sharded(cfg, runs, init_run, outer_step, evaluate_run, scan_steps):
    """As :func:`compgen.experiments.compile_runs`, with the run axis sharded over the current mesh.

    Returns ``(init() -> state, chunk(state, n) -> (state, metrics (n, R_padded, ...)), evaluate(state))``.
    """
    mesh = current_mesh()
    by_run = NamedSharding(mesh, PartitionSpec("runs"))
    by_step_run = NamedSharding(mesh, PartitionSpec(None, "runs"))
    runs = jax.device_put(pad_runs(runs, mesh.size), by_run)
    step_all = lambda r, state: jax.vmap(lambda x, s: outer_step(cfg, x, s))(r, state)
    init = jax.jit(lambda r: jax.vmap(lambda x: init_run(cfg, x))(r), out_shardings=by_run)
    chunk = jax.jit(lambda r, state, n: scan_steps(lambda s: step_all(r, s), state, n), static_argnums=2,
                    out_shardings=(by_run, by_step_run))
    evaluate = jax.jit(lambda r, state: jax.vmap(lambda x, s: evaluate_run(cfg, x, s))(r, state),
                       out_shardings=by_run)
    return (lambda: init(runs)), (lambda state, n: chunk(runs, state, n)), (lambda state: evaluate(runs, state))
