"""Will a config fit in memory? A lower bound from its traced programs, checked before anything compiles.

:func:`estimate` traces (does not compile) one outer step and one evaluation of a config, vmapped over its seeds as
the engine runs them, and adds the bytes of their inputs (the per-run arrays and the training state) to the bytes of
the largest array either program makes. That array exists at some moment of the step, so the sum is a lower bound
on the peak; :func:`check` refuses a config whose bound exceeds the device's memory with a one-line
:class:`compgen.params.ParameterError`, instead of a compilation that ends in ``RESOURCE_EXHAUSTED`` or a machine
that swaps.
"""

from __future__ import annotations

import math
import os
import re
from typing import NamedTuple

import jax
import numpy as np

try:
    from jax.extend.core import jaxprs_in_params
except ImportError:  # older jax
    from jax.core import jaxprs_in_params

from compgen import params

GB = 1e9


class Estimate(NamedTuple):
    """Bytes of the inputs, and of the largest array of the outer step (and of the evaluation), with its shape."""

    inputs: int
    step: int
    step_shape: tuple
    evaluate: int
    evaluate_shape: tuple

    @property
    def peak(self) -> int:
        """The lower bound on the peak: the inputs plus the larger of the two largest arrays."""
        return self.inputs + max(self.step, self.evaluate)


def _nbytes(aval) -> int:
    shape, dtype = getattr(aval, "shape", ()), getattr(aval, "dtype", None)
    if dtype is None:
        return 0
    try:
        itemsize = np.dtype(dtype).itemsize
    except TypeError:  # a PRNG key type
        itemsize = 8
    return math.prod(shape) * itemsize


def _largest(jaxpr) -> tuple[int, tuple]:
    """(bytes, shape) of the largest array any equation of ``jaxpr`` (or of its sub-programs) makes."""
    best = (0, ())
    for eqn in jaxpr.eqns:
        for var in eqn.outvars:
            size = _nbytes(var.aval)
            if size > best[0]:
                best = (size, tuple(var.aval.shape))
        for sub in jaxprs_in_params(eqn.params):
            best = max(best, _largest(sub), key=lambda b: b[0])
    return best


def estimate(cfg, prog, runs) -> Estimate:
    """The lower bound of the memory that the program ``prog`` of ``cfg`` needs on ``runs`` (see module docstring);
    traces, never compiles. The chunk is traced at the length the engine runs first (``eval_every`` steps)."""
    state = prog.init.trace(runs).out_info  # the state's shapes, traced and not run
    step = prog.steps.trace(runs, state, min(cfg.eval_every, cfg.outer_steps)).jaxpr
    evaluate = prog.evaluate.trace(runs, state).jaxpr
    inputs = sum(_nbytes(a) for a in jax.tree.leaves((runs, state)))
    return Estimate(inputs, *_largest(step.jaxpr), *_largest(evaluate.jaxpr))


def device_bytes() -> int:
    """Memory of the default device: an accelerator's limit as jax reports it, else the machine's RAM."""
    device = jax.devices()[0]
    if device.platform != "cpu":
        stats = device.memory_stats() or {}
        if stats.get("bytes_limit"):
            return int(stats["bytes_limit"])
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def too_large(section, cfg, error: OverflowError) -> params.ParameterError:
    """The one-line error of a config one of whose sizes is beyond what JAX indexes (int32), from the ``error`` that
    tracing it raised."""
    value = re.search(r"with value (\d+)", str(error))
    return params.ParameterError(
        f"{section.name} {section.label(cfg)}: a size of this config is too large to build its arrays"
        f"{f' (an array dimension of {value.group(1)})' if value else ''}; lower the sizes"
    )


def check(section, cfg, prog, runs, available: int | None = None) -> Estimate:
    """:func:`estimate` of ``cfg``, or a :class:`ParameterError` if it exceeds ``available`` bytes (default
    :func:`device_bytes`), naming the size that drives the larger program."""
    try:
        found = estimate(cfg, prog, runs)
    except OverflowError as error:  # a size beyond what JAX indexes (int32), e.g. hidden_factor=10**12
        raise too_large(section, cfg, error) from None
    available = device_bytes() if available is None else available
    if found.peak > available:
        in_step = found.step >= found.evaluate
        size = "meta_batch" if in_step else "eval_tasks"
        value = getattr(cfg, size, None)
        given = f"{size}={value}" if value is not None else "its sizes"
        raise params.ParameterError(
            f"{given} is too large for this machine: {section.name} {section.label(cfg)} needs at least "
            f"{found.peak / GB:,.1f} GB ({'an outer step' if in_step else 'the evaluation'} makes an array of shape "
            f"{found.step_shape if in_step else found.evaluate_shape} for {len(cfg.seeds)} seed(s)), this device has "
            f"{available / GB:,.1f} GB; lower {size}, the shots or the number of seeds"
        )
    return found
