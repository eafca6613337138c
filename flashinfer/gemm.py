"""Matrix multiply: :func:`mm`, a stable API with ``"torch"`` and ``"triton"`` backends and the
experimental ``"splitk"`` backend (``flashinfer/experimental/splitk_gemm``), laid out as
:mod:`flashinfer.norm` is.

A backend's ``run`` is an autotuner runner: ``runner(inputs, tactic=None)`` for ``inputs =
(a, b, out, out_dtype)``, with ``tactic_space()`` and ``tactics(inputs)`` (those worth timing,
default first).  ``backend="auto"`` goes through the autotuner, which sees only the
dispatcher's candidates.  Split-K imports :func:`run_tiled` from here when it first runs.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Sequence
from typing import Any

import torch

from flashinfer.aliasing import OverlapRule
from flashinfer.api_logging import flashinfer_api
from flashinfer.autotuner import AutoTuner
from flashinfer.backend_dispatch import (
    LOWER_PRECISION,
    AutocastRule,
    Backend,
    backend_requirement,
    find_compute_capability,
)
from flashinfer.backend_families import FLOAT_DTYPES, TORCH, TRITON, backend_family, dtype_name

# The only module-level import from flashinfer.experimental: its light declarations.
from flashinfer.experimental.splitk_gemm.support import SPLITK
from flashinfer.experimental.splitk_gemm.support import SplitKRunner as SplitKRunner
from flashinfer.kernels import (
    bf16_reason,
    next_positive_power_of_2,
    offsets_reason,
    triton_device_reason,
)
from flashinfer.kernels.autograd import needs_function, out_with_grad_error
from flashinfer.kernels.tiled_mm import mm_backward as mm_backward
from flashinfer.kernels.tiled_mm import mm_jvp as mm_jvp
from flashinfer.kernels.tiled_mm import run_tiled as run_tiled

__all__ = [
    "MM_RUNNERS",
    "MM_TRITON_TACTICS",
    "OVERLAP",
    "TorchRunner",
    "TritonRunner",
    "mm",
    "mm_backward",
    "mm_jvp",
    "run_tiled",
]

SUPPORTED_DTYPES = FLOAT_DTYPES  # what every backend's family computes in (backend_families)

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


def result_dtype(a: torch.Tensor, out_dtype: torch.dtype | None) -> torch.dtype:
    return a.dtype if out_dtype is None else out_dtype


# ``out`` may not overlap ``a``, ``b`` or itself (no backend computes in place); the
# dispatcher checks it on every path of a call; a runner called directly trusts its caller.
OVERLAP = OverlapRule("mm", ("out",), ("a", "b"))


# Backend "torch": the reference


class TorchRunner:
    """``torch.mm``, nothing to tune; 16-bit inputs with a float32 result are multiplied in
    float32 with autocast off (the op cast its inputs already)."""

    def tactic_space(self) -> Sequence[Any]:
        return [None]

    def tactics(self, inputs: tuple) -> Sequence[Any]:
        return [None]

    def __call__(self, inputs: tuple, tactic: Any = None) -> torch.Tensor:
        a, b, out, out_dtype = inputs
        if out is None and out_dtype is None:
            return torch.mm(a, b)  # the common call: torch.mm's own result, nothing around it
        if out is not None:
            if torch.is_grad_enabled() and (
                a.requires_grad or b.requires_grad or out.requires_grad
            ):
                raise out_with_grad_error("mm", "torch", a=a, b=b, out=out)
        device_type = a.device.type
        if torch.amp.is_autocast_available(device_type) and torch.is_autocast_enabled(device_type):
            with torch.autocast(device_type, enabled=False):
                return self._mm(a, b, out, out_dtype)
        return self._mm(a, b, out, out_dtype)

    @staticmethod
    def _mm(
        a: torch.Tensor, b: torch.Tensor, out: torch.Tensor | None, out_dtype: Any
    ) -> torch.Tensor:
        dtype = result_dtype(a, out_dtype)
        if dtype == torch.float32 and a.dtype != torch.float32:
            a, b = a.float(), b.float()
        if out is not None and out.dtype == a.dtype and not needs_function(a, b, out):
            return torch.mm(a, b, out=out)  # (vmap and forward AD have no rule for mm.out)
        result = torch.mm(a, b)
        if out is not None:
            return out.copy_(result)
        return result.to(dtype)


# Backend "triton"


def _smem_limit(device: torch.device) -> int | None:
    if device.type != "cuda":
        return None  # interpreter: no shared memory
    return _cuda_smem(device.index if device.index is not None else torch.cuda.current_device())


@functools.cache
def _cuda_smem(index: int) -> int:
    props = torch.cuda.get_device_properties(index)
    return int(getattr(props, "shared_memory_per_block_optin", 48 * 1024))


@functools.lru_cache(maxsize=4096)
def triton_tactics(pm: int, pn: int, pk: int, elem: int, smem: int | None) -> tuple[int, ...]:
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


class TritonRunner:
    """The tiled Triton GEMM; tactics are :data:`MM_TRITON_TACTICS` entries."""

    def tactic_space(self) -> Sequence[Any]:
        return MM_TRITON_TACTICS

    def tactics(self, inputs: tuple) -> Sequence[Any]:
        """Tactics that fit these sizes (and, on CUDA, the device's shared memory)."""
        a, b = inputs[0], inputs[1]
        idx = triton_tactics(
            next_positive_power_of_2(a.shape[0]),
            next_positive_power_of_2(b.shape[1]),
            next_positive_power_of_2(a.shape[1]),
            a.element_size(),
            _smem_limit(a.device),
        )
        return [MM_TRITON_TACTICS[i] for i in idx]

    def __call__(self, inputs: tuple, tactic: Any = None) -> torch.Tensor:
        from flashinfer.kernels.mm_triton import matmul  # first use imports Triton

        return run_tiled(self, inputs, tactic, MM_TRITON_TACTICS, "triton", matmul)


# Shared validation


def _common_check(
    a: torch.Tensor,
    b: torch.Tensor,
    *,
    out: torch.Tensor | None = None,
    out_dtype: torch.dtype | None = None,
    backend: str = "auto",
) -> bool:
    """Reject malformed calls with a ``ValueError`` that says what is wrong and what to do."""
    for name, t in (("a", a), ("b", b)):
        if not isinstance(t, torch.Tensor):
            raise ValueError(f"mm: {name} must be a torch.Tensor, got {type(t).__name__}")
        if t.dim() != 2:
            raise ValueError(
                f"mm: {name} must be a 2-D matrix, got a {t.dim()}-D tensor of shape "
                f"{tuple(t.shape)}; for batches use torch.bmm or reshape to 2-D"
            )
        if t.dtype not in SUPPORTED_DTYPES:
            raise ValueError(
                f"mm: {name} has dtype {dtype_name(t.dtype)}; supported are float32, "
                "float16 and bfloat16"
            )
    if a.shape[1] != b.shape[0]:
        raise ValueError(
            f"mm: inner dimensions differ: a is {tuple(a.shape)} (K={a.shape[1]}) and b is "
            f"{tuple(b.shape)} (K={b.shape[0]}); a must be (M, K) and b (K, N)"
        )
    if a.dtype != b.dtype:
        raise ValueError(
            f"mm: a is {dtype_name(a.dtype)} but b is {dtype_name(b.dtype)}; cast one so "
            "both have the same dtype (use out_dtype= to choose the result's dtype)"
        )
    if a.device != b.device:
        raise ValueError(f"mm: a is on {a.device} but b is on {b.device}; use one device")
    if out_dtype is not None and out_dtype not in SUPPORTED_DTYPES:
        raise ValueError(
            f"mm: out_dtype={out_dtype!r} is not supported; use torch.float32, torch.float16, "
            "torch.bfloat16 or None (the inputs' dtype)"
        )
    if out is not None:
        if not isinstance(out, torch.Tensor):
            raise ValueError(f"mm: out must be a torch.Tensor or None, got {type(out).__name__}")
        shape = (a.shape[0], b.shape[1])
        if tuple(out.shape) != shape:
            raise ValueError(
                f"mm: out has shape {tuple(out.shape)} but the result is {shape} (M, N); "
                f"allocate out with torch.empty({shape[0]}, {shape[1]}, ...)"
            )
        want = result_dtype(a, out_dtype)
        if out.dtype != want:
            raise ValueError(
                f"mm: out has dtype {dtype_name(out.dtype)} but the result is "
                f"{dtype_name(want)} (out_dtype, or the inputs' dtype when out_dtype is None); "
                f"pass out_dtype=torch.{dtype_name(out.dtype)} or an out of that dtype"
            )
        if out.device != a.device:
            raise ValueError(f"mm: out is on {out.device} but the inputs are on {a.device}")
    return True


# What each stable backend supports (their runners are above)


@backend_family(TORCH)
def _check_torch(a: torch.Tensor) -> bool:
    """The reference accepts every input the shared validation accepts."""
    return True


@backend_family(TRITON)
def _check_triton(
    a: torch.Tensor,
    b: torch.Tensor,
    *,
    out: torch.Tensor | None = None,
    out_dtype: torch.dtype | None = None,
    backend: str = "auto",
) -> bool:
    """Triton's real limits: device, bf16 capability, empty outputs, 32-bit offsets."""
    reason = triton_device_reason(a)
    if reason is not None:
        raise ValueError(reason)
    reason = bf16_reason(a.dtype, find_compute_capability(a))
    if reason is not None:
        raise ValueError(reason)
    if a.shape[0] == 0 or b.shape[1] == 0:
        raise ValueError("the output is empty (M or N is 0); there is no kernel to launch")
    reason = offsets_reason(a=a, b=b, out=out)
    if reason is not None:
        raise ValueError(reason)
    return True


# Heuristic and the API


# Ranks of the stable backends; experimental ones come last unless their ``prefer`` says.
_RANKS = {"torch": 0, "triton": 1}


def _heuristic(
    suitable: list[str],
    a: torch.Tensor,
    b: torch.Tensor,
    *,
    out: torch.Tensor | None = None,
    out_dtype: torch.dtype | None = None,
    backend: str = "auto",
) -> list[str]:
    """Torch first (BLAS / cuBLAS), then Triton; the autotuner measures instead of guessing."""
    return sorted(suitable, key=lambda name: _RANKS.get(name, len(_RANKS)))


@flashinfer_api
@backend_requirement(
    [
        Backend("torch", check=_check_torch, run=TorchRunner()),
        Backend("triton", check=_check_triton, run=TritonRunner(), differentiable=True),
        SPLITK,
    ],
    common_check=_common_check,
    heuristic_func=_heuristic,
    overlap=OVERLAP,
    backward=mm_backward,
    jvp=mm_jvp,
    # torch.mm's policy: the autocast dtype on CPU and CUDA
    autocast=AutocastRule(cpu=LOWER_PRECISION, cuda=LOWER_PRECISION),
)
def mm(
    a: torch.Tensor,
    b: torch.Tensor,
    *,
    out: torch.Tensor | None = None,
    out_dtype: torch.dtype | None = None,
    backend: str = "auto",
    skip_check: bool = False,
) -> torch.Tensor:
    """Matrix multiply ``a @ b`` of two 2-D matrices with fp32 accumulation.

    Autograd: every backend differentiates with respect to ``a`` and ``b`` (grad mode on
    and one of them requiring grad), gradients in the inputs' dtypes whatever
    ``out_dtype``.  ``"torch"`` is recorded by autograd as it runs; ``"triton"`` and
    ``"splitk"`` run their kernel inside a :class:`torch.autograd.Function` whose backward
    is :func:`flashinfer.gemm.mm_backward` (two torch GEMMs); with no grad required they
    run as before, after one cheap test.  ``out=`` cannot be differentiated (torch's rule for
    ``torch.mm(..., out=...)``): with grad required every backend refuses it
    (``ValueError``, also a ``RuntimeError``); drop ``out=``, or call under
    ``torch.no_grad()``.

    Args:
        a: ``(M, K)`` matrix; float32, float16 or bfloat16.
        b: ``(K, N)`` matrix of the same dtype and device.
        out: optional ``(M, N)`` output of the result dtype, on the inputs' device.  It
            must not overlap ``a``, ``b`` or itself (e.g. a zero-stride ``expand()`` view);
            disjoint views of one buffer are fine.  ``a`` and ``b`` may alias each other.
        out_dtype: dtype of the result (float32, float16 or bfloat16); ``None`` means the
            inputs' dtype.
        backend: ``"auto"`` (default), ``"torch"`` (reference; CPU and CUDA), ``"triton"``
            (tiled Triton GEMM; CUDA, CPU only under ``TRITON_INTERPRET=1``) or
            ``"splitk"`` (experimental split-K Triton GEMM for ``M <= 64``, ``K >= 1024``;
            naming it opts in and warns once).  ``"auto"`` picks among the backends that
            support the inputs, leaving experimental ones out unless
            ``FLASHINFER_ALLOW_EXPERIMENTAL_AUTO_BACKENDS=1``; inside
            ``flashinfer.autotune()`` it times them and remembers the fastest.
        skip_check: ``True`` skips validating the inputs: a named backend runs unchecked;
            ``"auto"`` still chooses by the backends' support checks (see
            :func:`flashinfer.backend_requirement`).

    Returns:
        The ``(M, N)`` product (``out`` when given).  Under ``torch.autocast`` (CPU, CUDA)
        ``a`` and ``b`` are cast to the autocast dtype first and the product is in it, as
        ``torch.mm``'s are; an ``out=`` call is not cast, as ``torch.mm(out=)`` is not.

    Raises:
        ValueError: malformed inputs (ranks, shapes, dtypes, devices, ``out``), raised
            before any kernel runs; or an explicitly named backend cannot run the inputs.
            ``out`` overlapping as above is refused by every backend before its kernel
            runs, also with ``skip_check=True`` and inside ``flashinfer.autotune()``.  Also
            ``out=`` while grad is required (see Autograd).
        BackendSupportedError: unknown backend, or no backend can run the inputs with
            ``backend="auto"`` (the message lists each backend and why).
    """
    inputs = (a, b, out, out_dtype)
    if backend == "auto":
        return AutoTuner.get().run(mm, mm.implementations, inputs)
    return mm.implementations[backend](inputs)


MM_RUNNERS: dict[str, Any] = mm.implementations  # one autotuner runner per backend

# direct: the dispatcher hands auto calls straight to the tuner with the body's inputs.
AutoTuner.register(mm, MM_RUNNERS, direct=True)


# --------------------------------------------------------------------------------------
# Declared test cases (run against every backend by tests/test_conformance.py and
# tests/experimental/test_conformance_experimental.py)
# --------------------------------------------------------------------------------------


def _reference(
    a: torch.Tensor,
    b: torch.Tensor,
    *,
    out: torch.Tensor | None = None,
    out_dtype: torch.dtype | None = None,
) -> torch.Tensor:
    return (a.double() @ b.double()).to(result_dtype(a, out_dtype))


def _case_inputs(
    m: int,
    n: int,
    k: int,
    dtype: torch.dtype,
    *,
    out_dtype: torch.dtype | None = None,
    with_out: bool = False,
    b_transposed: bool = False,
) -> Any:
    def make(gen: torch.Generator) -> dict[str, Any]:
        a = torch.randn(m, k, generator=gen).to(dtype)
        if b_transposed:  # a (K, N) view of an (N, K) matrix: column-major b
            b = torch.randn(n, k, generator=gen).to(dtype).t()
        else:
            b = torch.randn(k, n, generator=gen).to(dtype)
        inputs: dict[str, Any] = {"a": a, "b": b, "out_dtype": out_dtype}
        if with_out:
            inputs["out"] = torch.full((m, n), float("nan"), dtype=result_dtype(a, out_dtype))
        return inputs

    return make


def _example_inputs(dims: tuple[int, ...], dtype: torch.dtype, device: Any) -> dict[str, Any]:
    m, n, k = dims
    return {
        "a": torch.randn(m, k, dtype=dtype, device=device),
        "b": torch.randn(k, n, dtype=dtype, device=device),
    }


def declare_test_cases() -> None:
    """Declare this op's test cases and CLI inputs (called by ``flashinfer.testing``)."""
    from flashinfer.testing import Case, ExampleInputs, declare_cases, rel_frobenius

    specs: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = [
        ("f32_64x64x64", (64, 64, 64, torch.float32), {}),
        ("f16_33x40x70_ragged", (33, 40, 70, torch.float16), {}),
        ("bf16_17x24x96", (17, 24, 96, torch.bfloat16), {}),
        ("f16_16x32x48_out_f32", (16, 32, 48, torch.float16), {"out_dtype": torch.float32}),
        ("f32_20x36x40_out", (20, 36, 40, torch.float32), {"with_out": True}),
        ("f32_24x40x56_b_colmajor", (24, 40, 56, torch.float32), {"b_transposed": True}),
        ("bf16_4x32x1024_small_m", (4, 32, 1024, torch.bfloat16), {}),
        (
            "f16_8x48x1536_small_m_out_f32",
            (8, 48, 1536, torch.float16),
            {"out_dtype": torch.float32},
        ),
        # every dtype has an odd M and M=1: a kernel losing the last row of an odd count,
        # or launching no program for one row, fails (issue 43 item 21)
        ("f32_7x24x40_odd_rows", (7, 24, 40, torch.float32), {}),
        ("f32_1x40x64_one_row", (1, 40, 64, torch.float32), {}),
        ("f16_1x32x48_one_row_out_f32", (1, 32, 48, torch.float16), {"out_dtype": torch.float32}),
        ("bf16_1x24x96_one_row", (1, 24, 96, torch.bfloat16), {}),
    ]
    declare_cases(
        mm,
        [
            Case(name, _case_inputs(*dims, **kw), _reference, rel_frobenius(), seed=100 + i)
            for i, (name, dims, kw) in enumerate(specs)
        ],
        examples=ExampleInputs(
            shape_help="MxNxK (a is MxK, b is KxN)",
            ndims=(3,),
            make=_example_inputs,
            example="64x64x64,128x64x32",
            tensors=lambda d: {"a": (d[0], d[2]), "b": (d[2], d[1]), "the result": (d[0], d[1])},
        ),
    )


if "flashinfer.testing" in sys.modules:  # else the test kit declares them when it loads
    declare_test_cases()
