"""The implementation of the experimental :func:`flashinfer.fused_add_rmsnorm` (whose thin,
marked entry point is in ``flashinfer/fused_norm.py`` and imports this module on first call).

Semantics (in place, like upstream FlashInfer; returns ``None``)::

    residual += input                       # summed in fp32, rounded once to the dtype
    input[...] = rmsnorm(residual, weight, eps)   # fp32 accumulation, from the rounded sum

i.e. exactly the unfused composition ``residual.add_(input); rmsnorm(residual, weight, eps,
out=input)``, in one pass over memory.  The Triton kernel (:mod:`.kernel`, imported on first
use) runs when it can: CUDA tensors, or CPU tensors under ``TRITON_INTERPRET=1``, with rows
of unit stride.  Otherwise a torch composition does the same thing.

Autograd (grad mode on and a tensor requiring grad), forward AD and functorch's transforms
(``vmap``, ``functionalize``, ``torch.func.grad``/``jvp``): the torch composition runs, which
they record or batch (the kernel's launch they would not see).  ``input`` and ``residual``
are written in place, so a leaf that requires grad is refused as torch's in-place
operations refuse it (:func:`refuse_leaves`).
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
    """Raise as torch's in-place operations do when grad is on and ``input`` or ``residual``
    (both written in place) is a leaf that requires grad, or a view of one: autograd cannot
    record an in-place write to a leaf.  The message names the API and the two fixes."""
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
    """The unfused composition as autograd records it: the sum in place, then the norm of
    it (the torch backend, functional: ``out=`` is not differentiable) copied into
    ``input``."""
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
    """``residual += input; input = rmsnorm(residual) * weight``, in place (see module doc).

    ``overlap`` is the API's aliasing rule (``flashinfer.fused_norm.OVERLAP``), checked after
    the other validation and before anything is written.  The entry point hands it down so
    that this module does not import its entry point back (imports flow one way)."""
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
