"""The autotuner's vocabulary: what a tunable op and its runners look like, the records the
tuner keeps (a choice, a failure, a tuning), and what counts as a measured time.

Every other module of the package imports these; this one imports none of them but
:mod:`.keys` and :mod:`._stats`.  The public names are documented, and pickled, under
:mod:`flashinfer.autotuner.tuner`, which re-exports them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple, Protocol, runtime_checkable

from flashinfer.autotuner._stats import StatsBook
from flashinfer.autotuner.keys import Key
from flashinfer.dispatch.thread_state import PerThreadList
from flashinfer.gating.exposed import exposed_in

__all__ = [
    "Choice",
    "ProgressCallback",
    "TacticFailure",
    "TunableOp",
    "TunableRunner",
    "TunedResults",
    "TuningRecord",
]

ProgressCallback = Callable[[int, int, str], None]
"""``progress(done, total, label)``: called before each (backend, tactic) is timed and once
with ``done == total`` at the end of a tuning."""


# Pickles and reprs name the public home of these classes, which re-exports them, so that
# moving them between private modules never breaks a pickle.
_TUNER = exposed_in("flashinfer.autotuner.tuner")


@_TUNER
@runtime_checkable
class TunableRunner(Protocol):
    """One backend of a tunable op, as the autotuner sees it.

    * ``tactic_space()``: every tactic the runner could ever use, JSON-serialisable (a
      persisted result naming a tactic outside this space is skipped on load).  ``[None]``
      when there is nothing to tune.
    * ``tactics(inputs)``: the tactics valid for these inputs, default first.  Each must stay
      valid for every input of the same tuning key (see :mod:`flashinfer.autotuner.keys`).
    * ``__call__(inputs, tactic=None)``: run.  ``tactic=None`` means the runner's default,
      i.e. ``tactics(inputs)[0]``; the untuned path passes ``None`` so that it never has to
      call ``tactics()``.
    """

    def tactic_space(self) -> Sequence[Any]: ...

    def tactics(self, inputs: tuple) -> Sequence[Any]: ...

    def __call__(self, inputs: tuple, tactic: Any = None) -> Any: ...


@_TUNER
class TunableOp(Protocol):
    """What the tuner reads of an op: the function ``backend_requirement`` returns."""

    api_key: str
    api_name: str
    backend_checks: Mapping[str, Any]
    experimental_backends: frozenset[str]
    dispatcher: Any  # its BackendRequirementOp (route_auto)

    @property
    def suitable_auto_backends(self) -> PerThreadList: ...


@_TUNER
class Choice(NamedTuple):
    """A tuned result: the backend and tactic to run and the median time they took."""

    backend: str
    tactic: Any
    median_s: float


@_TUNER
class TacticFailure(NamedTuple):
    """A (backend, tactic) that could not be timed, and why (one line)."""

    backend: str
    tactic: Any
    reason: str


@_TUNER
class TuningRecord(NamedTuple):
    """What the last tuning-mode call of this thread did (see :meth:`AutoTuner.last_tuning`)."""

    key: Key
    choice: Choice | None  # None: nothing could be timed, the default ran
    timed: bool  # False: the key was already tuned (e.g. loaded from a tuning file)
    #: the (backend, tactic) pairs this call tried to time, and those that failed
    tried: int = 0
    failures: tuple[TacticFailure, ...] = ()
    #: the interquartile range of the choice's timed calls, in seconds: the spread of its
    #: median (None when not timed now, or timed by a timer that reports no spread)
    iqr_s: float | None = None
    #: True when a pair looked faster than the choice but by less than the spread of their
    #: timed calls: "too noisy to choose", the earlier pair (the default, if it was one of
    #: them) was kept (see :func:`~flashinfer.autotuner.candidate_timing.pick`)
    too_noisy: bool = False


class TunedResults(Protocol):
    """What the tuning file reads and writes of a tuner (an ``AutoTuner``)."""

    #: counts what was loaded, per op (``AutoTuner.stats()``)
    stats_book: StatsBook

    def registered(self) -> dict[str, tuple[TunableOp, Mapping[str, TunableRunner]]]: ...

    def choices(self) -> dict[Key, Choice]: ...

    def set_choice(self, key: Key, choice: Choice, *, iqr_s: float | None = None) -> None: ...

    def spread(self, key: Key) -> float | None: ...


def is_number(value: Any) -> bool:
    """An ``int`` or ``float`` (``True`` is not a number of seconds)."""
    return not isinstance(value, bool) and isinstance(value, (int, float))


def is_real_time(seconds: float) -> bool:
    """Whether a measured time is a result: finite and >= 0.  A time that is not finite is
    a broken measurement (and JSON cannot hold it).  An int too large for a float is not
    finite either."""
    try:
        return math.isfinite(seconds) and seconds >= 0
    except OverflowError:
        return False


def check_median(median_s: Any) -> None:
    """``TypeError`` unless ``median_s`` is a number, ``ValueError`` unless a real time."""
    if not is_number(median_s):
        raise TypeError(f"Choice.median_s must be a number of seconds, not {median_s!r}")
    if not is_real_time(median_s):
        raise ValueError(
            f"Choice.median_s must be a finite number of seconds >= 0, not {median_s!r}: "
            "a time that is not finite is a broken measurement, and JSON cannot hold it"
        )
