"""What is decided once, at decoration: the facts about an API and the checks on them.

:class:`DispatchPlan` holds the API, its backend table split into stable and experimental
backends, its parameter list (without the dispatcher's ``skip_check``) and the call spec of
every checker; building it raises at decoration (import) time for a table that cannot be
dispatched.  The reference path and the emitter read the plan; neither changes it.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any

from .._codegen import CallSpec, ParameterList
from ..api_logging import ALLOW_EXPERIMENTAL_AUTO_BACKENDS_ENV
from .call_specs import checker_spec

__all__ = ["DispatchPlan"]

_EXPERIMENTAL = "flashinfer.experimental"


def _check_declared_skip_check(func: Callable[..., Any]) -> None:
    """An API may declare the dispatcher's ``skip_check`` itself, so that type checkers
    see it, but only as the dispatcher takes it: keyword-only, defaulting to False."""
    param = inspect.signature(func).parameters.get("skip_check")
    if param is None:
        return
    if param.kind != param.KEYWORD_ONLY or param.default is not False:
        default = "no default" if param.default is param.empty else f"default {param.default!r}"
        raise TypeError(
            f"backend_requirement: {func.__qualname__} declares skip_check as "
            f"{param.kind.description} with {default}; the dispatcher takes "
            "it keyword-only with default False: declare it as `*, skip_check: bool = False` "
            "or leave it out (the dispatcher adds it either way)"
        )


class DispatchPlan:
    """The decoration-time analysis of an API wrapped by ``backend_requirement``."""

    def __init__(
        self,
        func: Callable[..., Any],
        backend_checks: Mapping[str, Callable[..., Any]],
        common_check: Callable[..., Any] | None,
        heuristic_func: Callable[..., Any] | None,
    ) -> None:
        self.__wrapped__ = func
        for attr in ("__module__", "__name__", "__qualname__", "__doc__"):
            setattr(self, attr, getattr(func, attr, None))
        self.api_name = func.__name__
        # Warnings are keyed by the qualified name: two modules may both define "mm".
        self.api_key = f"{func.__module__}.{func.__qualname__}"
        self.backend_checks = dict(backend_checks)
        self.common_check = common_check
        self.heuristic_func = heuristic_func
        self.experimental_backends = frozenset(
            name
            for name, chk in self.backend_checks.items()
            if getattr(chk, "is_experimental_backend", False)
        )
        self.stable_backends = tuple(
            b for b in self.backend_checks if b not in self.experimental_backends
        )
        _check_declared_skip_check(func)
        # A declared skip_check is the dispatcher's: never passed on (the body sees its
        # default), so the API's parameters are the rest.
        self._sig = ParameterList(func, omit=("skip_check",))
        self._check_experimental_placement()
        self._specs = self._build_specs()
        # The arguments searched for a CUDA tensor, in order: every parameter but
        # ``backend``, each as (name, spread) where ``*args`` is spread out.
        self._scanned = [
            (n, how == "star")
            for how, n in self._specs["__func__"]
            if how in ("pos", "kw", "star") and n != "backend"
        ]

    # ---- decoration-time checks --------------------------------------------------------

    def _check_experimental_placement(self) -> None:
        for backend, checker in self.backend_checks.items():
            module = getattr(inspect.unwrap(checker), "__module__", "") or ""
            inside = module == _EXPERIMENTAL or module.startswith(_EXPERIMENTAL + ".")
            if inside and not getattr(checker, "is_experimental_backend", False):
                raise ValueError(
                    f"API {self.api_name!r}: the checker of backend {backend!r} is defined in "
                    f"module {module!r} under {_EXPERIMENTAL} but is not marked "
                    "@experimental_backend. Backends under flashinfer.experimental must be "
                    "marked, so that backend='auto' skips them unless "
                    f"{ALLOW_EXPERIMENTAL_AUTO_BACKENDS_ENV}=1."
                )
        if self.backend_checks and "backend" not in self._sig.names:
            raise TypeError(
                f"backend_requirement: {self.api_name} has backend checks but no 'backend' "
                "parameter to select them with"
            )

    def _build_specs(self) -> dict[str, CallSpec]:
        sig, api = self._sig, self.api_name
        specs = {"__func__": sig.call_spec()}
        if self.common_check is not None:
            specs["__common__"] = checker_spec(sig, self.common_check, "common_check", api)
        for name, chk in self.backend_checks.items():
            specs[name] = checker_spec(sig, chk, f"the checker of backend {name!r}", api)
        return specs

    def routed_inputs(self) -> list[str] | None:
        """The parameters whose arguments a routed auto call passes on (see
        :meth:`route_auto`): every parameter but ``backend``, in declaration order; None
        when the API cannot be routed (no backends, or ``*args``/``**kwargs``)."""
        if not self.backend_checks or self._sig.has_var:
            return None
        return [n for n in self._sig.names if n != "backend"]
