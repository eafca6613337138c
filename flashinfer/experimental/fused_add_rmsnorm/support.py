"""The light part of the experimental :func:`flashinfer.fused_add_rmsnorm`: the validation
that metadata decides (shapes, dtypes, devices, ``eps``), which the API's torch operator runs
at trace time on fake tensors (``flashinfer/fused_norm.py``) and the implementation runs on
every call before the overlap rule.  Imports no kernel.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from flashinfer.backend_families import FLOAT_DTYPES

__all__ = ["explain_paths", "validate_metadata"]


def explain_paths(*args: Any, **kwargs: Any) -> Any:
    """What a ``fused_add_rmsnorm`` call would run, and why (``flashinfer explain``); the
    explanation (:mod:`.explain`) loads on first use, as the kernel does."""
    from flashinfer.experimental.fused_add_rmsnorm.explain import explain_paths as explain

    return explain(*args, **kwargs)


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
    for name, t in (("residual", residual), ("weight", weight)):
        if t.dtype != input.dtype:
            raise ValueError(
                f"fused_add_rmsnorm: {name} has dtype {t.dtype} but input has {input.dtype}; "
                "use one dtype"
            )
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
