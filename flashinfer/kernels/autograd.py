"""What the kernel backends share for autograd.  A kernel's launch is invisible to autograd,
forward AD and functorch, so a differentiable kernel backend runs it inside a
``torch.autograd.Function`` (backward: the op's formula) when one is in play
(:func:`needs_function`); ``out=`` with grad required is refused as torch refuses it."""

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
    """Whether a kernel must run inside its autograd Function: grad required, a forward-AD
    level open, or a functorch wrapper among ``tensors`` (cheap tests first)."""
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
    """A Function's ``vmap`` for a kernel that sees plain tensors: ``apply`` once per sample
    (batched arguments sliced along ``in_dims``), results stacked along dim 0."""
    samples = []
    for i in range(info.batch_size):
        sample = [
            a.select(d, i) if isinstance(d, int) else a for a, d in zip(args, in_dims, strict=True)
        ]
        samples.append(apply(*sample))
    return torch.stack(samples), 0


class OutWithGradError(ValueError, RuntimeError):
    """A call with ``out=`` while grad is required: a ``ValueError`` like every refusal of an
    op's arguments, and a ``RuntimeError`` like torch's own refusal."""


def out_with_grad_error(api: str, backend: str, **tensors: torch.Tensor | None) -> OutWithGradError:
    """The error for ``api``'s ``out=`` with grad required, naming the backend, the arguments
    that require grad and the two fixes."""
    names = [n for n, t in tensors.items() if t is not None and t.requires_grad]
    what = ", ".join(repr(n) for n in names) or "an argument"
    verb = "require" if len(names) > 1 else "requires"
    return OutWithGradError(
        f"{api}: backend {backend!r} cannot differentiate a call with out=: {what} {verb} "
        "grad, and functions with out= arguments don't support automatic differentiation "
        "(torch's rule, as for torch.mm(..., out=...)).  Drop out= to get a result autograd "
        "tracks, or call under torch.no_grad() to write into out without a graph"
    )
