"""The autotuner's vocabulary: a tunable op and its runners, the records the tuner keeps,
what counts as a measured time, the per-op counts, and the per-thread tuning state.  Public
names are documented (and pickled) under :mod:`flashinfer.autotuner.tuner`.

The state is ContextVars, not process-wide flags: threads entering and leaving overlapping
blocks each restore their own, and a thread serving requests never times kernels because
another thread tunes."""

from __future__ import annotations

import itertools
import json
import math
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextvars import ContextVar, Token
from typing import Any, NamedTuple, Protocol, runtime_checkable

from flashinfer.autotuner.keys import Key
from flashinfer.dispatch.thread_state import PerThreadList
from flashinfer.gating.exposed import exposed_in

ProgressCallback = Callable[[int, int, str], None]
"""``progress(done, total, label)``: called before each (backend, tactic) is timed and once
with ``done == total`` at the end of a tuning."""


# Pickles name the public home: moving a class between private modules breaks none.
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
    #: them) was kept (see :func:`~flashinfer.autotuner.timing.pick`)
    too_noisy: bool = False


class TunedResults(Protocol):
    """What the tuning file reads and writes of a tuner (an ``AutoTuner``)."""

    #: counts what was loaded, per op (``AutoTuner.stats()``)
    stats_book: StatsBook

    def registered(self) -> dict[str, tuple[TunableOp, Mapping[str, TunableRunner]]]: ...

    def choices(self) -> dict[Key, Choice]: ...

    def set_choice(self, key: Key, choice: Choice, *, iqr_s: float | None = None) -> None: ...

    def spread(self, key: Key) -> float | None: ...

    #: key -> (the loaded Choice, its file's fingerprint)
    loaded_from: dict[Key, tuple[Choice, dict[str, Any]]]

    def loaded_fingerprint(self, key: Key, choice: Choice) -> dict[str, Any] | None: ...


def is_number(value: Any) -> bool:
    """An ``int`` or ``float`` (``True`` is not a number of seconds)."""
    return not isinstance(value, bool) and isinstance(value, (int, float))


def is_real_time(seconds: float) -> bool:
    """Whether a measured time is a result: finite (JSON holds it) and >= 0."""
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


