"""``@flashinfer_api``: mark a stable public API, record it, and optionally log its calls.

Re-exported by ``flashinfer.api_logging`` (upstream's import path).
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Callable
from typing import Any, TypeVar

from flashinfer.gating.gate import warn_unrecognised_once
from flashinfer.gating.records import qualified_name, record_api

__all__ = ["flashinfer_api"]

F = TypeVar("F", bound=Callable[..., Any])

_logger = logging.getLogger("flashinfer.api")


LOGLEVEL_ENV = "FLASHINFER_LOGLEVEL"
LOGLEVEL_ACCEPTED = (
    "an integer (0 off, 1 or 2 each call's name, 3 or more its arguments too), or empty/unset"
)


def api_log_level() -> int:
    """``FLASHINFER_LOGLEVEL`` as an int, read on each call (0 when unset or not a number)."""
    raw = os.environ.get(LOGLEVEL_ENV, "0")
    try:
        return int(raw or 0)
    except ValueError:
        warn_unrecognised_once(
            LOGLEVEL_ENV, raw, "treating it as 0 (no logging)", LOGLEVEL_ACCEPTED
        )
        return 0


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


def flashinfer_api(func: F) -> F:
    """Mark a stable public API and record it in the API inventory.

    With ``FLASHINFER_LOGLEVEL`` unset or ``0`` at decoration time the function is returned
    unchanged, so the marker costs nothing per call.  ``1`` logs each call's name and ``3``
    also its arguments (shapes and dtypes of tensors) to the ``flashinfer.api`` logger.
    Composes with :func:`flashinfer_experimental_api` in either order.
    """
    level = api_log_level()
    result = _logged(func, level) if level > 0 else func
    record_api(result)
    return result
