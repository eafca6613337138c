"""Timing one (backend, tactic) of a tunable op: warm-up, repetitions, the median.

On CUDA the time is measured with CUDA events on the current stream (device time, no host
overhead); on CPU with :func:`time.perf_counter` around each call.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

import torch

__all__ = ["measure"]


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
) -> float:
    """Median time of ``fn()`` in seconds, after ``warmup`` untimed calls.

    ``repeat`` timed calls are made, fewer when the warm-up shows that they would take more
    than ``budget_s`` (at least one).  Exceptions from ``fn`` propagate.
    """
    cuda = _uses_cuda(inputs)
    start = time.perf_counter()
    for _ in range(max(warmup, 0)):
        fn()
    if cuda:
        torch.cuda.synchronize()
    if warmup > 0 and budget_s is not None:
        per_call = (time.perf_counter() - start) / warmup
        if per_call > 0:
            repeat = max(1, min(repeat, int(budget_s / per_call)))
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
    return statistics.median(times)
