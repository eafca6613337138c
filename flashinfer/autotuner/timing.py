"""Timing one (backend, tactic) of a tunable op: warm-up, repetitions, the median and its
spread.

On CUDA the time is measured with CUDA events on the current stream (device time, no host
overhead); on CPU with :func:`time.perf_counter` around each call.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

import torch

__all__ = ["Median", "interquartile_range", "measure"]


class Median(float):
    """A median time in seconds (a ``float``) that carries the spread of the timed calls it
    is the median of: ``iqr_s``, their interquartile range (0.0 for a single call).

    A float, so that code (and tests) that treat a measurement as a number of seconds keep
    working; the tuner reads the spread with ``getattr(t, "iqr_s", None)``."""

    iqr_s: float

    def __new__(cls, median_s: float, iqr_s: float) -> Median:
        self = super().__new__(cls, median_s)
        self.iqr_s = iqr_s
        return self

    def __reduce__(self) -> tuple[Any, ...]:
        return (Median, (float(self), self.iqr_s))


def interquartile_range(times: Sequence[float]) -> float:
    """Third quartile minus first (inclusive method: stays within the data); 0.0 for fewer
    than two times.  Robust to the one slow outlier a busy machine adds, unlike a standard
    deviation."""
    if len(times) < 2:
        return 0.0
    q1, _, q3 = statistics.quantiles(times, n=4, method="inclusive")
    return q3 - q1


def _uses_cuda(inputs: tuple) -> bool:
    for x in inputs:
        if isinstance(x, torch.Tensor):
            return x.is_cuda
    return False


def measure(
    fn: Callable[[], Any],
    inputs: tuple,
    *,
    warmup: int = 1,
    repeat: int = 5,
    budget_s: float | None = 1.0,
) -> Median:
    """Median time of ``fn()`` in seconds, after ``warmup`` untimed calls, with the
    interquartile range of the timed calls as ``.iqr_s`` (see :class:`Median`).

    ``repeat`` timed calls are made, fewer when the warm-up shows that they would take more
    than ``budget_s`` (at least one).  Exceptions from ``fn`` propagate.  ``ValueError``
    before any call for ``repeat < 1`` (no timed call has no median) or ``warmup < 0``.
    """
    if repeat < 1 or warmup < 0:
        raise ValueError(
            f"measure(): repeat must be at least 1 and warmup at least 0, got repeat={repeat!r}, "
            f"warmup={warmup!r} (see AutoTuner.repeat and AutoTuner.warmup)"
        )
    cuda = _uses_cuda(inputs)
    start = time.perf_counter()
    for _ in range(warmup):
        fn()
    if cuda:
        torch.cuda.synchronize()
    if warmup > 0 and budget_s is not None:
        per_call = (time.perf_counter() - start) / warmup
        fits = budget_s / per_call if per_call > 0 else repeat
        if fits < repeat:  # False for an infinite (or NaN) budget: no int() of it
            repeat = max(1, int(fits))
    times: list[float] = []
    if cuda:
        events = [
            (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
            for _ in range(repeat)
        ]
        for begin, end in events:
            begin.record()
            fn()
            end.record()
        torch.cuda.synchronize()
        times = [begin.elapsed_time(end) / 1000.0 for begin, end in events]
    else:
        for _ in range(repeat):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
    return Median(statistics.median(times), interquartile_range(times))