class StatsBook:
    """Per op (by ``api_key``), what the tuner did: see :class:`OpStats`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        #: api_key -> [keys tuned, results loaded, tactics failed, the last failure]
        self._counts: dict[str, list[Any]] = {}
        #: api_key -> its (tuned, default) call counters, for the code that serves calls
        self.calls: dict[str, tuple[CallCounter, CallCounter]] = {}

    def counters(self, api_key: str) -> tuple[CallCounter, CallCounter]:
        found = self.calls.get(api_key)
        if found is None:
            with self._lock:
                found = self.calls.setdefault(api_key, (CallCounter(), CallCounter()))
        return found

    def add(self, api_key: str, tuned: int = 0, loaded: int = 0, failures: Iterable = ()) -> None:
        """Keys tuned, results loaded and the ``(backend, tactic, reason)`` failed of an op."""
        with self._lock:
            counts = self._counts.setdefault(api_key, [0, 0, 0, None])
            counts[0] += tuned
            counts[1] += loaded
            for backend, tactic, reason in failures:
                counts[2] += 1
                counts[3] = f"{backend} {describe_tactic(tactic)}: {reason}"

    def snapshot(self) -> dict[str, OpStats]:
        """``api_key -> OpStats`` of every op something happened to."""
        with self._lock:
            api_keys = sorted({*self._counts, *self.calls})
        stats = {}
        for api_key in api_keys:
            tuned, loaded, failed, last = self._counts.get(api_key, (0, 0, 0, None))
            counters = self.calls.get(api_key)
            on, off = (counters[0].value(), counters[1].value()) if counters else (0, 0)
            stats[api_key] = OpStats(tuned, loaded, on, off, failed, last)
        return {api_key: s for api_key, s in stats.items() if s != _NOTHING}


def describe_tactic(tactic: Any) -> str:
    """A tactic as the log, the stats and the command show it: JSON (sorted keys), or its ``repr``
    when it is not JSON."""
    try:
        return json.dumps(tactic, sort_keys=True)
    except (TypeError, ValueError):
        return repr(tactic)


# ---- the per-thread tuning state ----------------------------------------------------------

_tuning: ContextVar[bool] = ContextVar("flashinfer_autotune_enabled", default=False)
_progress: ContextVar[ProgressCallback | None] = ContextVar(
    "flashinfer_autotune_progress", default=None
)
#: Keys tuned in the innermost block (None outside any): with none, the file is not touched.
_new_keys: ContextVar[list[Key] | None] = ContextVar("flashinfer_autotune_new_keys", default=None)

#: api_keys of the ops the enclosing ``autotune(skip_ops=...)`` blocks leave untuned.
_skipped: ContextVar[frozenset[str]] = ContextVar(
    "flashinfer_autotune_skipped_ops", default=frozenset()
)

BlockTokens = tuple[
    Token[bool], Token[ProgressCallback | None], Token[list[Key] | None], Token[frozenset[str]]
]

#: :func:`is_tuning` for the call paths: the ContextVar's own ``get`` (no Python frame).
tuning_now = _tuning.get

#: This thread's progress callback (None: none), for the timing of candidates.
progress_callback = _progress.get

#: The api_keys of the ops this thread's blocks skip: they run their default, untimed.
skipped_ops = _skipped.get


def is_tuning() -> bool:
    """Whether the current thread (or task) is inside an enabled ``autotune()`` block."""
    return _tuning.get()


def enter_block(
    enabled: bool, progress: ProgressCallback | None, skip: frozenset[str] = frozenset()
) -> BlockTokens:
    """Set this thread's state for a block (``skip`` adds to the enclosing blocks')."""
    skipped = _skipped.set(_skipped.get() | skip)
    return _tuning.set(enabled), _progress.set(progress), _new_keys.set([]), skipped


def leave_block(tokens: BlockTokens) -> list[Key]:
    """Restore the state before the block; the keys it tuned count for the enclosing one too."""
    tuning, progress, new_keys, skipped = tokens
    tuned_here = _new_keys.get() or []
    _skipped.reset(skipped)
    _new_keys.reset(new_keys)
    _progress.reset(progress)
    _tuning.reset(tuning)
    outer = _new_keys.get()
    if outer is not None:
        outer.extend(tuned_here)
    return tuned_here


def note_tuned(key: Key) -> None:
    """Record that this thread tuned ``key`` (its innermost block saves it on exit)."""
    new_keys = _new_keys.get()
    if new_keys is not None:
        new_keys.append(key)


#: The default ``AutoTuner.noisy_spread``.  ``benchmarks/bench_measure_spread.py`` on a
#: shared 2-core CPU: a small matmul's spread is 5 % at the 90th percentile unloaded, 10-19 %
#: loaded; 10 % flags the loaded outliers (a wrong flag costs one more timing later).
NOISY_SPREAD = 0.10


def is_noisy(median_s: float, iqr_s: float | None, limit: float = NOISY_SPREAD) -> bool:
    """Whether a measurement's spread (``iqr_s``, None: unknown) is more than ``limit``
    (``AutoTuner.noisy_spread``) of its median."""
    return iqr_s is not None and median_s > 0 and iqr_s > limit * median_s


#: The report of this context's outermost ``autotune()`` block (None outside any).
report_var: ContextVar[Any] = ContextVar("flashinfer_autotune_report", default=None)

#: :func:`current_report` for the tuning path: the ContextVar's own ``get``.
current_report = report_var.get


# ---- which ops a block's skip_ops names ---------------------------------------------------

_HOW = (
    "name each op by the op itself (e.g. flashinfer.mm), its API name (e.g. 'mm') or its "
    "qualified name (e.g. 'flashinfer.gemm.mm')"
)


def _shown(item: Any) -> str:
    text = repr(item)
    return text if len(text) <= 80 else text[:77] + "..."


def resolve_skip_ops(
    names: Iterable[Any] | None, registered: Callable[[], Mapping[str, tuple[Any, Any]]]
) -> frozenset[str]:
    """The api_keys of the ops ``names`` names among ``registered()`` (read once every op module is
    imported): ops or API/qualified names; ``None``: none."""
    if names is None:
        return frozenset()
    if isinstance(names, (str, bytes)):
        raise TypeError(
            f"skip_ops must be a list of ops, not the string {_shown(names)}: write "
            f"skip_ops=[{_shown(names)}]"
        )
    single = _api_key_of(names)
    if single is not None:
        name = getattr(names, "api_name", single)
        raise TypeError(
            f"skip_ops must be a list of ops, not the op {name} itself: write skip_ops=[{name}]"
        )
    try:
        items = list(names)
    except TypeError:
        raise TypeError(
            f"skip_ops must be a list of ops, got {type(names).__name__} {_shown(names)}; {_HOW}"
        ) from None
    if not items:
        return frozenset()
    for position, item in enumerate(items):  # every item's kind, before any import
        if not isinstance(item, str) and _api_key_of(item) is None:
            raise TypeError(
                f"skip_ops[{position}] is {type(item).__name__} {_shown(item)}, not an op; {_HOW}"
            )
    from flashinfer.api_modules import load_api_modules

    load_api_modules()  # an op is registered when its module is imported
    by_name: dict[str, set[str]] = {}
    for api_key, (op, _) in registered().items():
        by_name.setdefault(api_key, set()).add(api_key)
        by_name.setdefault(getattr(op, "api_name", api_key), set()).add(api_key)
    keys: set[str] = set()
    for item in items:
        name = item if isinstance(item, str) else _api_key_of(item)
        assert name is not None  # checked above
        found = by_name.get(name)
        if found is None:
            valid = ", ".join(sorted(by_name)) or "none"
            what = (
                f"no autotunable op is named {name!r}"
                if isinstance(item, str)
                else f"the op {name} is not autotunable"
            )
            raise ValueError(
                f"skip_ops: {what}; name an op by the op itself, its API name or its "
                f"qualified name: {valid}"
            )
        keys |= found
    return frozenset(keys)


def _api_key_of(item: Any) -> str | None:
    """An op's ``api_key``, or None for anything that is not an op."""
    try:
        api_key = getattr(item, "api_key", None)
    except Exception:  # an object whose attribute access itself fails is not an op
        return None
    return api_key if isinstance(api_key, str) else None
