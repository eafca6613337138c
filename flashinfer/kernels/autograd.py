"""What the kernel backends share for autograd: when a kernel must run inside its
:class:`torch.autograd.Function`, the refusal of ``out=`` when grad is required, and a
``vmap`` rule for a Function whose kernel sees only plain tensors.

A Triton kernel's launch is invisible to autograd, so a kernel backend that differentiates
(``rmsnorm``'s and ``mm``'s Triton backends, ``mm``'s split-K) runs its kernel as the forward
of a :class:`torch.autograd.Function` whose backward is the op's formula
(:func:`flashinfer.norm.rmsnorm_backward`, :func:`flashinfer.gemm.mm_backward`).
A call that writes into ``out=`` has no result for autograd to track; every backend, torch's
included, refuses it when grad is required, as torch does for its own ``out=`` functions
(``torch.mm(..., out=...)``: "functions with out=... arguments don't support automatic
differentiation").  The error is built here, so that every backend says the same thing.

A kernel cannot see forward-mode tangents (``torch.autograd.forward_ad``, ``torch.func.jvp``)
nor functorch's wrapped tensors (``vmap``'s batched tensors, ``torch.func.grad``'s
wrappers): launched on them it would drop the tangent or fail on their storage.  So the
kernel also runs inside its Function while a forward-AD level is open or an argument is a
functorch tensor (:func:`needs_function`): the Function's ``jvp`` gives the tangent,
functorch hands its ``forward`` plain tensors, and its ``vmap`` rule maps over the batch.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from flashinfer.torch_boundary import forward_ad_open, is_functorch_wrapped

__all__ = [
    "OutWithGradError",
    "forward_ad_open",
    "needs_function",
    "out_with_grad_error",
    "vmap_rule",
]

is_functorch_tensor = is_functorch_wrapped


def needs_function(*tensors: torch.Tensor | None) -> bool:
    """Whether a kernel backend must run its kernel inside its autograd Function: grad
    mode is on and a tensor requires grad, a forward-AD level is open, or a tensor is one
    of functorch's wrappers (``vmap``, ``torch.func.grad``).  Attribute reads first: a
    plain call with nothing requiring grad makes two cheap calls."""
    if any(t is not None and t.requires_grad for t in tensors) and torch.is_grad_enabled():
        return True
    if forward_ad_open():
        return True
    return any(t is not None and is_functorch_tensor(t) for t in tensors)


def vmap_rule(
    apply: Callable[..., torch.Tensor],
    info: Any,
    in_dims: tuple[int | None, ...],
    *args: Any,
) -> tuple[torch.Tensor, int]:
    """An autograd Function's ``vmap`` staticmethod for a kernel that sees plain tensors:
    ``apply`` (the Function's ``apply``) runs once per sample of the batch (the batched
    arguments sliced along their ``in_dims``; an argument whose dim is None, or a
    structure of Nones, is shared), and the results are stacked along dim 0.
    Correct for any op; an op whose kernel batches natively (rmsnorm's rows) checks for
    that first."""
    samples = []
    for i in range(info.batch_size):
        sample = [
            a.select(d, i) if isinstance(d, int) else a for a, d in zip(args, in_dims, strict=True)
        ]
        samples.append(apply(*sample))
    return torch.stack(samples), 0


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
