"""The one way to give a class or function its public module (``__module__``): reprs,
pickles and warning filters read it.  :func:`exposed_in` records each pair so a test checks
the public path really exports the name.  Imports nothing of the package."""

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
    return list(_EXPOSED)
