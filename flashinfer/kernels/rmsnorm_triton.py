"""Triton RMS-norm kernel (backend ``"triton"`` of :func:`flashinfer.rmsnorm`).

Imported on first use (it imports Triton).  One program per row, fp32 accumulation; rows
over ``MAX_BLOCK`` elements take two passes in chunks (no hidden-size limit).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from flashinfer.kernels import interpreter_enabled

MAX_BLOCK = 4096


@triton.jit
def _rmsnorm_kernel(
    x_ptr,
    w_ptr,
    y_ptr,
    stride_x,
    stride_y,
    n_cols,
    eps,
    BLOCK: tl.constexpr,
    SINGLE: tl.constexpr,
):
    row = tl.program_id(0)
    x_row = x_ptr + row * stride_x
    y_row = y_ptr + row * stride_y
    cols = tl.arange(0, BLOCK)
    if SINGLE:
        mask = cols < n_cols
        x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
        rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / n_cols + eps)
        w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_row + cols, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)
    else:
        acc = tl.zeros((BLOCK,), dtype=tl.float32)
        for start in range(0, n_cols, BLOCK):
            offs = start + cols
            x = tl.load(x_row + offs, mask=offs < n_cols, other=0.0).to(tl.float32)
            acc += x * x
        rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / n_cols + eps)
        for start in range(0, n_cols, BLOCK):
            offs = start + cols
            mask = offs < n_cols
            x = tl.load(x_row + offs, mask=mask, other=0.0).to(tl.float32)
            w = tl.load(w_ptr + offs, mask=mask, other=0.0).to(tl.float32)
            tl.store(y_row + offs, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)


def rmsnorm_rows(x: torch.Tensor, weight: torch.Tensor, eps: float, y: torch.Tensor) -> None:
    """Write ``rmsnorm(x) * weight`` into ``y``; both 2-D ``(rows, hidden)``, unit column stride.

    The caller (the backend) has validated shapes, dtypes, devices and strides.
    """
    rows, n_cols = x.shape
    if rows == 0:
        return
    target = y
    if y.dtype == torch.bfloat16 and interpreter_enabled():
        # The interpreter's fp32 -> bf16 store truncates; let torch round to nearest.
        y = torch.empty(y.shape, dtype=torch.float32, device=y.device)
    block = min(triton.next_power_of_2(n_cols), MAX_BLOCK)
    num_warps = min(max(block // 256, 1), 8)
    _rmsnorm_kernel[(rows,)](
        x,
        weight,
        y,
        x.stride(0),
        y.stride(0),
        n_cols,
        float(eps),
        BLOCK=block,
        SINGLE=n_cols <= block,
        num_warps=num_warps,
    )
    if y is not target:
        target.copy_(y)
