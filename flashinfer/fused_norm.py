"""Fused normalisation APIs: the experimental :func:`fused_add_rmsnorm`'s marked entry point
and cases; its implementation (``flashinfer/experimental/fused_add_rmsnorm/``) loads on the
first call."""

from __future__ import annotations

import sys
from typing import Any

import torch

from flashinfer.aliasing import OverlapRule
from flashinfer.api_logging import flashinfer_experimental_api
from flashinfer.dispatch.torch_op import register_api_op, traced_call

# The only module-level import from flashinfer.experimental: the light validation.
from flashinfer.experimental.fused_add_rmsnorm.support import explain_paths, validate_metadata

__all__ = ["OVERLAP", "fused_add_rmsnorm"]

# None of the three may overlap another, nor a written one itself (see the docstring).
OVERLAP = OverlapRule("fused_add_rmsnorm", ("input", "residual"), ("weight",))


@flashinfer_experimental_api(
    feature="fused_add_rmsnorm", owner="@bob", tracking_issue=4, graduate_by="2027-05-28"
)
def fused_add_rmsnorm(
    input: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6
) -> None:
    """Residual add then RMS norm, in place: ``residual += input``, then
    ``input = rmsnorm(residual, weight, eps)``.

    The sum is formed in fp32 and rounded once to the dtype; the norm is computed from the
    rounded sum with fp32 accumulation, so the result equals the unfused
    ``residual.add_(input); flashinfer.rmsnorm(residual, weight, eps, out=input)``, in one
    pass over memory (Triton kernel on CUDA, or on CPU under ``TRITON_INTERPRET=1``; a torch
    composition otherwise).

    Args:
        input: ``(..., hidden)`` tensor, float32, float16 or bfloat16; overwritten with the
            normalised sum.
        residual: tensor of the same shape, dtype and device; overwritten with the sum.
        weight: ``(hidden,)`` tensor on the same device; float32, float16 or bfloat16,
            the input's dtype or another (a mixed-precision model's float32 weight).
            ``input`` and ``residual`` keep their dtype: written in place, they are never
            cast, under ``torch.autocast`` either.
        eps: added to the mean square before the square root; finite and ``>= 0``.

    Aliasing: ``input`` and ``residual`` are both written, so they must not overlap each
    other or themselves (e.g. a zero-stride ``expand()`` view), and ``weight`` must not
    overlap either of them (e.g. be a row of ``input``): it is read for every row while
    others are written.  Disjoint views of one buffer are fine.

    Autograd: ``input`` and ``residual`` are written in place, so with grad mode on, a leaf
    that requires grad (or a view of one) passed as either is refused as torch's in-place
    operations refuse it (``RuntimeError``; pass a non-leaf, e.g. ``x.clone()``, or call
    under ``torch.no_grad()``).  Given non-leaf tensors that require grad, or a ``weight``
    that does, the call runs the torch composition above, which autograd records (the
    Triton kernel's launch it would not see), so gradients flow to the tensors ``input``,
    ``residual`` and ``weight`` were computed from.  With no grad required the kernel runs.

    Raises:
        ValueError: mismatched shapes, dtypes or devices, an unsupported dtype, a bad
            ``eps``, or any overlap forbidden above; raised before anything is written.
        RuntimeError: ``input`` or ``residual`` is a leaf that requires grad (see
            Autograd).
    """
    if (type(input) is not torch.Tensor or input.is_meta) and traced_call(input, residual, weight):
        TORCH_OP.default(input, residual, weight, eps)  # fake or meta tensors, or export
        return
    from flashinfer.experimental.fused_add_rmsnorm.implementation import fused_add_rmsnorm as impl

    impl(input, residual, weight, eps, overlap=OVERLAP)


def _check_metadata(values: dict[str, Any]) -> None:
    # Metadata only: the overlap rule needs addresses, checked on the real tensors.
    eps = values.get("eps", 1e-6)
    validate_metadata(values["input"], values["residual"], values["weight"], eps)


# Not ``explain``: that name says "an op with backends" (op.explain returns an Explanation).
fused_add_rmsnorm.explain_paths = explain_paths  # type: ignore[attr-defined]


# torch.ops.flashinfer.fused_add_rmsnorm (input and residual mutated): what compile sees.
TORCH_OP = register_api_op(
    fused_add_rmsnorm, overlap=OVERLAP, validate=_check_metadata, fake=lambda values: None
)


# Declared test cases (run by tests/experimental/test_conformance_experimental.py)


def _reference(
    input: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6
) -> tuple[torch.Tensor, torch.Tensor]:
    s = (input.double() + residual.double()).to(input.dtype)  # rounded once, like residual
    r = s.double()
    y = r * torch.rsqrt(r.pow(2).mean(dim=-1, keepdim=True) + eps) * weight.double()
    return y.to(input.dtype), s


def _case_inputs(shape: tuple[int, ...], dtype: torch.dtype) -> Any:
    def make(gen: torch.Generator) -> dict[str, Any]:
        x = torch.randn(shape, generator=gen).to(dtype)
        r = torch.randn(shape, generator=gen).to(dtype)
        w = (1.0 + 0.1 * torch.randn(shape[-1], generator=gen)).to(dtype)
        return {"input": x, "residual": r, "weight": w, "eps": 1e-6}

    return make


def declare_test_cases() -> None:
    """Declare this op's test cases and CLI inputs (called by ``flashinfer.testing``)."""
    from flashinfer.testing import Case, ExampleInputs, allclose, declare_cases

    specs = [
        ("f32_4x64", (4, 64), torch.float32),
        ("f16_2x3x100", (2, 3, 100), torch.float16),
        ("bf16_5x256", (5, 256), torch.bfloat16),
        ("f32_2x5000_two_pass", (2, 5000), torch.float32),
        # every dtype has an odd row count and one row (issue 43 item 21)
        ("f32_3x64_odd_rows", (3, 64), torch.float32),
        ("f32_1x64_one_row", (1, 64), torch.float32),
        ("f16_3x100_odd_rows", (3, 100), torch.float16),
        ("f16_1x100_one_row", (1, 100), torch.float16),
        ("bf16_256_one_row", (256,), torch.bfloat16),
    ]
    declare_cases(
        fused_add_rmsnorm,
        [
            Case(
                name,
                _case_inputs(shape, dtype),
                _reference,
                allclose(),
                seed=200 + i,
                result=lambda inputs, _: (inputs["input"], inputs["residual"]),
            )
            for i, (name, shape, dtype) in enumerate(specs)
        ],
        overlap=OVERLAP,
        examples=ExampleInputs(
            shape_help="TOKENSxHIDDEN (or any AxBx...xHIDDEN; input and residual)",
            ndims=(1, 2, 3, 4),
            make=_example_inputs,
            example="64x256,128x512",
            tensors=lambda d: {"input": d, "residual": d, "weight": (d[-1],)},
        ),
    )


def _example_inputs(dims: tuple[int, ...], dtype: torch.dtype, device: Any) -> dict[str, Any]:
    """The CLI's inputs for ``--shapes TOKENSxHIDDEN``: input and residual of that shape,
    the weight of its last dimension."""
    return {
        "input": torch.randn(*dims, dtype=dtype, device=device),
        "residual": torch.randn(*dims, dtype=dtype, device=device),
        "weight": torch.randn(dims[-1], dtype=dtype, device=device),
    }


if "flashinfer.testing" in sys.modules:  # else the test kit declares them when it loads
    declare_test_cases()
