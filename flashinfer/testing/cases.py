"""A declared test case (:class:`Case`) and the comparators that judge its result.

Comparators: :func:`allclose` (elementwise, tolerances per dtype) and :func:`rel_frobenius`
(``||actual - expected||_F / ||expected||_F`` bounded per dtype), which is what a matmul
wants: accumulation order moves single elements far more than the whole.  Both compare bool
and integer results exactly unless given a tolerance for their dtype, and refuse (``TypeError``)
a dtype they have no tolerance for.  Everything here
is re-exported by :mod:`flashinfer.testing`, the import path to use.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

Inputs = dict[str, Any]
Comparator = Callable[[Any, Any], None]

ALLCLOSE_TOLERANCES: dict[torch.dtype, tuple[float, float]] = {
    torch.float32: (1e-5, 1e-5),
    torch.float16: (2e-3, 2e-3),
    torch.bfloat16: (1e-2, 1e-2),
}
"""Default ``(rtol, atol)`` per result dtype: about two units in the last place."""

FROBENIUS_BOUNDS: dict[torch.dtype, float] = {
    torch.float32: 1e-5,
    torch.float16: 2e-3,
    torch.bfloat16: 1e-2,
}
"""Default relative Frobenius-error bound per result dtype."""


# --------------------------------------------------------------------------------------
# Comparators
# --------------------------------------------------------------------------------------


def _pairs(actual: Any, expected: Any, path: str = "result") -> Iterable[tuple[str, Any, Any]]:
    if isinstance(expected, (tuple, list)):
        if not isinstance(actual, (tuple, list)) or len(actual) != len(expected):
            raise AssertionError(f"{path}: expected {len(expected)} outputs, got {actual!r}")
        for i, (a, e) in enumerate(zip(actual, expected, strict=True)):
            yield from _pairs(a, e, f"{path}[{i}]")
        return
    if not isinstance(actual, torch.Tensor):
        raise AssertionError(f"{path}: expected a tensor, got {type(actual).__name__}")
    if actual.shape != expected.shape:
        raise AssertionError(
            f"{path}: shape {tuple(actual.shape)}, expected {tuple(expected.shape)}"
        )
    if actual.dtype != expected.dtype:
        raise AssertionError(f"{path}: dtype {actual.dtype}, expected {expected.dtype}")
    yield path, actual, expected


def _is_exact_dtype(dtype: torch.dtype) -> bool:
    """bool and every integer dtype (int8..int64, uint8..uint64, the sub-byte int1..int7 and
    uint1..uint7), recognised by name: torch has no predicate for them, and ``is_signed`` or
    ``iinfo`` miss the unsigned or sub-byte ones.  Quantized and ``bits`` dtypes are not."""
    name = str(dtype).removeprefix("torch.")
    return name == "bool" or name.removeprefix("u").removeprefix("int").isdigit()


def _element(t: torch.Tensor, k: int) -> object:
    try:
        return t.reshape(-1)[k].item()
    except (RuntimeError, NotImplementedError):  # a sub-byte dtype has no scalar: its byte
        return "0x" + bytes(t.reshape(-1)[k : k + 1].view(torch.uint8).tolist()).hex()


def _compare_exactly(path: str, actual: torch.Tensor, expected: torch.Tensor) -> None:
    """Bytewise equality, element by element: no rounding through float64 (an int64 past
    ``2**53`` would lose its low bits) and it holds for dtypes torch has no ``!=`` for."""
    n = expected.numel()
    if n == 0:
        return
    width = expected.dtype.itemsize
    a = actual.detach().cpu().contiguous()
    e = expected.detach().cpu().contiguous()
    a_bytes = a.reshape(-1).view(torch.uint8).reshape(n, width)
    e_bytes = e.reshape(-1).view(torch.uint8).reshape(n, width)
    bad = (a_bytes != e_bytes).any(dim=1)
    if bad.any():
        k = int(torch.nonzero(bad)[0])
        idx = tuple(int(i) for i in torch.unravel_index(torch.tensor(k), e.shape))
        raise AssertionError(
            f"{path}: {int(bad.sum())} of {n} elements differ ({expected.dtype} compares "
            f"exactly); first at {idx}: {_element(a, k)!r} vs expected {_element(e, k)!r}"
        )


def _no_tolerance(path: str, comparator: str, dtype: torch.dtype, defaults: Iterable) -> TypeError:
    known = ", ".join(str(d).removeprefix("torch.") for d in defaults)
    example = "(rtol, atol)" if comparator == "allclose" else "bound"
    return TypeError(
        f"{path}: {comparator} has no default tolerance for {dtype} results (defaults: "
        f"{known}; bool and integer results compare exactly); pass one, e.g. "
        f"{comparator}({{{dtype}: {example}}})"
    )


def allclose(
    tolerances: Mapping[torch.dtype, tuple[float, float]] | None = None,
) -> Comparator:
    """Elementwise ``|actual - expected| <= atol + rtol * |expected|``, tolerances per dtype.

    ``tolerances`` overrides entries of :data:`ALLCLOSE_TOLERANCES`.  Bool and integer results
    compare exactly unless ``tolerances`` names their dtype; a result of another dtype with no
    tolerance (``float64``, complex, float8) raises ``TypeError``.  Shapes and dtypes must
    match exactly; tuples of outputs are compared element by element.
    """
    table = {**ALLCLOSE_TOLERANCES, **(tolerances or {})}

    def compare(actual: Any, expected: Any) -> None:
        for path, a, e in _pairs(actual, expected):
            if e.dtype not in table:
                if not _is_exact_dtype(e.dtype):
                    raise _no_tolerance(path, "allclose", e.dtype, table)
                _compare_exactly(path, a, e)
                continue
            rtol, atol = table[e.dtype]
            a64, e64 = a.detach().cpu().double(), e.detach().cpu().double()
            bad = ~torch.isclose(a64, e64, rtol=rtol, atol=atol)
            if bad.any():
                err = (a64 - e64).abs()
                idx = tuple(int(i) for i in torch.nonzero(bad)[0])
                raise AssertionError(
                    f"{path}: {int(bad.sum())} of {bad.numel()} elements differ beyond "
                    f"rtol={rtol}, atol={atol} ({e.dtype}); max abs error {err.max().item():.3g};"
                    f" first at {idx}: {a64[idx].item()!r} vs expected {e64[idx].item()!r}"
                )

    compare.__qualname__ = f"allclose({table})"
    return compare


def rel_frobenius(bounds: Mapping[torch.dtype, float] | float | None = None) -> Comparator:
    """``||actual - expected||_F <= bound * ||expected||_F``, the bound per result dtype.

    A float applies to every floating-point dtype; a mapping overrides entries of
    :data:`FROBENIUS_BOUNDS`.  Bool and integer results compare exactly unless the mapping
    names their dtype; a result of another dtype with no bound (complex, or ``float64`` with
    the defaults) raises ``TypeError``.
    """
    every_float: float | None = None
    if isinstance(bounds, (int, float)):
        every_float = float(bounds)
        table = dict.fromkeys(FROBENIUS_BOUNDS, every_float)
    else:
        table = {**FROBENIUS_BOUNDS, **(bounds or {})}

    def bound_for(dtype: torch.dtype) -> float | None:
        if dtype in table:
            return table[dtype]
        return every_float if dtype.is_floating_point else None

    def compare(actual: Any, expected: Any) -> None:
        for path, a, e in _pairs(actual, expected):
            bound = bound_for(e.dtype)
            if bound is None:
                if not _is_exact_dtype(e.dtype):
                    raise _no_tolerance(path, "rel_frobenius", e.dtype, table)
                _compare_exactly(path, a, e)
                continue
            a64, e64 = a.detach().cpu().double(), e.detach().cpu().double()
            if not torch.isfinite(a64).all():
                raise AssertionError(f"{path}: result has non-finite values")
            norm = e64.norm().item()
            err = (a64 - e64).norm().item()
            rel = err / norm if norm else err
            if rel > bound:
                raise AssertionError(
                    f"{path}: relative Frobenius error {rel:.3g} exceeds {bound:g} ({e.dtype})"
                )

    compare.__qualname__ = f"rel_frobenius({table})"
    return compare


# --------------------------------------------------------------------------------------
# Cases
# --------------------------------------------------------------------------------------


def _to_device(value: Any, device: torch.device | str) -> Any:
    return value.to(device) if isinstance(value, torch.Tensor) else value


@dataclass(frozen=True)
class Case:
    """One declared test case of an op.

    Attributes:
        name: unique among the op's cases; part of the test id.
        inputs: ``inputs(generator) -> {parameter: value}``, the op's keyword arguments
            (without ``backend``), built on CPU from the seeded ``torch.Generator``; tensors
            are moved to the test's device afterwards, so every device sees the same values.
        reference: ``reference(**inputs) -> expected``, computed on a copy of the inputs
            before the op runs (so in-place ops are fine).
        compare: ``compare(actual, expected)`` raising ``AssertionError`` on a mismatch.
        seed: seed of the generator handed to ``inputs``.
        result: ``result(inputs, returned) -> actual``; by default the returned value.  An
            in-place op returns what it wrote, e.g. ``lambda ins, _: ins["input"]``.
    """

    name: str
    inputs: Callable[[torch.Generator], Inputs]
    reference: Callable[..., Any]
    compare: Comparator
    seed: int = 0
    result: Callable[[Inputs, Any], Any] | None = field(default=None)

    def make_inputs(self, device: torch.device | str = "cpu") -> Inputs:
        """The case's inputs on ``device``, freshly generated from the seed."""
        generator = torch.Generator().manual_seed(self.seed)
        return {k: _to_device(v, device) for k, v in self.inputs(generator).items()}


def expected_output(case: Case, args: Inputs) -> Any:
    """``case``'s reference for ``args``, computed on copies of them (an in-place op can
    then run on the originals)."""
    return case.reference(
        **{k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in args.items()}
    )


def op_key(op: Any) -> str:
    return getattr(op, "api_key", None) or f"{op.__module__}.{op.__qualname__}"
