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
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar, overload

from ._codegen import ParameterList, compile_function, render_call

__all__ = [
    "ALLOW_EXPERIMENTAL_AUTO_BACKENDS_ENV",
    "APIRecord",
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
T = TypeVar("T")

ALLOW_EXPERIMENTAL_AUTO_BACKENDS_ENV = "FLASHINFER_ALLOW_EXPERIMENTAL_AUTO_BACKENDS"
_ACCEPTED_VALUES = "'1' (on), '0' or empty/unset (off)"


class ExperimentalWarning(UserWarning):
    """Emitted once when an experimental API or backend is first used.

    A ``UserWarning`` subclass, so it is shown by default and can be filtered on its own::

        warnings.filterwarnings("ignore", category=flashinfer.ExperimentalWarning)
    """


# --------------------------------------------------------------------------------------
# Pointing warnings at the user's line
# --------------------------------------------------------------------------------------


def _is_internal_frame(frame: Any) -> bool:
    name = frame.f_globals.get("__name__", "")
    return name == "flashinfer" or name.startswith(("flashinfer.", "wrapt", "functools"))


def user_stacklevel() -> int:
    """The ``stacklevel`` that makes a warning issued by the caller point at user code.

    Counts frames from the caller of this function up to the first frame outside the
    ``flashinfer`` package.  Only called on the rare path that actually warns.
    """
    frame: Any = sys._getframe(1)
    level = 1
    while frame is not None and _is_internal_frame(frame):
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
_warned_env_values: set[str] = set()
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
    if raw not in _warned_env_values:
        with _warn_lock:
            first = raw not in _warned_env_values
            _warned_env_values.add(raw)
        if first:
            warnings.warn(
                f"{ALLOW_EXPERIMENTAL_AUTO_BACKENDS_ENV}={raw!r} is not a recognised value; "
                f"treating it as off. Accepted values: {_ACCEPTED_VALUES}.",
                RuntimeWarning,
                stacklevel=user_stacklevel(),
            )
    return False


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


def warn_experimental_backend_once(api: str, backend: str, *, automatic: bool = False) -> None:
    """Warn once per process for each (API, backend) pair that an experimental backend runs.

    ``automatic=True`` words the warning for a backend picked by ``backend="auto"`` or the
    autotuner; otherwise it says the backend was selected explicitly by name.
    """
    flag = backend_warning_flag(api, backend)
    if flag.warned or not flag.claim():
        return
    if automatic:
        how = (
            f"was picked automatically for {api}(backend='auto') because "
            f"{ALLOW_EXPERIMENTAL_AUTO_BACKENDS_ENV}=1"
        )
    else:
        how = f"was selected explicitly for {api}(backend={backend!r})"
    warnings.warn(
        f"Experimental backend {backend!r} {how}. Experimental backends may change or be "
        "removed without deprecation.",
        ExperimentalWarning,
        stacklevel=user_stacklevel(),
    )


def reset_experimental_warnings() -> None:
    """Forget every "already warned" record, so each warning fires again once.

    For test suites (ours and our users'): makes warning tests independent of order.
    """
    with _warn_lock:
        _warned_env_values.clear()
        for flag in _once_flags:
            flag.warned = False


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
    "**Experimental API** (feature ``{feature}``): it may change or be removed without "
    "deprecation. Calling it is the opt-in; the first call warns with ExperimentalWarning."
)


def _with_banner(doc: str | None, feature: str) -> str:
    banner = _BANNER.format(feature=feature)
    if not doc:
        return banner
    return f"{banner}\n\n{inspect.cleandoc(doc)}"


def _warn_api(feature: str, name: str) -> None:
    label = name if feature == name else f"{name} (feature {feature!r})"
    warnings.warn(
        f"{label} is an experimental API: it may change or disappear without deprecation.",
        ExperimentalWarning,
        stacklevel=user_stacklevel(),
    )


def _mark(obj: Any, info: ExperimentalInfo) -> None:
    try:
        obj.is_experimental = True
        obj.experimental_feature = info.feature
        obj.experimental_info = info
    except (AttributeError, TypeError):  # builtins and slot wrappers take no attributes
        pass


def _wrap_function(func: Callable[..., Any], info: ExperimentalInfo, name: str) -> Any:
    flag = _new_flag()
    feature = info.feature

    def first_call() -> None:
        _warn_api(feature, name)

    try:
        params = ParameterList(func)
    except (TypeError, ValueError):  # no introspectable signature: a plain closure will do
        params = None
    if params is not None:
        # Same parameter list as ``func``: no *args/**kwargs repacking on the hot path.
        ns: dict[str, Any] = {"_func": func, "_flag": flag, "_first": first_call}
        wrapper = compile_function(
            [
                f"def generated({params.def_params(ns)}):",
                "    if not _flag.warned and _flag.claim():",
                "        _first()",
                f"    return {render_call('_func', params.call_spec())}",
            ],
            ns,
            f"<flashinfer_experimental_api {name}>",
        )
    else:

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if not flag.warned and flag.claim():
                first_call()
            return func(*args, **kwargs)

    functools.update_wrapper(wrapper, func)
    wrapper.__doc__ = _with_banner(func.__doc__, feature)
    _mark(func, info)
    _mark(wrapper, info)
    return wrapper


def _wrap_class(cls: type, info: ExperimentalInfo) -> type:
    flag = _new_flag()
    original_init = cls.__init__  # type: ignore[misc]
    feature = info.feature
    name = cls.__qualname__

    @functools.wraps(original_init)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        if not flag.warned and flag.claim():
            _warn_api(feature, name)
        original_init(self, *args, **kwargs)

    cls.__init__ = __init__  # type: ignore[misc]
    cls.__doc__ = _with_banner(cls.__doc__, feature)
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
def flashinfer_experimental_api(func: T, /) -> T: ...


@overload
def flashinfer_experimental_api(
    *,
    feature: str | None = None,
    owner: str | None = None,
    tracking_issue: str | int | None = None,
    graduate_by: str | _dt.date | None = None,
) -> Callable[[T], T]: ...


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
    silent, also under many threads.  Classes warn at first instantiation.  The marker sets
    ``is_experimental = True``, ``experimental_feature`` and ``experimental_info`` on the
    wrapper and on the original, prepends a banner to the docstring and keeps the signature,
    name, module and ``__wrapped__``.  It never reads the environment.
    """
    info_args = {"feature": feature, "rest": (owner, tracking_issue, graduate_by)}
    if func is None:
        return lambda obj: _experimental(obj, info_args)
    return _experimental(func, info_args)


experimental_api = flashinfer_experimental_api
