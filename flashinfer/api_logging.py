"""API markers and the experimental gate (upstream import path: ``flashinfer.api_logging``).

Two markers live here:

* :func:`flashinfer_api` marks a stable public API and records it in the API inventory.
* :func:`flashinfer_experimental_api` (alias :func:`experimental_api`) marks an API that may
  change or disappear.  Calling it is the opt-in: it always runs, and warns once.

The gate for *automatic* selection of experimental backends is
``FLASHINFER_ALLOW_EXPERIMENTAL_AUTO_BACKENDS``; it is read at call time by
:func:`experimental_auto_backends_allowed`.  Explicit opt-ins never read it.
"""

from __future__ import annotations

import datetime as _dt
import functools
import inspect
import logging
import os
import sys
import threading
import types
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, TypeVar, get_args, overload

from ._codegen import ParameterList, compile_function, render_call

__all__ = [
    "ALLOW_EXPERIMENTAL_AUTO_BACKENDS_ENV",
    "APIRecord",
    "EXPERIMENTAL_WARNINGS_ENV",
    "ExperimentalInfo",
    "ExperimentalWarning",
    "api_inventory",
    "experimental_api",
    "experimental_auto_backends_allowed",
    "flashinfer_api",
    "flashinfer_experimental_api",
    "require_experimental_auto_backends",
    "reset_experimental_warnings",
    "user_stacklevel",
    "warn_experimental_backend_once",
]

F = TypeVar("F", bound=Callable[..., Any])
# What the experimental marker accepts and gives back unchanged in type: a function (its
# parameters, return type and overloads stay visible to a type checker), a class (still
# that class), or a staticmethod / classmethod object.
_Marked = TypeVar(
    "_Marked", bound="Callable[..., Any] | staticmethod[..., Any] | classmethod[Any, ..., Any]"
)

ALLOW_EXPERIMENTAL_AUTO_BACKENDS_ENV = "FLASHINFER_ALLOW_EXPERIMENTAL_AUTO_BACKENDS"
# Upstream's name for the same variable (its tests import it from here).
_EXPERIMENTAL_AUTO_ENV_VAR = ALLOW_EXPERIMENTAL_AUTO_BACKENDS_ENV
_ACCEPTED_VALUES = "'1' (on), '0' or empty/unset (off)"
EXPERIMENTAL_WARNINGS_ENV = "FLASHINFER_EXPERIMENTAL_WARNINGS"
# Python's warning-filter actions, by their full names: no prefixes, no case folding.
_Action = Literal["default", "error", "ignore", "always", "module", "once"]
_WARNING_ACTIONS: tuple[_Action, ...] = get_args(_Action)


class ExperimentalWarning(UserWarning):
    """Emitted once when an experimental API or backend is first used.

    A ``UserWarning`` subclass, so it is shown by default and can be filtered on its own::

        warnings.filterwarnings("ignore", category=flashinfer.ExperimentalWarning)

    From the command line, ``FLASHINFER_EXPERIMENTAL_WARNINGS=error`` (or ``ignore``,
    ``default``, ...) does the same; ``python -W error::flashinfer...`` cannot, because
    Python resolves a category named there before it can import this package.  Escalated to
    an error, it refuses every use, not only the first.  Its message starts with
    "Experimental".
    """


# --------------------------------------------------------------------------------------
# Pointing warnings at the user's line
# --------------------------------------------------------------------------------------


def _is_internal_frame(frame: Any) -> bool:
    name = frame.f_globals.get("__name__", "")
    return name == "flashinfer" or name.startswith(("flashinfer.", "wrapt", "functools"))


def _is_import_machinery(frame: Any) -> bool:
    # The test warnings.warn itself uses to leave importlib's frames out of ``stacklevel``.
    filename = frame.f_code.co_filename
    return "importlib" in filename and "_bootstrap" in filename


