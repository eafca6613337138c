"""The backend dispatcher: the one place that decides which backend of an API runs.

``@backend_requirement(backend_checks, common_check, heuristic_func)`` turns an API whose
signature has a ``backend`` parameter into a :class:`BackendRequirementOp`.  On each call it
checks the inputs against the chosen backend (or, for ``backend="auto"``, against every
backend), applies the experimental gate and the heuristic, and then calls the API body.

Speed: everything that depends only on the API's signature and backend table is done once,
at decoration time.  A call goes through a wrapper *generated* for that API (the way
``dataclasses`` generates ``__init__``), whose own parameter list does the argument binding,
and which calls each checker directly with the arguments spelled out.  Only the happy path
is generated; every failure is handed to the readable reference path
(:meth:`BackendRequirementOp.call_reference`), which builds the error message.  The two paths
are tested to agree.
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

import torch

from .api_logging import (
    ALLOW_EXPERIMENTAL_AUTO_BACKENDS_ENV,
    backend_warning_flag,
    experimental_auto_backends_allowed,
    make_experimental_info,
    warn_experimental_backend_once,
)

__all__ = [
    "BackendRequirementOp",
    "BackendSupportedError",
    "backend_requirement",
    "experimental_backend",
    "find_compute_capability",
    "registered_ops",
    "supported_compute_capability",
]

C = TypeVar("C", bound=Callable[..., Any])

_EXPERIMENTAL_PACKAGE = "flashinfer.experimental"


class BackendSupportedError(Exception):
    """The requested backend, or every candidate of ``backend="auto"``, cannot run the call."""


# --------------------------------------------------------------------------------------
# Checker markers
# --------------------------------------------------------------------------------------


def supported_compute_capability(ccs: Iterable[int], *, cpu: bool = False) -> Callable[[C], C]:
    """Declare the CUDA compute capabilities (``major * 10 + minor``) a checker's backend runs on.

    ``cpu=True`` also declares that the backend runs on CPU tensors.  Sets
    ``_supported_ccs``, ``_supports_cpu`` and ``is_compute_capability_supported(cc)`` on the
    checker and returns the checker itself (no wrapper, so no call overhead).
    """
    if isinstance(ccs, (str, bytes)) or not isinstance(ccs, Iterable):
        raise TypeError(
            f"supported_compute_capability expects an iterable of integers such as [80, 90], "
            f"got {type(ccs).__name__}"
        )
    values = list(ccs)
    for cc in values:
        if isinstance(cc, bool) or not isinstance(cc, int):
            raise TypeError(
                f"compute capabilities must be integers like 90 (major * 10 + minor), "
                f"got {cc!r} ({type(cc).__name__})"
            )
    supported = frozenset(values)

    def decorator(checker: C) -> C:
        checker._supported_ccs = supported  # type: ignore[attr-defined]
        checker._supports_cpu = cpu  # type: ignore[attr-defined]
        checker.is_compute_capability_supported = supported.__contains__  # type: ignore[attr-defined]
        return checker

    return decorator


def experimental_backend(
    checker: Any = None,
    /,
    *,
    owner: str | None = None,
    tracking_issue: str | int | None = None,
    graduate_by: str | None = None,
    feature: str | None = None,
) -> Any:
    """Mark a backend's support checker as experimental and return it.

    An experimental backend runs when named (``backend="name"``, warning once per API and
    backend) and is skipped by ``backend="auto"`` unless
    ``FLASHINFER_ALLOW_EXPERIMENTAL_AUTO_BACKENDS=1``.  Composes with
    :func:`supported_compute_capability` in either order.  Used bare or with lifecycle
    metadata (``owner=``, ``tracking_issue=``, ``graduate_by="YYYY-MM-DD"``).
    """

    def mark(fn: C) -> C:
        name = feature or f"{fn.__module__}.{fn.__qualname__}"
        fn.experimental_info = make_experimental_info(  # type: ignore[attr-defined]
            name, owner, tracking_issue, graduate_by
        )
        fn.is_experimental_backend = True  # type: ignore[attr-defined]
        return fn

    if checker is None:
        return mark
    return mark(checker)


# --------------------------------------------------------------------------------------
# Compute capability of a call
# --------------------------------------------------------------------------------------

_cuda_possible: bool | None = None  # decided on first use: no CUDA, no CUDA tensors to scan
_capability_by_device: dict[int, int] = {}


def _device_capability(index: int) -> int:
    cc = _capability_by_device.get(index)
    if cc is None:
        major, minor = torch.cuda.get_device_capability(index)
        cc = _capability_by_device[index] = major * 10 + minor
    return cc


def find_compute_capability(*values: Any) -> int | None:
    """Capability (``major * 10 + minor``) of the first CUDA tensor among ``values``.

    ``None`` when there is no CUDA tensor (CPU tensors, or no tensors at all).  Looked up
    once per device.
    """
    global _cuda_possible
    if not _cuda_possible:
        if _cuda_possible is False:
            return None
        _cuda_possible = bool(torch.cuda.is_available())
        if not _cuda_possible:
            return None
    for value in values:
        if isinstance(value, torch.Tensor) and value.is_cuda:
            return _device_capability(value.get_device())
    return None


def _capability_reason(checker: Any, cc: int | None) -> str | None:
    """Why ``checker``'s backend cannot run at capability ``cc`` (None = no CUDA tensor)."""
    ccs = getattr(checker, "_supported_ccs", None)
    if cc is None:
        if ccs is None or getattr(checker, "_supports_cpu", False):
            return None
        return (
            f"needs CUDA tensors (compute capability in {sorted(ccs)}); "
            "the call has no CUDA tensor and the backend does not declare cpu=True"
        )
    if ccs is None:
        return f"declares no supported compute capability (found {cc})"
    if cc not in ccs:
        return f"needs compute capability in {sorted(ccs)}, found {cc}"
    return None


