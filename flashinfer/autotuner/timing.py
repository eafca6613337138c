"""Timing candidates and choosing among them: one (backend, tactic) timed the way Triton's
``do_bench`` does, every pair of a tuning key's plan, the pick, and the checks of the
tuner's timing settings (a bad value fails on the user's line).

The steps, constants and pick rules: docs/api/autotuner.rst ("How a pair is timed",
"Choosing under noise").  Timing synchronises, so it refuses while a CUDA graph is captured.
:func:`time_candidates` runs in one process; :mod:`.distributed` runs its pieces
(:func:`time_pairs`, :func:`decide`) across a process group."""

from __future__ import annotations

import functools
import logging
import math
import numbers
import statistics
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple, Protocol

import torch

from flashinfer import settings
from flashinfer.autotuner._types import (
    Choice,
    TacticFailure,
    TunableRunner,
    TuningRecord,
    describe_tactic,
    is_real_time,
    progress_callback,
)
from flashinfer.autotuner.keys import Key

#: Warm-up lasts at least this many seconds (Triton's ``do_bench`` default warm-up).
WARMUP_S = 0.025
#: Timed calls are taken for at least this many seconds (``do_bench``'s default ``rep``).
REPEAT_S = 0.1
#: A warm-up round lasts about this long (its median is compared with the round before).
ROUND_S = 0.005
#: Warm-up has settled when a round's median is within this fraction of the round before.
SETTLE_TOLERANCE = 0.05
#: Warm-up stops unsettled after this (or half of ``budget_s``): a busy machine is timed
#: anyway, and its spread says so.
WARMUP_MAX_S = 0.5
#: Bytes zeroed before each timed CUDA call (as ``do_bench``): more than any GPU's L2 cache.
FLUSH_BYTES = 256 * 1024 * 1024
#: A call is never estimated faster than this (a clock's resolution): call counts stay finite.
_FLOOR_S = 1e-7
#: The most calls one batch makes (a bound on the events and times a batch holds).
_MAX_CALLS = 1_000_000


class Median(float):
    """A median time in seconds (a ``float``, so code treating it as seconds works) carrying the
    ``iqr_s`` of its timed calls (0.0 for one call) and their count ``calls`` (0: unknown)."""

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
    """Q3 - Q1 (inclusive: stays within the data; robust to one slow outlier); 0.0 under 2 times."""
    if len(times) < 2:
        return 0.0
    q1, _, q3 = statistics.quantiles(times, n=4, method="inclusive")
    return q3 - q1


def stream_capturing() -> bool:
    """Whether the current CUDA stream captures a graph (never initialises CUDA)."""
    if not torch.cuda.is_initialized():
        return False
    return bool(torch.cuda.is_current_stream_capturing())


def refuse_during_capture(what: str = "tune") -> None:
    """:class:`TuningDuringCaptureError` while the current CUDA stream captures a graph."""
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
    """Times calls with :func:`time.perf_counter`."""

    def now(self) -> float:
        """Wall-clock seconds (what the time targets and the budget count)."""
        return time.perf_counter()

    def first(self, fn: Callable[[], Any]) -> None:
        fn()

    def run(self, fn: Callable[[], Any], n: int) -> list[float]:
        times = []
        clock = time.perf_counter
        for _ in range(n):
            t0 = clock()
            fn()
            times.append(clock() - t0)
        return times


class CudaClock(CpuClock):
    """CUDA events on the current stream, zeroing a :data:`FLUSH_BYTES` buffer before each call
    (``do_bench``'s L2 flush); without room for it, timed without the flush rather than failing."""

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
    """How many calls of ``per_call_s`` fit in ``seconds``: 1 to :data:`_MAX_CALLS`."""
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
    """Median time of ``fn()`` in seconds, with the IQR of the timed calls (:class:`Median`)."""
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
    """Warm-up rounds until settled; returns the seconds per call of the last round."""
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
    """Timed calls for :data:`REPEAT_S`, at least ``repeat``, until ``deadline`` (at least one),
    each batch half of what the time left allows."""
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


# The defaults of AutoTuner.warmup, .repeat and .budget_s (see their docstrings).
DEFAULT_WARMUP = 1
DEFAULT_REPEAT = 5
DEFAULT_BUDGET_S = 1.0


def _shown(value: Any) -> str:
    try:
        text = repr(value)
    except ValueError:  # an int past the interpreter's digit limit
        text = "(too long to show)"
    if len(text) > 60:  # a long string or container: its start is enough to recognise it
        text = text[:57] + "..."
    return f"{type(value).__name__} {text}"


def _as_float(value: Any) -> float:
    """``float(value)``; an int too large for a float counts as infinite."""
    try:
        return float(value)
    except OverflowError:
        return math.inf


