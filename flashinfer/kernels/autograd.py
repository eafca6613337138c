"""What the kernel backends share for autograd: the refusal of ``out=`` when grad is required.

A Triton kernel's launch is invisible to autograd, so a kernel backend that differentiates
(``rmsnorm``'s and ``mm``'s Triton backends, ``mm``'s split-K) runs its kernel as the forward
of a :class:`torch.autograd.Function` whose backward is the op's formula
(:func:`flashinfer.norm.rmsnorm_backward`, :func:`flashinfer.gemm.mm_backward`).
A call that writes into ``out=`` has no result for autograd to track; every backend, torch's
included, refuses it when grad is required, as torch does for its own ``out=`` functions
(``torch.mm(..., out=...)``: "functions with out=... arguments don't support automatic
differentiation").  The error is built here, so that every backend says the same thing.
"""

from __future__ import annotations

import torch

__all__ = ["OutWithGradError", "out_with_grad_error"]


class OutWithGradError(ValueError, RuntimeError):
    """A call with ``out=`` while grad is required (grad mode on, a tensor argument requiring
    grad).  A ``ValueError`` like every other refusal of an op's arguments, and a
    ``RuntimeError`` like torch's own refusal of ``out=`` under autograd (and the compiled
    operator's), so code written against either catches it."""


def out_with_grad_error(api: str, backend: str, **tensors: torch.Tensor | None) -> OutWithGradError:
    """The error a backend raises for a call of ``api`` with ``out=`` while grad is required,
    naming the backend, the arguments that require grad (from ``tensors``, by name) and the
    two fixes.  Built only when raised: the backends test grad first, cheaply."""
    names = [n for n, t in tensors.items() if t is not None and t.requires_grad]
    what = ", ".join(repr(n) for n in names) or "an argument"
    verb = "require" if len(names) > 1 else "requires"
    return OutWithGradError(
        f"{api}: backend {backend!r} cannot differentiate a call with out=: {what} {verb} "
        "grad, and functions with out= arguments don't support automatic differentiation "
        "(torch's rule, as for torch.mm(..., out=...)).  Drop out= to get a result autograd "
        "tracks, or call under torch.no_grad() to write into out without a graph"
    )