# --------------------------------------------------------------------------------------
# Calling checkers with the API's arguments
# --------------------------------------------------------------------------------------

_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


class _Signature:
    """What the generator needs to know about the API's parameters."""

    def __init__(self, func: Callable[..., Any]) -> None:
        self.signature = inspect.signature(func)
        self.params = list(self.signature.parameters.values())
        self.names = [p.name for p in self.params]
        self.has_var = any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in self.params)

    def call_spec(self) -> list[tuple[str, str]]:
        """How to pass the bound values on to a callable with the same signature."""
        spec = []
        for p in self.params:
            if p.kind in _POSITIONAL:
                spec.append(("pos", p.name))
            elif p.kind == p.VAR_POSITIONAL:
                spec.append(("star", p.name))
            elif p.kind == p.KEYWORD_ONLY:
                spec.append(("kw", p.name))
            else:
                spec.append(("starstar", p.name))
        return spec

    def spec_for(self, fn: Callable[..., Any], role: str, api: str) -> list[tuple[str, str]]:
        """Call spec for a checker: positional when its parameters match the API's."""
        try:
            params = list(inspect.signature(fn).parameters.values())
        except (TypeError, ValueError):
            return self.call_spec()
        names = [p.name for p in params]
        if not self.has_var and names == self.names and all(p.kind in _POSITIONAL for p in params):
            return [("pos", n) for n in names]
        if any(p.kind == p.VAR_KEYWORD for p in params) or set(self.names) <= set(names):
            return self.call_spec()
        for p in params:
            if (
                p.name not in self.names
                and p.default is p.empty
                and p.kind
                not in (
                    p.VAR_POSITIONAL,
                    p.VAR_KEYWORD,
                )
            ):
                raise TypeError(
                    f"{role} of {api} has parameter {p.name!r}, which {api} does not have; "
                    f"a checker takes (a subset of) the API's parameters: {self.names}"
                )
        return [("kw", p.name) for p in params if p.name in self.names]


def _render_call(target: str, spec: list[tuple[str, str]], prefix: str = "") -> str:
    parts = [prefix] if prefix else []
    for how, name in spec:
        parts.append(
            {"pos": name, "star": f"*{name}", "kw": f"{name}={name}", "starstar": f"**{name}"}[how]
        )
    return f"{target}({', '.join(parts)})"


def _invoke(
    fn: Callable[..., Any], spec: list[tuple[str, str]], bound: Mapping[str, Any], *lead: Any
) -> Any:
    """Reference-path equivalent of a generated call."""
    args: list[Any] = list(lead)
    kwargs: dict[str, Any] = {}
    for how, name in spec:
        if how == "pos":
            args.append(bound[name])
        elif how == "star":
            args.extend(bound[name])
        elif how == "kw":
            kwargs[name] = bound[name]
        else:
            kwargs.update(bound[name])
    return fn(*args, **kwargs)


