"""Matrix multiply: :func:`mm`, a stable API with ``"torch"`` and ``"triton"`` backends and the
experimental ``"splitk"`` backend (``flashinfer/experimental/splitk_gemm``).

Every backend is also an autotuner runner (:data:`MM_RUNNERS`): ``backend="auto"`` goes
through :class:`flashinfer.autotuner.AutoTuner`, which only ever sees the dispatcher's
candidates for the call (so the experimental gate applies to tuning too).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import torch

from .aliasing import OverlapRule
from .api_logging import flashinfer_api
from .backend_dispatch import (
    backend_requirement,
    find_compute_capability,
    supported_compute_capability,
)

# The only module-level import from flashinfer.experimental: the light checker.
from .experimental.splitk_gemm.support import check_splitk
from .kernels import bf16_reason, offsets_reason, triton_device_reason

try:
    from .autotuner import AutoTuner
except ModuleNotFoundError as _exc:  # built without the autotuner: see mm's body
    if _exc.name != "flashinfer.autotuner":
        raise
    AutoTuner = None  # type: ignore[assignment,misc]

__all__ = ["MM_RUNNERS", "MM_TRITON_TACTICS", "mm"]

SUPPORTED_DTYPES = (torch.float32, torch.float16, torch.bfloat16)

_TORCH_CCS = [60, 61, 70, 75, 80, 86, 87, 89, 90, 100, 101, 103, 110, 120, 121]
_TRITON_CCS = [75, 80, 86, 87, 89, 90, 100, 101, 103, 110, 120, 121]

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


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


def _result_dtype(a: torch.Tensor, out_dtype: torch.dtype | None) -> torch.dtype:
    return a.dtype if out_dtype is None else out_dtype


# --------------------------------------------------------------------------------------
# Shared validation
# --------------------------------------------------------------------------------------


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
                f"mm: {name} has dtype {_dtype_name(t.dtype)}; supported are float32, "
                "float16 and bfloat16"
            )
    if a.shape[1] != b.shape[0]:
        raise ValueError(
            f"mm: inner dimensions differ: a is {tuple(a.shape)} (K={a.shape[1]}) and b is "
            f"{tuple(b.shape)} (K={b.shape[0]}); a must be (M, K) and b (K, N)"
        )
    if a.dtype != b.dtype:
        raise ValueError(
            f"mm: a is {_dtype_name(a.dtype)} but b is {_dtype_name(b.dtype)}; cast one so "
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
        want = _result_dtype(a, out_dtype)
        if out.dtype != want:
            raise ValueError(
                f"mm: out has dtype {_dtype_name(out.dtype)} but the result is "
                f"{_dtype_name(want)} (out_dtype, or the inputs' dtype when out_dtype is None); "
                f"pass out_dtype=torch.{_dtype_name(out.dtype)} or an out of that dtype"
            )
        if out.device != a.device:
            raise ValueError(f"mm: out is on {out.device} but the inputs are on {a.device}")
    return True


OVERLAP = OverlapRule("mm", ("out",), ("a", "b"))
"""What :func:`mm` writes and reads: ``out`` may not overlap ``a``, ``b`` or itself (no
backend computes in place).  Every runner checks it before its kernel, so every path to a
kernel goes through it: explicit, ``"auto"``, routed and tuning calls, ``skip_check=True``,
and direct use of :data:`MM_RUNNERS`."""


# --------------------------------------------------------------------------------------
# Backend "torch": the reference
# --------------------------------------------------------------------------------------


@supported_compute_capability(_TORCH_CCS, cpu=True)
def _check_torch(a: torch.Tensor) -> bool:
    """The reference accepts every input the shared validation accepts."""
    return True


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
            OVERLAP.check(out, a, b)
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


@supported_compute_capability(_TRITON_CCS, cpu=True)
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


def _np2(n: int) -> int:
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


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


def _run_tiled(
    runner: Any,
    inputs: tuple,
    tactic: Any,
    space: Sequence[Any],
    backend: str,
    launch: Callable[[torch.Tensor, torch.Tensor, torch.Tensor, Any], None],
) -> torch.Tensor:
    """Run a tiled Triton GEMM (the ``triton`` and ``splitk`` runners): ``tactic`` defaults to
    ``runner``'s first for these inputs and must otherwise be in ``space`` (the tactics of
    ``backend``); ``launch(a, b, c, tactic)`` writes ``c``: ``out``, or a fresh result."""
    a, b, out, out_dtype = inputs
    if out is not None:
        OVERLAP.check(out, a, b)
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


class TritonRunner:
    """The tiled Triton GEMM; tactics are :data:`MM_TRITON_TACTICS` entries."""

    def tactic_space(self) -> Sequence[Any]:
        """Every tactic (tile shape, warps, stages) the backend may use."""
        return MM_TRITON_TACTICS

    def tactics(self, inputs: tuple) -> Sequence[Any]:
        """Tactics that fit these sizes (and, on CUDA, the device's shared memory)."""
        a, b = inputs[0], inputs[1]
        idx = _triton_tactics(
            _np2(a.shape[0]),
            _np2(b.shape[1]),
            _np2(a.shape[1]),
            a.element_size(),
            _smem_limit(a.device),
        )
        return [MM_TRITON_TACTICS[i] for i in idx]

    def __call__(self, inputs: tuple, tactic: Any = None) -> torch.Tensor:
        """Run ``a @ b`` for ``inputs = (a, b, out, out_dtype)`` with ``tactic``."""
        from .kernels.mm_triton import matmul  # first use imports Triton

        return _run_tiled(self, inputs, tactic, MM_TRITON_TACTICS, "triton", matmul)


# --------------------------------------------------------------------------------------
# Backend "splitk" (experimental)
# --------------------------------------------------------------------------------------


class SplitKRunner:
    """The experimental split-K GEMM; the kernel is imported on first use."""

    def tactic_space(self) -> Sequence[Any]:
        """Every split-K tactic (tile shape, number of K splits, warps, stages)."""
        from .experimental.splitk_gemm.support import TACTIC_SPACE

        return TACTIC_SPACE

    def tactics(self, inputs: tuple) -> Sequence[Any]:
        """Split-K tactics worth timing for these sizes, default first."""
        from .experimental.splitk_gemm.support import valid_tactics

        a, b = inputs[0], inputs[1]
        return valid_tactics(a.shape[0], b.shape[1], a.shape[1])

    def __call__(self, inputs: tuple, tactic: Any = None) -> torch.Tensor:
        """Run ``a @ b`` for ``inputs = (a, b, out, out_dtype)`` with ``tactic``."""
        from .experimental.splitk_gemm import TACTIC_SPACE, splitk_mm

        return _run_tiled(self, inputs, tactic, TACTIC_SPACE, "splitk", splitk_mm)


MM_RUNNERS: dict[str, Any] = {
    "torch": TorchRunner(),
    "triton": TritonRunner(),
    "splitk": SplitKRunner(),
}
"""One autotuner runner per backend of :func:`mm`."""


# --------------------------------------------------------------------------------------
# Heuristic and the API
# --------------------------------------------------------------------------------------


def _heuristic(
    suitable: list[str],
    a: torch.Tensor,
    b: torch.Tensor,
    *,
    out: torch.Tensor | None = None,
    out_dtype: torch.dtype | None = None,
    backend: str = "auto",
) -> list[str]:
    """Fastest first.  CPU: torch (native BLAS) first; Triton runs there only through its
    interpreter, and split-K launches more interpreted programs than the plain kernel.
    CUDA: split-K first when it is a candidate (its checker admits only small-M, large-K
    problems, where a plain GEMM leaves most SMs idle), then torch (cuBLAS), then the plain
    Triton kernel; the autotuner measures instead of guessing."""
    if a.is_cuda:
        order = ("splitk", "torch", "triton")
    else:
        order = ("torch", "triton", "splitk")
    rank = {name: i for i, name in enumerate(order)}
    return sorted(suitable, key=lambda name: rank.get(name, len(order)))


@flashinfer_api
@backend_requirement(
    {"torch": _check_torch, "triton": _check_triton, "splitk": check_splitk},
    common_check=_common_check,
    heuristic_func=_heuristic,
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
        The ``(M, N)`` product (``out`` when given).

    Raises:
        ValueError: malformed inputs (ranks, shapes, dtypes, devices, ``out``), raised
            before any kernel runs; or an explicitly named backend cannot run the inputs.
            ``out`` overlapping as above is refused by every backend before its kernel
            runs, also with ``skip_check=True`` and inside ``flashinfer.autotune()``.
        BackendSupportedError: unknown backend, or no backend can run the inputs with
            ``backend="auto"`` (the message lists each backend and why).
    """
    inputs = (a, b, out, out_dtype)
    if backend == "auto":
        if AutoTuner is None:
            # AUTOTUNER FALLBACK: without flashinfer.autotuner, run the heuristic's first
            # candidate with its default tactic.
            return MM_RUNNERS[mm.suitable_auto_backends[0]](inputs)
        return AutoTuner.get().run(mm, MM_RUNNERS, inputs)
    return MM_RUNNERS[backend](inputs)


if AutoTuner is not None:
    # direct: the dispatcher hands auto calls straight to the tuner with inputs
    # (a, b, out, out_dtype), the tuple the body builds above.
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
    return (a.double() @ b.double()).to(_result_dtype(a, out_dtype))


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
            inputs["out"] = torch.full((m, n), float("nan"), dtype=_result_dtype(a, out_dtype))
        return inputs

    return make


def _declare_cases() -> None:
    from .testing import Case, declare_cases, rel_frobenius

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
    ]
    declare_cases(
        mm,
        [
            Case(name, _case_inputs(*dims, **kw), _reference, rel_frobenius(), seed=100 + i)
            for i, (name, dims, kw) in enumerate(specs)
        ],
        overlap=OVERLAP,
    )


_declare_cases()