#: The timing settings of ``AutoTuner``: name -> (an int, not a float?; the values taken;
#: what the ``TypeError`` and the ``ValueError`` say before "got <value>").
SETTINGS: dict[str, tuple[bool, Callable[[float], bool], str, str]] = {
    "switch_margin": (
        False,
        lambda v: math.isfinite(v) and v >= 0.0,
        "a number: the fraction another (backend, tactic) must be faster by to be picked, "
        "e.g. 0.03 for 3 %; ",
        "a finite number >= 0 (0.0 always takes the fastest median; 0.03, the default, is 3 %); ",
    ),
    "repeat": (
        True,
        lambda v: v >= 1,
        "an int (the least number of timed calls per (backend, tactic)), ",
        "at least 1: the median of the timed calls is what is compared, and it takes at least "
        "one call; ",
    ),
    "warmup": (
        True,
        lambda v: v >= 0,
        "an int (the least number of warm-up calls of a (backend, tactic) after its first call), ",
        "0 or more warm-up calls, ",
    ),
    "budget_s": (
        False,
        lambda v: math.isfinite(v) and v > 0.0,
        "a number of seconds (spent timing one (backend, tactic) at most), or None for no budget; ",
        "a finite number of seconds > 0, or None for no budget; ",
    ),
    "noisy_spread": (
        False,
        lambda v: v >= 0.0,  # NaN fails; math.inf: nothing is ever noisy
        "a number: the interquartile range of a measurement's timed calls, as a fraction of "
        "their median, above which it is noisy, e.g. 0.1 for 10 %; ",
        "a number >= 0 (0.1, the default, is 10 %; math.inf never calls a measurement noisy); ",
    ),
}


def check_setting(name: str, value: Any) -> Any:
    """``value`` as ``AutoTuner.<name>`` holds it, or ``TypeError``/``ValueError`` naming the
    setting (a bool is no number; ``budget_s`` may be None)."""
    integer, valid, a_type, a_value = SETTINGS[name]
    if value is None and name == "budget_s":
        return None
    kind: Any = numbers.Integral if integer else numbers.Real
    if not isinstance(value, kind) or isinstance(value, bool):
        raise TypeError(f"AutoTuner.{name} must be {a_type}got {_shown(value)}")
    number = int(value) if integer else _as_float(value)
    if not valid(number):
        raise ValueError(f"AutoTuner.{name} must be {a_value}got {_shown(value)}")
    return number


AUTOTUNER_LOG_ENV = "FLASHINFER_AUTOTUNER_LOG"

#: Relative margin a pair must beat the earliest near-fastest pair by.  Identical work timed
#: on a shared 2-core CPU (``benchmarks/bench_autotune.py``, "noise") differs by 2.3-2.4 % at
#: the 95th percentile: 3 % keeps such coin flips on the earlier pair.
DEFAULT_SWITCH_MARGIN = 0.03

_logger = logging.getLogger("flashinfer.autotuner")


def log(message: str) -> None:
    """One line to the ``flashinfer.autotuner`` logger (and stderr with the variable set)."""
    _logger.debug(message)
    if settings.read(AUTOTUNER_LOG_ENV):
        print(f"[flashinfer.autotuner] {message}", file=sys.stderr, flush=True)


def one_line_reason(exc: BaseException) -> str:
    """``Type: first line of the message``: Triton's errors span many lines."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.4f} ms"


class TimingSettings(Protocol):
    """What timing reads of the tuner (an :class:`~flashinfer.autotuner.AutoTuner`)."""

    warmup: int
    repeat: int
    budget_s: float | None
    switch_margin: float


class Pair(NamedTuple):
    """One (backend, tactic) of a plan, with the runner that runs it."""

    backend: str
    runner: TunableRunner
    tactic: Any

    @property
    def label(self) -> str:
        return f"{self.backend} {describe_tactic(self.tactic)}"


class Outcome(NamedTuple):
    """One pair's median and IQR in seconds, or (``median_s`` None) why it failed."""

    median_s: float | None
    iqr_s: float | None = None
    reason: str | None = None

    @property
    def ok(self) -> bool:
        return self.median_s is not None


def build_plan(
    runners: Mapping[str, TunableRunner], inputs: tuple, candidates: Sequence[str]
) -> list[Pair]:
    """Every (backend, tactic) of ``candidates`` that has a runner, the default first."""
    runs = [(b, runners[b]) for b in candidates if b in runners]
    return [Pair(b, runner, tactic) for b, runner in runs for tactic in runner.tactics(inputs)]


def _time_one(pair: Pair, inputs: tuple, settings: TimingSettings) -> Outcome:
    try:
        median = measure(
            functools.partial(pair.runner, inputs, pair.tactic),
            inputs,
            warmup=settings.warmup,
            repeat=settings.repeat,
            budget_s=settings.budget_s,
        )
    except TuningDuringCaptureError:  # not the tactic's failure: the whole tuning's
        raise
    except Exception as exc:  # a tactic that fails is not a candidate
        return Outcome(None, reason=one_line_reason(exc))
    if not is_real_time(median):
        return Outcome(None, reason=f"its time is not a finite number of seconds ({median!r})")
    iqr = getattr(median, "iqr_s", None)  # a plain float (a scripted timer) has no spread
    return Outcome(float(median), None if iqr is None else float(iqr))


