"""Triton matrix multiply (backend ``"triton"`` of :func:`flashinfer.mm`).

Imported on first use (it imports Triton).  A classic tiled GEMM: one ``BLOCK_M x BLOCK_N``
tile of ``C`` per program over the whole K with an fp32 accumulator, grouped along M for L2
reuse; the tactic space lives with the op (:data:`flashinfer.gemm.MM_TRITON_TACTICS`).

Under the Triton interpreter ``tl.dot`` on bf16 operands returns garbage (Triton 3.9), so
there bf16 tiles are upcast to fp32 before the dot (``UPCAST``); and its fp32 -> bf16 stores
truncate instead of rounding to nearest, so a bf16 result is written to an fp32 buffer and
rounded by torch.  fp32 inputs use IEEE fp32
products unless ``torch.get_float32_matmul_precision()`` allows TF32.
"""

from __future__ import annotations

from typing import Any

import torch
import triton
import triton.language as tl

from flashinfer.kernels import interpreter_enabled


@triton.jit
def _mm_kernel(
    a_ptr,
    b_ptr,
    c_ptr,
    M,
    N,
    K,
    stride_am,
    stride_ak,
    stride_bk,
    stride_bn,
    stride_cm,
    stride_cn,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    UPCAST: tl.constexpr,
    PRECISION: tl.constexpr,
):
    pid = tl.program_id(0)
    grid_m = tl.cdiv(M, BLOCK_M)
    grid_n = tl.cdiv(N, BLOCK_N)
    width = GROUP_M * grid_n
    group = pid // width
    first_m = group * GROUP_M
    group_size = tl.minimum(grid_m - first_m, GROUP_M)
    pid_m = first_m + (pid % width) % group_size
    pid_n = (pid % width) // group_size

    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + rm[:, None] * stride_am + rk[None, :] * stride_ak
    b_ptrs = b_ptr + rk[:, None] * stride_bk + rn[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        k_left = K - k * BLOCK_K
        a = tl.load(a_ptrs, mask=(rm[:, None] < M) & (rk[None, :] < k_left), other=0.0)
        b = tl.load(b_ptrs, mask=(rk[:, None] < k_left) & (rn[None, :] < N), other=0.0)
        if UPCAST:
            a = a.to(tl.float32)
            b = b.to(tl.float32)
        acc = tl.dot(a, b, acc, input_precision=PRECISION)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    c_ptrs = c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(rm[:, None] < M) & (rn[None, :] < N))


def dot_precision(dtype: torch.dtype) -> str:
    """``tl.dot``'s ``input_precision``: fp32 ``"ieee"`` unless torch allows TF32; 16-bit
    operands Triton's default (IEEE could steer the compiler away from tensor cores)."""
    if dtype == torch.float32 and torch.get_float32_matmul_precision() == "highest":
        return "ieee"
    return "tf32"


def matmul(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, tactic: dict[str, Any]) -> None:
    """Write ``a @ b`` into ``c`` (all 2-D, validated by the caller) using ``tactic``."""
    M, K = a.shape
    N = b.shape[1]
    if M == 0 or N == 0:
        return
    bm, bn, bk = tactic["BLOCK_M"], tactic["BLOCK_N"], tactic["BLOCK_K"]
    target = c
    if c.dtype == torch.bfloat16 and interpreter_enabled():
        c = torch.empty(c.shape, dtype=torch.float32, device=c.device)  # see module docstring
    grid = (triton.cdiv(M, bm) * triton.cdiv(N, bn),)
    _mm_kernel[grid](
        a,
        b,
        c,
        M,
        N,
        K,
        a.stride(0),
        a.stride(1),
        b.stride(0),
        b.stride(1),
        c.stride(0),
        c.stride(1),
        BLOCK_M=bm,
        BLOCK_N=bn,
        BLOCK_K=bk,
        GROUP_M=8,
        UPCAST=a.dtype == torch.bfloat16 and interpreter_enabled(),
        PRECISION=dot_precision(a.dtype),
        num_warps=tactic["num_warps"],
        num_stages=tactic["num_stages"],
    )
    if c is not target:
        target.copy_(c)
