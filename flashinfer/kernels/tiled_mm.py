"""mm's tiled Triton driver, shared by the stable ``triton`` runner of :func:`flashinfer.mm`
and the experimental split-K runner, and mm's backward formula, which its autograd Function
and the compiled operator use.

Here, among the kernels (which import nothing else of the package), so that split-K's runner
can import it without importing :mod:`flashinfer.gemm`, which imports split-K's declarations:
the two stay acyclic.  Each launch is given by its runner; Triton is imported by those.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from flashinfer.kernels.autograd import out_with_grad_error

__all__ = ["mm_backward", "run_tiled"]


def run_tiled(
    runner: Any,
    inputs: tuple,
    tactic: Any,
    space: Sequence[Any],
    backend: str,
    launch: Callable[[torch.Tensor, torch.Tensor, torch.Tensor, Any], None],
) -> torch.Tensor:
    """Run a tiled Triton GEMM of mm (the ``triton`` and ``splitk`` runners; the dispatcher
    has refused an ``out`` that overlaps ``a`` or ``b``,
    :data:`flashinfer.gemm.OVERLAP`); ``tactic``
    defaults to ``runner``'s first for these inputs and must otherwise be in ``space`` (the
    tactics of ``backend``);
    ``launch(a, b, c, tactic)`` writes ``c``: ``out``, or a fresh result.

    When grad is required (grad mode on and ``a``, ``b`` or ``out`` requiring it) the launch
    runs inside :class:`_TiledMatmul`, whose backward is :func:`mm_backward`'s formula, and
    ``out=`` is refused (:func:`~flashinfer.kernels.autograd.out_with_grad_error`)."""
    a, b, out, out_dtype = inputs
    # The one grad test (attribute reads first: no call when nothing requires grad).
    if (
        a.requires_grad or b.requires_grad or (out is not None and out.requires_grad)
    ) and torch.is_grad_enabled():
        if out is not None:
            raise out_with_grad_error("mm", backend, a=a, b=b, out=out)
        return _TiledMatmul.apply(  # type: ignore[no-any-return]
            a, b, out_dtype, (runner, tactic, space, backend, launch)
        )
    if tactic is None:
        tactic = runner.tactics(inputs)[0]
    elif tactic not in space:
        raise ValueError(f"mm: {tactic!r} is not a tactic of backend {backend!r}")
    if out is None:
        out = torch.empty(
            (a.shape[0], b.shape[1]),
            dtype=a.dtype if out_dtype is None else out_dtype,
            device=a.device,
        )
    launch(a, b, out, tactic)
    return out


class _TiledMatmul(torch.autograd.Function):
    """A tiled Triton GEMM as autograd sees it when grad is required: forward is
    :func:`run_tiled` (grad mode is off inside a Function's forward, so it launches the
    kernel), backward the formula :func:`mm_backward` computes."""

    @staticmethod
    def forward(
        a: torch.Tensor,
        b: torch.Tensor,
        out_dtype: torch.dtype | None,
        launch_args: tuple[Any, Any, Sequence[Any], str, Callable[..., None]],
    ) -> torch.Tensor:
        runner, tactic, space, backend, launch = launch_args
        return run_tiled(runner, (a, b, None, out_dtype), tactic, space, backend, launch)

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple[Any, ...], output: torch.Tensor) -> None:
        # Separate from forward, so that torch.func.grad can use the Function too.
        ctx.save_for_backward(inputs[0], inputs[1])

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        a, b = ctx.saved_tensors
        need_a, need_b = ctx.needs_input_grad[:2]
        return (*_mm_grads(grad, a, b, need_a, need_b), None, None)


# --------------------------------------------------------------------------------------
# Backward: the gradient of mm, whichever backend ran the forward
# --------------------------------------------------------------------------------------


def _mm_grads(
    grad: torch.Tensor,
    a: torch.Tensor,
    b: torch.Tensor,
    need_a: bool = True,
    need_b: bool = True,
) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """``grad @ b.T`` and ``a.T @ grad`` in the inputs' dtypes.  When the result had the
    inputs' dtype (no ``out_dtype``, or the same) they are multiplied in it, as autograd
    through the torch backend does (torch's GEMMs accumulate 16-bit products in fp32);
    with another ``out_dtype`` all three are multiplied in fp32 (what the torch backend's
    fp32 path records) and the gradients rounded once to the inputs' dtype."""
    a_dtype, b_dtype = a.dtype, b.dtype
    if grad.dtype != a_dtype or b_dtype != a_dtype:
        grad, a, b = grad.float(), a.float(), b.float()
    grad_a = torch.mm(grad, b.t()).to(a_dtype) if need_a else None
    grad_b = torch.mm(a.t(), grad).to(b_dtype) if need_b else None
    return grad_a, grad_b


def mm_backward(grad: torch.Tensor, inputs: dict[str, Any]) -> dict[str, torch.Tensor | None]:
    """The gradient of :func:`flashinfer.mm`: ``grad`` (of the ``(M, N)`` result, in its
    dtype: ``out_dtype`` or the inputs') and ``inputs`` (the call's arguments by name:
    ``a``, ``b``; others are ignored) give ``{"a": grad @ b.T, "b": a.T @ grad}`` in the
    inputs' dtypes, as autograd through the torch backend gives them.  The Triton and
    split-K backends' :class:`torch.autograd.Function` uses it, and so does the compiled
    operator."""
    grad_a, grad_b = _mm_grads(grad, inputs["a"], inputs["b"])
    return {"a": grad_a, "b": grad_b}
