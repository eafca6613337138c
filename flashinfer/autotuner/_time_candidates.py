"""Timing every candidate (backend, tactic) of one tuning key, and recording what failed.

**Failures.** A (backend, tactic) that raises, or whose time is not finite, is not a
candidate: it is left out, and the :class:`~flashinfer.autotuner.TuningRecord` lists it
with a one-line reason (:class:`~flashinfer.autotuner.TacticFailure`).  When every pair
fails the record holds no choice (the key stays untuned and the call runs the first
candidate's default).

**Logging.** Every timing, failure and pick is logged at DEBUG level to the
``flashinfer.autotuner`` logger; with ``FLASHINFER_AUTOTUNER_LOG=1`` the same lines are also
written to stderr (prefixed ``[flashinfer.autotuner]``), the way
``TRITON_PRINT_AUTOTUNING=1`` does it.  The variable is read at each line, so it can be
set at any time.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from ._state import progress_callback
from ._types import Choice, TacticFailure, TunableRunner, TuningRecord, is_real_time
from .keys import Key
from .timing import measure

__all__ = ["AUTOTUNER_LOG_ENV", "one_line_reason", "time_candidates"]

AUTOTUNER_LOG_ENV = "FLASHINFER_AUTOTUNER_LOG"

_logger = logging.getLogger("flashinfer.autotuner")


def _log(message: str) -> None:
    _logger.debug(message)
    if os.environ.get(AUTOTUNER_LOG_ENV) == "1":
        print(f"[flashinfer.autotuner] {message}", file=sys.stderr, flush=True)


def _describe_tactic(tactic: Any) -> str:
    try:
        return json.dumps(tactic, sort_keys=True)
    except (TypeError, ValueError):
        return repr(tactic)


def one_line_reason(exc: BaseException) -> str:
    """``Type: first line of the message``: Triton's errors span many lines."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__


def time_candidates(
    api_key: str,
    runners: Mapping[str, TunableRunner],
    inputs: tuple,
    key: Key,
    candidates: Sequence[str],
    *,
    warmup: int,
    repeat: int,
    budget_s: float,
) -> TuningRecord:
    """Time every (backend, tactic) of ``candidates`` that has a runner on ``inputs``; the
    record's choice is the fastest (None when none could be timed).  Reports progress to
    this thread's callback (see :data:`~flashinfer.autotuner.ProgressCallback`)."""
    plan = []
    for backend in candidates:
        runner = runners.get(backend)
        if runner is None:
            continue
        for tactic in runner.tactics(inputs):
            plan.append((backend, runner, tactic))
    progress = progress_callback()
    results: list[Choice] = []
    failures: list[TacticFailure] = []
    _log(f"tuning {api_key} for key {key}: {len(plan)} (backend, tactic) pairs")
    for i, (backend, runner, tactic) in enumerate(plan):
        label = f"{backend} {_describe_tactic(tactic)}"
        if progress is not None:
            progress(i, len(plan), label)
        try:
            median = measure(
                functools.partial(runner, inputs, tactic),
                inputs,
                warmup=warmup,
                repeat=repeat,
                budget_s=budget_s,
            )
        except Exception as exc:  # a tactic that fails is not a candidate
            reason = one_line_reason(exc)
        else:
            if is_real_time(median):
                _log(f"  {label}: median {median * 1e3:.4f} ms")
                results.append(Choice(backend, tactic, median))
                continue
            reason = f"its time is not a finite number of seconds ({median!r})"
        _log(f"  {label}: failed ({reason})")
        failures.append(TacticFailure(backend, tactic, reason))
    if progress is not None:
        progress(len(plan), len(plan), "done")
    if not results:
        _log(f"  no (backend, tactic) ran for {api_key}; using the default")
        return TuningRecord(key, None, True, len(plan), tuple(failures))
    best = min(results, key=lambda c: c.median_s)
    _log(
        f"picked {best.backend} {_describe_tactic(best.tactic)} for {api_key} "
        f"({best.median_s * 1e3:.4f} ms)"
    )
    return TuningRecord(key, best, True, len(plan), tuple(failures))
