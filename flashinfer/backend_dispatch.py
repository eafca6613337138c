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

:meth:`BackendRequirementOp.route_auto` lets the autotuner take over ``"auto"`` calls after
the checks: the generated path then hands it the candidates instead of calling the body.
"""

from __future__ import annotations

import functools
import inspect
import operator
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, ParamSpec, Protocol, TypeVar, cast, overload

import torch

from ._codegen import CallSpec, ParameterList, compile_function, render_call
from .api_logging import (
    ALLOW_EXPERIMENTAL_AUTO_BACKENDS_ENV,
    backend_warning_flag,
    experimental_auto_backends_allowed,
    gate_fast_read,
    make_experimental_info,
    warn_experimental_backend_once,
)

__all__ = [
    "BackendOp",
    "BackendRequirementOp",
    "BackendSupportedError",
    "PerThreadList",
    "UnsupportedInputsError",
    "backend_requirement",
    "experimental_backend",
    "find_compute_capability",
    "registered_ops",
    "supported_compute_capability",
]

C = TypeVar("C", bound=Callable[..., Any])
P = ParamSpec("P")
R = TypeVar("R")
R_co = TypeVar("R_co", covariant=True)

_EXPERIMENTAL = "flashinfer.experimental"


class BackendSupportedError(Exception):
    """The requested backend, or every candidate of ``backend="auto"``, cannot run the call."""


class UnsupportedInputsError(BackendSupportedError, ValueError):
    """A named backend cannot run these inputs: its support check (or the common check)
    refused them.

    Both a :class:`BackendSupportedError` and a ``ValueError``: upstream raises a
    ``ValueError`` ("Problem size is not supported for <api>") here, and code written
    against either keeps working.  The message names the API, the backend and the reason
    (the checker's own ``ValueError`` message, which is also the ``__cause__``).
    """


# --------------------------------------------------------------------------------------
# Checker markers
# --------------------------------------------------------------------------------------


def supported_compute_capability(
    supported_ccs: Iterable[int], *, cpu: bool = False
) -> Callable[[C], C]:
    """Declare the CUDA compute capabilities (``major * 10 + minor``) a checker's backend runs on.

    ``cpu=True`` also declares that the backend runs on CPU tensors.  Sets
    ``_supported_ccs``, ``_supports_cpu`` and ``is_compute_capability_supported(cc)`` on the
    checker and returns the checker itself (no wrapper, so no call overhead).

    Raises:
        TypeError: ``supported_ccs`` is not an iterable (a string counts as none), or one of
            its items is not an ``int`` (``bool`` is refused).
    """
    if isinstance(supported_ccs, (str, bytes)) or not isinstance(supported_ccs, Iterable):
        raise TypeError(
            "supported_compute_capability: supported_ccs must be an iterable of integers "
            f"such as [80, 90], got {type(supported_ccs).__name__}: {supported_ccs!r}"
        )
    values = list(supported_ccs)
    for i, cc in enumerate(values):
        if isinstance(cc, bool) or not isinstance(cc, int):
            raise TypeError(
                f"supported_compute_capability: supported_ccs[{i}] must be an integer like "
                f"90 (major * 10 + minor), got {type(cc).__name__}: {cc!r}"
            )
    supported = frozenset(values)

    def decorator(checker: C) -> C:
        checker._supported_ccs = supported  # type: ignore[attr-defined]
        checker._supports_cpu = cpu  # type: ignore[attr-defined]
        checker.is_compute_capability_supported = supported.__contains__  # type: ignore[attr-defined]
        return checker

    return decorator


@overload
def experimental_backend(checker: C, /) -> C: ...


@overload
def experimental_backend(
    checker: None = None,
    /,
    *,
    owner: str | None = None,
    tracking_issue: str | int | None = None,
    graduate_by: str | None = None,
    feature: str | None = None,
) -> Callable[[C], C]: ...


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


class _CudaState:
    """Whether this process can have CUDA tensors at all; decided on first use.

    Generated dispatchers read ``absent`` and skip the scan for CUDA tensors when no CUDA
    device exists (a CPU-only process has none to find).  Tests replace ``find``.
    """

    absent = False  # unknown until the first scan

    @staticmethod
    def find(*values: Any) -> int | None:
        return find_compute_capability(*values)


_CUDA = _CudaState()
_capability_by_device: dict[int, int] = {}


def device_capability(index: int) -> int:
    """Compute capability (``major * 10 + minor``) of CUDA device ``index``, looked up once."""
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
    for value in values:
        if isinstance(value, torch.Tensor) and value.is_cuda:
            return device_capability(value.get_device())
    if not torch.cuda.is_available():
        _CUDA.absent = True
    return None


def _capability_rule(checker: Any) -> tuple[bool, Any]:
    """The capability rule of a checker: (runs without CUDA tensors, the capabilities it
    declares or None).  The one place that reads the marks of supported_compute_capability:
    the reference path explains it, the generated path tests it."""
    ccs = getattr(checker, "_supported_ccs", None)
    return ccs is None or getattr(checker, "_supports_cpu", False), ccs


def _capability_reason(checker: Any, cc: int | None) -> str | None:
    """Why ``checker``'s backend cannot run at capability ``cc`` (None = no CUDA tensor)."""
    without_cuda, ccs = _capability_rule(checker)
    if cc is None:
        if without_cuda:
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


def _checker_spec(api: ParameterList, fn: Callable[..., Any], role: str, name: str) -> CallSpec:
    """How to call a checker: positionally when its parameters match the API's, else by name.

    A checker takes the API's parameters, or a subset of them, or ``**kwargs``; it may add
    parameters of its own only with defaults (rejected here, at decoration, otherwise).
    """
    try:
        theirs = ParameterList(fn)
    except (TypeError, ValueError):
        return api.call_spec()
    if api.matches_positionally(theirs):
        return [("pos", n) for n in api.names]
    var = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    ours = {p.name: p for p in api.params}
    for p in theirs.params:
        if p.name not in ours and p.default is p.empty and p.kind not in var:
            raise TypeError(
                f"{role} of {name} has parameter {p.name!r}, which {name} does not have; "
                f"a checker takes (a subset of) the API's parameters: {api.names}"
            )
    if _leads_with(theirs, api):  # the API's own parameter list, then defaulted extras
        return api.call_spec()
    # By name.  Positional-only parameters (always first) can only be passed by position.
    spec: CallSpec = []
    for p in theirs.params:
        mine = ours.get(p.name)
        if mine is None:
            continue
        if p.kind == p.POSITIONAL_ONLY:
            spec.append(("pos", p.name))
        elif p.kind in var:  # *args to *args, **kwargs to **kwargs; else by name below
            if mine.kind == p.kind:
                spec.append(("star" if p.kind == p.VAR_POSITIONAL else "starstar", p.name))
        else:
            spec.append(("kw", p.name))
    if any(p.kind == p.VAR_KEYWORD for p in theirs.params):
        # The rest of the API's arguments go to the checker's **kwargs, by name
        # (``*args`` as the tuple it is, ``**kwargs`` spread out).
        taken = {n for _, n in spec}
        for q in api.params:
            if q.name not in taken:
                spec.append(("starstar" if q.kind == q.VAR_KEYWORD else "kw", q.name))
    order = {"pos": 0, "star": 1, "kw": 2, "starstar": 3}
    return sorted(spec, key=lambda item: order[item[0]])


def _leads_with(theirs: ParameterList, api: ParameterList) -> bool:
    """Whether ``theirs`` starts with ``api``'s parameters: same names, order and kinds."""
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    if len(theirs.params) < len(api.params):
        return False
    for mine, other in zip(api.params, theirs.params[: len(api.params)], strict=True):
        if mine.name != other.name:
            return False
        if mine.kind in positional:
            if other.kind not in positional:
                return False
        elif mine.kind != other.kind:
            return False
    return True


def _filter_heuristic(ordered: Any, candidates: list[str]) -> list[str]:
    """A heuristic orders and may drop candidates; it can never add one, nor name one
    twice (the first mention counts)."""
    kept: list[str] = []
    for b in ordered:
        if b in candidates and b not in kept:
            kept.append(b)
    return kept


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


# --------------------------------------------------------------------------------------
# The op
# --------------------------------------------------------------------------------------

_registry: dict[str, Any] = {}


def registered_ops() -> list[Any]:
    """Every API decorated with ``backend_requirement`` so far, sorted by qualified name."""
    return [_registry[k] for k in sorted(_registry)]


class _Record:
    """One thread's record for one op: what its last "auto" call found."""

    __slots__ = ("suitable", "dropped")

    def __init__(self) -> None:
        self.suitable: list[str] = []
        self.dropped: tuple[str, ...] = ()


class _CallState(threading.local):
    # Each thread gets its own _Record on first use.  The hot path reads the thread-local
    # once and writes the record's slots: storing into a thread-local costs about three
    # times as much as reading one here (~0.3 us against ~0.1).
    def __init__(self) -> None:
        self.r = _Record()

    def clear_dropped(self) -> None:
        r = self.r
        if r.dropped:
            r.dropped = ()


class _Live:
    """Set once any thread has recorded dropped backends for an op: until then the
    generated path need not read the thread-local record to clear it."""

    __slots__ = ("dropped",)

    def __init__(self) -> None:
        self.dropped = False


class PerThreadList(Sequence[str]):
    """A read-only view of one field of the calling thread's record for an op.

    ``op.suitable_auto_backends`` and ``op.dropped_experimental_backends`` are these: the
    API is a plain function (the fastest thing to call), so its per-thread values are
    reached through an attribute that looks them up on every read.
    """

    __slots__ = ("_current", "current")

    def __init__(self, state: _CallState, field: str) -> None:
        # A C-level callable: reading the current value costs no Python frame.
        self._current = self.current = functools.partial(operator.attrgetter(f"r.{field}"), state)

    @overload
    def __getitem__(self, index: int) -> str: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[str]: ...

    def __getitem__(self, index: int | slice) -> str | Sequence[str]:
        return self._current()[index]

    def __len__(self) -> int:
        return len(self._current())

    def __iter__(self) -> Iterator[str]:
        return iter(self._current())

    def __contains__(self, value: object) -> bool:  # Sequence's default iterates in Python
        return value in self._current()

    current: Callable[[], Sequence[str]]
    """This thread's current value itself (no copy): for hot paths such as the autotuner."""

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence) and not isinstance(other, str):
            return list(self._current()) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return repr(list(self._current()))


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
        _check_declared_skip_check(func)
        # A declared skip_check is the dispatcher's: never passed on (the body sees its
        # default), so the API's parameters are the rest.
        self._sig = ParameterList(func, omit=("skip_check",))
        self._check_experimental_placement()
        self._specs = self._build_specs()
        self._live = _Live()
        self.suitable_auto_backends = PerThreadList(self._state, "suitable")
        self.dropped_experimental_backends = PerThreadList(self._state, "dropped")
        self.function = self._public_function(self._generate())
        _registry[self.api_key] = self.function

    def _public_function(self, fn: Any) -> Any:
        """The generated function, dressed as the API: what the decorator returns.

        A plain function, not this object: calling an instance with ``__call__`` costs
        several hundred nanoseconds more per call (no vectorcall through the type slot).
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
            "suitable_auto_backends",
            "dropped_experimental_backends",
            "has_backend",
            "has_backend_choices",
            "is_backend_supported",
            "is_compute_capability_supported",
            "is_experimental_backend",
            "backend_runnable_reason",
            "call_reference",
        ):
            setattr(fn, name, getattr(self, name))
        return fn

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
            specs["__common__"] = _checker_spec(sig, self.common_check, "common_check", api)
        for name, chk in self.backend_checks.items():
            specs[name] = _checker_spec(sig, chk, f"the checker of backend {name!r}", api)
        return specs

    # ---- code generation ---------------------------------------------------------------

    def _generate(self) -> Callable[..., Any]:
        """Source of the fast path: the happy path only, every failure goes to ``_fail``."""
        sig, specs = self._sig, self._specs
        ns: dict[str, Any] = {
            "_func": self.__wrapped__,
            "_common": self.common_check,
            "_heuristic": self.heuristic_func,
            "_filter": _filter_heuristic,
            "_CUDA": _CUDA,
            "_state": self._state,
            "_live": None,
            "_fail": self._fail,
            "_gate": experimental_auto_backends_allowed,
            "_warn": warn_experimental_backend_once,
            "_api": self.api_key,
            "_ORDER": tuple(self.backend_checks),
            "_route": None,
            # Builtins the code names, under names no API parameter can shadow.
            "_ValueError": ValueError,
            "_BaseException": BaseException,
        }
        self._ns = ns  # route_auto() fills _route in later
        call_func = render_call("_func", specs["__func__"])
        scan = self._scan_line()
        fail = self._fail_call(check_common=True)
        head = f"def generated({sig.def_params(ns, 'skip_check=False')}):"
        if not self.backend_checks:
            # skip_check=True bypasses the dispatcher entirely.
            lines = [head, "    if skip_check:", f"        return {call_func}", f"    {scan}"]
            if self.common_check is None:  # upstream: a usage error, raised on the call
                lines.append(f"    {fail}")
                return self._compile(lines, ns)
            ns["_cc_reason"] = _capability_reason  # upstream: it carries the capability rule
            lines += ["    if _cc_reason(_common, _cc) is not None:", f"        {fail}"]
            lines += [f"    {c}" for c in self._common_lines(fail)]
            lines.append(f"    return {call_func}")
            return self._compile(lines, ns)

        # skip_check=True: an explicit backend runs with no check at all; "auto" still has
        # to choose, which a second generated function does (the selection without the
        # common check), so that this one stays as short as it was.
        skip_lines = [f"def generated({sig.def_params(ns)}):", f"    {scan}"]
        skip_lines += self._auto_lines(ns, check_common=False)
        ns["_skip_auto"] = self._compile(skip_lines, ns, "skip_check auto")
        lines = [
            head,
            "    if skip_check:",
            "        if backend != 'auto':",
            f"            return {call_func}",
            f"        return {render_call('_skip_auto', specs['__func__'])}",
            f"    {scan}",
        ]
        # Only ops with experimental backends ever record dropped ones; each checked call
        # clears this thread's record first (an explicit branch) or rewrites it (auto).
        clear: list[str] = []
        if self.experimental_backends:
            clear = ["if _live.dropped and (_r := _state.r).dropped:", "    _r.dropped = ()"]
        # The common check runs after the backend is known to exist (inside each branch),
        # as in the reference: an unknown backend is reported whatever the check would do.
        common = self._common_lines(fail)
        # An explicit backend: one branch each, its checker called with its own spec.  They
        # sit under one "not auto" test, so that an "auto" call pays a single comparison.
        # A checker's ValueError goes to _fail, which names the op and backend with it.
        lines.append("    if backend != 'auto':")
        for i, (name, chk) in enumerate(self.backend_checks.items()):
            ns[f"_chk{i}"] = chk
            branch = [
                f"{'if' if i == 0 else 'elif'} backend == {name!r}:",
                *(f"    {c}" for c in clear + common),
                f"    if not {self._capability_guard(i, chk, ns)}:",
                f"        {fail}",
                "    try:",
                f"        _v = {render_call(f'_chk{i}', specs[name])}",
                "    except _ValueError:",
                "        _v = False",
                "    if not _v:",
                f"        {fail}",
            ]
            if name in self.experimental_backends:
                ns[f"_once{i}"] = backend_warning_flag(self.api_key, name)
                branch += [f"    if not _once{i}.warned:", f"        _warn(_api, {name!r})"]
            branch.append(f"    return {call_func}")
            lines += [f"        {c}" for c in branch]
        lines.append(f"        {fail}")  # an unknown backend; _fail clears the record
        lines += self._auto_lines(ns, check_common=True)
        return self._compile(lines, ns)

    def _scan_line(self) -> str:
        """The statement finding the call's capability: the first CUDA tensor among the
        arguments (every parameter but ``backend``, ``*args`` spread out)."""
        scanned = [
            f"*{n}" if how == "star" else n
            for how, n in self._specs["__func__"]
            if how in ("pos", "kw", "star") and n != "backend"
        ]
        return f"_cc = None if _CUDA.absent else _CUDA.find({', '.join(scanned)})"

    def _fail_call(self, *, check_common: bool) -> str:
        """The expression handing a call that does not fit to the reference path."""
        bound = "{" + ", ".join(f"{n!r}: {n}" for n in self._sig.names) + "}"
        return f"_fail(_cc, {bound})" if check_common else f"_fail(_cc, {bound}, False)"

    def _common_lines(self, fail: str) -> list[str]:
        if self.common_check is None:
            return []
        return [f"if not {render_call('_common', self._specs['__common__'])}:", f"    {fail}"]

    def _auto_lines(self, ns: dict[str, Any], *, check_common: bool) -> list[str]:
        """The ``backend="auto"`` part of a generated function (at function-body indent):
        select, record, then hand on to the router or call the body."""
        specs = self._specs
        fail = self._fail_call(check_common=check_common)
        if self.experimental_backends:
            ns["_live"] = self._live
        # backend="auto": every checker in declaration order.  Viable stable backends go to
        # _ok, experimental ones to _xok: with the gate off (the default) they are this
        # call's drops as they stand; with it on they are merged back in declaration order.
        # The thread's record is written at the end; whatever raises before that leaves
        # this call's drops in it (none before the gate is read), as the reference does.
        # The checks are generated twice: without CUDA tensors (_cc None, every call of a
        # CPU-only process) each capability test is known when generating, so that block
        # has none; the other tests the capability per checker.
        body = self._common_lines(fail) if check_common else []
        body += ["_ok = []", "if _cc is None:"]
        body += [f"    {c}" for c in self._auto_checks(ns, cc_none=True) or ["pass"]]
        body += ["else:"]
        body += [f"    {c}" for c in self._auto_checks(ns, cc_none=False) or ["pass"]]
        if self.experimental_backends:
            gate = "_gate()"
            unset = "False"
            fast = gate_fast_read()
            if fast is not None:  # read the variable inline; anything else goes to _gate
                ns["_os"], ns["_environ"], genv, gkey = fast
                ns["_gread"] = functools.partial(genv.get, gkey)  # C-level: no frame
                # Unset (the default) first, in the fewest steps; "1" next; the rest
                # (odd values warn, a replaced os.environ) through the full reader.
                unset = "(_g := _gread()) is None and _os.environ is _environ"
                gate = "(_g == b'1' and _os.environ is _environ) or _gate()"
            order = list(self.backend_checks)
            last_stable = max((order.index(b) for b in self.stable_backends), default=-1)
            if all(order.index(b) > last_stable for b in self.experimental_backends):
                merge = "_ok += _xok"  # experimental ones are declared last
            else:
                merge = "_ok = [_b for _b in _ORDER if _b in _xok or _b in _ok]"
            drop = ["        _drop = _xok", "        _live.dropped = True"]
            body += [
                "if _xok:",
                f"    if {unset}:",
                *drop,
                f"    elif {gate}:",
                f"        {merge}",
                "    else:",
                *drop,
            ]
        if self.heuristic_func is not None:
            # The heuristic gets a copy: were it given _ok itself, it could add a backend
            # (an unknown one, or one the gate dropped) by editing the list in place.  Any
            # other answer (reordered, shortened, with duplicates) goes through _filter.
            heur = render_call("_heuristic", specs["__func__"], lead="_ok.copy()")
            body += [
                "if _ok:",
                f"    _h = {heur}",
                "    if _h != _ok:",
                "        _ok = _filter(_h, _ok)",
            ]
        lines: list[str] = []
        if self.experimental_backends:
            lines += [
                "    _xok = _drop = ()",
                "    try:",
                *(f"        {c}" for c in body),
                "    except _BaseException:",
                "        if _live.dropped:",
                "            _state.r.dropped = _drop",
                "        raise",
            ]
        else:
            lines += [f"    {c}" for c in body]
        # _fail re-runs the selection, which records this call's drops itself.
        lines += ["    if not _ok:", f"        {fail}"]
        if self.experimental_backends:
            lines += [
                "    _r = _state.r",
                "    _r.suitable = _ok",
                "    _r.dropped = _drop",
                "    if _xok and _ok[0] in _xok:",
                "        _warn(_api, _ok[0], automatic=True)",
            ]
        else:
            lines.append("    _state.r.suitable = _ok")
        # An op whose auto calls are routed (route_auto) hands the candidates and its
        # arguments straight to the router (the autotuner) instead of calling the body;
        # a skip_check=True call keeps calling the body (route_auto's contract).
        routable = self.routed_inputs()
        if routable is not None and check_common:
            items = ", ".join(routable) + ("," if len(routable) == 1 else "")
            lines += ["    if _route is not None:", f"        return _route(_ok, ({items}))"]
        lines.append(f"    return {render_call('_func', specs['__func__'])}")
        return lines

    def _auto_checks(self, ns: dict[str, Any], *, cc_none: bool) -> list[str]:
        """The auto path's checker calls, in declaration order: viable stable backends are
        appended to _ok, experimental ones to _xok; each under its capability guard, known
        here to be ``_cc is None`` (``cc_none``) or not."""
        lines: list[str] = []
        for i, (name, chk) in enumerate(self.backend_checks.items()):
            guard = self._capability_guard(i, chk, ns, cc_none=cc_none)
            if guard == "False":
                continue
            keep = (
                f"_xok += ({name!r},)"
                if name in self.experimental_backends
                else (f"_ok.append({name!r})")
            )
            block = [
                "try:",
                f"    if {render_call(f'_chk{i}', self._specs[name])}:",
                f"        {keep}",
                "except _ValueError:",
                "    pass",
            ]
            if guard != "True":
                block = [f"if {guard}:", *(f"    {c}" for c in block)]
            lines += block
        return lines

    def _capability_guard(
        self, i: int, chk: Any, ns: dict[str, Any], *, cc_none: bool | None = None
    ) -> str:
        """Expression: the capability ``_cc`` lets checker ``i``'s backend run (see
        :func:`_capability_rule`).  ``cc_none``: whether ``_cc is None`` is known where the
        expression goes, which may reduce it to ``"True"`` or ``"False"``."""
        without_cuda, ccs = _capability_rule(chk)
        if ccs is not None:
            ns[f"_ccs{i}"] = ccs
        if cc_none is not None:
            if cc_none:
                return "True" if without_cuda else "False"
            return "False" if ccs is None else f"_cc in _ccs{i}"
        if ccs is None:
            return "_cc is None"
        if without_cuda:
            return f"(_cc is None or _cc in _ccs{i})"
        return f"_cc in _ccs{i}"

    def _compile(
        self, lines: list[str], ns: dict[str, Any], role: str = "dispatch"
    ) -> Callable[..., Any]:
        ns["__name__"] = __name__
        label = "" if role == "dispatch" else f" {role}"
        fn = compile_function(lines, ns, f"<backend_requirement {self.api_key}{label}>")
        fn.__name__ = self.api_name
        fn.__qualname__ = f"{self.__wrapped__.__qualname__}[{role}]"
        return fn

    # ---- the reference path ------------------------------------------------------------

    def _fail(self, cc: int | None, bound: dict[str, Any], check_common: bool = True) -> None:
        """Called by the generated path when something does not fit: raise the error."""
        self._select(cc, bound, check_common)
        raise RuntimeError(
            f"{self.api_name}: a support checker gave a different answer when re-run for "
            "the error message; checkers must be deterministic functions of the inputs"
        )

    def _check(self, fn: Any, spec_key: str, bound: Mapping[str, Any]) -> Any:
        return _invoke(fn, self._specs[spec_key], bound)

    def _backend_name(self, bound: Mapping[str, Any]) -> str:
        """The call's ``backend`` argument, refused with a TypeError unless it is a str."""
        backend = bound.get("backend", "auto") if self.backend_checks else "auto"
        if not isinstance(backend, str):
            raise TypeError(
                f"{self.api_name}: backend must be one backend name (a str), got "
                f"{type(backend).__name__} {backend!r}. Available backends: "
                f"{', '.join(repr(b) for b in self.backend_checks)}, or 'auto'."
            )
        return backend

    def _select(
        self, cc: int | None, bound: dict[str, Any], check_common: bool = True
    ) -> list[str]:
        """Readable selection logic: returns the candidates or raises the explaining error.

        ``check_common=False`` (a ``skip_check=True`` call) leaves the common check out.
        """
        api = self.api_name
        self._state.clear_dropped()
        backend = self._backend_name(bound)
        if self.backend_checks and backend != "auto" and backend not in self.backend_checks:
            raise BackendSupportedError(
                f"{api} does not support backend {backend!r}. Available backends: "
                f"{', '.join(repr(b) for b in self.backend_checks)}, or 'auto'."
            )
        if not self.backend_checks and self.common_check is None:
            raise ValueError(
                "Invalid @backend_requirement decorator usage: no backend choices and no "
                f"common_check for {api}"
            )
        if self.common_check is not None and check_common:
            self._run_common_check(cc, bound, backend)
        if not self.backend_checks:
            return []
        if backend != "auto":
            return self._select_explicit(cc, bound, backend)
        return self._select_auto(cc, bound)

    def _run_common_check(self, cc: int | None, bound: dict[str, Any], backend: str) -> None:
        """The common check; a ValueError it raises (malformed inputs) propagates."""
        api = self.api_name
        if not self.backend_checks:  # upstream: it carries the capability rule then
            reason = _capability_reason(self.common_check, cc)
            if reason is not None:
                raise BackendSupportedError(
                    f"{api} does not support compute capability {cc}: {reason}"
                )
        if self._check(self.common_check, "__common__", bound):
            return
        refused = "its common check returned False for these inputs"
        if not self.backend_checks:
            raise UnsupportedInputsError(f"Problem size is not supported for {api}: {refused}")
        if backend == "auto":  # an automatic-selection failure, as upstream
            raise BackendSupportedError(f"No suitable auto backends found for {api}: {refused}")
        raise UnsupportedInputsError(
            f"Problem size is not supported for {api} with backend {backend!r}: {refused}"
        )

    def _select_explicit(self, cc: int | None, bound: dict[str, Any], backend: str) -> list[str]:
        api = self.api_name
        checker = self.backend_checks[backend]
        reason = _capability_reason(checker, cc)
        if reason is not None:
            raise BackendSupportedError(
                f"{api} does not support backend {backend!r} with capability {cc}: {reason}"
            )
        try:
            fits = self._check(checker, backend, bound)
        except ValueError as exc:
            raise UnsupportedInputsError(
                f"{api} cannot run these inputs with backend {backend!r}: {exc}"
            ) from exc
        if not fits:
            raise UnsupportedInputsError(
                f"Problem size is not supported for {api} with backend {backend!r}: "
                "its support check returned False for these inputs"
            )
        if backend in self.experimental_backends:
            warn_experimental_backend_once(self.api_key, backend)
        return [backend]

    def _select_auto(self, cc: int | None, bound: dict[str, Any]) -> list[str]:
        api = self.api_name
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
            self._live.dropped = True
            self._state.r.dropped = tuple(dropped)
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
            ordered = _filter_heuristic(ordered, viable)
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
                f"No suitable auto backends found for {api}; every candidate was "
                f"rejected:\n{detail}"
            )
        self._state.r.suitable = viable
        if viable[0] in self.experimental_backends:
            warn_experimental_backend_once(self.api_key, viable[0], automatic=True)
        return viable

    def call_reference(self, *args: Any, skip_check: bool = False, **kwargs: Any) -> Any:
        """The same call through ``inspect.Signature.bind`` and the readable selection logic.

        Slow (upstream's design); kept as the reference the generated path is tested
        against, and as the "before" row of ``benchmarks/bench_dispatch.py``.
        """
        bound_args = self._sig.signature.bind(*args, **kwargs)  # TypeError as for the API
        bound_args.apply_defaults()
        bound = dict(bound_args.arguments)
        # skip_check=True skips every check of an explicit backend; "auto" still has to
        # choose, so it runs the selection without the common check, then calls the body.
        auto = bool(self.backend_checks) and bound["backend"] == "auto"
        if not skip_check or auto:
            # The values the generated path scans: named ones and *args, not backend.
            values: list[Any] = []
            for how, n in self._specs["__func__"]:
                if how in ("pos", "kw") and n != "backend":
                    values.append(bound[n])
                elif how == "star":
                    values.extend(bound[n])
            cc = find_compute_capability(*values)
            candidates = self._select(cc, bound, check_common=not skip_check)
            route = self._ns["_route"]
            if route is not None and auto and not skip_check:
                names = self.routed_inputs() or []
                return route(candidates, tuple(bound[n] for n in names))
        return self.__wrapped__(*bound_args.args, **bound_args.kwargs)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.function(*args, **kwargs)

    # ---- routing backend="auto" calls --------------------------------------------------

    def routed_inputs(self) -> list[str] | None:
        """The parameters whose arguments a routed auto call passes on (see
        :meth:`route_auto`): every parameter but ``backend``, in declaration order; None
        when the API cannot be routed (no backends, or ``*args``/``**kwargs``)."""
        if not self.backend_checks or self._sig.has_var:
            return None
        return [n for n in self._sig.names if n != "backend"]

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
        """
        if router is not None and self.routed_inputs() is None:
            raise TypeError(
                f"{self.api_key}: backend='auto' calls can only be routed for an API with "
                "backends and named parameters (no *args or **kwargs)"
            )
        self._ns["_route"] = router

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

    def backend_runnable_reason(self, backend: str, cc: int | None) -> str | None:
        """Why ``backend`` cannot run at capability ``cc`` (None: no CUDA), or None if it can."""
        if backend not in self.backend_checks:
            return f"unknown backend {backend!r}"
        return _capability_reason(self.backend_checks[backend], cc)


class BackendOp(Protocol[P, R_co]):
    """What :func:`backend_requirement` returns, as a type checker sees it.

    Called with the API's own parameters, it returns what the API returns: a checker
    reports a wrong argument or a wrong use of the result.  ``skip_check`` is part of
    those parameters only where the API declares it (``*, skip_check: bool = False``);
    the dispatcher takes it either way.  The attributes are the dispatcher's (see
    :class:`BackendRequirementOp`).  At run time the object is a plain function.
    """

    api_name: str
    api_key: str
    backend_checks: Mapping[str, Callable[..., Any]]
    common_check: Callable[..., Any] | None
    heuristic_func: Callable[..., Any] | None
    experimental_backends: frozenset[str]
    stable_backends: tuple[str, ...]
    suitable_auto_backends: PerThreadList
    dropped_experimental_backends: PerThreadList
    dispatcher: BackendRequirementOp
    __generated_source__: str

    @property
    def __wrapped__(self) -> Callable[P, R_co]: ...

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R_co: ...

    def call_reference(self, *args: P.args, **kwargs: P.kwargs) -> R_co: ...

    def has_backend(self, backend: str) -> bool: ...

    def has_backend_choices(self) -> bool: ...

    def is_backend_supported(self, backend: str, cc: int | None = None) -> bool: ...

    def is_compute_capability_supported(self, cc: int) -> bool: ...

    def is_experimental_backend(self, backend: str) -> bool: ...

    def backend_runnable_reason(self, backend: str, cc: int | None) -> str | None: ...


def backend_requirement(
    backend_checks: Mapping[str, Callable[..., Any]],
    common_check: Callable[..., Any] | None = None,
    heuristic_func: Callable[..., Any] | None = None,
) -> Callable[[Callable[P, R]], BackendOp[P, R]]:
    """Decorate an API with its backends' support checkers.

    ``backend_checks`` maps a backend name to a checker that receives the API's arguments
    and returns ``True`` when the backend supports them (or raises ``ValueError`` saying
    why not).  ``common_check`` validates the inputs for every backend (returning False or
    raising ``ValueError``).  ``heuristic_func(candidates, *args, **kwargs)`` orders the
    viable candidates of ``backend="auto"``, best first; it may drop candidates, never add
    one, and a name it repeats counts once.

    The decorated API (a :class:`BackendOp`, typed with the API's own parameters and
    return type) gains ``suitable_auto_backends`` (candidates of this thread's last
    ``"auto"`` call), ``dropped_experimental_backends``, ``experimental_backends``,
    upstream's query methods, and a keyword-only ``skip_check=False``.  An API may declare
    ``*, skip_check: bool = False`` itself so that type checkers see it; the dispatcher
    takes it and never passes it on.  ``skip_check=True``: a named backend runs with no
    check at all; ``"auto"`` still chooses (capability, support checkers, the experimental
    gate, the heuristic, as on a checked call), skipping only the common check, and calls
    the API body with ``suitable_auto_backends`` set (never a router, see
    :meth:`BackendRequirementOp.route_auto`).

    Raises (on a call; the same in the generated and the reference path):
        TypeError: ``backend`` is not a str (the message names the valid backends), or
            the arguments do not bind to the API's parameters.
        BackendSupportedError: an unknown backend; a capability the named backend (or an
            API without backends) does not declare; ``"auto"`` with no suitable candidate
            (each candidate and why, the gate named only when experimental backends were
            all that fitted), including a common check that returns False.
        UnsupportedInputsError: a named backend's support check (or the common check)
            refused the inputs: both a ``ValueError`` (upstream's contract) and a
            :class:`BackendSupportedError`, naming the API, the backend and the reason.
        ValueError: whatever the common check raises (the API's input validation), as it
            is; and upstream's usage errors: a call of an API with neither backends nor a
            common check, ``is_backend_supported`` on an API without backends.
    """

    def decorator(func: Callable[P, R]) -> BackendOp[P, R]:
        op = BackendRequirementOp(func, backend_checks, common_check, heuristic_func)
        return cast("BackendOp[P, R]", op.function)

    return decorator
