"""``@flashinfer_api``: mark a stable public API, record it, and optionally log its calls."""

from __future__ import annotations

import functools
import logging
import warnings
from collections.abc import Callable
from typing import Any, TypeVar, overload

from flashinfer.gating.records import qualified_name, record_api
from flashinfer.settings import read

F = TypeVar("F", bound=Callable[..., Any])

_logger = logging.getLogger("flashinfer.api")


def api_log_level() -> int:
    return int(read("FLASHINFER_LOGLEVEL"))


def _describe(value: Any) -> str:
    shape = getattr(value, "shape", None)
    dtype = getattr(value, "dtype", None)
    if shape is not None and dtype is not None:
        return f"Tensor(shape={tuple(shape)}, dtype={dtype}, device={value.device})"
    return repr(value)


def _logged(func: F, level: int) -> F:
    name = qualified_name(func)

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


def _attach_trace(marked: Any, func: Callable[..., Any], trace: Any) -> None:
    """Upstream's ``trace=``: ``fi_trace`` (and ``fi_init``) from a template
    (``build_fi_trace_fn``) or a callable returning one per call (None: no trace)."""
    api = qualified_name(func)
    build = getattr(trace, "build_fi_trace_fn", None)
    if callable(build):
        try:
            marked.fi_trace = build(api)
        except Exception as exc:  # as upstream: the API works, without fi_trace
            warnings.warn(
                f"flashinfer_api: cannot build fi_trace of {api} from its trace template "
                f"({type(exc).__name__}: {exc}); the API works without it",
                RuntimeWarning,
                stacklevel=3,
            )
            return
        if getattr(trace, "init", None) is not None:
            marked.fi_init = trace.init
        return
    if not callable(trace):
        raise TypeError(
            f"flashinfer_api: trace= of {api} must be a trace template (an object with "
            f"build_fi_trace_fn) or a callable returning one, got {type(trace).__name__}"
        )
    # One fi_trace per template the calls pick (kept with it: its id is never reused).
    built: dict[int, tuple[Any, Callable[..., Any]]] = {}

    def fi_trace(save_dir: Any = None, name: Any = None, **arguments: Any) -> Any:
        template = trace(save_dir=None, name=None, **arguments)
        if template is None:
            return {}
        if id(template) not in built:
            built[id(template)] = (template, template.build_fi_trace_fn(api))
        return built[id(template)][1](save_dir=save_dir, name=name, **arguments)

    def fi_init(**arguments: Any) -> Any:
        template = trace(save_dir=None, name=None, **arguments)
        if getattr(template, "init", None) is None:
            raise RuntimeError(f"{api}: the trace template for these arguments has no init")
        return template.init(**arguments)

    marked.fi_trace, marked.fi_init = fi_trace, fi_init


@overload
def flashinfer_api(func: F, *, trace: Any = None) -> F: ...


@overload
def flashinfer_api(func: None = None, *, trace: Any = None) -> Callable[[F], F]: ...


def flashinfer_api(func: F | None = None, *, trace: Any = None) -> Any:
    """Mark a stable public API and record it in the API inventory.

    With ``FLASHINFER_LOGLEVEL`` unset or ``0`` at decoration time the function is returned
    unchanged (no cost per call); ``1`` logs each call's name and ``3`` also its arguments
    to the ``flashinfer.api`` logger.  Composes with :func:`flashinfer_experimental_api` in
    either order.  ``trace=template`` (upstream's form) adds ``fi_trace`` (and ``fi_init``)
    built as upstream builds them; ``FLASHINFER_TRACE_DUMP`` is not read.
    """
    if func is None:
        return functools.partial(flashinfer_api, trace=trace)
    level = api_log_level()
    result = _logged(func, level) if level > 0 else func
    if trace is not None:
        _attach_trace(result, func, trace)
    record_api(result)
    return result
