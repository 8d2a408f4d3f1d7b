"""Where a run's wall time goes: compiling XLA programs, training, evaluating.

A :class:`Stopwatch` times named parts of a run (``with clock.measure("train"): ...``). The seconds JAX spends
tracing, lowering and compiling programs inside a part (its monitoring events; overlapping or nested events
counted once; a persistent-cache hit counts as the time it took to load) are taken out of that part and reported
as ``compile``:

    clock = Stopwatch()
    with clock.measure("train"):
        state = step(state)          # the first call compiles
    clock.seconds()                  # {"compile": 12.3, "train": 40.1}

:func:`gemm_gflops` reads how fast this machine multiplies (a 1024² float32 GEMM), once per process; every stored run
records it (:func:`compgen.results.provenance`), so a time measured on one machine can be scaled to another. It is
the median of :data:`GEMM_READINGS` readings of 10 products each, which spread far less between processes than a
first reading alone (the measurements: ``book/records/choices.json``).
"""

from __future__ import annotations

import contextlib
import time

import jax

COMPILE_EVENTS = frozenset(
    {
        "/jax/core/compile/jaxpr_trace_duration",
        "/jax/core/compile/jaxpr_to_mlir_module_duration",
        "/jax/core/compile/backend_compile_duration",
    }
)
GEMM_SIZE = 1024
GEMM_READINGS = 5  # gemm_gflops takes their median
_gemm_reading: list = []  # this process's GEMM reading, once taken or given (gemm_gflops)


def jit_gflops(fn, args, flops, repeats=10):
    """GFLOP/s of ``jax.jit(fn)(*args)`` doing ``flops`` per call, after one warm-up call."""
    f = jax.jit(fn)
    f(*args).block_until_ready()
    start = time.perf_counter()
    for _ in range(repeats):
        f(*args).block_until_ready()
    return flops * repeats / (time.perf_counter() - start) / 1e9


def gemm_gflops(given: float | None = None) -> float:
    """GFLOP/s of a 1024² float32 matrix product on JAX's default device: the median of :data:`GEMM_READINGS`
    readings (:func:`jit_gflops`), taken once per process (about 0.4 s on 2 cores), or ``given`` by the process that
    started this one (a worker takes its parent's reading, made before the workers compete for the cores)."""
    if given is not None and not _gemm_reading:
        _gemm_reading.append(float(given))
    if not _gemm_reading:
        a = jax.random.normal(jax.random.key(0), (GEMM_SIZE, GEMM_SIZE))
        product = jax.jit(lambda a: a @ a)
        readings = sorted(jit_gflops(product, (a,), 2 * GEMM_SIZE**3) for _ in range(GEMM_READINGS))
        _gemm_reading.append(readings[len(readings) // 2])
    return _gemm_reading[0]


_spans: list = []  # (start, end) in time.time() seconds of every compile event seen since the first Stopwatch
_listening = False


def _record(event, start, end, **_):
    if event in COMPILE_EVENTS:
        _spans.append((start, end))


def covered(spans, start: float, end: float) -> float:
    """Seconds of ``[start, end]`` covered by the union of the intervals ``spans``."""
    total, reach = 0.0, start
    for a, b in sorted(spans):
        a, b = max(a, reach), min(b, end)
        if b > a:
            total, reach = total + b - a, b
    return total


class Stopwatch:
    """Wall seconds per named part of a run, with the compilation inside them counted apart."""

    def __init__(self):
        global _listening
        if not _listening:
            jax.monitoring.register_event_time_span_listener(_record)
            _listening = True
        self.parts: dict[str, float] = {"compile": 0.0}

    @contextlib.contextmanager
    def measure(self, part: str):
        start = time.time()
        try:
            yield
        finally:
            end = time.time()
            compiling = covered([s for s in _spans if s[1] > start], start, end)
            self.parts["compile"] += compiling
            self.parts[part] = self.parts.get(part, 0.0) + (end - start - compiling)

    def seconds(self) -> dict:
        """``{"compile": s, part: s, ...}``, rounded to milliseconds."""
        return {k: round(v, 3) for k, v in self.parts.items()}
