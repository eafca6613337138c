"""The runners of :func:`flashinfer.mm`'s stable backends, the Triton backend's tactics
(:data:`MM_TRITON_TACTICS`), and :func:`run_tiled`, which every tiled Triton runner shares.

A runner is the ``run`` of an mm backend's declaration (``flashinfer.gemm.MM_RUNNERS`` is
``mm.implementations``): what the autotuner times and what every call finally runs,
``runner(inputs, tactic)`` for ``inputs = (a, b, out, out_dtype)``, with ``tactic_space()``
(every tactic of the backend) and ``tactics(inputs)`` (those worth timing, default first).
The dispatcher checks :data:`OVERLAP` before any runner runs (no runner checks it itself).
The gradient of mm is here too (:func:`mm_backward`): the tiled runners run their kernel
inside a :class:`torch.autograd.Function` with it when grad is required (in
:func:`run_tiled`), and the compiled operator registers it.  Kernels are imported on first
use.  The experimental split-K runner is declared with its
feature (``flashinfer/experimental/splitk_gemm/support.py``) and uses :func:`run_tiled`
from here: a public module, which imports neither :mod:`flashinfer.gemm` nor any
experimental code, so that a feature's runner can share it without an import cycle.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import torch

from flashinfer.dispatch.overlap import OverlapRule
from flashinfer.kernels import next_positive_power_of_2
from flashinfer.kernels.autograd import out_with_grad_error

__all__ = [
    "MM_TRITON_TACTICS",
    "OVERLAP",
    "TorchRunner",
    "TritonRunner",
    "mm_backward",
    "run_tiled",
]

MM_TRITON_TACTICS: list[dict[str, int]] = [
    {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "num_warps": w, "num_stages": s}
    for bm, bn, bk, w, s in (
        (128, 256, 64, 8, 3),
        (128, 128, 64, 8, 3),
        (128, 128, 32, 4, 4),
        (128, 64, 32, 4, 4),
        (64, 128, 32, 4, 4),
        (64, 64, 64, 4, 3),
        (64, 64, 32, 4, 4),
        (32, 64, 64, 4, 4),
        (16, 64, 64, 4, 4),
        (16, 32, 64, 2, 3),
        (16, 16, 32, 2, 2),
    )
]
"""Every tactic of the Triton backend: tile shape, warps and pipeline stages."""


def _result_dtype(a: torch.Tensor, out_dtype: torch.dtype | None) -> torch.dtype:
    return a.dtype if out_dtype is None else out_dtype


OVERLAP = OverlapRule("mm", ("out",), ("a", "b"))
"""What :func:`mm` writes and reads: ``out`` may not overlap ``a``, ``b`` or itself (no
backend computes in place).  Declared with ``backend_requirement(..., overlap=OVERLAP)``:
the dispatcher checks it before any backend's checker or runner, on every path of a call of
:func:`flashinfer.mm` (explicit, ``"auto"``, routed and tuning calls, ``skip_check=True``);
a runner called directly (``MM_RUNNERS[name](inputs)``) is a backend's internals and trusts
its caller."""


# --------------------------------------------------------------------------------------
# Backend "torch": the reference
# --------------------------------------------------------------------------------------


class TorchRunner:
    """``torch.mm``; 16-bit inputs with a float32 result are multiplied in float32, so the
    products are accumulated in fp32 whatever torch's reduced-precision settings are.
    Nothing to tune."""

    def tactic_space(self) -> Sequence[Any]:
        """``[None]``: no tactics."""
        return [None]

    def tactics(self, inputs: tuple) -> Sequence[Any]:
        """``[None]``: no tactics."""
        return [None]

    def __call__(self, inputs: tuple, tactic: Any = None) -> torch.Tensor:
        """Run ``a @ b`` for ``inputs = (a, b, out, out_dtype)``."""
        a, b, out, out_dtype = inputs
        if out is not None:
            if torch.is_grad_enabled() and (
                a.requires_grad or b.requires_grad or out.requires_grad
            ):
                raise out_with_grad_error("mm", "torch", a=a, b=b, out=out)
        dtype = _result_dtype(a, out_dtype)
        if dtype == torch.float32 and a.dtype != torch.float32:
            a, b = a.float(), b.float()
        if out is not None and out.dtype == a.dtype:
            return torch.mm(a, b, out=out)
        result = torch.mm(a, b)
        if out is not None:
            return out.copy_(result)
        return result.to(dtype)


# --------------------------------------------------------------------------------------
# Backend "triton"
# --------------------------------------------------------------------------------------


def _smem_limit(device: torch.device) -> int | None:
    if device.type != "cuda":
        return None  # interpreter: no shared memory
    return _cuda_smem(device.index if device.index is not None else torch.cuda.current_device())


@functools.cache
def _cuda_smem(index: int) -> int:
    props = torch.cuda.get_device_properties(index)
    return int(getattr(props, "shared_memory_per_block_optin", 48 * 1024))


@functools.lru_cache(maxsize=4096)
def _triton_tactics(pm: int, pn: int, pk: int, elem: int, smem: int | None) -> tuple[int, ...]:
    """Indices into MM_TRITON_TACTICS valid for these (power-of-two) sizes, default first."""
    fits = []
    for i, t in enumerate(MM_TRITON_TACTICS):
        if t["BLOCK_M"] > max(16, pm) or t["BLOCK_N"] > max(16, pn) or t["BLOCK_K"] > max(32, pk):
            continue
        stages = t["num_stages"]
        if smem is not None and (t["BLOCK_M"] + t["BLOCK_N"]) * t["BLOCK_K"] * elem * stages > smem:
            continue
        fits.append(i)
    if not fits:
        fits = [len(MM_TRITON_TACTICS) - 1]
    # Default: the largest tile that fits (fewest programs, most reuse).
    fits.sort(key=lambda i: -(MM_TRITON_TACTICS[i]["BLOCK_M"] * MM_TRITON_TACTICS[i]["BLOCK_N"]))
    return tuple(fits)


def run_tiled(
    runner: Any,
    inputs: tuple,
    tactic: Any,
    space: Sequence[Any],
    backend: str,
    launch: Callable[[torch.Tensor, torch.Tensor, torch.Tensor, Any], None],
) -> torch.Tensor:
    """Run a tiled Triton GEMM of mm (the ``triton`` and ``splitk`` runners; the dispatcher
    has refused an ``out`` that overlaps ``a`` or ``b``, :data:`OVERLAP`); ``tactic``
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
            (a.shape[0], b.shape[1]), dtype=_result_dtype(a, out_dtype), device=a.device
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


class TritonRunner:
    """The tiled Triton GEMM; tactics are :data:`MM_TRITON_TACTICS` entries."""

    def tactic_space(self) -> Sequence[Any]:
        """Every tactic (tile shape, warps, stages) the backend may use."""
        return MM_TRITON_TACTICS

    def tactics(self, inputs: tuple) -> Sequence[Any]:
        """Tactics that fit these sizes (and, on CUDA, the device's shared memory)."""
        a, b = inputs[0], inputs[1]
        idx = _triton_tactics(
            next_positive_power_of_2(a.shape[0]),
            next_positive_power_of_2(b.shape[1]),
            next_positive_power_of_2(a.shape[1]),
            a.element_size(),
            _smem_limit(a.device),
        )
        return [MM_TRITON_TACTICS[i] for i in idx]

    def __call__(self, inputs: tuple, tactic: Any = None) -> torch.Tensor:
        """Run ``a @ b`` for ``inputs = (a, b, out, out_dtype)`` with ``tactic``."""
        from flashinfer.kernels.mm_triton import matmul  # first use imports Triton

        return run_tiled(self, inputs, tactic, MM_TRITON_TACTICS, "triton", matmul)


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
