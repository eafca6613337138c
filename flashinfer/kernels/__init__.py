"""Triton kernels of the stable backends.

This package itself is light: it never imports Triton.  Each kernel module
(:mod:`.rmsnorm_triton`, :mod:`.mm_triton`) imports Triton at its top and is imported by its
backend function on first use.  The helpers here answer whether a Triton kernel can run on
a tensor's device at all (through the probe in :mod:`.availability`, which finds Triton
and numpy without importing them), whether a tensor's layout suits the kernels, and how sizes
round to tile sizes; support checkers and runners (ours and the experimental ones) call them.
"""

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

INT32_MAX = 2**31 - 1
"""Kernels index with 32-bit offsets: element offsets must stay below this."""


def triton_device_reason(*tensors: torch.Tensor) -> str | None:
    """Why a Triton kernel cannot run on these tensors' device, or ``None`` if it can.

    The reason and its fix come from :func:`.availability.triton_unavailable`, the probe that
    ``flashinfer backends`` reports too: CUDA tensors need Triton installed; CPU tensors also
    need the Triton interpreter (``TRITON_INTERPRET=1``) and what it imports (numpy).  Once
    Triton is imported, the variable must still say what Triton read at its import (set
    after ``import triton``, it cannot take effect: "cannot run here ...; restart with it set
    first").
    """
    problem = triton_unavailable(tensors[0].device.type)
    return None if problem is None else str(problem)


def next_positive_power_of_2(n: int) -> int:
    """The smallest power of two ``>= n``, and ``1`` for ``n < 1`` (upstream's name).

    Tile sizes and tactic filters round problem sizes with it, and the autotuner's shape
    buckets (:func:`flashinfer.autotuner.bucket_dim`, which keeps ``0`` as ``0``) with it, so
    a tactic chosen for one shape fits every shape of its bucket.
    """
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
