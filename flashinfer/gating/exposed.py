"""The one way to give a class or function its public module (``__module__``).

Code lives in the module of its job; users import it from a public path (a facade such as
``flashinfer.backend_dispatch``, or a package such as ``flashinfer.autotuner``).  Reprs,
tracebacks, pickles and warning filters (``-W error::flashinfer.api_logging.ExperimentalWarning``)
read ``__module__``, so it names the public path.  :func:`exposed_in` sets it and records the
pair, so a test can check that each public path really exports the name (a ``__module__``
naming a module that does not hold the object breaks pickling).  Like torch's own
``exposed_in`` (in its private library package); the lowest layer of the package: it
imports nothing of it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T", bound=Callable[..., Any])

_EXPOSED: list[tuple[Any, str]] = []


def exposed_in(module: str) -> Callable[[T], T]:
    """Decorator: the object's public home is ``module`` (its ``__module__`` says so)."""

    def expose(obj: T) -> T:
        obj.__module__ = module
        _EXPOSED.append((obj, module))
        return obj

    return expose


def exposed_objects() -> list[tuple[Any, str]]:
    """Every ``(object, public module)`` given a public home so far."""
    return list(_EXPOSED)
