"""The experimental split-K GEMM backend of ``mm``, declared: :data:`SPLITK` pairs its
support checker, its runner (tactic space included) and when ``"auto"`` should prefer it.

Light on purpose (``flashinfer.gemm`` imports it): the kernel loads when the backend first
runs.  Split-K splits K across ``SPLIT_K`` programs per tile for small-M, large-K problems and
reduces their fp32 partial sums deterministically.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from flashinfer.backend_dispatch import Backend, experimental_backend, find_compute_capability
from flashinfer.backend_families import TRITON, backend_family
from flashinfer.kernels import (
    bf16_reason,
    next_positive_power_of_2,
    offsets_reason,
    triton_device_reason,
)

__all__ = [
    "MAX_M",
    "MIN_K",
    "SPLITK",
    "TACTIC_SPACE",
    "SplitKRunner",
    "check_splitk",
    "prefer_splitk",
    "valid_tactics",
]

MAX_M = 64  # beyond it a plain GEMM has enough tiles to fill the GPU
MIN_K = 1024  # below it the extra reduction costs more than it saves

TACTIC_SPACE: list[dict[str, int]] = [
    {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "SPLIT_K": sk, "num_warps": w, "num_stages": s}
    for bm, bn, bk, sk, w, s in (
        (16, 64, 128, 4, 4, 3),
        (16, 64, 64, 8, 4, 4),
        (16, 128, 64, 4, 4, 3),
        (32, 64, 64, 4, 4, 4),
        (32, 128, 64, 8, 4, 3),
        (64, 64, 64, 4, 4, 3),
        (16, 32, 128, 16, 2, 3),
    )
]


def valid_tactics(m: int, n: int, k: int) -> list[dict[str, int]]:
    """Tactics worth timing for an ``(m, n, k)`` problem, default first (by the sizes' next
    powers of two: valid for the autotuner's whole bucket; edges are masked)."""
    pm = max(16, next_positive_power_of_2(m))
    pn = max(16, next_positive_power_of_2(n))
    pk = next_positive_power_of_2(k)
    fits = [
        t
        for t in TACTIC_SPACE
        if t["BLOCK_M"] <= pm and t["BLOCK_N"] <= max(32, pn) and t["SPLIT_K"] * t["BLOCK_K"] <= pk
    ]
    if not fits:
        return [TACTIC_SPACE[0]]
    # Default: the tile closest to M, then the most K work per split.
    fits.sort(key=lambda t: (abs(t["BLOCK_M"] - min(pm, 64)), -t["BLOCK_K"], t["SPLIT_K"]))
    return fits


@experimental_backend(owner="@alice", tracking_issue=3, graduate_by="2027-05-28")
@backend_family(TRITON, min_compute_capability=80)
def check_splitk(
    a: torch.Tensor,
    b: torch.Tensor,
    *,
    out: torch.Tensor | None = None,
    out_dtype: torch.dtype | None = None,
    backend: str = "auto",
) -> bool:
    """Split-K runs small-M, large-K problems on CUDA (CPU: Triton interpreter only)."""
    reason = triton_device_reason(a)
    if reason is not None:
        raise ValueError(reason)
    m, k = a.shape
    n = b.shape[1]
    if m == 0 or n == 0:
        raise ValueError("the output is empty; there is nothing to split")
    if m > MAX_M:
        raise ValueError(
            f"split-K is for small M (M <= {MAX_M}), got M={m}; a plain tiled GEMM fills the "
            "GPU at this size, use backend='triton' or 'torch'"
        )
    if k < MIN_K:
        raise ValueError(
            f"split-K is for large K (K >= {MIN_K}), got K={k}; splitting a short K costs "
            "more than it saves"
        )
    reason = bf16_reason(a.dtype, find_compute_capability(a)) or offsets_reason(a=a, b=b, out=out)
    if reason is not None:
        raise ValueError(reason)
    return True


def prefer_splitk(a: torch.Tensor) -> bool:
    """``"auto"`` (gate on) tries split-K first on CUDA, where a plain GEMM leaves SMs idle."""
    return a.is_cuda


class SplitKRunner:
    """The split-K runner (``mm.implementations["splitk"]``): the kernel and the tiled driver
    (differentiable through mm's Function) load on first use."""

    def tactic_space(self) -> Sequence[Any]:
        return TACTIC_SPACE

    def tactics(self, inputs: tuple) -> Sequence[Any]:
        a, b = inputs[0], inputs[1]
        return valid_tactics(a.shape[0], b.shape[1], a.shape[1])

    def __call__(self, inputs: tuple, tactic: Any = None) -> torch.Tensor:
        """Run ``a @ b`` for ``inputs = (a, b, out, out_dtype)`` with ``tactic``."""
        from flashinfer.experimental.splitk_gemm.kernel import (
            splitk_matmul,  # first use imports Triton
        )
        from flashinfer.kernels.tiled_mm import run_tiled

        return run_tiled(self, inputs, tactic, TACTIC_SPACE, "splitk", splitk_matmul)


SPLITK = Backend(
    "splitk", check=check_splitk, run=SplitKRunner(), prefer=prefer_splitk, differentiable=True
)
"""The split-K backend of :func:`flashinfer.mm`, as its table lists it."""
