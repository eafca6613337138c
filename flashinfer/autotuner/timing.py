"""Timing one (backend, tactic) of a tunable op, the way Triton's ``do_bench`` does, and the
checks of the tuner's timing settings.

:func:`measure`: the first call made and never timed (imports, JIT, lazy initialisation);
warm-up in rounds of about :data:`ROUND_S` until a round's median is within
:data:`SETTLE_TOLERANCE` of the last (at least ``warmup`` calls and :data:`WARMUP_S`, at most
:data:`WARMUP_MAX_S` or half of ``budget_s``); timed calls for :data:`REPEAT_S` and at least
``repeat`` of them, cut by ``budget_s`` (never below one); the median with its interquartile
range (:class:`Median`).  On CUDA: CUDA events on the current stream, and a 256 MiB buffer
zeroed before each call so no call finds its inputs in L2; on CPU: ``time.perf_counter``.
Timing synchronises, so it refuses to start while the stream captures a CUDA graph
(:func:`refuse_during_capture`).  The user's guide: docs/api/autotuner.rst, "How a pair is
timed".

The ``check_*`` functions are what the ``AutoTuner`` properties run at the assignment, so a
bad value fails on the user's line, naming the setting, and the value in effect stays.
"""

from __future__ import annotations

import math
import numbers
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

import torch

__all__ = [
    "FLUSH_BYTES",
    "REPEAT_S",
    "ROUND_S",
    "SETTLE_TOLERANCE",
    "WARMUP_MAX_S",
    "WARMUP_S",
    "CpuClock",
    "CudaClock",
    "Median",
    "TuningDuringCaptureError",
    "interquartile_range",
    "measure",
    "refuse_during_capture",
    "stream_capturing",
    "DEFAULT_BUDGET_S",
    "DEFAULT_REPEAT",
    "DEFAULT_WARMUP",
    "check_budget_s",
    "check_noisy_spread",
    "check_repeat",
    "check_switch_margin",
    "check_warmup",
]

#: Warm-up lasts at least this many seconds (Triton's ``do_bench`` default warm-up).
WARMUP_S = 0.025
#: Timed calls are taken for at least this many seconds (``do_bench``'s default ``rep``).
REPEAT_S = 0.1
#: A warm-up round lasts about this long; its median call time is compared with the round
#: before it.
ROUND_S = 0.005
#: Warm-up has settled when a round's median is within this fraction of the round before.
SETTLE_TOLERANCE = 0.05
#: Warm-up that has not settled stops after this many seconds (or half of ``budget_s``,
#: whichever is less): a machine too busy to settle is timed anyway, and says so in the
#: spread of the result.
WARMUP_MAX_S = 0.5
#: Bytes of the buffer zeroed before each timed call on CUDA (as ``do_bench``): more than
#: any GPU's L2 cache, so no call finds the previous call's data there.
FLUSH_BYTES = 256 * 1024 * 1024
#: A call is never estimated faster than this (a clock's resolution), so that the number
#: of calls a time allows stays finite.
_FLOOR_S = 1e-7
#: The most calls one batch makes (a bound on the events and times a batch holds).
_MAX_CALLS = 1_000_000


class Median(float):
    """A median time in seconds (a ``float``) that carries the spread of the timed calls it
    is the median of: ``iqr_s``, their interquartile range (0.0 for a single call), and
    ``calls``, how many timed calls it is the median of (0: not known).

    A float, so that code (and tests) that treat a measurement as a number of seconds keep
    working; the tuner reads the spread with ``getattr(t, "iqr_s", None)``."""

    iqr_s: float
    calls: int

    def __new__(cls, median_s: float, iqr_s: float, calls: int = 0) -> Median:
        self = super().__new__(cls, median_s)
        self.iqr_s = iqr_s
        self.calls = calls
        return self

    def __reduce__(self) -> tuple[Any, ...]:
        return (Median, (float(self), self.iqr_s, self.calls))


class TuningDuringCaptureError(RuntimeError):
    """Tuning was asked for while the current CUDA stream captures a CUDA graph: timing
    synchronises the device, which capture forbids.  Tune before capturing, or load a tuned
    file; a ``RuntimeError``."""


