"""mm's tiled Triton driver (the ``triton`` and split-K runners) and mm's derivative formulas.
Among the kernels so that split-K imports it without :mod:`flashinfer.gemm` (no cycle)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from flashinfer.kernels import dispatch_mode_active
from flashinfer.kernels.autograd import (
    forward_ad_open,
    is_functorch_tensor,
    needs_function,
    out_with_grad_error,
    vmap_rule,
)

__all__ = ["mm_backward", "mm_jvp", "run_tiled"]


def run_tiled(
    runner: Any,
    inputs: tuple,
    tactic: Any,
    space: Sequence[Any],
    backend: str,
    launch: Callable[[torch.Tensor, torch.Tensor, torch.Tensor, Any], None],
) -> torch.Tensor:
    """Run a tiled Triton GEMM of mm: ``launch(a, b, c, tactic)`` writes ``c`` (``out`` or a
    fresh result); ``tactic`` defaults to ``runner``'s first, else must be in ``space``.
    When grad is required the launch runs inside :class:`_TiledMatmul`."""
    a, b, out, out_dtype = inputs
    # The one test for autograd, forward AD and functorch (no call when none is in play).
    if needs_function(a, b, out):
        if out is not None:
            if forward_ad_open() or any(is_functorch_tensor(t) for t in (a, b, out)):
                raise ValueError(
                    f"mm: backend {backend!r} cannot write into out= under forward-mode AD "
                    "or a torch.func transform (jvp, vmap, grad): the tangent or batch "
                    "would be lost. Drop out=, or use backend='torch'"
                )
            raise out_with_grad_error("mm", backend, a=a, b=b, out=out)
        return _TiledMatmul.apply(  # type: ignore[no-any-return]
            a, b, out_dtype, (runner, tactic, space, backend, launch)
        )
    return _launch_tiled(runner, inputs, tactic, space, backend, launch)


def _launch_tiled(
    runner: Any,
    inputs: tuple,
    tactic: Any,
    space: Sequence[Any],
    backend: str,
    launch: Callable[[torch.Tensor, torch.Tensor, torch.Tensor, Any], None],
) -> torch.Tensor:
    """Launch on plain tensors; under a dispatch mode ``mm``'s operator runs instead."""
    a, b, out, out_dtype = inputs
    if dispatch_mode_active():
        result = torch.ops.flashinfer.mm_no_grad(
            a, b, out_dtype=out_dtype, backend=backend, skip_check=True
        )
        return result if out is None else out.copy_(result)
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
    """A tiled Triton GEMM as autograd and torch.func see it: forward is
    :func:`_launch_tiled` (functorch hands it plain tensors), backward the formula
    :func:`mm_backward` computes, ``jvp`` the forward-mode one (:func:`mm_jvp`), ``vmap``
    one launch over the stacked rows of ``a`` when ``b`` is shared."""

    @staticmethod
    def forward(
        a: torch.Tensor,
        b: torch.Tensor,
        out_dtype: torch.dtype | None,
        launch_args: tuple[Any, Any, Sequence[Any], str, Callable[..., None]],
    ) -> torch.Tensor:
        runner, tactic, space, backend, launch = launch_args
        return _launch_tiled(runner, (a, b, None, out_dtype), tactic, space, backend, launch)

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple[Any, ...], output: torch.Tensor) -> None:
        # Separate from forward, so that torch.func.grad can use the Function too.
        ctx.save_for_backward(inputs[0], inputs[1])
        ctx.save_for_forward(inputs[0], inputs[1])
        ctx.out_dtype = output.dtype

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        a, b = ctx.saved_tensors
        need_a, need_b = ctx.needs_input_grad[:2]
        return (*_mm_grads(grad, a, b, need_a, need_b), None, None)

    @staticmethod
    def jvp(ctx: Any, a_t: torch.Tensor | None, b_t: torch.Tensor | None, *_: Any) -> torch.Tensor:
        a, b = ctx.saved_tensors
        return _mm_tangent(a, b, a_t, b_t, ctx.out_dtype)

    @staticmethod
    def vmap(
        info: Any,
        in_dims: tuple[int | None, ...],
        a: torch.Tensor,
        b: torch.Tensor,
        out_dtype: torch.dtype | None,
        launch_args: tuple[Any, Any, Sequence[Any], str, Callable[..., None]],
    ) -> tuple[torch.Tensor, int]:
        a_dim, b_dim = in_dims[:2]
        if b_dim is None and a_dim is not None:
            # (batch, M, K) @ (K, N) is one (batch * M, K) @ (K, N): one launch
            stacked = a.movedim(a_dim, 0)
            rows = stacked.reshape(-1, stacked.shape[-1])
            result = _TiledMatmul.apply(rows, b, out_dtype, launch_args)
            return result.reshape(stacked.shape[0], stacked.shape[1], -1), 0
        return vmap_rule(_TiledMatmul.apply, info, in_dims, a, b, out_dtype, launch_args)


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
    """``grad @ b.T`` and ``a.T @ grad`` in the inputs' dtypes, multiplied as the torch
    backend's autograd does (in fp32 when the result had another dtype)."""
    a_dtype, b_dtype = a.dtype, b.dtype
    if grad.dtype != a_dtype or b_dtype != a_dtype:
        grad, a, b = grad.float(), a.float(), b.float()
    grad_a = torch.mm(grad, b.t()).to(a_dtype) if need_a else None
    grad_b = torch.mm(a.t(), grad).to(b_dtype) if need_b else None
    return grad_a, grad_b


def _mm_tangent(
    a: torch.Tensor,
    b: torch.Tensor,
    a_t: torch.Tensor | None,
    b_t: torch.Tensor | None,
    result_dtype: torch.dtype,
) -> torch.Tensor:
    """``a_t @ b + a @ b_t`` (a missing tangent is zero) in the result's dtype, as forward AD
    through the torch backend gives it."""
    if result_dtype != a.dtype:
        a, b = a.float(), b.float()
        a_t = None if a_t is None else a_t.float()
        b_t = None if b_t is None else b_t.float()
    tangent = torch.zeros((a.shape[0], b.shape[1]), dtype=a.dtype, device=a.device)
    if a_t is not None:
        tangent = tangent + torch.mm(a_t, b)
    if b_t is not None:
        tangent = tangent + torch.mm(a, b_t)
    return tangent.to(result_dtype)


def mm_jvp(inputs: dict[str, Any], tangents: dict[str, torch.Tensor | None]) -> torch.Tensor:
    """The forward-mode derivative of :func:`flashinfer.mm`: ``a_t @ b + a @ b_t`` from the
    call's arguments and ``a``'s and ``b``'s tangents (None: none), in the result's dtype."""
    a, b = inputs["a"], inputs["b"]
    out_dtype = inputs.get("out_dtype")
    return _mm_tangent(a, b, tangents.get("a"), tangents.get("b"), out_dtype or a.dtype)


def mm_backward(grad: torch.Tensor, inputs: dict[str, Any]) -> dict[str, torch.Tensor | None]:
    """The gradient of :func:`flashinfer.mm`: ``{"a": grad @ b.T, "b": a.T @ grad}`` in the
    inputs' dtypes, as autograd through the torch backend gives them."""
    grad_a, grad_b = _mm_grads(grad, inputs["a"], inputs["b"])
    return {"a": grad_a, "b": grad_b}
