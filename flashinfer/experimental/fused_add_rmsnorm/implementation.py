"""The implementation of the experimental :func:`flashinfer.fused_add_rmsnorm` (whose thin,
marked entry point is in ``flashinfer/fused_norm.py`` and imports this module on first call).

Semantics (in place, like upstream FlashInfer; returns ``None``)::

    residual += input                       # summed in fp32, rounded once to the dtype
    input[...] = rmsnorm(residual, weight, eps)   # fp32 accumulation, from the rounded sum

The Triton kernel (:mod:`.kernel`) runs when it can; otherwise, and under autograd, forward
AD or functorch (which would not see its launch), a torch composition does the same thing.
"""

from __future__ import annotations

import torch

from flashinfer.aliasing import OverlapRule
from flashinfer.experimental.fused_add_rmsnorm.support import (
    kernel_unsupported_reason,
    validate_metadata,
)
from flashinfer.kernels import rows_view
from flashinfer.kernels.autograd import needs_function
from flashinfer.norm import rmsnorm

__all__ = ["fused_add_rmsnorm", "kernel_unsupported_reason", "refuse_leaves"]


def _validate(
    input: torch.Tensor,
    residual: torch.Tensor,
    weight: torch.Tensor,
    eps: float,
    overlap: OverlapRule,
) -> None:
    validate_metadata(input, residual, weight, eps)
    overlap.check(input, residual, weight)


def refuse_leaves(input: torch.Tensor, residual: torch.Tensor) -> None:
    """Raise as torch's in-place operations do when ``input`` or ``residual`` is a leaf (or a
    view of one) that requires grad."""
    for name, t in (("input", input), ("residual", residual)):
        if not t.requires_grad:
            continue
        base = t._base
        if t.is_leaf:
            what = "a leaf Variable that requires grad"
        elif base is not None and base.is_leaf and base.requires_grad:
            what = "a view of a leaf Variable that requires grad"
        else:
            continue
        raise RuntimeError(
            f"fused_add_rmsnorm: {name} is {what} and is being used in an in-place "
            f"operation (fused_add_rmsnorm writes input and residual in place); pass a "
            f"non-leaf, e.g. {name}.clone(), or call under torch.no_grad()"
        )


def _recorded(
    input: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float
) -> None:
    """The unfused composition as autograd records it (``out=`` is not differentiable)."""
    refuse_leaves(input, residual)
    residual.add_(input)
    input.copy_(rmsnorm(residual, weight, float(eps), backend="torch", skip_check=True))


def fused_add_rmsnorm(
    input: torch.Tensor,
    residual: torch.Tensor,
    weight: torch.Tensor,
    eps: float = 1e-6,
    *,
    overlap: OverlapRule,
) -> None:
    """``residual += input; input = rmsnorm(residual) * weight``, in place; ``overlap``: the
    API's rule, handed down so this module does not import its entry point back."""
    _validate(input, residual, weight, eps, overlap)
    if needs_function(input, residual, weight):
        # Autograd, forward AD or a functorch transform: the kernel would not see them.
        _recorded(input, residual, weight, eps)
        return
    if input.numel() == 0:
        return
    if kernel_unsupported_reason(input, residual, weight) is None:
        from flashinfer.experimental.fused_add_rmsnorm.kernel import (
            fused_add_rmsnorm_rows,  # first use imports Triton
        )

        rows_in, rows_res = rows_view(input), rows_view(residual)
        assert rows_in is not None and rows_res is not None  # kernel_unsupported_reason checked
        fused_add_rmsnorm_rows(rows_in, rows_res, weight, float(eps))
    else:
        # The unfused composition, through the stable API's public name: the torch backend,
        # its checks skipped (the inputs were validated above, overlap included).
        residual.add_(input)
        rmsnorm(residual, weight, float(eps), out=input, backend="torch", skip_check=True)