def interquartile_range(times: Sequence[float]) -> float:
    """Third quartile minus first (inclusive method: stays within the data); 0.0 for fewer
    than two times.  Robust to the one slow outlier a busy machine adds, unlike a standard
    deviation."""
    if len(times) < 2:
        return 0.0
    q1, _, q3 = statistics.quantiles(times, n=4, method="inclusive")
    return q3 - q1


def stream_capturing() -> bool:
    """Whether the current CUDA stream is capturing a CUDA graph.  False without CUDA, and
    while CUDA is not initialised (nothing can capture then): the probe never initialises
    CUDA nor fails on a CPU-only build of torch."""
    if not torch.cuda.is_initialized():
        return False
    return bool(torch.cuda.is_current_stream_capturing())


def refuse_during_capture(what: str = "tune") -> None:
    """:class:`TuningDuringCaptureError` if the current CUDA stream is capturing a graph
    (:func:`stream_capturing`), naming ``what`` was asked and what to do instead."""
    if stream_capturing():
        raise TuningDuringCaptureError(
            f"flashinfer autotuner: cannot {what} while the current CUDA stream is capturing a "
            "CUDA graph: timing synchronises the device, which capture forbids. Tune before "
            "capturing (run the same shapes once inside autotune() first, then capture), or "
            "load a tuning file (autotune(tuning_file=path), or "
            "AutoTuner.get().load_tuning_file(path)) and capture outside autotune(), or inside "
            "autotune(False)"
        )


def _uses_cuda(inputs: tuple) -> torch.device | None:
    for x in inputs:
        if isinstance(x, torch.Tensor):
            return x.device if x.is_cuda else None
    return None


class CpuClock:
    """Times calls with :func:`time.perf_counter`, one reading on each side of a call."""

    def now(self) -> float:
        """Wall-clock seconds (what the time targets and the budget count)."""
        return time.perf_counter()

    def first(self, fn: Callable[[], Any]) -> None:
        """The first call: made, never timed."""
        fn()

    def run(self, fn: Callable[[], Any], n: int) -> list[float]:
        """``n`` calls of ``fn``; the seconds each took."""
        times = []
        clock = time.perf_counter
        for _ in range(n):
            t0 = clock()
            fn()
            times.append(clock() - t0)
        return times


