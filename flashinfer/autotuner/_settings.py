"""The tuner's timing settings (``AutoTuner.warmup``, ``repeat``, ``budget_s``,
``switch_margin``): what a valid value is, and the error that names the setting otherwise.

Timing is by time, as Triton's ``do_bench`` does (:mod:`flashinfer.autotuner.timing`): the
counts are *minimums* and the budget a limit.  ``warmup``: the least number of warm-up calls
after the first call (which is always made and never timed), warm-up going on until the
timings settle; ``repeat``: the least number of timed calls, which are taken for
:data:`~flashinfer.autotuner.timing.REPEAT_S` seconds; ``budget_s``: the most seconds one
(backend, tactic) is timed for after its first call, which wins over ``repeat`` (at least one
timed call).  No new setting was added: the time targets are constants of the timing module,
and these four are what the ranks of a process group compare
(:data:`flashinfer.autotuner.distributed.agreement.SETTINGS`).  A fifth,
``noisy_spread``, changes no pick: it says which saved measurements are noisy enough to be
timed again (:mod:`flashinfer.autotuner.block_report`), so the ranks do not compare it.

The :class:`~flashinfer.autotuner.AutoTuner` properties call these checks at the assignment,
so a bad value fails on the user's line, before any timing, and the value in effect stays
as it was.  Without them a negative or NaN margin, or ``repeat = 0``, surfaced later and far
away: a bare ``StopIteration`` while picking, or "no median for empty data" for every
backend, with no word about the setting.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

__all__ = [
    "DEFAULT_BUDGET_S",
    "DEFAULT_REPEAT",
    "DEFAULT_WARMUP",
    "check_budget_s",
    "check_noisy_spread",
    "check_repeat",
    "check_switch_margin",
    "check_warmup",
]

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
