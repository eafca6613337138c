"""RMS normalisation: :func:`rmsnorm`, a stable API with ``"torch"`` and ``"triton"`` backends.

The layout of an op module (docs/author.md): the shared validation, one checker and one
``run(input, weight, eps, out)`` per backend (declared together as ``Backend``), the
heuristic, the API, and the declared test cases.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from typing import Any

import torch
from torch.nn.functional import rms_norm as _torch_rms_norm  # a global: no guard on torch.nn

from flashinfer.aliasing import OverlapRule
from flashinfer.api_logging import flashinfer_api
from flashinfer.backend_dispatch import (
    FP32,
    AutocastRule,
    Backend,
    backend_requirement,
    find_compute_capability,
)
from flashinfer.backend_families import FLOAT_DTYPES, TORCH, TRITON, backend_family, dtype_name
from flashinfer.kernels import (
    bf16_reason,
    dispatch_mode_active,
    offsets_reason,
    rows_view,
    triton_device_reason,
)
from flashinfer.kernels.autograd import (
    forward_ad_open,
    is_functorch_tensor,
    needs_function,
    out_with_grad_error,
    vmap_rule,
)

__all__ = ["rmsnorm", "rmsnorm_backward", "rmsnorm_jvp"]

SUPPORTED_DTYPES = FLOAT_DTYPES  # what every backend's family computes in (backend_families)

# Shared validation: every backend, before any kernel runs

# ``out=input`` is in place (each row is read before it is written, by every backend); any
# other overlap of ``out`` is refused, on every path, before any checker or body runs.
OVERLAP = OverlapRule("rmsnorm", ("out",), ("input", "weight"), frozenset({("out", "input")}))


def _common_check(
    input: torch.Tensor,
    weight: torch.Tensor,
    eps: float = 1e-6,
    *,
    out: torch.Tensor | None = None,
    backend: str = "auto",
) -> bool:
    """Reject malformed calls with a ``ValueError`` that says what is wrong and what to do."""
    if not isinstance(input, torch.Tensor) or not isinstance(weight, torch.Tensor):
        raise ValueError(
            "rmsnorm: input and weight must be torch.Tensor, got "
            f"{type(input).__name__} and {type(weight).__name__}"
        )
    if input.dim() < 1:
        raise ValueError(
            "rmsnorm: input must have at least one dimension (normalised over the last); "
            "got a 0-d tensor"
        )
    hidden = input.shape[-1]
    if hidden == 0:
        raise ValueError(
            f"rmsnorm: the last dimension of input (hidden size) is 0, shape "
            f"{tuple(input.shape)}; RMS of no elements is undefined"
        )
    if input.dtype not in SUPPORTED_DTYPES:
        raise ValueError(
            f"rmsnorm: input dtype {dtype_name(input.dtype)} is not supported; use float32, "
            "float16 or bfloat16"
        )
    if weight.dim() != 1 or weight.shape[0] != hidden:
        raise ValueError(
            f"rmsnorm: weight must be 1-D of the hidden size ({hidden},), the last dimension "
            f"of input {tuple(input.shape)}; got weight of shape {tuple(weight.shape)}"
        )
    if weight.dtype not in SUPPORTED_DTYPES:
        raise ValueError(
            f"rmsnorm: weight dtype {dtype_name(weight.dtype)} is not supported; use float32, "
            "float16 or bfloat16 (it may differ from the input's: a mixed-precision model's "
            "float32 weight with bfloat16 activations is fine)"
        )
    if weight.device != input.device:
        raise ValueError(
            f"rmsnorm: input is on {input.device} but weight is on {weight.device}; "
            "move them to the same device"
        )
    if (
        isinstance(eps, bool)
        or not isinstance(eps, (int, float))
        or not (math.isfinite(eps) and eps >= 0)
    ):
        raise ValueError(f"rmsnorm: eps must be a finite float >= 0, got {eps!r}")
    if out is not None:
        if not isinstance(out, torch.Tensor):
            raise ValueError(
                f"rmsnorm: out must be a torch.Tensor or None, got {type(out).__name__}"
            )
        if out.shape != input.shape:
            raise ValueError(
                f"rmsnorm: out has shape {tuple(out.shape)} but the result has the input's "
                f"shape {tuple(input.shape)}; pass out=torch.empty_like(input) or out=None"
            )
        if out.dtype != input.dtype:
            raise ValueError(
                f"rmsnorm: out has dtype {dtype_name(out.dtype)} but the result has the "
                f"input's dtype {dtype_name(input.dtype)}; pass an out of that dtype"
            )
        if out.device != input.device:
            raise ValueError(
                f"rmsnorm: out is on {out.device} but input is on {input.device}; allocate "
                "out on the input's device"
            )
    return True


# Backend "torch": the reference, anywhere torch runs


@backend_family(TORCH)
def _check_torch(input: torch.Tensor) -> bool:
    """The reference accepts every input the shared validation accepts."""
    return True


def _rmsnorm_torch(
    input: torch.Tensor, weight: torch.Tensor, eps: float, out: torch.Tensor | None
) -> torch.Tensor:
    # torch's fused op has the composition's numerics (bit for bit on CPU,
    # tests/test_norm_torch_backend.py); it cannot fuse a weight of another dtype, nor out=.
    if out is None and weight.dtype == input.dtype:
        return _torch_rms_norm(input, (input.shape[-1],), weight, eps)
    return _rmsnorm_composed(input, weight, eps, out)


def _rmsnorm_composed(
    input: torch.Tensor, weight: torch.Tensor, eps: float, out: torch.Tensor | None
) -> torch.Tensor:
    x = input.float()
    y = x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps) * weight.float()
    if out is None:
        return y.to(input.dtype)
    if torch.is_grad_enabled() and (
        input.requires_grad or weight.requires_grad or out.requires_grad
    ):
        # copy_ would record a graph through out (and, for out=input, break it): refused as
        # every backend refuses out= with grad (flashinfer.kernels.autograd).
        raise out_with_grad_error("rmsnorm", "torch", input=input, weight=weight, out=out)
    return out.copy_(y)


# Backend "triton": CUDA, or CPU through the Triton interpreter


@backend_family(TRITON)
def _check_triton(
    input: torch.Tensor,
    weight: torch.Tensor,
    eps: float = 1e-6,
    *,
    out: torch.Tensor | None = None,
    backend: str = "auto",
) -> bool:
    """Triton's real limits: device, bf16 capability, memory layout, 32-bit offsets."""
    reason = triton_device_reason(input)
    if reason is not None:
        raise ValueError(reason)
    reason = bf16_reason(input.dtype, find_compute_capability(input))
    if reason is not None:
        raise ValueError(reason)
    for name, t in (("input", input), ("out", out)):
        if t is not None and rows_view(t) is None:
            raise ValueError(
                f"{name} of shape {tuple(t.shape)} and strides {t.stride()} is not a stack of "
                "rows with a contiguous last dimension (stride 1) and one row stride; pass "
                f"{name}.contiguous() or use backend='torch'"
            )
    if weight.stride(0) != 1 and weight.shape[0] > 1:
        raise ValueError(
            f"weight must be contiguous (stride 1), got stride {weight.stride(0)}; "
            "pass weight.contiguous()"
        )
    reason = offsets_reason(input=input, out=out)
    if reason is not None:
        raise ValueError(reason)
    return True


