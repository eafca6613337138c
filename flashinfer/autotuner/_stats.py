"""What the autotuner did, per op: :meth:`AutoTuner.stats` reads it, the tuner and the tuning
file write it.

Calls are counted on the hot path of a tuned call, so a count costs one C call: each
counter is an :func:`itertools.count`, and the code that serves a call holds its bound
``__next__``.  ``next()`` on a count is atomic under the GIL, so counting takes no lock;
reading a count advances it too, and the reads are subtracted.
"""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

from flashinfer.gating.exposed import exposed_in

__all__ = ["CallCounter", "OpStats", "StatsBook", "describe_tactic"]


@exposed_in("flashinfer.autotuner.tuner")
class OpStats(NamedTuple):
    """What the autotuner did for one op (:meth:`AutoTuner.stats`), since the process
    started (or :meth:`AutoTuner.clear`)."""

    #: keys timed in this process that got a choice
    keys_tuned: int = 0
    #: results loaded from tuning files (entries used, see :class:`LoadReport.loaded`)
    results_loaded: int = 0
    #: ``backend="auto"`` calls that ran a tuned (or loaded) choice
    calls_tuned: int = 0
    #: ``backend="auto"`` calls that ran the first candidate's default (no usable choice)
    calls_default: int = 0
    #: (backend, tactic) pairs that failed while tuning (raised, or timed not finite)
    tactics_failed: int = 0
    #: the last of them, ``"backend tactic: reason"`` (None: none failed)
    last_failure: str | None = None


_NOTHING = OpStats()


class CallCounter:
    """A count of calls: ``hit()`` adds one (a C call, no lock), :meth:`value` reads it."""

    __slots__ = ("_count", "_lock", "_reads", "hit")

    def __init__(self) -> None:
        self._count = itertools.count()
        self.hit: Callable[[], int] = self._count.__next__
        self._reads = 0
        self._lock = threading.Lock()

    def value(self) -> int:
        with self._lock:  # readers take a number each: count them exactly
            value = next(self._count) - self._reads
            self._reads += 1
        return value


class _OpBook:
    """The counts of one op."""

    __slots__ = ("calls_default", "calls_tuned", "failed", "last_failure", "loaded", "tuned")

    def __init__(self) -> None:
        self.tuned = self.loaded = self.failed = 0
        self.last_failure: str | None = None
        self.calls_tuned = CallCounter()
        self.calls_default = CallCounter()

    def stats(self) -> OpStats:
        return OpStats(
            self.tuned,
            self.loaded,
            self.calls_tuned.value(),
            self.calls_default.value(),
            self.failed,
            self.last_failure,
        )


class StatsBook:
    """Per op (by ``api_key``), what the tuner did: see :class:`OpStats`."""

    def __init__(self) -> None:
        self._ops: dict[str, _OpBook] = {}
        self._lock = threading.Lock()
        #: api_key -> the ``hit`` of its (tuned, default) call counters: what the call path
        #: reads (``hits.get(api_key)``, one C call; :meth:`call_hits` on a miss).
        self.hits: dict[str, tuple[Callable[[], int], Callable[[], int]]] = {}

    def op(self, api_key: str) -> _OpBook:
        book = self._ops.get(api_key)
        if book is None:
            with self._lock:
                book = self._ops.setdefault(api_key, _OpBook())
                self.hits[api_key] = (book.calls_tuned.hit, book.calls_default.hit)
        return book

    def call_hits(self, api_key: str) -> tuple[Callable[[], int], Callable[[], int]]:
        """``hits[api_key]``, created on first use."""
        self.op(api_key)
        return self.hits[api_key]

    def counters(self, api_key: str) -> tuple[CallCounter, CallCounter]:
        """The (tuned, default) call counters of ``api_key``, for code that serves calls."""
        book = self.op(api_key)
        return book.calls_tuned, book.calls_default

    def tuned(self, api_key: str, failures: Iterable[tuple[str, Any, str]], chosen: bool) -> None:
        """A tuning of one key of ``api_key`` ended: ``chosen`` if it got a choice;
        ``failures``: its failed pairs (:class:`TacticFailure`: backend, tactic, reason)."""
        book = self.op(api_key)
        with self._lock:
            book.tuned += chosen
            for backend, tactic, reason in failures:
                book.failed += 1
                book.last_failure = f"{backend} {describe_tactic(tactic)}: {reason}"

    def loaded(self, api_key: str, count: int) -> None:
        """``count`` results of ``api_key`` were loaded from a file."""
        book = self.op(api_key)
        with self._lock:
            book.loaded += count

    def snapshot(self) -> dict[str, OpStats]:
        """``api_key -> OpStats`` of every op something happened to."""
        with self._lock:
            books = sorted(self._ops.items())
        stats = {api_key: book.stats() for api_key, book in books}
        return {api_key: s for api_key, s in stats.items() if s != _NOTHING}


def describe_tactic(tactic: Any) -> str:
    """A tactic as the log, the stats and the command show it: JSON (sorted keys), or its
    ``repr`` when it is not JSON.  Here, at the bottom of the package's imports, so that
    every module describing tactics can use it."""
    try:
        return json.dumps(tactic, sort_keys=True)
    except (TypeError, ValueError):
        return repr(tactic)
