"""The autotuner: picks a (backend, tactic) per tuning key among the dispatcher's candidates.

Only the dispatcher's candidates for the call are timed (with the gate off no experimental
backend), tuning state is per thread, results are process-wide (read lock-free, written under
a lock) and tuning is serialised.  An op's use of it: ``flashinfer/gemm.py``; the guide:
docs/api/autotuner.rst.

The :class:`Router` of an op registered ``direct=True`` gets each checked ``backend="auto"``
call with its candidates, arguments and (for a cached verdict) the verdict's slot.  Outside
``autotune()`` this is the whole cost the tuner adds to a call: a slot entry of the current
epoch serves without reading the signature, else one ``exact_signature`` and one memo
lookup.  Anything else (tuning, a choice that is not a candidate, an experimental backend,
which must warn) goes to :meth:`AutoTuner.run_candidates`."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from flashinfer.autotuner import distributed
from flashinfer.autotuner._types import (
    NOISY_SPREAD,
    Choice,
    OpStats,
    ProgressCallback,
    StatsBook,
    TacticFailure,
    TunableOp,
    TunableRunner,
    TuningRecord,
    check_median,
    current_report,
    is_noisy,
    is_tuning,
    note_tuned,
    skipped_ops,
    tuning_now,
)
from flashinfer.autotuner.keys import MEMO_CAP, Key, declare_key_inputs, exact_signature, make_key
from flashinfer.autotuner.timing import (
    AUTOTUNER_LOG_ENV,
    DEFAULT_BUDGET_S,
    DEFAULT_REPEAT,
    DEFAULT_SWITCH_MARGIN,
    DEFAULT_WARMUP,
    check_setting,
    refuse_during_capture,
    time_candidates,
)
from flashinfer.dispatch.choice_log import LOG_SWITCH, install_tuner_view, note_tuner_choice
from flashinfer.dispatch.restrictions import restriction_for
from flashinfer.gating.warn_once import warn_experimental_backend_once

if TYPE_CHECKING:
    from flashinfer.autotuner.persist import LoadReport

__all__ = [
    "AUTOTUNER_LOG_ENV",
    "AutoTuner",
    "Choice",
    "OpStats",
    "ProgressCallback",
    "TacticFailure",
    "TunableOp",
    "TunableRunner",
    "TuningRecord",
    "is_tuning",
]


def _setting(name: str, doc: str) -> Any:
    """A timing setting of :class:`AutoTuner`: a property that checks the value it is set to (a bad
    one fails on the user's line, naming the setting, and the value in effect stays)."""
    attr = f"_{name}"

    def setter(self: Any, value: Any) -> None:
        setattr(self, attr, check_setting(name, value))

    return property(lambda self: getattr(self, attr), setter, doc=doc)


class AutoTuner:
    """The process-wide autotuner (:meth:`get`).  See the module docstring."""

    _instance: AutoTuner | None = None
    _instance_lock = threading.Lock()
    #: Most entries each call-path memo holds (past it, looked up, not remembered).
    memo_cap = MEMO_CAP

    def __init__(self) -> None:
        self._best: dict[Key, Choice] = {}
        # The router's memo (exact signature -> route entry), replaced, never cleared,
        # when ``_best`` changes: a racing reader writes into the discarded dict.
        self.route_memo: dict[tuple, RouteEntry] = {}
        # A verdict keeps the epoch with its route entry (valid while current), not the memo.
        self.route_epoch = object()
        self._ops: dict[str, tuple[TunableOp, Mapping[str, TunableRunner]]] = {}
        self._lock = threading.Lock()
        self._local = threading.local()
        self._tune_lock = threading.RLock()
        # The timing settings (the properties below check each value).
        self._warmup = DEFAULT_WARMUP
        self._repeat = DEFAULT_REPEAT
        self._budget_s: float | None = DEFAULT_BUDGET_S
        self._switch_margin = DEFAULT_SWITCH_MARGIN
        self._noisy_spread = NOISY_SPREAD
        self.stats_book = StatsBook()
        # key -> IQR (s) of its choice, saved as iqr_ms; keys loaded noisy, to time again.
        self._spread: dict[Key, float] = {}
        self._retime: set[Key] = set()
        #: key -> (the loaded Choice object, the fingerprint a file gave it): saved again, a
        #: loaded result keeps the environment that measured it until tuned anew.
        self.loaded_from: dict[Key, tuple[Choice, dict[str, Any]]] = {}

    # ---- the timing settings: each checked where it is set (timing.SETTINGS) ----------

    warmup = _setting(
        "warmup",
        """The least number of warm-up calls after each pair's untimed first call (default 1;
        an int >= 0).  See docs/api/autotuner.rst ("How a pair is timed").""",
    )
    repeat = _setting(
        "repeat",
        """The least number of timed calls of each pair (default 5; an int >= 1); their
        median is compared.""",
    )
    budget_s = _setting(
        "budget_s",
        """The most seconds spent on one pair after its first call (default 1.0; None: no
        budget; else a finite number > 0).""",
    )
    switch_margin = _setting(
        "switch_margin",
        """The default pair is kept unless another is faster by more than this fraction
        (default 0.03; 0.0 takes the fastest; a finite number >= 0).""",
    )
    noisy_spread = _setting(
        "noisy_spread",
        """A measurement whose interquartile range exceeds this fraction of its median is
        noisy: flagged, and timed again when loaded (default 0.1; ``math.inf``: never).""",
    )

    # ---- the singleton and registration -----------------------------------------------

    @classmethod
    def get(cls) -> AutoTuner:
        """The process's autotuner."""
        inst = cls._instance
        if inst is None:
            with cls._instance_lock:
                inst = cls._instance
                if inst is None:
                    inst = cls._instance = cls()
        return inst

    @classmethod
    def register(
        cls, op: TunableOp, runners: Mapping[str, TunableRunner], *, direct: bool = False
    ) -> None:
        """Declare ``op`` tunable with one runner per backend (at import of the op).

        ``ValueError`` for a runner named after no backend of ``op``; a bad ``key_inputs``
        declaration is a ``TypeError``/``ValueError``.  ``direct=True`` routes checked
        ``backend="auto"`` calls straight to the tuner with ``inputs`` = the API's arguments but
        ``backend`` in declaration order (``TypeError`` for ``*args``/``**kwargs``): use it only
        when the body would build exactly that tuple."""
        unknown = [b for b in runners if b not in op.backend_checks]
        if unknown:
            raise ValueError(
                f"AutoTuner.register({op.api_key}): runners {unknown} name no backend of the "
                f"op; its backends are {list(op.backend_checks)}"
            )
        declare_key_inputs(op.api_key, runners)
        tuner = cls.get()
        if direct:
            op.dispatcher.route_auto(Router(tuner, op, runners).route())
        else:
            op.dispatcher.route_auto(None)
        with tuner._lock:
            tuner._ops[op.api_key] = (op, runners)
            tuner._forget_memos()  # they may hold a previous registration's runners

    def registered(self) -> dict[str, tuple[TunableOp, Mapping[str, TunableRunner]]]:
        """``api_key -> (op, runners)`` of every registered op."""
        return dict(self._ops)

    # ---- the call path ----------------------------------------------------------------

    def run(self, op: TunableOp, runners: Mapping[str, TunableRunner], inputs: tuple) -> Any:
        """Run the current ``backend="auto"`` call of ``op`` with the best known choice.

        Inside ``autotune()`` a key untuned (or whose choice is not a candidate now) is timed
        first; otherwise a tuned choice runs when its backend is a candidate, else the first
        candidate with its default tactic."""
        return self.run_candidates(op, runners, op.suitable_auto_backends.current(), inputs)

    def run_candidates(
        self,
        op: TunableOp,
        runners: Mapping[str, TunableRunner],
        candidates: Sequence[str],
        inputs: tuple,
    ) -> Any:
        """:meth:`run` with the call's candidates given (what a routed call receives)."""
        if (tuning := tuning_now()) and distributed.group_in_effect() is not None:
            distributed.check_block(self, op.api_key)  # the ranks' settings, once per block
        if tuning and op.api_key in skipped_ops():
            choice = None  # autotune(skip_ops=...): the default, untimed
            if (report := current_report()) is not None:
                report.note_skipped(op.api_key)
        elif tuning:
            key = make_key(op.api_key, inputs)
            choice = self._best.get(key)
            retime = key in self._retime  # a saved noisy measurement: timed again
            if (
                choice is None
                or choice.backend not in candidates
                or retime
                or distributed.group_in_effect()
            ):
                was = (choice.median_s, self._spread.get(key, 0.0)) if retime and choice else None
                record = self._tune(op, runners, inputs, key, candidates)
            else:
                record, was = TuningRecord(key, choice, False), None
            self._local.last = record
            choice = record.choice
            if (report := current_report()) is not None:
                spread, limit = self._spread.get(record.key), self._noisy_spread
                report.note_call(op, runners, candidates, inputs, record, was, spread, limit)
        else:
            choice = self._best.get(make_key(op.api_key, inputs))  # make_key memoises
        tuned_calls, default_calls = self.stats_book.counters(op.api_key)
        if choice is not None and choice[0] in candidates and choice[0] in runners:
            backend, tactic = choice[0], choice[1]
            tuned_calls.hit()  # counted for AutoTuner.stats()
        else:
            backend, tactic = self.default_backend(op, runners, candidates), None
            default_calls.hit()
        if backend in op.experimental_backends:
            warn_experimental_backend_once(op.api_key, backend, automatic=True)
        if LOG_SWITCH.armed:  # its line on the flashinfer.dispatch logger, once
            note_run(self, op, backend, choice, candidates, inputs)
        return runners[backend](inputs, tactic)

    @staticmethod
    def default_backend(
        op: TunableOp, runners: Mapping[str, TunableRunner], candidates: Sequence[str]
    ) -> str:
        """The backend an untuned key runs (with its default tactic): the first candidate
        that has a runner.  ``RuntimeError`` if none has."""
        for backend in candidates:
            if backend in runners:
                return backend
        raise RuntimeError(
            f"{op.api_key}: none of the backend='auto' candidates {list(candidates)} has an "
            f"autotuner runner (runners: {list(runners)})"
        )

    def _tune(
        self,
        op: TunableOp,
        runners: Mapping[str, TunableRunner],
        inputs: tuple,
        key: Key,
        candidates: Sequence[str],
    ) -> TuningRecord:
        with self._tune_lock:
            choice = self._best.get(key)  # another thread may have tuned it meanwhile
            group = distributed.group_in_effect()
            if (
                group is None
                and choice is not None
                and choice.backend in candidates
                and key not in self._retime
            ):
                return TuningRecord(key, choice, False)
            # Timing (or the group's collective step) synchronises: never while capturing.
            refuse_during_capture(f"tune {op.api_key} (a key with no tuned choice)")
            if group is not None:  # a collective step: see flashinfer.autotuner.distributed
                args = (op.api_key, runners, inputs, key, candidates, choice, self)
                record = distributed.tune_in_group(group, *args)
            else:
                record = time_candidates(op.api_key, runners, inputs, key, candidates, self)
            if not record.timed:  # the ranks of the group already agreed on a choice
                return record
            self.stats_book.add(op.api_key, record.choice is not None, failures=record.failures)
            if record.choice is None:
                return record
            with self._lock:
                self._best[key] = record.choice
                self._keep_spread(key, record.iqr_s)
                self._retime.discard(key)  # measured now: a noisy one waits for a later run
                self._forget_memos()
            note_tuned(key)
            return record

    def _keep_spread(self, key: Key, iqr_s: float | None) -> None:
        if iqr_s is None:
            self._spread.pop(key, None)
        else:
            self._spread[key] = float(iqr_s)

    def _forget_memos(self) -> None:
        """Replace (never clear) the call-path memos, under ``_lock``: a reader that raced
        with a change writes into the discarded dicts, so no entry is ever stale."""
        self.route_memo = {}
        self.route_epoch = object()  # after the memo: see the router's slot

    # ---- inspecting and editing the results -------------------------------------------

    def last_tuning(self) -> TuningRecord | None:
        """The key, choice and whether timing happened, of this thread's last call made
        inside ``autotune()`` (None before any).  Not recorded outside tuning."""
        return getattr(self._local, "last", None)

    def choice(self, key: Key) -> Choice | None:
        """The tuned choice of ``key``, if any."""
        return self._best.get(key)

    def choices(self) -> dict[Key, Choice]:
        """A copy of every tuned (or loaded) result."""
        return dict(self._best)

    def set_choice(self, key: Key, choice: Choice, *, iqr_s: float | None = None) -> None:
        """Record ``choice`` for ``key`` (the tuning file's loader uses it).

        ``iqr_s`` (None: unknown) over ``noisy_spread`` of the median makes the next tuning-mode
        call of ``key`` time it again.  ``ValueError``/``TypeError`` for a time that is not a finite
        number >= 0."""
        check_median(choice.median_s)
        if iqr_s is not None:
            check_median(iqr_s)
        with self._lock:
            self._best[key] = choice
            self._keep_spread(key, iqr_s)
            if is_noisy(choice.median_s, iqr_s, self._noisy_spread):
                self._retime.add(key)
            else:
                self._retime.discard(key)
            self._forget_memos()

    def spread(self, key: Key) -> float | None:
        """The interquartile range, in seconds, of the timed calls behind ``key``'s choice
        (None: unknown, or no choice): what the tuning file saves as ``iqr_ms``."""
        return self._spread.get(key)

    def loaded_fingerprint(self, key: Key, choice: Choice) -> dict[str, Any] | None:
        """The fingerprint ``choice`` was loaded with; None when this process measured it."""
        loaded = self.loaded_from.get(key)
        return loaded[1] if loaded is not None and loaded[0] is choice else None

    def stats(self) -> dict[str, OpStats]:
        """Per op (``api_key``), since the process started: see :class:`OpStats` (ops nothing
        happened to are left out)."""
        return self.stats_book.snapshot()

    def clear(self) -> None:
        """Forget every tuned result (registrations and :meth:`stats` stay)."""
        with self._lock:
            self._best = {}
            self._spread, self._retime = {}, set()
            self._forget_memos()

    # ---- the tuning file ----------------------------------------------------------------

    def save_tuning_file(self, path: str | os.PathLike[str], *, merge: bool = True) -> int:
        """Save every result of this tuner to ``path``; the same as
        :func:`flashinfer.autotuner.save_tuning_file`."""
        from flashinfer.autotuner.persist import save_into  # the file's code: when used

        return save_into(self, path, merge=merge)

    def load_tuning_file(self, path: str | os.PathLike[str]) -> LoadReport:
        """Load ``path`` into this tuner; the same as
        :func:`flashinfer.autotuner.load_tuning_file`."""
        from flashinfer.autotuner.persist import load_into

        return load_into(self, path)

    # Upstream FlashInfer's names, which its users type: the very same methods, silently
    # (flashinfer.autotuner.tuning_file.OLD_SPELLINGS lists every old spelling).
    save_configs = save_tuning_file
    load_configs = load_tuning_file


# ---- the router of a directly registered op ------------------------------------------------

RouteEntry = tuple[Any, Any, Any, Any]
"""The memo's entry per exact signature, ``(tuned backend, bound call, tactic, default
backend)``: a tuned stable choice (served when a candidate), an untuned key's stable default
(served when the first candidate), :data:`_UNTUNED` (only experimental defaults) or
:data:`_SLOW` (an experimental choice: the readable path warns)."""

# Never served (None is no candidate); told apart by identity, so their contents differ.
_SLOW: RouteEntry = (None, "readable path", None, None)
_UNTUNED: RouteEntry = (None, "first candidate", None, None)


class Router:
    """Serves the ``backend="auto"`` calls of one op registered ``direct=True``."""

    def __init__(self, tuner: AutoTuner, op: TunableOp, runners: Mapping[str, TunableRunner]):
        self.tuner, self.op, self.runners = tuner, op, runners
        # Calls served from a tuned key / the default (the readable path counts its own).
        self.tuned_calls, self.default_calls = tuner.stats_book.counters(op.api_key)

    def route(self) -> Callable[..., Any]:
        """The function serving each routed call: a closure over what it reads (every call)."""
        tuner, api_key, readable, memo_miss = (
            self.tuner,
            self.op.api_key,
            self.readable,
            self.memo_miss,
        )
        hit, default_hit = self.tuned_calls.hit, self.default_calls.hit
        op, choice_log = self.op, self.op.dispatcher.choice_log

        def route(candidates: Sequence[str], inputs: tuple, slot: list | None = None) -> Any:
            if tuning_now():
                return readable(candidates, inputs)
            exact = None
            epoch, entry = slot[0] if slot is not None else (None, None)
            if (
                entry is None
                or epoch is not tuner.route_epoch
                or not (entry[0] in candidates or entry[3] == candidates[0])
            ):
                exact = exact_signature(api_key, inputs)
                epoch = tuner.route_epoch  # read before the memo, which is replaced before it
                entry = tuner.route_memo.get(exact, _SLOW)
                if slot is not None and entry is not _SLOW:
                    slot[0] = (epoch, entry)
            if entry[0] in candidates:  # a tuned, stable choice
                hit()
                if LOG_SWITCH.armed and entry[0] is not choice_log.tuned:
                    note_run(tuner, op, entry[0], True, candidates, inputs)
                return entry[1](inputs, entry[2])
            if entry[3] == candidates[0]:  # an untuned key's stable default
                default_hit()
                if LOG_SWITCH.armed:
                    note_run(tuner, op, entry[3], False, candidates, inputs)
                return entry[1](inputs, None)
            return memo_miss(candidates, inputs, exact or exact_signature(api_key, inputs))

        route.takes_route_slot = True  # type: ignore[attr-defined]
        return route

    def readable(self, candidates: Sequence[str], inputs: tuple) -> Any:
        return self.tuner.run_candidates(self.op, self.runners, candidates, inputs)

    def memo_miss(self, candidates: Sequence[str], inputs: tuple, exact: tuple) -> Any:
        """A signature not in the memo yet, an untuned key whose entry is not this call's default
        (both updated here), or anything else: the readable path."""
        memo = self.tuner.route_memo  # read before the choice: see entry()
        entry = memo.get(exact)
        new = entry is None
        room = not new or len(memo) < self.tuner.memo_cap  # the cap stops new signatures only
        if entry is None:
            entry = self.entry(inputs)
            if entry[0] in candidates:
                if room:
                    memo[exact] = entry
                self.tuned_calls.hit()
                if LOG_SWITCH.armed:
                    note_run(self.tuner, self.op, entry[0], True, candidates, inputs)
                return entry[1](inputs, entry[2])
        if entry is _UNTUNED or entry[3] is not None:
            # What run_candidates does for an untuned key, without reading the key again.
            backend = self.tuner.default_backend(self.op, self.runners, candidates)
            stable = backend not in self.op.experimental_backends
            if stable and entry[3] != backend:
                # Follows this call's stable default, in the dict read above (see entry()).
                if room:
                    memo[exact] = (None, self.runners[backend].__call__, None, backend)
            elif new and room:
                memo[exact] = entry  # _UNTUNED: an experimental default, not served here
            if stable:
                self.default_calls.hit()
                if LOG_SWITCH.armed:
                    note_run(self.tuner, self.op, backend, False, candidates, inputs)
                return self.runners[backend](inputs, None)
        elif new and room:
            memo[exact] = entry
        return self.readable(candidates, inputs)

    def entry(self, inputs: tuple) -> RouteEntry:
        """The memo entry of a signature's tuned choice (:data:`_UNTUNED`: none), computed after
        the memo dict was read: an entry older than a new result lands in the dict that result
        discards."""
        choice = self.tuner.choice(make_key(self.op.api_key, inputs))
        if choice is None or choice.backend not in self.runners:
            return _UNTUNED
        if choice.backend in self.op.experimental_backends:
            return _SLOW  # the readable path warns once
        return (choice.backend, self.runners[choice.backend].__call__, choice.tactic, None)


TUNED_HERE = "tuned in this process"
LOADED = "loaded from a file"


def _source(tuner: Any, api_key: str, inputs: tuple) -> tuple[Any, str] | None:
    """The tuned choice of these inputs and where it comes from, or None (untuned)."""
    key = make_key(api_key, inputs)
    choice = tuner.choice(key)
    if choice is None:
        return None
    return choice, LOADED if tuner.loaded_fingerprint(key, choice) is not None else TUNED_HERE


def note_run(
    tuner: Any, op: TunableOp, backend: str, tuned: Any, candidates: Sequence[str], inputs: tuple
) -> None:
    """Log that the tuner runs ``backend`` for this call."""
    log = op.dispatcher.choice_log
    restricted = restriction_for(op.api_key) is not None
    if tuned is True or (tuned not in (None, False) and tuned[0] == backend):
        if backend is log.tuned:
            return
        found = _source(tuner, op.api_key, inputs)
        source = TUNED_HERE if found is None else found[1]
    else:
        if backend is (log.tuner_restricted if restricted else log.tuner_auto):
            return
        source = None
    dropped = op.dispatcher.dropped_experimental_backends.current()
    note_tuner_choice(log, backend, candidates, dropped, restricted, source)


class ChoiceView:
    """The dispatcher's :class:`~flashinfer.dispatch.choice_log.TunerView` of the tuner: it
    asks about choices (``op.explain``, the choice log) through it, never importing the tuner."""

    def registered(self, api_key: str) -> bool:
        return api_key in AutoTuner.get().registered()

    def tuning_now(self) -> bool:
        return tuning_now()

    def tuned_choice(self, api_key: str, inputs: tuple) -> tuple[str, Any, str] | None:
        """``(backend, tactic, source)`` of the tuned result of these inputs of a registered
        op, or None (not registered, untuned, or inputs the key cannot read)."""
        if not self.registered(api_key):
            return None
        try:
            found = _source(AutoTuner.get(), api_key, inputs)
        except Exception:  # noqa: BLE001 - explain reports no tuned result rather than fail
            return None
        return None if found is None else (found[0].backend, found[0].tactic, found[1])


install_tuner_view(ChoiceView())