def _rmsnorm_triton(
    input: torch.Tensor, weight: torch.Tensor, eps: float, out: torch.Tensor | None
) -> torch.Tensor:
    # The one test for autograd, forward AD and functorch (no call when none is in play).
    if needs_function(input, weight, out):
        if out is not None:
            raise _out_refusal(input, weight, out)
        return _RMSNormTriton.apply(input, weight, eps)  # type: ignore[no-any-return]
    return _rmsnorm_kernel(input, weight, eps, out)


def _rmsnorm_kernel(
    input: torch.Tensor, weight: torch.Tensor, eps: float, out: torch.Tensor | None
) -> torch.Tensor:
    """Launch the kernel on plain tensors (the Function's forward calls this directly)."""
    if dispatch_mode_active():
        result = torch.ops.flashinfer.rmsnorm_no_grad(
            input, weight, eps, backend="triton", skip_check=True
        )
        return result if out is None else out.copy_(result)
    from flashinfer.kernels.rmsnorm_triton import rmsnorm_rows  # first use imports Triton

    result = torch.empty_like(input, memory_format=torch.contiguous_format) if out is None else out
    rows_in, rows_out = rows_view(input), rows_view(result)
    assert rows_in is not None and rows_out is not None  # guaranteed by _check_triton
    rmsnorm_rows(rows_in, weight, eps, rows_out)
    return result


