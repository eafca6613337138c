"""The marks a backend's support checker carries: its compute capabilities, and whether the
backend is experimental.

Both decorators return the checker itself with attributes set (no wrapper, so no call
overhead); the dispatcher reads the marks once, at decoration (see ``capability``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeVar, overload

from flashinfer.gating.records import feature_of_module, given_name, make_experimental_info

__all__ = ["experimental_backend", "supported_compute_capability"]

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
    metadata: ``owner="@handle"`` (a person), ``tracking_issue=`` (an issue number or URL),
    ``graduate_by="YYYY-MM-DD"``.  ``feature=`` names the feature in listings; by default it
    is the folder of ``flashinfer/experimental/<feature>/support.py`` where the checker
    lives (elsewhere: the checker's qualified name).  Malformed metadata never raises: it
    is recorded and warned about once (``ExperimentalMetadataWarning``), and the lifecycle
    check fails in CI.
    """

    def mark(fn: C) -> C:
        module = getattr(fn, "__module__", None)
        module = module if isinstance(module, str) else ""
        qualname = getattr(fn, "__qualname__", None) or type(fn).__qualname__
        name = (
            feature if given_name(feature) else feature_of_module(module) or f"{module}.{qualname}"
        )
        fn.experimental_info = make_experimental_info(  # type: ignore[attr-defined]
            name, owner, tracking_issue, graduate_by, marked=fn
        )
        fn.is_experimental_backend = True  # type: ignore[attr-defined]
        return fn

    if checker is None:
        return mark
    return mark(checker)
