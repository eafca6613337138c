"""The reference path: the readable selection logic, and every error message of a call.

Slow by design (``inspect.Signature.bind`` per call, upstream's way) and kept for three
uses: the generated fast path hands every call that does not fit to :meth:`_fail`, which
re-runs the selection here to raise the explaining error; ``op.call_reference`` is the
reference the fast path is tested against; and it is the "before" row of
``benchmarks/bench_dispatch.py``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

from flashinfer.dispatch.call_specs import invoke
from flashinfer.dispatch.capability import CUDA_STATE, capability_reason
from flashinfer.dispatch.choice_log import LOG_SWITCH, OpLog, note_auto, note_restricted
from flashinfer.dispatch.errors import BackendSupportedError, UnsupportedInputsError
from flashinfer.dispatch.plan import DispatchPlan
from flashinfer.dispatch.restrictions import (
    RESTRICTIONS,
    restriction_for,
    warn_listed_experimental,
)
from flashinfer.dispatch.selection import backend_refusal, select, selection_error
from flashinfer.dispatch.thread_state import CallState, LiveFlags
from flashinfer.dispatch.verdicts import VerdictCache
from flashinfer.gating.history import removed_backend_message
from flashinfer.gating.messages import auto_refused_by_common_check
from flashinfer.gating.warn_once import warn_experimental_backend_once

__all__ = ["ReferenceDispatcher"]


class ReferenceDispatcher(DispatchPlan):
    """A plan and its reference selection.  The op sets the state both paths share."""

    _state: CallState  # this thread's record of its last "auto" call
    _live: LiveFlags  # whether any thread has recorded dropped backends yet
    _ns: dict[str, Any]  # the generated code's namespace; its "_route" is the router
    choice_log: OpLog  # what this op's "auto" calls have logged (choice_log)
    verdict_cache: VerdictCache  # what its checks decided, per call signature (verdicts)

    def _check(self, fn: Any, spec_key: str, bound: Mapping[str, Any]) -> Any:
        return invoke(fn, self._specs[spec_key], bound)

    def _available(self) -> str:
        return f"Available backends: {', '.join(repr(b) for b in self.backend_checks)}, or 'auto'."

    def _backend_name(self, bound: Mapping[str, Any]) -> str:
        """The call's ``backend`` argument, refused with a TypeError unless it is a str."""
        backend = bound.get("backend", "auto") if self.backend_checks else "auto"
        if not isinstance(backend, str):
            raise TypeError(
                f"{self.api_name}: backend must be one backend name (a str), got "
                f"{type(backend).__name__} {backend!r}. {self._available()}"
            )
        if backend in self.backend_aliases:
            return self.resolve_alias(backend)
        return backend

    def _select(self, cc: int | None, bound: dict[str, Any]) -> list[str]:
        """Readable selection logic: returns the candidates or raises the explaining error.

        A ``skip_check=True`` call of ``"auto"`` runs all of it, common check included
        (upstream runs the common check there too)."""
        api = self.api_name
        self._state.clear_dropped()
        backend = self._backend_name(bound)
        if self.backend_checks and backend != "auto" and backend not in self.backend_checks:
            tomb = self.backend_tombstones.get(backend)
            if tomb is not None:
                raise BackendSupportedError(f"{removed_backend_message(tomb)}. {self._available()}")
            raise BackendSupportedError(
                f"{api} does not support backend {backend!r}. {self._available()}"
            )
        if not self.backend_checks and self.common_check is None:
            raise ValueError(
                "Invalid @backend_requirement decorator usage: no backend choices and no "
                f"common_check for {api}"
            )
        if self.backend_checks and backend != "auto":  # capability first, as upstream
            self._check_capability(cc, backend)
        if self.common_check is not None:
            self._run_common_check(cc, bound, backend)
        # The overlap rule: after the common check (which says what a malformed ``out`` is),
        # before any backend's checker, also with skip_check=True.
        self.check_overlap(bound)
        if not self.backend_checks:
            return []
        if backend != "auto":
            return self._select_explicit(cc, bound, backend)
        return self._select_auto(cc, bound)

    def _run_common_check(self, cc: int | None, bound: dict[str, Any], backend: str) -> None:
        """The common check; a ValueError it raises (malformed inputs) propagates."""
        api = self.api_name
        if not self.backend_checks:  # upstream: it carries the capability rule then
            reason = capability_reason(self.common_check, cc)
            if reason is not None:
                raise BackendSupportedError(
                    f"{api} does not support compute capability {cc}: {reason}"
                )
        if self.check_result(None, self._check(self.common_check, "__common__", bound)):
            return
        refused = "its common check returned False for these inputs"
        if not self.backend_checks:
            raise UnsupportedInputsError(f"Problem size is not supported for {api}: {refused}")
        if backend == "auto":  # an automatic-selection failure, as upstream
            raise BackendSupportedError(auto_refused_by_common_check(api, refused))
        raise UnsupportedInputsError(
            f"Problem size is not supported for {api} with backend {backend!r}: {refused}"
        )

    def _select_explicit(self, cc: int | None, bound: dict[str, Any], backend: str) -> list[str]:
        self._check_explicit(cc, bound, backend)
        if backend in self.experimental_backends:
            warn_experimental_backend_once(self.api_key, backend)
        return [backend]

    def _check_capability(self, cc: int | None, backend: str) -> None:
        """A named backend's capability rule, raising if ``cc`` is not one it runs at: the
        first check of a named backend, before the common check (upstream's order)."""
        reason = capability_reason(self.backend_checks[backend], cc)
        if reason is not None:
            raise BackendSupportedError(
                f"{self.api_name} does not support backend {backend!r} with capability "
                f"{cc}: {reason}"
            )

    def _check_explicit(self, cc: int | None, bound: dict[str, Any], backend: str) -> None:
        """A named backend's capability and support check, raising why it cannot run."""
        api = self.api_name
        self._check_capability(cc, backend)
        try:  # (a backend that cannot differentiate: its grad gate, see plan)
            fits = self._check(self._checkers[backend], backend, bound)
        except ValueError as exc:
            raise UnsupportedInputsError(
                f"{api} cannot run these inputs with backend {backend!r}: {exc}"
            ) from exc
        if not self.check_result(backend, fits):
            raise UnsupportedInputsError(
                f"Problem size is not supported for {api} with backend {backend!r}: "
                "its support check returned False for these inputs"
            )

    def _restriction(self) -> tuple[str, ...] | None:
        """The backends a restriction lists for this op in this context, or None (read as
        the generated path reads it)."""
        return restriction_for(self.api_key) if RESTRICTIONS.on else None

    def _select_auto(self, cc: int | None, bound: dict[str, Any]) -> list[str]:
        """``"auto"``'s candidates, recorded for this thread, with the warning an
        experimental choice gives; or the error (see :meth:`_decide`)."""
        candidates, _, warns, _ = self._decide(None, cc, self._restriction(), bound)
        self._state.r.suitable = candidates
        if warns is not None:
            warns()
        return candidates

    def _decide(
        self,
        key: tuple | None,
        cc: int | None,
        listed: tuple[str, ...] | None,
        bound: dict[str, Any],
        skip_check: bool = False,
    ) -> tuple[list[str], tuple[str, ...], Callable[[], None] | None, list[Any]]:
        """The verdict of an ``"auto"`` call, cached under ``key`` (None: not cacheable):
        (candidates, the experimental backends the gate dropped, what warns when it runs or
        None, the router's slot).  The common check and the overlap rule first, then the one
        selection (:func:`~flashinfer.dispatch.selection.select`) under the restriction
        ``listed``; raises why no backend can run (a call's drops are recorded first).
        ``skip_check=True`` runs all of it too (upstream runs the common check there)."""
        self._state.clear_dropped()
        if self.common_check is not None:
            self._run_common_check(cc, bound, "auto")
        self.check_overlap(bound)
        sel = select(self, cc, bound, listed)
        if sel.dropped:
            self._live.dropped = True
            self._state.r.dropped = sel.dropped
        if not sel.candidates:
            raise selection_error(self, sel)
        candidates, exp = sel.candidates, self.experimental_backends
        warns: Callable[[], None] | None = None
        if listed is not None and not exp.isdisjoint(candidates):
            warns = functools.partial(warn_listed_experimental, self.api_key, candidates, exp)
        elif listed is None and candidates[0] in exp:
            warns = functools.partial(
                warn_experimental_backend_once, self.api_key, candidates[0], automatic=True
            )
        verdict = (candidates, sel.dropped, warns, [(None, None)])
        if key is not None:
            self.verdict_cache.put(key, verdict)
        return verdict

    def backend_refusal(self, backend: str, cc: int | None, bound: Mapping[str, Any]) -> str | None:
        """Why ``backend`` refuses a call's bound arguments at capability ``cc``, or None
        (see :func:`~flashinfer.dispatch.selection.backend_refusal`).  Never warns, never
        runs the common check or the API."""
        refused = backend_refusal(self, backend, cc, bound)
        return None if refused is None else refused[1]

    def backend_support_reason(self, backend: str, /, *args: Any, **kwargs: Any) -> str | None:
        """Why ``backend`` would refuse the call ``op(*args, **kwargs, backend=backend)``, or
        None if it would accept it (see :meth:`backend_refusal`; the capability is the
        call's, found as a call finds it).  ``backend`` replaces any in the arguments.
        ``TypeError`` for arguments the API cannot bind.
        """
        if backend not in self.backend_checks:
            return f"unknown backend {backend!r}. {self._available()}"
        bound = dict(self._sig.bind(*args, **kwargs).arguments)
        bound["backend"] = backend
        return self.backend_refusal(backend, self._call_capability(bound), bound)

    def _call_capability(self, bound: Mapping[str, Any]) -> int | None:
        """The capability of a call's first CUDA tensor, scanned as the generated path
        scans the arguments (None: no CUDA tensor)."""
        values: list[Any] = []
        for n, spread in self._scanned:
            if spread:
                values.extend(bound[n])
            else:
                values.append(bound[n])
        return CUDA_STATE.find(*values)  # the seam tests replace, as on the generated path

    def call_reference(self, *args: Any, skip_check: bool = False, **kwargs: Any) -> Any:
        """The same call through ``inspect.Signature.bind`` and the readable logic.

        Slow (upstream's design); kept as the reference the generated function is tested
        against, and as the "before" row of ``benchmarks/bench_dispatch.py``.
        """
        bound_args = self._sig.bind(*args, **kwargs)  # TypeError as for the API
        named = bound_args.arguments.get("backend")
        if type(named) is str and named in self.backend_aliases:  # a renamed backend
            bound_args.arguments["backend"] = self.resolve_alias(named)
        bound = dict(bound_args.arguments)
        # skip_check=True skips every check of a named backend; "auto" still has to
        # choose, so it runs the selection (as upstream, its common check too).
        auto = bool(self.backend_checks) and bound["backend"] == "auto"
        if auto:
            listed = self._restriction()
            verdict = self._decide(None, self._call_capability(bound), listed, bound)
            candidates, dropped, warns, _ = verdict
        elif not skip_check:
            self._select(self._call_capability(bound), bound)
        else:  # a named backend, unchecked: only the overlap rule still applies
            self.check_overlap(bound)
        if not auto:
            return self.__wrapped__(*bound_args.args, **bound_args.kwargs)
        record = self._state.r
        record.suitable = candidates
        if warns is not None:
            warns()
        route = self._ns["_route"]
        if route is None or skip_check:
            self._log_choice(candidates, dropped, listed is not None)
        enclosing, record.open = record.open, candidates  # (see emitter)
        try:
            if route is not None and not skip_check:
                names = self.routed_inputs() or []
                return route(candidates, tuple(bound[n] for n in names))
            return self.__wrapped__(*bound_args.args, **bound_args.kwargs)
        finally:
            record.open = enclosing
            if enclosing is not None:
                record.suitable = enclosing

    def _log_choice(
        self, candidates: list[str], dropped: tuple[str, ...], restricted: bool
    ) -> None:
        """The log line of an ``"auto"`` call that runs the body (see ``choice_log``):
        asked only while logging may show it, and only once per backend and path."""
        if not LOG_SWITCH.armed:
            return
        log = self.choice_log
        if restricted:
            if candidates[0] is not log.restricted:
                note_restricted(log, candidates)
        elif candidates[0] is not log.auto:
            note_auto(log, candidates, dropped)