def user_stacklevel() -> int:
    """The ``stacklevel`` that makes a warning issued by the caller point at user code.

    Counts frames from the caller of this function up to the first frame outside the
    ``flashinfer`` package, leaving out importlib's frames as ``warnings.warn`` does (a
    warning issued while ``flashinfer`` is imported points at the ``import`` line).  Only
    called on the rare path that actually warns.
    """
    frame: Any = sys._getframe(1)
    level = 1
    while frame is not None and _is_internal_frame(frame):
        frame = frame.f_back
        while frame is not None and _is_import_machinery(frame):
            frame = frame.f_back
        level += 1
    return level


# --------------------------------------------------------------------------------------
# The gate
# --------------------------------------------------------------------------------------

# os.environ.get re-encodes the key on every call (~1 us here); on POSIX the underlying
# bytes dict is kept in sync by os.environ itself, so reading it directly is exact and cheap.
_ENV_KEY_BYTES = os.fsencode(ALLOW_EXPERIMENTAL_AUTO_BACKENDS_ENV)
_environ_object = os.environ
_environ_bytes: dict[bytes, bytes] | None = (
    getattr(os.environ, "_data", None) if os.name == "posix" else None
)
_warned_env_values: set[tuple[str, str]] = set()  # (variable, value) pairs warned about
_warn_lock = threading.Lock()


def gate_fast_read() -> tuple[Any, Any, dict[bytes, bytes], bytes] | None:
    """``(os module, os.environ, its bytes dict, key)`` for generated code to read the
    gate variable inline (POSIX only; None elsewhere).  The reader must check that
    ``os.environ`` is still that object (replaced, e.g. by a mock, it reads through
    :func:`experimental_auto_backends_allowed`), and leave any value but ``b"1"``,
    ``b"0"`` or empty to that function, which warns."""
    if _environ_bytes is None:
        return None
    return os, _environ_object, _environ_bytes, _ENV_KEY_BYTES


def _gate_raw_value() -> str | None:
    if _environ_bytes is not None and os.environ is _environ_object:
        raw = _environ_bytes.get(_ENV_KEY_BYTES)
        return None if raw is None else os.fsdecode(raw)
    return os.environ.get(ALLOW_EXPERIMENTAL_AUTO_BACKENDS_ENV)


def experimental_auto_backends_allowed() -> bool:
    """Whether automatic selection may pick experimental backends.

    ``True`` only when ``FLASHINFER_ALLOW_EXPERIMENTAL_AUTO_BACKENDS`` is exactly ``"1"``.
    Unset, empty or ``"0"`` is off.  Any other value is off and warns once per distinct
    value.  Read at every call, so changing the variable at run time takes effect.
    """
    raw = _gate_raw_value()
    if raw == "1":
        return True
    if not raw or raw == "0":
        return False
    _warn_unrecognised_once(
        ALLOW_EXPERIMENTAL_AUTO_BACKENDS_ENV, raw, "treating it as off", _ACCEPTED_VALUES
    )
    return False


def _warn_unrecognised_once(variable: str, raw: str, effect: str, accepted: str) -> None:
    """One RuntimeWarning per (variable, value): the value, what is done instead, the fix."""
    if (variable, raw) in _warned_env_values:
        return
    with _warn_lock:
        first = (variable, raw) not in _warned_env_values
        _warned_env_values.add((variable, raw))
    if first:
        warnings.warn(
            f"{variable}={raw!r} is not a recognised value; {effect}. Accepted values: {accepted}.",
            RuntimeWarning,
            stacklevel=user_stacklevel(),
        )


def require_experimental_auto_backends(feature: str) -> None:
    """Raise ``RuntimeError`` unless the gate allows automatic experimental selection.

    For APIs that route ``backend="auto"`` by hand rather than through
    ``backend_requirement``.
    """
    if not experimental_auto_backends_allowed():
        raise RuntimeError(
            f"Automatic selection of the experimental feature {feature!r} is disabled. "
            f"Set {ALLOW_EXPERIMENTAL_AUTO_BACKENDS_ENV}=1 to allow it, or select the "
            "experimental backend explicitly by name."
        )


