"""The light part of the experimental :func:`flashinfer.fused_add_rmsnorm` (no kernel): the
metadata validation (also run on fake tensors at trace time), whether the Triton kernel can
take the tensors, and the explanation of a call built from those two."""

from __future__ import annotations

import math
from typing import Any

import torch

from flashinfer.backend_families import FLOAT_DTYPES

__all__ = ["explain_paths", "kernel_unsupported_reason", "validate_metadata"]


_DTYPES = FLOAT_DTYPES  # the torch and Triton families' dtypes (its two paths)


def validate_metadata(
    input: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float
) -> None:
    """Raise ``ValueError`` saying what is wrong with the arguments' metadata."""
    for name, t in (("input", input), ("residual", residual), ("weight", weight)):
        if not isinstance(t, torch.Tensor):
            raise ValueError(
                f"fused_add_rmsnorm: {name} must be a torch.Tensor, got {type(t).__name__}"
            )
    if input.dim() < 1 or input.shape[-1] == 0:
        raise ValueError(
            "fused_add_rmsnorm: input needs at least one dimension with a non-zero last "
            f"(hidden) size, got shape {tuple(input.shape)}"
        )
    if input.dtype not in _DTYPES:
        raise ValueError(
            f"fused_add_rmsnorm: dtype {input.dtype} is not supported; use float32, float16 "
            "or bfloat16"
        )
    if residual.shape != input.shape:
        raise ValueError(
            f"fused_add_rmsnorm: residual has shape {tuple(residual.shape)} but input has "
            f"{tuple(input.shape)}; they must match"
        )
    hidden = input.shape[-1]
    if weight.dim() != 1 or weight.shape[0] != hidden:
        raise ValueError(
            f"fused_add_rmsnorm: weight must be 1-D of the hidden size ({hidden},), got "
            f"shape {tuple(weight.shape)}"
        )
    if residual.dtype != input.dtype:
        raise ValueError(
            f"fused_add_rmsnorm: residual has dtype {residual.dtype} but input has "
            f"{input.dtype}; they are written in place together: use one dtype"
        )
    # A mixed-precision model's float32 weight with 16-bit activations is accepted, as
    # rmsnorm and HF's RMSNorm accept it: the result is written in the input's dtype.
    if weight.dtype not in _DTYPES:
        raise ValueError(
            f"fused_add_rmsnorm: weight has dtype {weight.dtype}; use float32, float16 or bfloat16"
        )
    for name, t in (("residual", residual), ("weight", weight)):
        if t.device != input.device:
            raise ValueError(
                f"fused_add_rmsnorm: {name} is on {t.device} but input is on {input.device}"
            )
    if (
        isinstance(eps, bool)
        or not isinstance(eps, (int, float))
        or not (math.isfinite(eps) and eps >= 0)
    ):
        raise ValueError(f"fused_add_rmsnorm: eps must be a finite float >= 0, got {eps!r}")


def kernel_unsupported_reason(
    input: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor
) -> str | None:
    """Why the Triton kernel cannot run these (validated) tensors, or ``None`` if it can.
    Metadata only: the explanation asks it too, without loading the kernel."""
    from flashinfer.kernels import (
        dispatch_mode_active,
        offsets_reason,
        rows_view,
        triton_device_reason,
    )

    reason = triton_device_reason(input)
    if reason is not None:
        return reason
    if dispatch_mode_active():
        return "a torch dispatch mode (make_fx, FlopCounterMode) would not see the launch"
    for name, t in (("input", input), ("residual", residual)):
        if rows_view(t) is None:
            return f"{name} is not a stack of rows with a contiguous last dimension"
        reason = offsets_reason(**{name: t})
        if reason is not None:
            return reason
    if weight.shape[0] > 1 and weight.stride(0) != 1:
        return "weight is not contiguous"
    return None


_API = "flashinfer.fused_add_rmsnorm"
_KERNEL, _COMPOSITION = "triton kernel", "torch composition"


def explain_paths(
    input: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6
) -> Any:
    """What ``fused_add_rmsnorm(input, residual, weight, eps)`` would run, and why
    (``flashinfer explain fused_add_rmsnorm``): its Triton kernel when it can, else the
    torch composition.  Runs the checks only; metadata-only (fake) tensors are fine."""
    from flashinfer.backend_dispatch import explain_paths as path_explanation

    bound = {"input": input, "residual": residual, "weight": weight, "eps": eps}
    try:
        validate_metadata(input, residual, weight, eps)
    except ValueError as exc:
        return path_explanation(_API, bound, {_KERNEL: str(exc), _COMPOSITION: str(exc)}, str(exc))
    grad = torch.is_grad_enabled() and any(t.requires_grad for t in (input, residual, weight))
    kernel = "a tensor requires grad: autograd records the composition" if grad else None
    if kernel is None and input.numel() == 0:
        kernel = "empty input: nothing to compute"
    if kernel is None:
        kernel = kernel_unsupported_reason(input, residual, weight)
        # The device reason's advice ends in "or use backend='torch'": this API takes none.
        kernel = kernel if kernel is None else kernel.replace(", or use backend='torch'", "")
    notes = ("the overlap of input, residual and weight is checked on the real call",)
    return path_explanation(_API, bound, {_KERNEL: kernel, _COMPOSITION: None}, notes=notes)
