"""The op object: :class:`BackendRequirementOp`, routing of ``"auto"`` calls, upstream's query API,
and the Python paths of a call; each op built is recorded in the registry."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from flashinfer.dispatch.autocast import AutocastCall, AutocastRule, checked_autocast_rule
from flashinfer.dispatch.capability import (
    CUDA_STATE,
    BackendSupportedError,
    UnsupportedInputsError,
    capability_reason,
)
from flashinfer.dispatch.choice_log import LOG_SWITCH, OpLog, note_auto, note_restricted
from flashinfer.dispatch.declarations import Backend
from flashinfer.dispatch.emitter import Front
from flashinfer.dispatch.explain import Explanation, explain_call
from flashinfer.dispatch.plan import DispatchPlan, invoke
from flashinfer.dispatch.restrictions import (
    RESTRICTIONS,
    restriction_for,
    warn_listed_experimental,
)
from flashinfer.dispatch.selection import backend_refusal, select, selection_error
from flashinfer.dispatch.thread_state import CallState, LiveFlags, PerThreadList
from flashinfer.dispatch.torch_op import TorchOp, schema_of
from flashinfer.dispatch.tracing import attach_torch_op
from flashinfer.dispatch.verdicts import VerdictCache
from flashinfer.gating.messages import auto_refused_by_common_check
from flashinfer.gating.op_registry import register_op
from flashinfer.gating.op_registry import registered_ops as registered_ops  # upstream path
from flashinfer.gating.warn_once import warn_experimental_backend_once


class BackendRequirementOp(DispatchPlan):
    """An API wrapped by :func:`backend_requirement`.  Callable like the API itself."""

    def __init__(
        self,
        func: Callable[..., Any],
        backend_checks: Mapping[str, Callable[..., Any]] | Iterable[Backend],
        common_check: Callable[..., Any] | None,
        heuristic_func: Callable[..., Any] | None,
        *,
        overlap: Any = None,
        fake: Callable[..., Any] | None = None,
        backward: Callable[[Any, dict[str, Any]], dict[str, Any]] | None = None,
        jvp: Callable[[dict[str, Any], dict[str, Any]], Any] | None = None,
        autocast: AutocastRule | None = None,
    ) -> None:
        # overlap: what the API writes (its ``OverlapRule``), or None; the dispatcher checks
        # it (see ``plan``), and the operator's schema marks those arguments mutated.
        super().__init__(func, backend_checks, common_check, heuristic_func, overlap=overlap)
        #: The API's torch operator (``torch.ops.flashinfer.<name>``, built below), its
        #: schema (the generated code routes traced calls by it), or None for both, with
        #: the reason in ``torch_op_reason`` (see ``tracing``).
        self.torch_op: TorchOp | None = None
        self.torch_schema, self.torch_op_reason = schema_of(
            self.api_key, func, overlap, dispatcher=True
        )
        self._state = CallState()
        self._live = LiveFlags()
        self.suitable_auto_backends = PerThreadList(self._state, "suitable")
        self.dropped_experimental_backends = PerThreadList(self._state, "dropped")
        #: What this op's "auto" calls have logged (the once-per-choice log line).
        self.choice_log = OpLog(self.api_key, self.__module__ or "", self.api_name)
        #: What this op's checks decided, per call signature (see ``verdicts``).
        self.verdict_cache = VerdictCache()
        #: How the op's inputs are cast under torch.autocast (see ``autocast``), or None.
        self.autocast = checked_autocast_rule(self.api_key, autocast, self.torch_schema)
        self._front = Front(self)
        self._ns = self._front.ns
        self.function = self._public_function(self._front.build())
        if self.autocast is not None:
            self._ns["_acall"] = AutocastCall(self)
        attach_torch_op(self, fake, backward, jvp)
        register_op(self.api_key, self.function)

    def _public_function(self, fn: Any) -> Any:
        """The generated function, dressed as the API."""
        functools.update_wrapper(fn, self.__wrapped__)
        fn.dispatcher = self
        for name in (
            "api_name",
            "api_key",
            "backend_checks",
            "common_check",
            "heuristic_func",
            "experimental_backends",
            "stable_backends",
            "backends",
            "implementations",
            "suitable_auto_backends",
            "dropped_experimental_backends",
            "has_backend",
            "has_backend_choices",
            "is_backend_supported",
            "is_compute_capability_supported",
            "is_experimental_backend",
            "backend_runnable_reason",
            "explain",
            "call_reference",
            "verdict_cache",
        ):
            setattr(fn, name, getattr(self, name))
        return fn

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.function(*args, **kwargs)

    # ---- routing backend="auto" calls --------------------------------------------------

    @property
    def auto_route(self) -> Callable[[list[str], tuple], Any] | None:
        """The router of ``backend="auto"`` calls (see :meth:`route_auto`), if any."""
        return self._ns["_route"]

    def route_auto(self, router: Callable[[list[str], tuple], Any] | None) -> None:
        """Send every checked ``backend="auto"`` call to ``router(candidates, inputs)``
        instead of the API body (``None`` restores the body); the autotuner's ``direct=True``.

        ``candidates``: the call's suitable backends, best first (do not modify);
        ``inputs``: the arguments of every parameter but ``backend``, in order.  Explicit
        backends and ``skip_check=True`` still run the body.  A router with a true
        ``takes_route_slot`` is called ``router(candidates, inputs, slot)``: ``slot`` is a
        one-item list kept with the call's verdict, where it may keep what it looked up.
        """
        if router is not None and self.routed_inputs() is None:
            raise TypeError(
                f"{self.api_key}: backend='auto' calls can only be routed for an API with "
                "backends and named parameters (no *args or **kwargs)"
            )
        self._ns["_route"] = router
        # A router that declares it takes a third argument gets the verdict's route slot
        # (a one-item list it may fill with what it looked up for the call's signature).
        self._ns["_rslot"] = bool(getattr(router, "takes_route_slot", False))

    def __repr__(self) -> str:
        return f"<backend_requirement dispatcher of {self.api_key}>"

    # ---- upstream's query API (also set on the API function) ---------------------------

    def has_backend_choices(self) -> bool:
        return len(self.backend_checks) > 0

    def has_backend(self, backend: str) -> bool:
        return backend in self.backend_checks

    def is_experimental_backend(self, backend: str) -> bool:
        return backend in self.experimental_backends

    def is_backend_supported(self, backend: str, cc: int | None = None) -> bool:
        """Whether ``backend`` exists and (given ``cc``) declares support for that capability."""
        if not self.backend_checks:
            raise ValueError(
                f"Invalid is_backend_supported call: no backend choices for {self.api_name}"
            )
        checker = self.backend_checks.get(backend)
        if checker is None:
            return False
        if cc is None:
            return True
        is_supported = getattr(checker, "is_compute_capability_supported", None)
        return bool(is_supported and is_supported(cc))

    def is_compute_capability_supported(self, cc: int) -> bool:
        """Whether any backend (without backends: the common check) declares ``cc``."""
        if not self.backend_checks:
            is_supported = getattr(self.common_check, "is_compute_capability_supported", None)
            if is_supported is None:
                checker = getattr(self.common_check, "__name__", "the common check")
                raise ValueError(
                    f"Invalid is_compute_capability_supported call: {checker} does not have "
                    "is_compute_capability_supported decorator"
                )
            return bool(is_supported(cc))
        return any(self.is_backend_supported(b, cc) for b in self.backend_checks)

    def explain(self, *args: Any, **kwargs: Any) -> Explanation:
        """What ``op(*args, **kwargs)`` with ``backend="auto"`` would do here, without
        running it: each backend's verdict (can it run, and if it is not a candidate, what
        left it out: capability, support check, the experimental gate, a restriction, the
        heuristic), the candidates, the choice and where it comes from (the heuristic, a
        restriction, the autotuner: tuned in this process or loaded from a file).
        ``str()`` of the result is a table.  Never runs the API body or a kernel; runs the
        common check, the support checks and the heuristic, as a call does.  ``TypeError``
        for arguments the API cannot bind."""
        return explain_call(self, args, kwargs)

    def backend_runnable_reason(self, backend: str, cc: int | None) -> str | None:
        """Why ``backend`` cannot run at capability ``cc`` (None: no CUDA), or None if it can."""
        if backend not in self.backend_checks:
            return f"unknown backend {backend!r}"
        return capability_reason(self.backend_checks[backend], cc)

    # ---- the Python paths: what the generated function calls off its happy path ------

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
        if self.backend_checks and backend != "auto" and backend not in self.backend_checks:
            return self.resolve_alias(backend)
        return backend

    def _select(self, cc: int | None, bound: dict[str, Any]) -> list[str]:
        """Readable selection logic."""
        api = self.api_name
        self._state.clear_dropped()
        backend = self._backend_name(bound)
        if self.backend_checks and backend != "auto" and backend not in self.backend_checks:
            tomb = self.backend_tombstones.get(backend)
            if tomb is not None:
                from flashinfer.gating.history import removed_backend_message

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
        return self._decide(None, cc, self._restriction(), bound)[0]

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
        """A named backend's capability rule, raising if ``cc`` is not one it runs at."""
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
        reason = self.grad_refusal(backend, bound)  # it cannot differentiate (see plan)
        if reason is not None:
            raise UnsupportedInputsError(
                f"{api} cannot run these inputs with backend {backend!r}: {reason}"
            )
        try:
            fits = self._check(self.backend_checks[backend], backend, bound)
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

    def _decide(
        self,
        key: tuple | None,
        cc: int | None,
        listed: tuple[str, ...] | None,
        bound: dict[str, Any],
    ) -> tuple[list[str], tuple[str, ...], Callable[[], None] | None, list[Any]]:
        """The verdict of an ``"auto"`` call, cached under ``key`` (None: not cacheable)."""
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

    def backend_support_reason(self, backend: str, /, *args: Any, **kwargs: Any) -> str | None:
        """Why ``backend`` would refuse ``op(*args, **kwargs, backend=backend)``, or None (never
        warns, never runs the common check or the API); ``TypeError`` if the arguments do not
        bind."""
        if backend not in self.backend_checks:
            return f"unknown backend {backend!r}. {self._available()}"
        bound = dict(self._sig.bind(*args, **kwargs).arguments)
        bound["backend"] = backend
        refused = backend_refusal(self, backend, self._call_capability(bound), bound)
        return None if refused is None else refused[1]

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
        """The same call through ``inspect.Signature.bind`` and the readable logic."""
        bound_args = self._sig.bind(*args, **kwargs)  # TypeError as for the API
        named = bound_args.arguments.get("backend")
        if type(named) is str and named != "auto" and named not in self.backend_checks:
            bound_args.arguments["backend"] = self.resolve_alias(named)  # a renamed backend
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
        """The log line of an ``"auto"`` call that runs the body (see ``choice_log``)."""
        if not LOG_SWITCH.armed:
            return
        log = self.choice_log
        if restricted:
            if candidates[0] is not log.restricted:
                note_restricted(log, candidates)
        elif candidates[0] is not log.auto:
            note_auto(log, candidates, dropped)
