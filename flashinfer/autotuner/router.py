"""The router of a directly registered op (``AutoTuner.register(op, runners, direct=True)``).

The dispatcher hands each checked ``backend="auto"`` call of such an op to a router, with
the call's candidates and its arguments (every parameter but ``backend``, in order).  Outside
``autotune()``, the router's work is the whole cost the autotuner adds to a call, so it is
generated per op, the way the dispatcher is: one unrolled read of the exact signature per
input-type pattern seen so far (see :func:`~flashinfer.autotuner.keys.pattern_reads`), one
dict lookup in the memo (exact signature -> :data:`RouteEntry`), one count of the call
(``AutoTuner.stats()``: a C call, no lock) and a call of the runner's bound method.

The memo serves two kinds of signature from the generated code:

* a tuned key: its stable choice runs, with its tactic, whenever its backend is one of this
  call's candidates;
* an untuned key (the common case of a program that never tunes): the entry names the
  stable default the signature last ran (:meth:`RoutedTuner.default_backend`, the first
  candidate with a runner), and serves a call only when that backend is the call's first
  candidate, i.e. when it is this call's default too (the same signature can come with
  other candidates: a ``use_backends`` restriction, the experimental gate).

:meth:`Router.memo_miss` fills the memo and serves the rest: a signature not seen yet, a
default that is not this call's first candidate (the entry then follows this call's
default), a first candidate without a runner.  Anything else (tuning, a tuned choice that is
not a candidate of this call, an experimental backend, which must warn) goes to
:meth:`AutoTuner.run_candidates`, the readable path.

A call whose input types match no known pattern adds its pattern (up to
:data:`MAX_PATTERNS`), regenerates the router and installs the new one on the dispatcher.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from flashinfer.autotuner._state import tuning_now
from flashinfer.autotuner._types import CallCounter, Choice, TunableOp, TunableRunner
from flashinfer.autotuner.fingerprint import loaded_fingerprint
from flashinfer.autotuner.keys import Key, make_key, pattern_reads
from flashinfer.codegen.compiler import compile_function, module_namespace
from flashinfer.dispatch.choice_log import LOG_SWITCH as LOG_SWITCH
from flashinfer.dispatch.choice_log import note_tuner_choice
from flashinfer.dispatch.restrictions import restriction_for

__all__ = [
    "MAX_PATTERNS",
    "RoutedTuner",
    "Router",
    "RouteEntry",
    "LOG_SWITCH",
    "ChoiceView",
    "note_run",
    "tuned_choice",
    "tuning_now",
]

MAX_PATTERNS = 8

RouteEntry = tuple[Any, Any, Any, Any]
"""What the router's memo holds per exact signature, ``(tuned backend, bound runner call,
tactic, default backend)``: ``(backend, call, tactic, None)`` for a tuned, stable choice;
``(None, call, None, backend)`` for an untuned key whose default (the first candidate with
a runner, with its default tactic) was last the stable ``backend``; :data:`_UNTUNED` for an
untuned key that has had only experimental defaults; :data:`_SLOW` for an experimental choice,
left to the readable path, which warns.  The generated code serves the first kind when
the backend is a candidate, the second when it is the first candidate."""

# Neither is ever served by the generated code (None is never a candidate): memo_miss tells
# them apart by identity (hence the distinct contents: equal tuple constants may be one
# object).
_SLOW: RouteEntry = (None, "readable path", None, None)
_UNTUNED: RouteEntry = (None, "first candidate", None, None)


class RoutedTuner(Protocol):
    """What a router uses of the tuner (the :class:`~flashinfer.autotuner.AutoTuner`)."""

    #: exact signature -> :data:`RouteEntry`; a new dict replaces it whenever a result
    #: changes, so it is read anew on every call, and filled by the router up to
    #: ``memo_cap`` entries.
    route_memo: dict[tuple, RouteEntry]
    #: replaced right after ``route_memo``: an entry kept with a dispatcher's verdict (the
    #: router's slot) stands while the epoch it was read in is current.
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
    """Builds, installs and serves the generated router of one op."""

    def __init__(
        self,
        tuner: RoutedTuner,
        op: TunableOp,
        runners: Mapping[str, TunableRunner],
        counters: tuple[CallCounter, CallCounter] | None = None,
    ) -> None:
        self.tuner, self.op, self.runners = tuner, op, runners
        # The calls served from a tuned key and from the default (AutoTuner.stats()); those
        # handed to the readable path are counted there.
        self.tuned_calls, self.default_calls = counters or (CallCounter(), CallCounter())
        # The API's own parameter names (never "_"-prefixed, see ParameterList) name the
        # inputs in the generated code; None: not routable, and install() says why.
        self.names: list[str] = op.dispatcher.routed_inputs() or []
        self.patterns: list[tuple[type, ...]] = []
        self._lock = threading.Lock()

    def install(self) -> None:
        """Generate the router for the patterns known so far and hand it to the dispatcher."""
        self.op.dispatcher.route_auto(self._generate())

    # ---- generated code ------------------------------------------------------------------

    def _generate(self) -> Callable[[Sequence[str], tuple], Any]:
        ns = module_namespace(self.op.api_key, "autotuner router")
        ns |= {
            "_tuning": tuning_now,
            "_tuner": self.tuner,
            "_api": self.op.api_key,
            "_readable": self.readable,
            "_miss": self.miss,
            "_memo_miss": self.memo_miss,
            "_SLOW": _SLOW,
            "_hit": self.tuned_calls.hit,
            "_dhit": self.default_calls.hit,
            # The once-per-choice log line: an attribute test while logging is off.
            "_clog": LOG_SWITCH,
            "_lg": self.op.dispatcher.choice_log,
            "_note": self.note_tuned,
            "_dnote": self.note_default,
        }
        names = self.names
        # Underscored names throughout: the inputs are named after the API's parameters.
        lines = [
            "    if _tuning():",
            "        return _readable(_candidates, _inputs)",
        ]
        # A call whose verdict the dispatcher cached brings that verdict's slot: the entry
        # looked up for its signature, with the tuner's epoch it was read in.  While that
        # epoch is current (a new result replaces memo and epoch), the entry stands.
        served = self._serve_lines()
        lines += [
            "    if _rs is not None:",
            "        _p = _rs[0]",
            "        if _p[0] is _tuner.route_epoch:",
            "            _e = _p[1]",
            *(f"        {c}" for c in served),
        ]
        if names:
            lines.append(f"    {', '.join(names)}, = _inputs")
        for i, pattern in enumerate(self.patterns):
            test, parts = pattern_reads(pattern, names, ns, f"p{i}_", self.op.api_key)
            lines += [
                f"    {'if' if i == 0 else 'elif'} {test}:",
                f"        _x = ({', '.join(['_api', *parts])},)",
            ]
        if not self.patterns:  # nothing to read yet: learn the first pattern
            lines.append("    return _miss(_candidates, _inputs)")
            return self._compile(lines, ns)
        lines += ["    else:", "        return _miss(_candidates, _inputs)"]
        # The tuned test first: it adds nothing to a tuned call.  The untuned one costs an
        # untuned call a scan of the candidates for None (never one) and one comparison.
        # The epoch is read before the memo, which is replaced before the epoch: an entry
        # is never kept under an epoch newer than its memo.
        lines += [
            "    _ep = _tuner.route_epoch",
            "    _e = _tuner.route_memo.get(_x, _SLOW)",
            "    if _rs is not None and _e is not _SLOW:",
            "        _rs[0] = (_ep, _e)",
            *served,
            "    return _memo_miss(_candidates, _inputs, _x)",
        ]
        return self._compile(lines, ns)

    @staticmethod
    def _serve_lines() -> list[str]:
        """Serve the call from memo entry ``_e``, if it fits (at function-body indent)."""
        return [
            "    if _e[0] in _candidates:",
            "        _hit()",
            "        if _clog.armed and _e[0] is not _lg.tuned:",
            "            _note(_e[0], _candidates, _inputs)",
            "        return _e[1](_inputs, _e[2])",
            "    if _e[3] == _candidates[0]:",
            "        _dhit()",
            "        if _clog.armed:",
            "            _dnote(_e[3], _candidates, _inputs)",
            "        return _e[1](_inputs, None)",
        ]

    def _compile(self, body: list[str], ns: dict[str, Any]) -> Callable[..., Any]:
        params = "_candidates, _inputs, _rs=None"
        fn = compile_function(params, body, ns, role="autotuner router", api=self.op.api_key)
        fn.takes_route_slot = True  # type: ignore[attr-defined]
        return fn

    # ---- the paths the generated code hands over to --------------------------------------

    def readable(self, candidates: Sequence[str], inputs: tuple) -> Any:
        return self.tuner.run_candidates(self.op, self.runners, candidates, inputs)

    def miss(self, candidates: Sequence[str], inputs: tuple) -> Any:
        """Input types of a pattern not seen yet: learn it, then serve the call."""
        pattern = tuple(type(x) for x in inputs)
        with self._lock:
            if pattern not in self.patterns and len(self.patterns) < MAX_PATTERNS:
                self.patterns.append(pattern)
                self.install()
        return self.readable(candidates, inputs)

    def memo_miss(self, candidates: Sequence[str], inputs: tuple, exact: tuple) -> Any:
        """Not served by the generated lookup: a signature not in the memo yet (filled
        here), an untuned key whose entry is not this call's default (updated here), or
        anything for the readable path."""
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
                # The entry follows this call's stable default.  Written into the dict read
                # above, which a new result discards (see entry()) with the verdict
                # "untuned" the entry stands on.
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
        """The log line of a tuned choice this router runs (see ``_choice_note``)."""
        note_run(self.tuner, self.op, backend, True, candidates, inputs)

    def note_default(self, backend: str, candidates: Sequence[str], inputs: tuple) -> None:
        """The log line of a default (first candidate, default tactic) this router runs."""
        note_run(self.tuner, self.op, backend, False, candidates, inputs)

    def entry(self, inputs: tuple) -> RouteEntry:
        """The memo entry of a signature's tuned choice (:data:`_UNTUNED` if none; memo_miss
        makes it this call's default).  Computed from the tuned choice after the memo dict
        was read: an entry computed before a new result is then written into the dict that
        the new result discards, never into its replacement."""
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
    """Log that the tuner runs ``backend`` for this call: its tuned choice, or the first
    candidate with its default tactic.  ``tuned``: whether it is the tuned choice, or the
    choice the tuner looked up (None: untuned), which ran if ``backend`` is its backend."""
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
    """The dispatcher's :class:`~flashinfer.dispatch.tuner_view.TunerView` of the tuner that
    ``get_tuner`` returns (``AutoTuner.get``; installed by :mod:`flashinfer.autotuner`)."""

    def __init__(self, get_tuner: Callable[[], Any]) -> None:
        self._get_tuner = get_tuner

    def registered(self, api_key: str) -> bool:
        return api_key in self._get_tuner().registered()

    def tuning_now(self) -> bool:
        return tuning_now()

    def tuned_choice(self, api_key: str, inputs: tuple) -> tuple[str, Any, str] | None:
        return tuned_choice(self._get_tuner(), api_key, inputs)
