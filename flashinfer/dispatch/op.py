"""The op object: :class:`BackendRequirementOp`, routing of ``"auto"`` calls, upstream's
query API; each op built is recorded in the registry (:mod:`.registry`).

The op is a :class:`~.reference.ReferenceDispatcher` (the decoration-time plan and the
reference path) that generates its fast path once (``emitter``) and hands it out, dressed
as the API, as ``op.function``: what ``backend_requirement`` returns.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from flashinfer.dispatch.autocast import AutocastCall, AutocastRule, checked_autocast_rule
from flashinfer.dispatch.capability import capability_reason
from flashinfer.dispatch.choice_log import OpLog
from flashinfer.dispatch.declarations import Backend
from flashinfer.dispatch.emitter import Front
from flashinfer.dispatch.explain import Explanation, explain_call
from flashinfer.dispatch.reference import ReferenceDispatcher
from flashinfer.dispatch.thread_state import CallState, LiveFlags, PerThreadList
from flashinfer.dispatch.torch_op import TorchOp, schema_of
from flashinfer.dispatch.tracing import attach_torch_op
from flashinfer.dispatch.verdicts import VerdictCache
from flashinfer.gating.op_registry import register_op, registered_ops

__all__ = ["BackendRequirementOp", "registered_ops"]


class BackendRequirementOp(ReferenceDispatcher):
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
        """The generated function, dressed as the API: what the decorator returns.

        A plain function, not this object: calling an instance whose ``__call__`` calls
        the function costs several times the call itself (no vectorcall through the type
        slot; ``benchmarks/bench_costs.py`` prints both).
        """
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
        instead of the API body (``None`` restores the body).

        ``candidates`` is the call's list of suitable backends, best first (the same list
        as ``suitable_auto_backends``; do not modify it); ``inputs`` is a tuple of the
        call's arguments for every parameter but ``backend``, in declaration order.  The
        checks, the gate, the heuristic and the per-thread records are unchanged; the body
        still runs for explicit backends and ``skip_check=True``.  The autotuner uses this
        (``AutoTuner.register(op, runners, direct=True)``) to save the body's call and the
        per-thread lookup of the candidates on every tuned call.

        A router with a true ``takes_route_slot`` attribute is called as
        ``router(candidates, inputs, slot)`` on a call whose verdict came from the cache:
        ``slot`` is a one-item list kept with that verdict (``[(None, None)]`` at first),
        where the router may keep what it looked up for the signature, so that the next
        call of it need not look again; other calls pass no slot.
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
        """Whether ``backend`` exists and (given ``cc``) declares support for that capability.

        Raises ``ValueError`` on an API without backend choices (as upstream): there is no
        backend to ask about; use :meth:`is_compute_capability_supported`.
        """
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
        """Whether any backend (an API without backends: its common check) declares ``cc``.

        On an API without backends whose common check carries no
        :func:`supported_compute_capability` mark, raises ``ValueError`` (as upstream).
        """
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
