"""The router of a directly registered op (``AutoTuner.register(op, runners, direct=True)``).

The dispatcher hands it each checked ``backend="auto"`` call with its candidates, arguments
and (for a cached verdict) the verdict's slot.  Outside ``autotune()`` this is the whole cost
the tuner adds to a call, so the signature is read at most once: a slot entry of the current
epoch serves without reading it, else one :func:`~flashinfer.autotuner.keys.exact_signature`
and one memo lookup.  Anything else (tuning, a choice that is not a candidate, an
experimental backend, which must warn) goes to :meth:`AutoTuner.run_candidates`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from flashinfer.autotuner._state import tuning_now
from flashinfer.autotuner._types import CallCounter, Choice, TunableOp, TunableRunner
from flashinfer.autotuner.fingerprint import loaded_fingerprint
from flashinfer.autotuner.keys import Key, exact_signature, make_key
from flashinfer.dispatch.choice_log import LOG_SWITCH as LOG_SWITCH
from flashinfer.dispatch.choice_log import note_tuner_choice
from flashinfer.dispatch.restrictions import restriction_for

RouteEntry = tuple[Any, Any, Any, Any]
"""The memo's entry per exact signature, ``(tuned backend, bound call, tactic, default
backend)``: a tuned stable choice (served when a candidate), an untuned key's stable default
(served when the first candidate), :data:`_UNTUNED` (only experimental defaults) or
:data:`_SLOW` (an experimental choice: the readable path warns)."""

# Never served (None is no candidate); told apart by identity, so their contents differ.
_SLOW: RouteEntry = (None, "readable path", None, None)
_UNTUNED: RouteEntry = (None, "first candidate", None, None)


class RoutedTuner(Protocol):
    """What a router uses of the tuner (the :class:`~flashinfer.autotuner.AutoTuner`)."""

    #: exact signature -> :data:`RouteEntry`, replaced when a result changes (read anew
    #: on every call), filled up to ``memo_cap``; an entry kept in a slot stands while
    #: ``route_epoch`` (replaced right after it) is the one it was read in.
    route_memo: dict[tuple, RouteEntry]

    route_epoch: object
    memo_cap: int

    def choice(self, key: Key) -> Choice | None: ...

    def default_backend(
        self, op: TunableOp, runners: Mapping[str, TunableRunner], candidates: Sequence[str]
    ) -> str: ...

    def run_candidates(
        self,
        op: TunableOp,
        runners: Mapping[str, TunableRunner],
        candidates: Sequence[str],
        inputs: tuple,
    ) -> Any: ...


class Router:
    """Installs and serves the router of one op."""

    def __init__(
        self,
        tuner: RoutedTuner,
        op: TunableOp,
        runners: Mapping[str, TunableRunner],
        counters: tuple[CallCounter, CallCounter] | None = None,
    ) -> None:
        self.tuner, self.op, self.runners = tuner, op, runners
        # Calls served from a tuned key / the default (the readable path counts its own).
        self.tuned_calls, self.default_calls = counters or (CallCounter(), CallCounter())

    def install(self) -> None:
        """Hand the router to the dispatcher."""
        self.op.dispatcher.route_auto(self._route())

    def _route(self) -> Callable[..., Any]:
        """The function serving each routed call: a closure over what it reads (every call)."""
        tuner, api_key, readable, memo_miss = (
            self.tuner,
            self.op.api_key,
            self.readable,
            self.memo_miss,
        )
        hit, default_hit, choice_log = (
            self.tuned_calls.hit,
            self.default_calls.hit,
            self.op.dispatcher.choice_log,
        )
        note_tuned, note_default = self.note_tuned, self.note_default

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
                    note_tuned(entry[0], candidates, inputs)
                return entry[1](inputs, entry[2])
            if entry[3] == candidates[0]:  # an untuned key's stable default
                default_hit()
                if LOG_SWITCH.armed:
                    note_default(entry[3], candidates, inputs)
                return entry[1](inputs, None)
            return memo_miss(candidates, inputs, exact or exact_signature(api_key, inputs))

        route.takes_route_slot = True  # type: ignore[attr-defined]
        return route

    # ---- the paths the fast path hands over to --------------------------------------------

    def readable(self, candidates: Sequence[str], inputs: tuple) -> Any:
        return self.tuner.run_candidates(self.op, self.runners, candidates, inputs)

    def memo_miss(self, candidates: Sequence[str], inputs: tuple, exact: tuple) -> Any:
        """A signature not in the memo yet (filled here), an untuned key whose entry is not
        this call's default (updated here), or anything for the readable path."""
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
                    self.note_tuned(entry[0], candidates, inputs)
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
                    self.note_default(backend, candidates, inputs)
                return self.runners[backend](inputs, None)
        elif new and room:
            memo[exact] = entry
        return self.readable(candidates, inputs)

    def note_tuned(self, backend: str, candidates: Sequence[str], inputs: tuple) -> None:

        note_run(self.tuner, self.op, backend, True, candidates, inputs)

    def note_default(self, backend: str, candidates: Sequence[str], inputs: tuple) -> None:

        note_run(self.tuner, self.op, backend, False, candidates, inputs)

    def entry(self, inputs: tuple) -> RouteEntry:
        """The memo entry of a signature's tuned choice (:data:`_UNTUNED`: none), computed
        after the memo dict was read: an entry older than a new result lands in the dict
        that result discards."""
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
    return choice, LOADED if loaded_fingerprint(tuner, key, choice) is not None else TUNED_HERE


def note_run(
    tuner: Any, op: TunableOp, backend: str, tuned: Any, candidates: Sequence[str], inputs: tuple
) -> None:
    """Log that the tuner runs ``backend`` for this call.  ``tuned``: whether it is the tuned
    choice, or the choice looked up (None: untuned; it ran if ``backend`` is its backend)."""
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


def tuned_choice(tuner: Any, api_key: str, inputs: tuple) -> tuple[str, Any, str] | None:
    """``(backend, tactic, source)`` of the tuned result for these inputs of a registered
    op, or None (not registered, untuned, or inputs the key cannot read)."""
    if api_key not in tuner.registered():
        return None
    try:
        found = _source(tuner, api_key, inputs)
    except Exception:  # noqa: BLE001 - explain reports no tuned result rather than fail
        return None
    if found is None:
        return None
    choice, source = found
    return choice.backend, choice.tactic, source


class ChoiceView:
    """The dispatcher's :class:`~flashinfer.dispatch.choice_log.TunerView` of the tuner that
    ``get_tuner`` returns (``AutoTuner.get``; installed by :mod:`flashinfer.autotuner`)."""

    def __init__(self, get_tuner: Callable[[], Any]) -> None:
        self._get_tuner = get_tuner

    def registered(self, api_key: str) -> bool:
        return api_key in self._get_tuner().registered()

    def tuning_now(self) -> bool:
        return tuning_now()

    def tuned_choice(self, api_key: str, inputs: tuple) -> tuple[str, Any, str] | None:
        return tuned_choice(self._get_tuner(), api_key, inputs)