class CudaClock(CpuClock):
    """Times calls with CUDA events on the current stream, zeroing a :data:`FLUSH_BYTES`
    buffer before each call, outside the events (the L2 cache flush of ``do_bench``).  On a
    device without room for the buffer the calls are timed without the flush rather than
    every pair failing with an out-of-memory error."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self._flush: torch.Tensor | None = None

    def first(self, fn: Callable[[], Any]) -> None:
        fn()
        torch.cuda.synchronize(self.device)
        try:
            self._flush = torch.empty(FLUSH_BYTES // 4, dtype=torch.int32, device=self.device)
        except torch.OutOfMemoryError:  # a device nearly full: time without the flush
            self._flush = None

    def run(self, fn: Callable[[], Any], n: int) -> list[float]:
        flush = self._flush
        events = [
            (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
            for _ in range(n)
        ]
        for begin, end in events:
            if flush is not None:
                flush.zero_()
            begin.record()
            fn()
            end.record()
        torch.cuda.synchronize(self.device)
        return [begin.elapsed_time(end) / 1000.0 for begin, end in events]


def _calls_in(seconds: float, per_call_s: float) -> int:
    """How many calls of ``per_call_s`` fit in ``seconds``: at least one, at most
    :data:`_MAX_CALLS` (also for an infinite time)."""
    if seconds == math.inf:
        return _MAX_CALLS
    if not seconds > 0:  # none left (or NaN)
        return 1
    return max(1, min(_MAX_CALLS, int(seconds / max(per_call_s, _FLOOR_S))))


def measure(
    fn: Callable[[], Any],
    inputs: tuple,
    *,
    warmup: int = 1,
    repeat: int = 5,
    budget_s: float | None = 1.0,
    clock: CpuClock | None = None,
) -> Median:
    """Median time of ``fn()`` in seconds, with the interquartile range of the timed calls
    as ``.iqr_s`` (see :class:`Median` and the module docstring for the steps).

    ``warmup``: the least number of warm-up calls after the first call (which is always
    made and never timed); ``repeat``: the least number of timed calls; ``budget_s``: the
    most seconds spent after the first call (``None`` or infinite: no limit), which wins
    over ``repeat`` (at least one timed call).  ``clock``: how calls are timed (default:
    CUDA events when the first tensor of ``inputs`` is on a CUDA device, else
    :func:`time.perf_counter`).

    Exceptions from ``fn`` propagate.  ``ValueError`` before any call for ``repeat < 1``
    (no timed call has no median) or ``warmup < 0``;
    :class:`TuningDuringCaptureError` before any call while the current CUDA stream
    captures a graph.
    """
    if repeat < 1 or warmup < 0:
        raise ValueError(
            f"measure(): repeat must be at least 1 and warmup at least 0, got repeat={repeat!r}, "
            f"warmup={warmup!r} (see AutoTuner.repeat and AutoTuner.warmup)"
        )
    refuse_during_capture("time a (backend, tactic)")
    if clock is None:
        device = _uses_cuda(inputs)
        clock = CpuClock() if device is None else CudaClock(device)
    budget = math.inf if budget_s is None else float(budget_s)

    clock.first(fn)  # one-time costs: never part of a measurement
    start = clock.now()
    per_call = _warm_up(fn, clock, warmup, start, budget)
    times = _repeats(fn, clock, repeat, start + budget, per_call)
    return Median(statistics.median(times), interquartile_range(times), len(times))


def _warm_up(
    fn: Callable[[], Any], clock: CpuClock, warmup: int, start: float, budget: float
) -> float:
    """Warm-up rounds until settled (see the module docstring); returns the wall-clock
    seconds per call of the last round (what the repeats are sized by)."""
    least_until = start + min(WARMUP_S, budget / 2)
    give_up_at = start + min(budget / 2, WARMUP_MAX_S)
    calls, previous, n = 0, None, 1
    while True:
        began = clock.now()
        current = statistics.median(clock.run(fn, n))
        now = clock.now()
        calls += n
        per_call = (now - began) / n
        settled = previous is not None and abs(current - previous) <= SETTLE_TOLERANCE * previous
        if calls >= warmup and ((settled and now >= least_until) or now >= give_up_at):
            return per_call
        previous = current
        n = _calls_in(ROUND_S, per_call)
        if calls >= warmup:  # the minimum is made: stay within half the budget
            n = min(n, _calls_in(give_up_at - now, per_call))
        else:
            n = max(n, warmup - calls) if now < give_up_at else warmup - calls


def _repeats(
    fn: Callable[[], Any], clock: CpuClock, repeat: int, deadline: float, per_call: float
) -> list[float]:
    """Timed calls for :data:`REPEAT_S` and at least ``repeat`` of them, until ``deadline``
    (at least one); each batch is half of what the time left allows, so the estimate of a
    call's cost is refined as the calls are made."""
    times: list[float] = []
    began = clock.now()
    target = began + REPEAT_S
    while True:
        now = clock.now()
        if times and now >= deadline:
            return times
        if len(times) >= repeat and now >= target:
            return times
        until = min(max(target, now), deadline)
        n = max(1, _calls_in((until - now) / 2, per_call))
        n = max(n, repeat - len(times))  # the minimum count ...
        n = min(n, _calls_in(deadline - now, per_call))  # ... unless the budget is spent
        t0 = clock.now()
        times += clock.run(fn, n)
        per_call = max((clock.now() - t0) / n, _FLOOR_S)


#: The least number of warm-up calls of a (backend, tactic) after its first call; warm-up
#: goes on until the timings settle (for at least ``timing.WARMUP_S``).
DEFAULT_WARMUP = 1
#: The least number of timed calls per (backend, tactic); they are taken for
#: ``timing.REPEAT_S`` seconds, and their median is kept.
DEFAULT_REPEAT = 5
#: Seconds spent on a (backend, tactic) after its first call at most (warm-up and timed
#: calls): a cheap call takes about ``timing.WARMUP_S + timing.REPEAT_S``, a slow one is
#: cut to fit (``repeat`` shrinks, never below one timed call).
DEFAULT_BUDGET_S = 1.0


