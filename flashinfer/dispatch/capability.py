"""What a backend can run on: the compute capabilities its checker declares, the capability of
a call, and the errors a dispatched call raises when a backend cannot run it."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeVar

import torch

from flashinfer.gating.exposed import exposed_in

_PUBLIC_MODULE = "flashinfer.backend_dispatch"


@exposed_in(_PUBLIC_MODULE)
class BackendSupportedError(Exception):
    """The requested backend, or every candidate of ``backend="auto"``, cannot run the call."""


@exposed_in(_PUBLIC_MODULE)
class UnsupportedInputsError(BackendSupportedError, ValueError):
    """A named backend cannot run these inputs: its support check (or the common check)
    refused them.

    Both a :class:`BackendSupportedError` and a ``ValueError``: upstream raises a
    ``ValueError`` ("Problem size is not supported for <api>") here, and code written
    against either keeps working.  The message names the API, the backend and the reason
    (the checker's own ``ValueError`` message, which is also the ``__cause__``).
    """


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


class _CudaState:
    """Whether this process can have CUDA tensors at all."""

    absent = False  # unknown until the first scan

    @staticmethod
    def find(*values: Any) -> int | None:
        return find_compute_capability(*values)


CUDA_STATE = _CudaState()
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
        CUDA_STATE.absent = True
    return None


def capability_rule(checker: Any) -> tuple[bool, Any]:
    """The capability rule of a checker."""
    ccs = getattr(checker, "_supported_ccs", None)
    return ccs is None or getattr(checker, "_supports_cpu", False), ccs


def capability_reason(checker: Any, cc: int | None) -> str | None:
    """Why ``checker``'s backend cannot run at capability ``cc`` (None = no CUDA tensor)."""
    without_cuda, ccs = capability_rule(checker)
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
