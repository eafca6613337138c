"""What a call of ``fused_add_rmsnorm`` would run, and why (``flashinfer explain``)."""

from __future__ import annotations

from typing import Any

import torch

from flashinfer.backend_dispatch import explain_paths as _paths
from flashinfer.experimental.fused_add_rmsnorm.support import validate_metadata

__all__ = ["explain_paths"]

_API = "flashinfer.fused_add_rmsnorm"
_KERNEL, _COMPOSITION = "triton kernel", "torch composition"


def explain_paths(
    input: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6
) -> Any:
    """What ``fused_add_rmsnorm(input, residual, weight, eps)`` would run, and why
    (``flashinfer explain fused_add_rmsnorm``): its Triton kernel when it can, else the
    torch composition.  Runs the checks only; metadata-only (fake) tensors are fine."""
    from flashinfer.experimental.fused_add_rmsnorm.implementation import (
        kernel_unsupported_reason,
    )

    bound = {"input": input, "residual": residual, "weight": weight, "eps": eps}
    try:
        validate_metadata(input, residual, weight, eps)
    except ValueError as exc:
        return _paths(_API, bound, {_KERNEL: str(exc), _COMPOSITION: str(exc)}, str(exc))
    grad = torch.is_grad_enabled() and any(t.requires_grad for t in (input, residual, weight))
    kernel = "a tensor requires grad: autograd records the composition" if grad else None
    if kernel is None and input.numel() == 0:
        kernel = "empty input: nothing to compute"
    if kernel is None:
        kernel = kernel_unsupported_reason(input, residual, weight)
        # The device reason's advice ends in "or use backend='torch'": this API takes none.
        kernel = kernel if kernel is None else kernel.replace(", or use backend='torch'", "")
    notes = ("the overlap of input, residual and weight is checked on the real call",)
    return _paths(_API, bound, {_KERNEL: kernel, _COMPOSITION: None}, notes=notes)
