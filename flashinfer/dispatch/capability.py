"""The compute capability of a call, and what a checker's capability marks say about it."""

from __future__ import annotations

from typing import Any

import torch

__all__ = [
    "capability_reason",
    "capability_rule",
    "device_capability",
    "find_compute_capability",
]


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