def _out_refusal(input: torch.Tensor, weight: torch.Tensor, out: torch.Tensor) -> Exception:
    """Why the Triton backend refuses ``out=`` when its kernel must run in its Function."""
    if forward_ad_open() or any(is_functorch_tensor(t) for t in (input, weight, out)):
        return ValueError(
            "rmsnorm: backend 'triton' cannot write into out= under forward-mode AD or a "
            "torch.func transform (jvp, vmap, grad): the tangent or batch would be lost. "
            "Drop out=, or use backend='torch'"
        )
    return out_with_grad_error("rmsnorm", "triton", input=input, weight=weight, out=out)


class _RMSNormTriton(torch.autograd.Function):
    """The Triton kernel as autograd and torch.func see it (``vmap``: one launch over the
    batch's rows when the weight is shared)."""

    @staticmethod
    def forward(input: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
        return _rmsnorm_kernel(input, weight, eps, None)

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple[Any, ...], output: torch.Tensor) -> None:
        # Separate from forward, so that torch.func.grad can use the Function too.
        input, weight, eps = inputs
        ctx.save_for_backward(input, weight)
        ctx.save_for_forward(input, weight)
        ctx.eps = eps

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        input, weight = ctx.saved_tensors
        need_input, need_weight = ctx.needs_input_grad[:2]
        return (*_rmsnorm_grads(grad, input, weight, ctx.eps, need_input, need_weight), None)

    @staticmethod
    def jvp(
        ctx: Any, input_t: torch.Tensor | None, weight_t: torch.Tensor | None, _: Any
    ) -> torch.Tensor:
        input, weight = ctx.saved_tensors
        return _rmsnorm_tangent(input, weight, ctx.eps, input_t, weight_t)

    @staticmethod
    def vmap(
        info: Any,
        in_dims: tuple[int | None, ...],
        input: torch.Tensor,
        weight: torch.Tensor,
        eps: float,
    ) -> tuple[torch.Tensor, int]:
        input_dim, weight_dim = in_dims[:2]
        if weight_dim is None and input_dim is not None:
            # a row is a row whichever dim holds the batch: one launch over all of them
            rows = input.movedim(input_dim, 0).contiguous()
            return _RMSNormTriton.apply(rows, weight, eps), 0
        return vmap_rule(_RMSNormTriton.apply, info, in_dims, input, weight, eps)


# Backward: the gradient of rmsnorm, whichever backend ran the forward


def _rmsnorm_grads(
    grad: torch.Tensor,
    input: torch.Tensor,
    weight: torch.Tensor,
    eps: float,
    need_input: bool = True,
    need_weight: bool = True,
) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """Gradients of ``y = x * rstd * w`` (``rstd = (mean(x**2) + eps) ** -0.5`` per row) in
    fp32, returned in the arguments' dtypes: ``dw = sum over rows of dy * x * rstd`` and
    ``dx = rstd * (g - xhat * mean(g * xhat))`` with ``g = dy * w``, ``xhat = x * rstd``."""
    dy, x = grad.float(), input.float()
    rstd = torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps)
    xhat = x * rstd
    grad_input = grad_weight = None
    if need_weight:
        grad_weight = (dy * xhat).reshape(-1, x.shape[-1]).sum(dim=0).to(weight.dtype)
    if need_input:
        g = dy * weight.float()
        grad_input = (rstd * (g - xhat * (g * xhat).mean(dim=-1, keepdim=True))).to(input.dtype)
    return grad_input, grad_weight


def _rmsnorm_tangent(
    input: torch.Tensor,
    weight: torch.Tensor,
    eps: float,
    input_t: torch.Tensor | None,
    weight_t: torch.Tensor | None,
) -> torch.Tensor:
    """The tangent of ``y = xhat * w`` (``xhat = x * rstd``) in fp32, returned in the input's
    dtype: ``dy = rstd * (dx - xhat * mean(xhat * dx)) * w + xhat * dw``."""
    x = input.float()
    rstd = torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps)
    xhat = x * rstd
    tangent = torch.zeros_like(x)
    if input_t is not None:
        dx = input_t.float()
        tangent = (
            tangent + rstd * (dx - xhat * (xhat * dx).mean(dim=-1, keepdim=True)) * weight.float()
        )
    if weight_t is not None:
        tangent = tangent + xhat * weight_t.float()
    return tangent.to(input.dtype)


def rmsnorm_jvp(inputs: dict[str, Any], tangents: dict[str, torch.Tensor | None]) -> torch.Tensor:
    """The forward-mode derivative of :func:`rmsnorm`: the result's tangent from the call's
    arguments and ``input``'s and ``weight``'s tangents (None: none), computed in fp32."""
    return _rmsnorm_tangent(
        inputs["input"],
        inputs["weight"],
        inputs.get("eps", 1e-6),
        tangents.get("input"),
        tangents.get("weight"),
    )