# --------------------------------------------------------------------------------------
# Once-only warnings
# --------------------------------------------------------------------------------------


class _OnceFlag:
    """A "warn once" flag: the hot path reads one attribute, no lock and no key lookup."""

    __slots__ = ("warned",)

    def __init__(self) -> None:
        self.warned = False

    def claim(self) -> bool:
        """True for exactly one caller, even when many threads race here."""
        with _warn_lock:
            if self.warned:
                return False
            self.warned = True
            return True


_once_flags: list[_OnceFlag] = []
_backend_flags: dict[tuple[str, str], _OnceFlag] = {}
# The (API, backend) pairs that have warned.  Upstream keeps this set and its tests forget
# the warnings by assigning a fresh one (``monkeypatch.setattr``); here the once-flags
# decide, and assigning a set to this name makes exactly its pairs count as warned (see
# _ApiLoggingModule at the end of this module).
_WARNED_EXPERIMENTAL_BACKENDS: set[tuple[str, str]] = set()


def _experimental_warnings_action() -> _Action | None:
    """The filter action ``FLASHINFER_EXPERIMENTAL_WARNINGS`` asks for; None when unset.

    Read each time an ExperimentalWarning is issued.  An unknown value warns once (a
    RuntimeWarning naming the variable and the accepted values) and is ignored.
    """
    raw = os.environ.get(EXPERIMENTAL_WARNINGS_ENV)
    if not raw:
        return None
    for action in _WARNING_ACTIONS:
        if raw == action:
            return action
    accepted = ", ".join(repr(a) for a in _WARNING_ACTIONS) + ", or empty/unset"
    _warn_unrecognised_once(EXPERIMENTAL_WARNINGS_ENV, raw, "ignoring it", accepted)
    return None


def _issue(flag: _OnceFlag, message: str) -> None:
    """Issue the ExperimentalWarning of a once-flag that the caller has just claimed.

    ``FLASHINFER_EXPERIMENTAL_WARNINGS=<action>`` puts ``<action>`` first among the warning
    filters for ExperimentalWarning, again at every warning (a ``catch_warnings`` block that
    has ended takes it away), so it decides over any other filter.  When a filter turns the
    warning into an error, the flag is released: the next use is refused as well, instead of
    running silently.
    """
    try:
        action = _experimental_warnings_action()
        if action is not None:
            with _warn_lock:  # warnings' own filter list is not guarded on Python < 3.13
                warnings.filterwarnings(action, category=ExperimentalWarning)
        warnings.warn(message, ExperimentalWarning, stacklevel=user_stacklevel())
    except BaseException:
        flag.warned = False
        raise


def _new_flag() -> _OnceFlag:
    flag = _OnceFlag()
    with _warn_lock:
        _once_flags.append(flag)
    return flag


def backend_warning_flag(api: str, backend: str) -> _OnceFlag:
    """The shared once-flag of an (API, backend) pair; the dispatcher keeps it at hand."""
    flag = _backend_flags.get((api, backend))
    if flag is None:
        with _warn_lock:
            flag = _backend_flags.get((api, backend))
            if flag is None:
                flag = _backend_flags[(api, backend)] = _OnceFlag()
                _once_flags.append(flag)
    return flag


def _plain_name(api: str) -> str:
    """``"flashinfer.gemm.mm"`` -> ``"mm"``: the name users call (the last part of a key)."""
    return api.rsplit(".", 1)[-1]