# --------------------------------------------------------------------------------------
# The op
# --------------------------------------------------------------------------------------

_registry: dict[str, BackendRequirementOp] = {}


def registered_ops() -> list[BackendRequirementOp]:
    """Every API decorated with ``backend_requirement`` so far, sorted by name."""
    return [_registry[k] for k in sorted(_registry)]


class _CallState(threading.local):
    # Class attributes are each thread's defaults: no per-thread set-up cost.
    suitable: list[str] = []
    dropped: tuple[str, ...] = ()


class BackendRequirementOp:
    """An API wrapped by :func:`backend_requirement`.  Callable like the API itself."""

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
        self._state = _CallState()
        self._sig = _Signature(func)
        self._check_experimental_placement()
        self._specs = self._build_specs()
        self._fast = self._generate()
        _registry[f"{self.__module__}.{self.__qualname__}"] = self

    # ---- decoration-time checks --------------------------------------------------------

    def _check_experimental_placement(self) -> None:
        for backend, checker in self.backend_checks.items():
            module = getattr(inspect.unwrap(checker), "__module__", "") or ""
            inside = module == _EXPERIMENTAL_PACKAGE or module.startswith(
                _EXPERIMENTAL_PACKAGE + "."
            )
            if inside and not getattr(checker, "is_experimental_backend", False):
                raise ValueError(
                    f"API {self.api_name!r}: the checker of backend {backend!r} is defined in "
                    f"module {module!r} under {_EXPERIMENTAL_PACKAGE} but is not marked "
                    "@experimental_backend. Backends under flashinfer.experimental must be "
                    "marked, so that backend='auto' skips them unless "
                    f"{ALLOW_EXPERIMENTAL_AUTO_BACKENDS_ENV}=1."
                )
        if self.backend_checks and "backend" not in self._sig.names:
            raise TypeError(
                f"backend_requirement: {self.api_name} has backend checks but no 'backend' "
                "parameter to select them with"
            )
        if "skip_check" in self._sig.names:
            raise TypeError(
                f"backend_requirement: {self.api_name} may not declare a 'skip_check' "
                "parameter; the dispatcher adds it"
            )

    def _build_specs(self) -> dict[str, list[tuple[str, str]]]:
        sig, api = self._sig, self.api_name
        specs = {"__func__": sig.call_spec()}
        if self.common_check is not None:
            specs["__common__"] = sig.spec_for(self.common_check, "common_check", api)
        for name, chk in self.backend_checks.items():
            specs[name] = sig.spec_for(chk, f"the checker of backend {name!r}", api)
        return specs

    # ---- code generation ---------------------------------------------------------------

    def _generate(self) -> Callable[..., Any]:
        sig = self._sig
        ns: dict[str, Any] = {
            "__name__": __name__,  # warnings skip the generated frame as internal
            "_func": self.__wrapped__,
            "_common": self.common_check,
            "_heuristic": self.heuristic_func,
            "_find_cc": find_compute_capability,
            "_state": self._state,
            "_fail": self._fail,
            "_gate": experimental_auto_backends_allowed,
            "_warn": warn_experimental_backend_once,
            "_api": self.api_key,
            "_EXPERIMENTAL": self.experimental_backends,
        }
        # The def line: the API's own parameters, defaults taken from a namespace.
        pieces: list[str] = []
        seen_star = False
        pos_only = [p for p in sig.params if p.kind == p.POSITIONAL_ONLY]
        for p in sig.params:
            if p.kind == p.VAR_POSITIONAL:
                seen_star = True
                pieces.append(f"*{p.name}")
            elif p.kind == p.KEYWORD_ONLY and not seen_star:
                seen_star = True
                pieces.append("*")
            if p.kind == p.VAR_KEYWORD:
                if not seen_star:
                    pieces.append("*")
                    seen_star = True
                pieces.append("skip_check=False")
                pieces.append(f"**{p.name}")
                continue
            if p.kind in (p.VAR_POSITIONAL,):
                continue
            text = p.name
            if p.default is not p.empty:
                ns[f"_d_{p.name}"] = p.default
                text += f"=_d_{p.name}"
            pieces.append(text)
            if pos_only and p is pos_only[-1]:
                pieces.append("/")
        if not any(p.kind == p.VAR_KEYWORD for p in sig.params):
            if not seen_star:
                pieces.append("*")
            pieces.append("skip_check=False")
        for name in sig.names:
            if name.startswith("_"):  # would collide with the generated code's own names
                raise TypeError(
                    f"backend_requirement: parameter {name!r} of {self.api_name} starts with "
                    "an underscore, which the generated dispatcher reserves"
                )

        call_func = _render_call("_func", self._specs["__func__"])
        values = [
            f"*{n}" if how == "star" else n
            for how, n in self._specs["__func__"]
            if how in ("pos", "kw", "star") and n != "backend"
        ]
        bound_dict = "{" + ", ".join(f"{n!r}: {n}" for n in sig.names) + "}"
        lines = [f"def dispatch({', '.join(pieces)}):"]
        lines.append("    if skip_check:")
        lines.append(f"        return {call_func}")
        lines.append("    if _state.dropped:")
        lines.append("        _state.dropped = ()")
        lines.append(f"    _cc = _find_cc({', '.join(values)})")
        fail = f"_fail(_cc, {bound_dict})"
        if self.common_check is not None:
            if not self.backend_checks:  # upstream: then the common check carries capability
                ns["_cc_reason"] = _capability_reason
                lines.append("    if _cc_reason(_common, _cc) is not None:")
                lines.append(f"        {fail}")
            lines.append(f"    if not {_render_call('_common', self._specs['__common__'])}:")
            lines.append(f"        {fail}")
        if not self.backend_checks:
            lines.append(f"    return {call_func}")
            return self._compile(lines, ns)

        # Explicit backends: one branch each, checker called with its own spec.
        branch = "if"
        for i, (name, chk) in enumerate(self.backend_checks.items()):
            ns[f"_chk{i}"] = chk
            lines.append(f"    {branch} backend == {name!r}:")
            branch = "elif"
            lines.extend(self._capability_test(i, chk, "        ", ns, fail))
            lines.append(f"        if not {_render_call(f'_chk{i}', self._specs[name])}:")
            lines.append(f"            {fail}")
            if name in self.experimental_backends:
                ns[f"_once{i}"] = backend_warning_flag(self.api_key, name)
                lines.append(f"        if not _once{i}.warned:")
                lines.append(f"            _warn(_api, {name!r})")
            lines.append(f"        return {call_func}")
        lines.append("    if backend != 'auto':")
        lines.append(f"        {fail}")

        # backend="auto": every checker, in declaration order; failures explained slowly.
        lines.append("    _ok = []")
        for i, (name, chk) in enumerate(self.backend_checks.items()):
            cap = self._capability_guard(i, chk, ns)
            indent = "    "
            if cap:
                lines.append(f"    if {cap}:")
                indent = "        "
            lines.append(f"{indent}try:")
            lines.append(f"{indent}    if {_render_call(f'_chk{i}', self._specs[name])}:")
            lines.append(f"{indent}        _ok.append({name!r})")
            lines.append(f"{indent}except ValueError:")
            lines.append(f"{indent}    pass")
        if self.experimental_backends:
            lines.append("    if _EXPERIMENTAL.intersection(_ok) and not _gate():")
            lines.append("        _state.dropped = tuple(b for b in _ok if b in _EXPERIMENTAL)")
            lines.append("        _ok = [b for b in _ok if b not in _EXPERIMENTAL]")
        if self.heuristic_func is not None:
            lines.append("    if _ok:")
            heur = _render_call("_heuristic", self._specs["__func__"], prefix="_ok")
            lines.append(f"        _ok = [b for b in {heur} if b in _ok]")
        lines.append("    if not _ok:")
        lines.append(f"        {fail}")
        lines.append("    _state.suitable = _ok")
        if self.experimental_backends:
            lines.append("    if _ok[0] in _EXPERIMENTAL:")
            lines.append("        _warn(_api, _ok[0], automatic=True)")
        lines.append(f"    return {call_func}")
        return self._compile(lines, ns)

    def _capability_guard(self, i: int, chk: Any, ns: dict[str, Any]) -> str:
        ccs = getattr(chk, "_supported_ccs", None)
        if ccs is None:
            return "_cc is None"
        ns[f"_ccs{i}"] = ccs
        if getattr(chk, "_supports_cpu", False):
            return f"(_cc is None or _cc in _ccs{i})"
        return f"_cc in _ccs{i}"

    def _capability_test(
        self, i: int, chk: Any, indent: str, ns: dict[str, Any], fail: str
    ) -> list[str]:
        guard = self._capability_guard(i, chk, ns)
        return [f"{indent}if not ({guard}):", f"{indent}    {fail}"]

    def _compile(self, lines: list[str], ns: dict[str, Any]) -> Callable[..., Any]:
        source = "\n".join(lines) + "\n"
        code = compile(source, f"<backend_requirement {self.api_name}>", "exec")
        exec(code, ns)
        fn = ns["dispatch"]
        fn.__qualname__ = f"{self.__qualname__} [dispatch]"
        fn.__generated_source__ = source
        return fn

    # ---- the reference path ------------------------------------------------------------

    def _fail(self, cc: int | None, bound: dict[str, Any]) -> None:
        """Called by the generated path when something does not fit: raise the error."""
        self._select(cc, bound)
        raise RuntimeError(
            f"{self.api_name}: a support checker gave a different answer when re-run for "
            "the error message; checkers must be deterministic functions of the inputs"
        )

    def _check(self, fn: Any, spec_key: str, bound: Mapping[str, Any]) -> Any:
        return _invoke(fn, self._specs[spec_key], bound)

    def _select(self, cc: int | None, bound: dict[str, Any]) -> list[str]:
        """Readable selection logic: returns the candidates or raises the explaining error."""
        api = self.api_name
        self._state.dropped = ()
        backend = bound.get("backend", "auto") if self.backend_checks else None
        if self.backend_checks and backend != "auto" and backend not in self.backend_checks:
            raise BackendSupportedError(
                f"{api} does not support backend {backend!r}. Available backends: "
                f"{', '.join(repr(b) for b in self.backend_checks)}, or 'auto'."
            )
        if self.common_check is not None:
            reason = None if self.backend_checks else _capability_reason(self.common_check, cc)
            if reason is not None:
                raise BackendSupportedError(
                    f"{api} does not support compute capability {cc}: {reason}"
                )
            if not self._check(self.common_check, "__common__", bound):
                raise ValueError(
                    f"Problem size is not supported for {api}: its common check returned False "
                    "for these inputs"
                )
        if not self.backend_checks:
            return []
        if backend != "auto":
            checker = self.backend_checks[backend]
            reason = _capability_reason(checker, cc)
            if reason is not None:
                raise BackendSupportedError(
                    f"{api} does not support backend {backend!r} with capability {cc}: {reason}"
                )
            if not self._check(checker, backend, bound):
                raise ValueError(
                    f"Problem size is not supported for {api} with backend {backend!r}: "
                    "its support check returned False for these inputs"
                )
            if backend in self.experimental_backends:
                warn_experimental_backend_once(self.api_key, backend)
            return [backend]

        reasons: dict[str, str] = {}
        viable: list[str] = []
        for name, checker in self.backend_checks.items():
            reason = _capability_reason(checker, cc)
            if reason is None:
                try:
                    if not self._check(checker, name, bound):
                        reason = "support check returned False for these inputs"
                except ValueError as exc:
                    reason = f"support check rejected the inputs: {exc}"
            if reason is None:
                viable.append(name)
            else:
                reasons[name] = reason
        dropped = [b for b in viable if b in self.experimental_backends]
        if dropped and not experimental_auto_backends_allowed():
            self._state.dropped = tuple(dropped)
            viable = [b for b in viable if b not in self.experimental_backends]
            for b in dropped:
                reasons[b] = (
                    "experimental: excluded from automatic selection "
                    f"({ALLOW_EXPERIMENTAL_AUTO_BACKENDS_ENV} is not 1)"
                )
        else:
            dropped = []
        if viable and self.heuristic_func is not None:
            ordered = _invoke(self.heuristic_func, self._specs["__func__"], bound, list(viable))
            ordered = [b for b in ordered if b in viable]
            for b in viable:
                if b not in ordered:
                    reasons[b] = "left out by the heuristic for these inputs"
            viable = ordered
        if not viable:
            detail = "\n".join(f"  - {b}: {r}" for b, r in reasons.items())
            if dropped:
                names = ", ".join(repr(b) for b in dropped)
                raise BackendSupportedError(
                    f"No suitable auto backends found for {api}: only experimental backends "
                    f"({names}) support these inputs. Pass backend={dropped[0]!r} to opt in for "
                    f"this call, or set {ALLOW_EXPERIMENTAL_AUTO_BACKENDS_ENV}=1 to let "
                    f"automatic selection use them.\n{detail}"
                )
            raise BackendSupportedError(
                f"No suitable auto backends found for {api}; every candidate was rejected:\n{detail}"
            )
        self._state.suitable = viable
        if viable[0] in self.experimental_backends:
            warn_experimental_backend_once(self.api_key, viable[0], automatic=True)
        return viable

    def call_reference(self, *args: Any, skip_check: bool = False, **kwargs: Any) -> Any:
        """The same call through ``inspect.Signature.bind`` and the readable selection logic.

        Slow (upstream's design); kept as the reference the generated path is tested
        against, and as the "before" row of ``benchmarks/bench_dispatch.py``.
        """
        bound_args = self._sig.signature.bind(*args, **kwargs)
        bound_args.apply_defaults()
        if not skip_check:
            bound = dict(bound_args.arguments)
            values = [bound[n] for how, n in self._specs["__func__"] if how in ("pos", "kw")]
            self._select(find_compute_capability(*values), bound)
        return self.__wrapped__(*bound_args.args, **bound_args.kwargs)

    # ---- the call ----------------------------------------------------------------------

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._fast(*args, **kwargs)

    def __get__(self, instance: Any, owner: type | None = None) -> Any:
        if instance is None:
            return self
        import types

        return types.MethodType(self, instance)

    def __repr__(self) -> str:
        return f"<backend_requirement op {self.__module__}.{self.__qualname__}>"

    # ---- upstream's query API ----------------------------------------------------------

    @property
    def suitable_auto_backends(self) -> list[str]:
        """Candidates of this thread's current (or last) ``backend="auto"`` call, best first."""
        return self._state.suitable

    @property
    def dropped_experimental_backends(self) -> tuple[str, ...]:
        """Experimental backends that were viable but left out of this thread's last call."""
        return self._state.dropped

    def has_backend_choices(self) -> bool:
        return len(self.backend_checks) > 0

    def has_backend(self, backend: str) -> bool:
        return backend in self.backend_checks

    def is_experimental_backend(self, backend: str) -> bool:
        return backend in self.experimental_backends

    def is_backend_supported(self, backend: str, cc: int | None = None) -> bool:
        """Whether ``backend`` exists and (given ``cc``) declares support for that capability."""
        checker = self.backend_checks.get(backend)
        if checker is None:
            return False
        if cc is None:
            return True
        is_supported = getattr(checker, "is_compute_capability_supported", None)
        return bool(is_supported and is_supported(cc))

    def is_compute_capability_supported(self, cc: int) -> bool:
        if not self.backend_checks:
            is_supported = getattr(self.common_check, "is_compute_capability_supported", None)
            return bool(is_supported and is_supported(cc))
        return any(self.is_backend_supported(b, cc) for b in self.backend_checks)

    def backend_runnable_reason(self, backend: str, cc: int | None) -> str | None:
        """Why ``backend`` cannot run at capability ``cc`` (None: no CUDA), or None if it can."""
        if backend not in self.backend_checks:
            return f"unknown backend {backend!r}"
        return _capability_reason(self.backend_checks[backend], cc)


def backend_requirement(
    backend_checks: Mapping[str, Callable[..., Any]],
    common_check: Callable[..., Any] | None = None,
    heuristic_func: Callable[..., Any] | None = None,
) -> Callable[[Callable[..., Any]], BackendRequirementOp]:
    """Decorate an API with its backends' support checkers.

    ``backend_checks`` maps a backend name to a checker that receives the API's arguments
    and returns ``True`` when the backend supports them (or raises ``ValueError`` saying
    why not).  ``common_check`` applies to every backend.  ``heuristic_func(candidates,
    *args, **kwargs)`` orders the viable candidates of ``backend="auto"``, best first.

    The decorated API gains ``skip_check=`` (bypass all checks), ``suitable_auto_backends``
    (candidates of the current ``"auto"`` call), ``dropped_experimental_backends``,
    ``experimental_backends`` and upstream's query methods.  Errors:
    :class:`BackendSupportedError` for an unknown backend, a capability that does not fit or
    no suitable ``"auto"`` candidate; ``ValueError`` for an unsupported problem size.
    """

    def decorator(func: Callable[..., Any]) -> BackendRequirementOp:
        return BackendRequirementOp(func, backend_checks, common_check, heuristic_func)

    return decorator
