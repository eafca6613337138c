"""The compute capabilities a backend's support checker declares."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeVar

__all__ = ["supported_compute_capability"]

C = TypeVar("C", bound=Callable[..., Any])


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
