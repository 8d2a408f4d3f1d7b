"""Where a run's wall time goes: compiling XLA programs, training, evaluating.

A :class:`Stopwatch` times named parts of a run (``with clock.measure("train"): ...``). The seconds JAX spends
tracing, lowering and compiling programs inside a part (its monitoring events; overlapping or nested events
counted once; a persistent-cache hit counts as the time it took to load) are taken out of that part and reported
as ``compile``:

    clock = Stopwatch()
    with clock.measure("train"):
        state = step(state)          # the first call compiles
    clock.seconds()                  # {"compile": 12.3, "train": 40.1}
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