def rmsnorm_backward(grad: torch.Tensor, inputs: dict[str, Any]) -> dict[str, torch.Tensor | None]:
    """The gradient of :func:`rmsnorm`: ``{"input": ..., "weight": ...}`` from ``grad`` and
    the call's arguments by name, computed in fp32, in the arguments' dtypes."""
    grad_input, grad_weight = _rmsnorm_grads(
        grad, inputs["input"], inputs["weight"], inputs.get("eps", 1e-6)
    )
    return {"input": grad_input, "weight": grad_weight}


# Heuristic and the API


def _heuristic(
    suitable: list[str],
    input: torch.Tensor,
    weight: torch.Tensor,
    eps: float = 1e-6,
    *,
    out: torch.Tensor | None = None,
    backend: str = "auto",
) -> list[str]:
    """Fastest first: Triton's fused kernel on CUDA; torch on CPU (Triton interprets there)."""
    order = ("triton", "torch") if input.is_cuda else ("torch", "triton")
    rank = {b: i for i, b in enumerate(order)}
    return sorted(suitable, key=lambda b: rank.get(b, len(order)))


@flashinfer_api
@backend_requirement(
    [
        Backend("torch", check=_check_torch, run=_rmsnorm_torch),
        Backend("triton", check=_check_triton, run=_rmsnorm_triton, differentiable=True),
    ],
    common_check=_common_check,
    heuristic_func=_heuristic,
    overlap=OVERLAP,
    backward=rmsnorm_backward,
    jvp=rmsnorm_jvp,
    # torch.rms_norm's policy: float32 on CUDA, not cast on CPU
    autocast=AutocastRule(cuda=FP32),
)
def rmsnorm(
    input: torch.Tensor,
    weight: torch.Tensor,
    eps: float = 1e-6,
    *,
    out: torch.Tensor | None = None,
    backend: str = "auto",
    skip_check: bool = False,
) -> torch.Tensor:
    r"""Root-mean-square normalisation over the last dimension.

    .. math:: y = \frac{x}{\sqrt{\mathrm{mean}(x^2) + \epsilon}} \cdot w

    computed with fp32 accumulation and stored in the input's dtype.

    Autograd: every backend differentiates with respect to ``input`` and ``weight`` (grad
    mode on and one of them requiring grad).  ``"torch"`` is recorded by autograd as it
    runs; ``"triton"`` runs its kernel inside a :class:`torch.autograd.Function` whose
    backward is :func:`rmsnorm_backward` (fp32, in torch); with no grad required it runs
    as before, after one cheap test.  ``out=`` cannot be differentiated, as with torch's
    own ``out=`` functions: with grad required every backend refuses it (``ValueError``,
    also a ``RuntimeError``); drop ``out=``, or call under ``torch.no_grad()``.

    Args:
        input: tensor of any shape ``(..., hidden)``; float32, float16 or bfloat16.
        weight: ``(hidden,)`` tensor on the same device; float32, float16 or bfloat16,
            the input's dtype or another (a mixed-precision model's float32 weight with
            bfloat16 activations, as ``torch.nn.functional.rms_norm`` and HF's
            ``LlamaRMSNorm`` accept it).
        eps: added to the mean square before the square root; finite and ``>= 0``.
        out: optional output of the input's shape, dtype and device.  It may be ``input``
            itself (the same view) for an in-place update; otherwise it must not overlap
            ``input``, ``weight`` or itself (e.g. a zero-stride ``expand()`` view).
        backend: ``"auto"`` (default: the fastest suitable backend for the inputs),
            ``"torch"`` (reference; CPU and CUDA) or ``"triton"`` (CUDA; CPU tensors only
            under ``TRITON_INTERPRET=1``; needs a contiguous last dimension).
        skip_check: ``True`` skips validating the inputs: a named backend runs unchecked;
            ``"auto"`` still chooses by the backends' support checks (see
            :func:`flashinfer.backend_requirement`).

    Returns:
        The normalised tensor (``out`` when given), in the input's dtype whatever the
        weight's: torch's rule for ``rms_norm`` (HF's ``LlamaRMSNorm`` instead returns
        ``weight * normed``, float32 for a float32 weight).  Under ``torch.autocast`` it
        follows ``torch.rms_norm``: on CPU nothing is cast (a float32 input stays float32);
        on CUDA the input and weight are cast to float32, and so is the result.  An
        ``out=`` call is not cast.

    Raises:
        ValueError: malformed inputs (rank, shapes, dtypes, devices, ``out``), raised before
            any kernel runs; or an explicitly named backend cannot run these inputs (the
            message says why); or ``out=`` while grad is required (see Autograd).
            ``out`` overlapping as above is refused on every backend before any kernel
            runs, also with ``skip_check=True``.
        BackendSupportedError: unknown backend, or no backend can run the inputs with
            ``backend="auto"`` (the message lists each backend and why).
    """
    if backend == "auto":
        backend = rmsnorm.suitable_auto_backends[0]
    return rmsnorm.implementations[backend](input, weight, eps, out)


