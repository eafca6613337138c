"""Triton split-K GEMM kernel (experimental; imported on first use of ``backend="splitk"``).

Grid: (output tiles, SPLIT_K).  Program ``(t, s)`` multiplies tile ``t`` over the ``s``-th
slice of K into an fp32 workspace ``ws[s]``; the slices are then summed in a fixed order
(``ws.sum(0)``), so results are deterministic.  bf16 tiles are upcast to fp32 before the dot
under the Triton interpreter, whose bf16 ``tl.dot`` is wrong (Triton 3.9).
"""

from __future__ import annotations

from typing import Any

import torch
import triton
import triton.language as tl

from flashinfer.kernels import interpreter_enabled
from flashinfer.kernels.mm_triton import dot_precision


@triton.jit
def _splitk_kernel(
    a_ptr,
    b_ptr,
    ws_ptr,
    M,
    N,
    K,
    K_PER_SPLIT,
    stride_am,
    stride_ak,
    stride_bk,
    stride_bn,
    stride_ws,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    UPCAST: tl.constexpr,
    PRECISION: tl.constexpr,
):
    pid = tl.program_id(0)
    split = tl.program_id(1)
    grid_n = tl.cdiv(N, BLOCK_N)
    pid_m = pid // grid_n
    pid_n = pid % grid_n
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    k_start = split * K_PER_SPLIT
    k_end = tl.minimum(k_start + K_PER_SPLIT, K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(k_start, k_end, BLOCK_K):
        kk = k0 + rk
        a = tl.load(
            a_ptr + rm[:, None] * stride_am + kk[None, :] * stride_ak,
            mask=(rm[:, None] < M) & (kk[None, :] < k_end),
            other=0.0,
        )
        b = tl.load(
            b_ptr + kk[:, None] * stride_bk + rn[None, :] * stride_bn,
            mask=(kk[:, None] < k_end) & (rn[None, :] < N),
            other=0.0,
        )
        if UPCAST:
            a = a.to(tl.float32)
            b = b.to(tl.float32)
        acc = tl.dot(a, b, acc, input_precision=PRECISION)
    ws = ws_ptr + split * stride_ws + rm[:, None] * N + rn[None, :]
    tl.store(ws, acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


def splitk_matmul(
    a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, tactic: dict[str, Any]
) -> None:
    """Write ``a @ b`` into ``c`` using ``tactic`` (BLOCK_M/N/K, SPLIT_K, warps, stages)."""
    M, K = a.shape
    N = b.shape[1]
    bm, bn, bk, splits = tactic["BLOCK_M"], tactic["BLOCK_N"], tactic["BLOCK_K"], tactic["SPLIT_K"]
    k_per_split = triton.cdiv(triton.cdiv(K, bk), splits) * bk
    ws = torch.empty((splits, M, N), dtype=torch.float32, device=a.device)
    grid = (triton.cdiv(M, bm) * triton.cdiv(N, bn), splits)
    _splitk_kernel[grid](
        a,
        b,
        ws,
        M,
        N,
        K,
        k_per_split,
        a.stride(0),
        a.stride(1),
        b.stride(0),
        b.stride(1),
        M * N,
        BLOCK_M=bm,
        BLOCK_N=bn,
        BLOCK_K=bk,
        UPCAST=a.dtype == torch.bfloat16 and interpreter_enabled(),
        PRECISION=dot_precision(a.dtype),
        num_warps=tactic["num_warps"],
        num_stages=tactic["num_stages"],
    )
    c.copy_(ws.sum(dim=0))  # fixed-order reduction of the K slices, then the output dtype
