"""Triton kernel of the experimental fused residual-add + RMS norm (imported on first use).

One program per row.  The sum ``input + residual`` is formed in fp32 and rounded once to the
storage dtype (stored to ``residual``); the norm is computed from the rounded sum, so the
result equals the unfused ``residual += input; input = rmsnorm(residual)``.  Rows up to
``MAX_BLOCK`` stay in registers; longer rows take two passes.

Under the Triton interpreter fp32 -> bf16 conversion truncates (Triton 3.9), so there the
kernel rounds to nearest-even by hand (``ROUND_BF16``) before converting.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from flashinfer.kernels import interpreter_enabled

MAX_BLOCK = 4096


@triton.jit
def _round_to_bf16_grid(x):
    # Round an fp32 value to the nearest bf16 value (ties to even), kept in fp32.
    bits = x.to(tl.uint32, bitcast=True)
    bits = bits + 0x7FFF + ((bits >> 16) & 1)
    bits = bits & 0xFFFF0000
    return bits.to(tl.float32, bitcast=True)


@triton.jit
def _store_rounded(ptr, x, mask, ROUND_BF16: tl.constexpr):
    if ROUND_BF16:
        x = _round_to_bf16_grid(x)
    tl.store(ptr, x.to(ptr.dtype.element_ty), mask=mask)


@triton.jit
def _add_residual(x_ptrs, r_ptrs, mask, ROUND_BF16: tl.constexpr):
    # residual = input + residual, summed in fp32 and rounded once to the storage dtype;
    # stored to the residual and returned (rounded) in fp32.
    x = tl.load(x_ptrs, mask=mask, other=0.0).to(tl.float32)
    r = tl.load(r_ptrs, mask=mask, other=0.0).to(tl.float32)
    s = x + r
    if ROUND_BF16:
        s = _round_to_bf16_grid(s)
    s = s.to(r_ptrs.dtype.element_ty)
    tl.store(r_ptrs, s, mask=mask)
    return s.to(tl.float32)


@triton.jit
def _fused_add_rmsnorm_kernel(
    x_ptr,
    r_ptr,
    w_ptr,
    stride_x,
    stride_r,
    n_cols,
    eps,
    BLOCK: tl.constexpr,
    SINGLE: tl.constexpr,
    ROUND_BF16: tl.constexpr,
):
    row = tl.program_id(0)
    x_row = x_ptr + row * stride_x
    r_row = r_ptr + row * stride_r
    cols = tl.arange(0, BLOCK)
    if SINGLE:
        mask = cols < n_cols
        s = _add_residual(x_row + cols, r_row + cols, mask, ROUND_BF16)
        rstd = 1.0 / tl.sqrt(tl.sum(s * s, axis=0) / n_cols + eps)
        w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        _store_rounded(x_row + cols, s * rstd * w, mask, ROUND_BF16)
    else:
        acc = tl.zeros((BLOCK,), dtype=tl.float32)
        for start in range(0, n_cols, BLOCK):
            offs = start + cols
            mask = offs < n_cols
            s = _add_residual(x_row + offs, r_row + offs, mask, ROUND_BF16)
            acc += s * s
        rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / n_cols + eps)
        for start in range(0, n_cols, BLOCK):
            offs = start + cols
            mask = offs < n_cols
            s = tl.load(r_row + offs, mask=mask, other=0.0).to(tl.float32)
            w = tl.load(w_ptr + offs, mask=mask, other=0.0).to(tl.float32)
            _store_rounded(x_row + offs, s * rstd * w, mask, ROUND_BF16)


def fused_add_rmsnorm_rows(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float
) -> None:
    """In place on 2-D ``(rows, hidden)`` views with unit column stride (validated)."""
    rows, n_cols = x.shape
    block = min(triton.next_power_of_2(n_cols), MAX_BLOCK)
    _fused_add_rmsnorm_kernel[(rows,)](
        x,
        residual,
        weight,
        x.stride(0),
        residual.stride(0),
        n_cols,
        eps,
        BLOCK=block,
        SINGLE=n_cols <= block,
        ROUND_BF16=x.dtype == torch.bfloat16 and interpreter_enabled(),
        num_warps=min(max(block // 256, 1), 8),
    )
