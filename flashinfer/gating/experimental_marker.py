"""The experimental markers: ``@flashinfer_experimental_api`` (a function is wrapped by
generated code of the same kind and signature, a class by a ``__new__`` wrapper) and
``@experimental_backend`` (marks a support checker)."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, TypeVar, overload

from flashinfer.codegen.compiler import (
    ParameterList,
    compile_function,
    module_namespace,
    render_call,
)
from flashinfer.gating.messages import experimental_api_banner, experimental_api_used
from flashinfer.gating.records import (
    ExperimentalInfo,
    MetadataValue,
    check_metadata_names,
    feature_of_module,
    given_name,
    make_experimental_info,
    record_api,
)
from flashinfer.gating.warn_once import issue_experimental_warning, new_once_flag

_Marked = TypeVar(
    "_Marked", bound="Callable[..., Any] | staticmethod[..., Any] | classmethod[Any, ..., Any]"
)
_MakeInfo = Callable[[Any], ExperimentalInfo]


def _with_banner(doc: str | None, feature: str) -> str:
    banner = experimental_api_banner(feature)
    if not doc:
        return banner
    return f"{banner}\n\n{inspect.cleandoc(doc)}"


def _mark(obj: Any, info: ExperimentalInfo) -> None:
    try:
        obj.is_experimental = True
        obj.experimental_feature = info.feature
        obj.experimental_info = info
    except (AttributeError, TypeError):  # builtins and slot wrappers take no attributes
        pass


# The wrapper is of the function's kind (inspect.iscoroutinefunction and its siblings
# still answer True); it warns when its body first runs.
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


def _wrap_function(func: Callable[..., Any], make_info: _MakeInfo) -> Any:
    name = func.__qualname__
    info = make_info(func)
    flag = new_once_flag()
    message = experimental_api_used(info.feature, name)

    def first_call() -> None:
        issue_experimental_warning(flag, message)

    ns = module_namespace(f"{func.__module__}.{name}", "experimental API wrapper")
    ns |= {"_func": func, "_flag": flag, "_first": first_call}
    try:
        # Same parameter list as ``func``: no *args/**kwargs repacking on the hot path, and
        # a wrong call fails when made, as it would unwrapped (even for a coroutine).
        params = ParameterList(func)
        declared, call = params.def_params(ns), render_call("_func", params.call_spec())
    except (TypeError, ValueError):  # no introspectable signature, or reserved names
        declared, call = "*args, **kwargs", "_func(*args, **kwargs)"
    keyword, body = _FORWARD[_function_kind(func)]
    wrapper = compile_function(
        declared,
        [
            "    if not _flag.warned:",
            "        _first()",
            *(f"    {line}".format(call=call) for line in body),
        ],
        ns,
        role="experimental API wrapper",
        api=f"{func.__module__}.{name}",
        keyword=keyword,
    )
    # Dressed as the API; its code keeps the name of its role, which tracebacks show.
    functools.update_wrapper(wrapper, func)
    wrapper.__doc__ = _with_banner(func.__doc__, info.feature)
    _mark(func, info)
    _mark(wrapper, info)
    record_api(wrapper)
    return wrapper


# On the marker's __new__ wrappers: whether the class defined the __new__ it wraps.
_OWN_NEW = "_flashinfer_wraps_own_new"


def _overrides_new(klass: type, marked: type) -> bool:
    for base in klass.__mro__:
        if base is marked:
            return False
        new = base.__dict__.get("__new__")
        if new is not None and getattr(getattr(new, "__func__", new), _OWN_NEW, True):
            return True
    return False


def _wrap_class(cls: type, make_info: _MakeInfo) -> type:
    """Warn at the first instantiation of ``cls`` or a subclass: ``__new__`` runs first.
    Over ``object.__new__`` the wrapper applies its rule on arguments itself."""
    info = make_info(cls)
    flag = new_once_flag()
    message = experimental_api_used(info.feature, cls.__qualname__)
    original_new: Any = cls.__new__
    own_new = "__new__" in cls.__dict__
    try:
        signature: inspect.Signature | None = inspect.signature(cls)
    except (TypeError, ValueError):
        signature = None

    object_new, object_init = object.__new__, object.__init__
    passes_on = original_new is not object_new  # the class's own __new__, or a marked base's

    def __new__(klass: type, /, *args: Any, **kwargs: Any) -> Any:
        if not flag.warned:
            issue_experimental_warning(flag, message)
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
    record_api(cls)
    return cls


def _experimental(obj: Any, make_info: _MakeInfo) -> Any:
    if isinstance(obj, (staticmethod, classmethod)):
        return type(obj)(_wrap_function(obj.__func__, make_info))
    if not callable(obj):
        raise TypeError(
            f"@flashinfer_experimental_api decorates functions, methods and classes, "
            f"not {type(obj).__name__}"
        )
    if isinstance(obj, type):
        return _wrap_class(obj, make_info)
    return _wrap_function(obj, make_info)


@overload
def flashinfer_experimental_api(func: _Marked, /) -> _Marked: ...


@overload
def flashinfer_experimental_api(**metadata: MetadataValue) -> Callable[[_Marked], _Marked]: ...


def flashinfer_experimental_api(func: Any = None, /, **metadata: MetadataValue) -> Any:
    """Mark a public function, method or class as an experimental API.

    Bare or with the fields of :class:`~flashinfer.api_logging.ExperimentalInfo` as keywords
    (``feature="fused_norm", owner="@alice", tracking_issue=123,
    graduate_by="2027-05-31"``; ``feature`` defaults to the qualified name).  An unknown
    keyword is a ``TypeError``; malformed metadata is recorded, warned about once
    (``ExperimentalMetadataWarning``) and fails the lifecycle check.

    The API always runs: calling it is the opt-in.  Its first call in the process emits one
    :class:`ExperimentalWarning` at the caller's line (threads arriving meanwhile wait);
    escalated to an error, every call is refused.  Classes warn at the first instantiation
    (subclasses included); coroutines and (async) generators when their body first runs.
    The wrapper keeps the signature, name, ``__wrapped__`` and type, prepends a banner to
    the docstring and carries ``is_experimental``, ``experimental_feature`` and
    ``experimental_info``.  It never reads the gate variable.
    """

    check_metadata_names("flashinfer_experimental_api", metadata)

    def make_info(obj: Any) -> ExperimentalInfo:  # checked when applied, per object
        named = metadata.get("feature")
        named = named if given_name(named) else obj.__qualname__
        return make_experimental_info(marked=obj, **{**metadata, "feature": named})

    if func is None:
        return lambda obj: _experimental(obj, make_info)
    return _experimental(func, make_info)


experimental_api = flashinfer_experimental_api


# -- @experimental_backend ---------------------------------------------------------------------

C = TypeVar("C", bound=Callable[..., Any])


@overload
def experimental_backend(checker: C, /) -> C: ...


@overload
def experimental_backend(
    checker: None = None, /, **metadata: MetadataValue
) -> Callable[[C], C]: ...


def experimental_backend(checker: Any = None, /, **metadata: MetadataValue) -> Any:
    """Mark a backend's support checker as experimental and return it (no wrapper).

    The backend runs when named (warning once per API and backend) and is skipped by
    ``backend="auto"`` unless ``FLASHINFER_ALLOW_EXPERIMENTAL_AUTO_BACKENDS=1``.  Composes
    with ``supported_compute_capability`` in either order.  Takes the keywords of
    :func:`flashinfer_experimental_api`; ``feature`` defaults to the ``<feature>`` folder of
    ``flashinfer/experimental/<feature>/support.py`` (elsewhere: the qualified name).
    """
    check_metadata_names("experimental_backend", metadata)

    def mark(fn: C) -> C:
        module = getattr(fn, "__module__", None)
        module = module if isinstance(module, str) else ""
        qualname = getattr(fn, "__qualname__", None) or type(fn).__qualname__
        feature = metadata.get("feature")
        name = (
            feature if given_name(feature) else feature_of_module(module) or f"{module}.{qualname}"
        )
        fn.experimental_info = make_experimental_info(  # type: ignore[attr-defined]
            marked=fn, **{**metadata, "feature": name}
        )
        fn.is_experimental_backend = True  # type: ignore[attr-defined]
        return fn

    if checker is None:
        return mark
    return mark(checker)
