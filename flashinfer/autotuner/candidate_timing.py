"""Timing every candidate (backend, tactic) of one tuning key, and choosing among them.

The plan is every pair of the candidates that have a runner, in the dispatcher's order (the
first is the default); the pick rules: docs/api/autotuner.rst ("Choosing under
noise").  :func:`time_candidates` runs in one process; its pieces (:func:`time_pairs`,
:func:`decide`) are what :mod:`.distributed` runs across a process group.
"""

from __future__ import annotations

import functools
import logging
import sys
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple, Protocol

from flashinfer import settings
from flashinfer.autotuner._state import progress_callback
from flashinfer.autotuner._types import (
    Choice,
    TacticFailure,
    TunableRunner,
    TuningRecord,
    describe_tactic,
    is_real_time,
)
from flashinfer.autotuner.keys import Key
from flashinfer.autotuner.timing import TuningDuringCaptureError, check_setting, measure

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
    plan = []
    for backend in candidates:
        runner = runners.get(backend)
        if runner is not None:
            plan += [Pair(backend, runner, tactic) for tactic in runner.tactics(inputs)]
    return plan


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
    """Time ``plan[i]`` for ``i`` in ``indices`` (never raising for a pair that fails),
    reporting progress to this thread's callback and logging each outcome."""
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
    """``(picked, fastest)``: the earliest pair tied with the fastest, and the fastest.
    Tied: within ``margin`` of it, or (``spreads``: index -> IQR, unknown as 0) a gap of at
    most half the sum of their spreads.  ``medians``: ``(index, median)`` in plan order."""
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
