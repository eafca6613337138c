"""Triton kernels of the stable backends, each module imported on first use; this package
never imports Triton.  Its helpers (for the support checkers and runners) say whether a
kernel can run on a tensor's device and layout, and round sizes to tiles."""

from __future__ import annotations

import torch

from flashinfer.kernels.availability import interpreter_enabled, reset_probe, triton_unavailable
from flashinfer.torch_boundary import dispatch_mode_active as dispatch_mode_active

__all__ = [
    "INT32_MAX",
    "bf16_reason",
    "dispatch_mode_active",
    "interpreter_enabled",
    "max_offset",
    "next_positive_power_of_2",
    "offsets_reason",
    "reset_probe",
    "rows_view",
    "triton_device_reason",
]

INT32_MAX = 2**31 - 1  # kernels index with 32-bit offsets


def triton_device_reason(*tensors: torch.Tensor) -> str | None:
    """Why a Triton kernel cannot run on these tensors' device (the reason and its fix, from
    :func:`.availability.triton_unavailable`), or ``None`` if it can."""
    problem = triton_unavailable(tensors[0].device.type)
    return None if problem is None else str(problem)


def next_positive_power_of_2(n: int) -> int:
    """The smallest power of two ``>= n``, and ``1`` for ``n < 1`` (upstream's name): tiles,
    tactic filters and the autotuner's buckets round with it alike."""
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


def max_offset(t: torch.Tensor) -> int:
    """Largest element offset a kernel computes for ``t`` (0 for an empty tensor)."""
    if t.numel() == 0:
        return 0
    return sum((size - 1) * abs(stride) for size, stride in zip(t.shape, t.stride(), strict=True))


def offsets_reason(**tensors: torch.Tensor | None) -> str | None:
    """Why a kernel indexing with 32-bit offsets cannot run on one of ``tensors`` (passed by
    name, ``None`` entries skipped), or ``None`` if it can."""
    for name, t in tensors.items():
        if t is not None and max_offset(t) > INT32_MAX:
            return f"{name} spans more than 2**31 - 1 elements; the kernel uses 32-bit offsets"
    return None


def bf16_reason(dtype: torch.dtype, cc: int | None) -> str | None:
    """Why a Triton kernel cannot run ``dtype`` at compute capability ``cc`` (``None``: CPU or
    unknown), or ``None`` if it can: bfloat16 needs Ampere (sm80) or newer."""
    if dtype == torch.bfloat16 and cc is not None and cc < 80:
        return f"bfloat16 needs compute capability >= 80, found {cc}"
    return None


def rows_view(t: torch.Tensor) -> torch.Tensor | None:
    """``t`` seen as ``(rows, hidden)`` without a copy, with unit column stride; else ``None``
    (what the row kernels need)."""
    if t.shape[-1] > 1 and t.stride(-1) != 1:
        return None
    try:
        return t.view(-1, t.shape[-1])
    except RuntimeError:  # leading dimensions not collapsible into one row stride
        return None