def _shown(value: Any) -> str:
    try:
        text = repr(value)
    except ValueError:  # an int past the interpreter's digit limit
        text = "(too long to show)"
    if len(text) > 60:  # a long string or container: its start is enough to recognise it
        text = text[:57] + "..."
    return f"{type(value).__name__} {text}"


def _is_real(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _is_int(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _as_float(value: Any) -> float:
    """``float(value)``; an int too large for a float counts as infinite."""
    try:
        return float(value)
    except OverflowError:
        return math.inf


def check_switch_margin(value: Any) -> float:
    """``value`` as a float if it is a finite number >= 0; ``TypeError`` for anything that
    is not a number (``bool`` included), ``ValueError`` for a negative, NaN or infinite one."""
    if not _is_real(value):
        raise TypeError(
            "AutoTuner.switch_margin must be a number: the fraction another (backend, tactic) "
            f"must be faster by to be picked, e.g. 0.03 for 3 %; got {_shown(value)}"
        )
    margin = _as_float(value)
    if not (math.isfinite(margin) and margin >= 0.0):
        raise ValueError(
            "AutoTuner.switch_margin must be a finite number >= 0 (0.0 always takes the "
            f"fastest median; 0.03, the default, is 3 %); got {_shown(value)}"
        )
    return margin


def check_repeat(value: Any) -> int:
    """``value`` as an int if it is an int >= 1 (at least one timed call gives a median)."""
    if not _is_int(value):
        raise TypeError(
            f"AutoTuner.repeat must be an int (the least number of timed calls per (backend, "
            f"tactic)), got "
            f"{_shown(value)}"
        )
    if value < 1:
        raise ValueError(
            "AutoTuner.repeat must be at least 1: the median of the timed calls is what is "
            f"compared, and it takes at least one call; got {_shown(value)}"
        )
    return int(value)


def check_warmup(value: Any) -> int:
    """``value`` as an int if it is an int >= 0 (0: no warm-up call is required beyond the
    first call, which is always made and never timed; warm-up still runs until settled)."""
    if not _is_int(value):
        raise TypeError(
            f"AutoTuner.warmup must be an int (the least number of warm-up calls of a (backend, "
            f"tactic) after its first call), got {_shown(value)}"
        )
    if value < 0:
        raise ValueError(f"AutoTuner.warmup must be 0 or more warm-up calls, got {_shown(value)}")
    return int(value)


def check_budget_s(value: Any) -> float | None:
    """``value`` as a float if it is a finite number of seconds > 0, or None (no budget:
    the time targets alone end the timing, and every ``repeat`` call is made)."""
    if value is None:
        return None
    if not _is_real(value):
        raise TypeError(
            "AutoTuner.budget_s must be a number of seconds (spent timing one (backend, "
            f"tactic) at most), or None for no budget; got {_shown(value)}"
        )
    budget = _as_float(value)
    if not (math.isfinite(budget) and budget > 0.0):
        raise ValueError(
            "AutoTuner.budget_s must be a finite number of seconds > 0, or None for no "
            f"budget; got {_shown(value)}"
        )
    return budget


def check_noisy_spread(value: Any) -> float:
    """``value`` as a float if it is a number >= 0 (``math.inf``: no measurement is ever
    noisy); ``TypeError`` for anything that is not a number (``bool`` included),
    ``ValueError`` for a negative or NaN one."""
    if not _is_real(value):
        raise TypeError(
            "AutoTuner.noisy_spread must be a number: the interquartile range of a "
            "measurement's timed calls, as a fraction of their median, above which it is "
            f"noisy, e.g. 0.1 for 10 %; got {_shown(value)}"
        )
    spread = _as_float(value)
    if not spread >= 0.0:  # NaN too
        raise ValueError(
            "AutoTuner.noisy_spread must be a number >= 0 (0.1, the default, is 10 %; "
            f"math.inf never calls a measurement noisy); got {_shown(value)}"
        )
    return spread