def time_pairs(
    plan: Sequence[Pair],
    indices: Sequence[int],
    inputs: tuple,
    settings: TimingSettings,
) -> dict[int, Outcome]:
    """Time ``plan[i]`` for ``i`` in ``indices`` (never raising for a pair that fails), reporting
    progress to this thread's callback and logging each outcome."""
    progress = progress_callback()
    outcomes: dict[int, Outcome] = {}
    for done, i in enumerate(indices):
        pair = plan[i]
        if progress is not None:
            progress(done, len(indices), pair.label)
        outcome = outcomes[i] = _time_one(pair, inputs, settings)
        if outcome.median_s is not None:
            log(f"  {pair.label}: median {_ms(outcome.median_s)}{_spread(outcome.iqr_s, ' (')}")
        else:
            log(f"  {pair.label}: failed ({outcome.reason})")
    if progress is not None:
        progress(len(indices), len(indices), "done")
    return outcomes


def _spread(iqr_s: float | None, lead: str) -> str:
    """``IQR ...`` after ``lead`` (``" ("``: closed by a parenthesis), or nothing unknown."""
    if iqr_s is None:
        return ""
    return f"{lead}IQR {_ms(iqr_s)}" + (")" if lead.endswith("(") else "")


def pick(
    medians: Sequence[tuple[int, float]],
    margin: float,
    spreads: Mapping[int, float | None] | None = None,
) -> tuple[int, int]:
    """``(picked, fastest)``: the earliest pair tied with the fastest, and the fastest."""
    margin = check_setting("switch_margin", margin)
    fastest, fastest_s = min(medians, key=lambda item: item[1])
    bound = fastest_s * (1.0 + margin)
    spread = spreads or {}
    fastest_spread = spread.get(fastest) or 0.0

    def tied(i: int, median: float) -> bool:
        if median <= bound:
            return True
        return median - fastest_s <= ((spread.get(i) or 0.0) + fastest_spread) / 2

    picked = next(i for i, median in medians if tied(i, median))
    return picked, fastest


def decide(
    api_key: str,
    key: Key,
    plan: Sequence[Pair],
    outcomes: Mapping[int, Outcome],
    margin: float,
) -> TuningRecord:
    """The record of a tuning: every failed pair, and the pick among the others."""
    failures = tuple(
        TacticFailure(plan[i].backend, plan[i].tactic, outcomes[i].reason or "failed")
        for i in sorted(outcomes)
        if not outcomes[i].ok
    )
    medians = [(i, o.median_s) for i, o in sorted(outcomes.items()) if o.median_s is not None]
    if not medians:
        log(f"  no (backend, tactic) ran for {api_key}; using the default")
        return TuningRecord(key, None, True, len(plan), failures)
    spreads = {i: o.iqr_s for i, o in outcomes.items()}
    chosen, fastest = pick(medians, margin, spreads)
    by_margin = pick(medians, margin)[0]  # what the margin alone would pick
    too_noisy = chosen != by_margin
    best, outcome = plan[chosen], outcomes[chosen]
    assert outcome.median_s is not None
    note = ""
    if too_noisy:
        other = outcomes[by_margin]
        kept = "the default" if chosen == 0 else "the earlier pair"
        note = (
            f"; too noisy to choose: {plan[by_margin].label} ({_ms(other.median_s or 0.0)}"
            f"{_spread(other.iqr_s, ', ')}) is faster by less than the spread of their timed "
            f"calls, so {kept} is kept"
        )
    elif fastest != chosen:
        faster = outcomes[fastest].median_s
        note = (
            f"; {plan[fastest].label} ({_ms(faster or 0.0)}) is within the {margin:.0%} "
            "switch margin, and this one comes first"
        )
    spread = _spread(outcome.iqr_s, ", ")
    log(f"picked {best.label} for {api_key} ({_ms(outcome.median_s)}{spread}){note}")
    choice = Choice(best.backend, best.tactic, outcome.median_s)
    return TuningRecord(key, choice, True, len(plan), failures, outcome.iqr_s, too_noisy)


def time_candidates(
    api_key: str,
    runners: Mapping[str, TunableRunner],
    inputs: tuple,
    key: Key,
    candidates: Sequence[str],
    settings: TimingSettings,
) -> TuningRecord:
    """Time and pick among ``candidates``' pairs in this process (None: none timed)."""
    plan = build_plan(runners, inputs, candidates)
    log(f"tuning {api_key} for key {key}: {len(plan)} (backend, tactic) pairs")
    outcomes = time_pairs(plan, range(len(plan)), inputs, settings)
    return decide(api_key, key, plan, outcomes, settings.switch_margin)