def warn_experimental_backend_once(api: str, backend: str, *, automatic: bool = False) -> None:
    """Warn once per process for each (API, backend) pair that an experimental backend runs.

    ``api`` is the API's qualified name (``"flashinfer.gemm.mm"``) or its plain name; the
    message quotes the plain one: ``Experimental backend 'splitk' was selected for 'mm' ...``.
    ``automatic=True`` words the warning for a backend picked by ``backend="auto"`` or the
    autotuner; otherwise it says the backend was selected explicitly by name.
    """
    flag = backend_warning_flag(api, backend)
    if flag.warned or not flag.claim():
        return
    if automatic:
        how = (
            f"was picked automatically for {_plain_name(api)!r} ({api}(backend='auto')) "
            f"because {ALLOW_EXPERIMENTAL_AUTO_BACKENDS_ENV}=1"
        )
    else:
        how = f"was selected for {_plain_name(api)!r} explicitly ({api}(backend={backend!r}))"
    _issue(
        flag,
        f"Experimental backend {backend!r} {how}. Experimental backends may change or be "
        "removed without deprecation.",
    )
    _WARNED_EXPERIMENTAL_BACKENDS.add((api, backend))


def reset_experimental_warnings() -> None:
    """Forget every "already warned" record, so each warning fires again once.

    For test suites (ours and our users'): makes warning tests independent of order.
    """
    with _warn_lock:
        _warned_env_values.clear()
        _WARNED_EXPERIMENTAL_BACKENDS.clear()
        for flag in _once_flags:
            flag.warned = False


def _adopt_backend_warning_record(record: set[tuple[str, str]]) -> None:
    """After ``_WARNED_EXPERIMENTAL_BACKENDS = record``: exactly its pairs count as warned."""
    for flag in list(_backend_flags.values()):
        flag.warned = False
    for api, backend in record:
        backend_warning_flag(api, backend).warned = True


# --------------------------------------------------------------------------------------
# Experimental metadata and the API inventory
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ExperimentalInfo:
    """Lifecycle metadata of an experimental API or backend."""

    feature: str
    owner: str | None = None
    tracking_issue: str | None = None
    graduate_by: _dt.date | None = None


def _parse_graduate_by(value: str | _dt.date | None) -> _dt.date | None:
    if value is None or isinstance(value, _dt.date):
        return value
    try:
        return _dt.date.fromisoformat(value)
    except (TypeError, ValueError):
        raise ValueError(f"graduate_by must be a date written YYYY-MM-DD, got {value!r}") from None


def make_experimental_info(
    feature: str,
    owner: str | None,
    tracking_issue: str | int | None,
    graduate_by: str | _dt.date | None,
) -> ExperimentalInfo:
    """Validate lifecycle metadata given to a marker (shared by API and backend markers)."""
    return ExperimentalInfo(
        feature=feature,
        owner=owner,
        tracking_issue=None if tracking_issue is None else str(tracking_issue),
        graduate_by=_parse_graduate_by(graduate_by),
    )


@dataclass(frozen=True)
class APIRecord:
    """One entry of the API inventory."""

    name: str
    obj: Any

    @property
    def experimental(self) -> bool:
        # Read at listing time, so the two markers compose in either order.
        return bool(getattr(self.obj, "is_experimental", False))

    @property
    def info(self) -> ExperimentalInfo | None:
        return getattr(self.obj, "experimental_info", None)


_inventory: dict[str, APIRecord] = {}


def _qualified_name(obj: Any) -> str:
    return f"{obj.__module__}.{obj.__qualname__}"


def _record(obj: Any) -> None:
    _inventory[_qualified_name(obj)] = APIRecord(_qualified_name(obj), obj)


def api_inventory(*, experimental: bool | None = None) -> list[APIRecord]:
    """Every API recorded by the markers, sorted by name.

    ``experimental=True`` / ``False`` keeps only experimental / stable APIs.  Only the
    modules imported so far have recorded theirs; ``flashinfer.load_all_apis()`` imports
    every module of the package that defines APIs.
    """
    records = sorted(_inventory.values(), key=lambda r: r.name)
    if experimental is None:
        return records
    return [r for r in records if r.experimental == experimental]


# --------------------------------------------------------------------------------------
# flashinfer_api: the stable marker, with optional call logging
# --------------------------------------------------------------------------------------

_logger = logging.getLogger("flashinfer.api")


def _log_level() -> int:
    try:
        return int(os.environ.get("FLASHINFER_LOGLEVEL", "0") or 0)
    except ValueError:
        return 0