# Declared test cases (run against every backend by tests/test_conformance.py)


def _reference(
    input: torch.Tensor,
    weight: torch.Tensor,
    eps: float = 1e-6,
    *,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    x = input.double()
    y = x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps) * weight.double()
    return y.to(input.dtype)


def _case_inputs(
    shape: tuple[int, ...],
    dtype: torch.dtype,
    *,
    with_out: bool = False,
    transposed: bool = False,
    eps: float = 1e-6,
    weight_dtype: torch.dtype | None = None,
) -> Callable[[torch.Generator], dict[str, Any]]:
    def make(gen: torch.Generator) -> dict[str, Any]:
        src = shape[::-1] if transposed else shape
        x = torch.randn(src, generator=gen, dtype=torch.float32).to(dtype)
        if transposed:
            x = x.transpose(0, 1)
        w = (1.0 + 0.1 * torch.randn(shape[-1], generator=gen)).to(weight_dtype or dtype)
        inputs: dict[str, Any] = {"input": x, "weight": w, "eps": eps}
        if with_out:
            inputs["out"] = torch.full(shape, float("nan"), dtype=dtype)
        return inputs

    return make


def _example_inputs(dims: tuple[int, ...], dtype: torch.dtype, device: Any) -> dict[str, Any]:
    return {
        "input": torch.randn(*dims, dtype=dtype, device=device),
        "weight": torch.randn(dims[-1], dtype=dtype, device=device),
    }


def declare_test_cases() -> None:
    """Declare this op's test cases and CLI inputs (called by ``flashinfer.testing``)."""
    from flashinfer.testing import Case, ExampleInputs, allclose, declare_cases

    specs: list[tuple[str, Any, Any, dict[str, Any]]] = [
        ("f32_4x64", (4, 64), torch.float32, {}),
        ("f16_2x3x100", (2, 3, 100), torch.float16, {}),
        ("bf16_5x256", (5, 256), torch.bfloat16, {}),
        ("bf16_hidden_only_128", (128,), torch.bfloat16, {}),
        ("f32_3x5000_two_pass", (3, 5000), torch.float32, {}),
        ("f16_4x96_out", (4, 96), torch.float16, {"with_out": True}),
        ("f32_48x6_transposed", (48, 6), torch.float32, {"transposed": True}),
        ("f32_3x32_eps_1e-2", (3, 32), torch.float32, {"eps": 1e-2}),
        ("bf16_4x64_f32_weight", (4, 64), torch.bfloat16, {"weight_dtype": torch.float32}),
        ("f32_2x48_f16_weight", (2, 48), torch.float32, {"weight_dtype": torch.float16}),
        # every dtype has an odd row count and one row: a kernel losing the last row of an
        # odd count, or launching no program for one row, fails (issue 43 item 21)
        ("f32_1x64_one_row", (1, 64), torch.float32, {}),
        ("f16_3x5x100_odd_rows", (3, 5, 100), torch.float16, {}),
        ("f16_1x96_one_row_out", (1, 96), torch.float16, {"with_out": True}),
    ]
    declare_cases(
        rmsnorm,
        [
            Case(name, _case_inputs(shape, dtype, **kw), _reference, allclose(), seed=i)
            for i, (name, shape, dtype, kw) in enumerate(specs)
        ],
        examples=ExampleInputs(
            shape_help="TOKENSxHIDDEN (or any AxBx...xHIDDEN)",
            ndims=(1, 2, 3, 4),
            make=_example_inputs,
            example="64x256,128x512",
            tensors=lambda d: {"input": d, "weight": (d[-1],), "the result": d},
        ),
    )


if "flashinfer.testing" in sys.modules:  # else the test kit declares them when it loads
    declare_test_cases()