def _describe(value: Any) -> str:
    shape = getattr(value, "shape", None)
    dtype = getattr(value, "dtype", None)
    if shape is not None and dtype is not None:
        return f"Tensor(shape={tuple(shape)}, dtype={dtype}, device={value.device})"
    return repr(value)


def _logged(func: F, level: int) -> F:
    name = _qualified_name(func)

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if level >= 3:
            parts = [_describe(a) for a in args] + [
                f"{k}={_describe(v)}" for k, v in kwargs.items()
            ]
            _logger.info("%s(%s)", name, ", ".join(parts))
        else:
            _logger.info("%s called", name)
        return func(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


def flashinfer_api(func: F) -> F:
    """Mark a stable public API and record it in the API inventory.

    With ``FLASHINFER_LOGLEVEL`` unset or ``0`` at decoration time the function is returned
    unchanged, so the marker costs nothing per call.  ``1`` logs each call's name and ``3``
    also its arguments (shapes and dtypes of tensors) to the ``flashinfer.api`` logger.
    Composes with :func:`flashinfer_experimental_api` in either order.
    """
    level = _log_level()
    result = _logged(func, level) if level > 0 else func
    _record(result)
    return result


# --------------------------------------------------------------------------------------
# flashinfer_experimental_api
# --------------------------------------------------------------------------------------

_BANNER = (
    "**Experimental API** (feature ``{feature}``): this API is experimental; it may change "
    "or be removed without deprecation. Calling it is the opt-in; the first call warns with "
    "ExperimentalWarning."
)


def _with_banner(doc: str | None, feature: str) -> str:
    banner = _BANNER.format(feature=feature)
    if not doc:
        return banner
    return f"{banner}\n\n{inspect.cleandoc(doc)}"


def _api_message(feature: str, name: str) -> str:
    # Starts with "Experimental", like the backend warnings: a -W message filter can match both.
    label = repr(name) if feature == name else f"{name!r} (feature {feature!r})"
    return f"Experimental API {label} may change or disappear without deprecation."


def _mark(obj: Any, info: ExperimentalInfo) -> None:
    try:
        obj.is_experimental = True
        obj.experimental_feature = info.feature
        obj.experimental_info = info
    except (AttributeError, TypeError):  # builtins and slot wrappers take no attributes
        pass


# The generated wrapper is of the same kind as the function it wraps, so that
# inspect.iscoroutinefunction / isgeneratorfunction / isasyncgenfunction still answer True
# (asyncio, pytest fixtures and frameworks branch on them).  Such a wrapper warns when its
# body first runs: at the first await, next() or async iteration.
_FORWARD_ASYNC_GENERATOR = [
    # ``yield from`` for an async generator: values, asend(), athrow() and aclose() pass on.
    "_it = {call}",
    "try:",
    "    _v = await _it.__anext__()",
    "except StopAsyncIteration:",
    "    return",
    "while True:",
    "    try:",
    "        _s = yield _v",
    "    except GeneratorExit:",
    "        await _it.aclose()",
    "        raise",
    "    except BaseException as _e:",
    "        _step = _it.athrow(_e)",
    "    else:",
    "        _step = _it.__anext__() if _s is None else _it.asend(_s)",
    "    try:",
    "        _v = await _step",
    "    except StopAsyncIteration:",
    "        return",
]
_FORWARD = {
    "function": ("def", ["return {call}"]),
    "coroutine": ("async def", ["return await {call}"]),
    "generator": ("def", ["return (yield from {call})"]),
    "async generator": ("async def", _FORWARD_ASYNC_GENERATOR),
}


def _function_kind(func: Callable[..., Any]) -> str:
    if inspect.isasyncgenfunction(func):
        return "async generator"
    if inspect.iscoroutinefunction(func):
        return "coroutine"
    if inspect.isgeneratorfunction(func):
        return "generator"
    return "function"


def _wrap_function(func: Callable[..., Any], info: ExperimentalInfo, name: str) -> Any:
    flag = _new_flag()
    message = _api_message(info.feature, name)

    def first_call() -> None:
        _issue(flag, message)

    ns: dict[str, Any] = {"_func": func, "_flag": flag, "_first": first_call}
    try:
        # Same parameter list as ``func``: no *args/**kwargs repacking on the hot path, and
        # a wrong call fails when made, as it would unwrapped (even for a coroutine).
        params = ParameterList(func)
        declared, call = params.def_params(ns), render_call("_func", params.call_spec())
    except (TypeError, ValueError):  # no introspectable signature, or reserved names
        declared, call = "*args, **kwargs", "_func(*args, **kwargs)"
    keyword, body = _FORWARD[_function_kind(func)]
    wrapper = compile_function(
        [
            f"{keyword} generated({declared}):",
            "    if not _flag.warned and _flag.claim():",
            "        _first()",
            *(f"    {line}".format(call=call) for line in body),
        ],
        ns,
        f"<flashinfer_experimental_api {name}>",
    )
    functools.update_wrapper(wrapper, func)
    wrapper.__doc__ = _with_banner(func.__doc__, info.feature)
    _mark(func, info)
    _mark(wrapper, info)
    return wrapper


# On the marker's __new__ wrappers: whether the class defined the __new__ it wraps.
_OWN_NEW = "_flashinfer_wraps_own_new"


def _overrides_new(klass: type, marked: type) -> bool:
    """Whether ``klass`` or a class between it and ``marked`` defines a ``__new__`` of its
    own (a marker's wrapper counts only if it wraps such a one)."""
    for base in klass.__mro__:
        if base is marked:
            return False
        new = base.__dict__.get("__new__")
        if new is not None and getattr(getattr(new, "__func__", new), _OWN_NEW, True):
            return True
    return False


def _wrap_class(cls: type, info: ExperimentalInfo) -> type:
    """Warn at the first instantiation of ``cls`` or of a subclass, by wrapping ``__new__``.

    ``__new__`` rather than ``__init__``: it runs first for every class, whichever of the
    two it defines.  When ``__new__`` is ``object.__new__`` the wrapper must not pass the
    arguments on (object.__new__ refuses them once ``__new__`` is overridden); it applies
    object.__new__'s own rule for them instead, as if the wrapper were not there.
    """
    flag = _new_flag()
    message = _api_message(info.feature, cls.__qualname__)
    original_new: Any = cls.__new__
    own_new = "__new__" in cls.__dict__
    try:
        signature: inspect.Signature | None = inspect.signature(cls)
    except (TypeError, ValueError):
        signature = None

    object_new, object_init = object.__new__, object.__init__
    passes_on = original_new is not object_new  # the class's own __new__, or a marked base's

    def __new__(klass: type, /, *args: Any, **kwargs: Any) -> Any:
        if not flag.warned and flag.claim():
            _issue(flag, message)
        if passes_on:
            return original_new(klass, *args, **kwargs)
        if args or kwargs:  # object.__new__'s rule, for the class being made
            if klass is not cls and _overrides_new(klass, cls):
                raise TypeError(
                    "object.__new__() takes exactly one argument (the type to instantiate)"
                )
            if klass.__init__ is object_init:  # type: ignore[misc]
                raise TypeError(f"{klass.__name__}() takes no arguments")
        return object_new(klass)

    if own_new:
        functools.update_wrapper(__new__, original_new)
    setattr(__new__, _OWN_NEW, own_new)
    __new__.__qualname__ = f"{cls.__qualname__}.__new__"
    __new__.__module__ = cls.__module__
    if signature is not None:
        # inspect.signature(cls) now reads __new__: tell it the class's own parameters
        # (after a first one it drops, as it drops ``cls``).
        first = inspect.Parameter("__cls", inspect.Parameter.POSITIONAL_ONLY)
        params = [first, *signature.parameters.values()]
        __new__.__signature__ = signature.replace(parameters=params)  # type: ignore[attr-defined]
    cls.__new__ = staticmethod(__new__)  # type: ignore[method-assign]
    cls.__doc__ = _with_banner(cls.__doc__, info.feature)
    _mark(cls, info)
    return cls


def _experimental(obj: Any, info_args: dict[str, Any]) -> Any:
    if isinstance(obj, (staticmethod, classmethod)):
        inner = obj.__func__
        feature = info_args["feature"] or inner.__qualname__
        info = make_experimental_info(feature, *info_args["rest"])
        function = _wrap_function(inner, info, inner.__qualname__)
        _record(function)
        return type(obj)(function)
    if not callable(obj):
        raise TypeError(
            f"@flashinfer_experimental_api decorates functions, methods and classes, "
            f"not {type(obj).__name__}"
        )
    feature = info_args["feature"] or obj.__qualname__
    info = make_experimental_info(feature, *info_args["rest"])
    if isinstance(obj, type):
        result = _wrap_class(obj, info)
    else:
        result = _wrap_function(obj, info, obj.__qualname__)
    # Experimental APIs are listed too (apart from stable ones); this also updates the
    # record when @flashinfer_api was applied first.
    _record(result)
    return result


@overload
def flashinfer_experimental_api(func: _Marked, /) -> _Marked: ...


@overload
def flashinfer_experimental_api(
    *,
    feature: str | None = None,
    owner: str | None = None,
    tracking_issue: str | int | None = None,
    graduate_by: str | _dt.date | None = None,
) -> Callable[[_Marked], _Marked]: ...


def flashinfer_experimental_api(
    func: Any = None,
    /,
    *,
    feature: str | None = None,
    owner: str | None = None,
    tracking_issue: str | int | None = None,
    graduate_by: str | _dt.date | None = None,
) -> Any:
    """Mark a public function, method or class as an experimental API.

    Use bare (``@flashinfer_experimental_api``) or with arguments
    (``@flashinfer_experimental_api(feature="fused_norm", owner="@alice",
    tracking_issue=123, graduate_by="2027-06-30")``).

    The marked API always runs: calling it is the opt-in.  Its first call in the process
    emits one :class:`ExperimentalWarning`, pointing at the caller's line; later calls are
    silent, also under many threads.  If a warning filter turns that warning into an error,
    every call raises it, not only the first.  Classes warn at the first instantiation of
    the class or of a subclass (the marker wraps ``__new__``); ``async def`` functions,
    generators and async generators stay what they are (``inspect.iscoroutinefunction`` and
    its siblings still answer True) and warn when their body first runs.

    The marker sets ``is_experimental = True``, ``experimental_feature`` and
    ``experimental_info`` on the wrapper and on the original, prepends a banner to the
    docstring and keeps the signature, name, module and ``__wrapped__``.  For a type
    checker the marked object keeps its exact type: a function its parameters, return type
    and overloads, a class stays the class.  It never reads the gate variable.
    """
    info_args = {"feature": feature, "rest": (owner, tracking_issue, graduate_by)}
    if func is None:
        return lambda obj: _experimental(obj, info_args)
    return _experimental(func, info_args)


experimental_api = flashinfer_experimental_api


# --------------------------------------------------------------------------------------
# Module set-up
# --------------------------------------------------------------------------------------


class _ApiLoggingModule(types.ModuleType):
    """This module's type: assigning ``_WARNED_EXPERIMENTAL_BACKENDS`` (as upstream's tests
    do to forget warnings) updates the once-flags to match.  Attribute reads, and so every
    call path, are untouched."""

    def __setattr__(self, name: str, value: Any) -> None:
        super().__setattr__(name, value)
        if name == "_WARNED_EXPERIMENTAL_BACKENDS":
            _adopt_backend_warning_record(value)


sys.modules[__name__].__class__ = _ApiLoggingModule

# A bad gate value warns when flashinfer is imported (one read, no cost per call), not only
# on the first call whose selection it changes; a value set later warns at that call.
experimental_auto_backends_allowed()
