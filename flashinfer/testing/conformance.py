"""A declared test case (:class:`Case`), its comparators, and running it against one backend
(:class:`ConformanceItem`).  Import these from :mod:`flashinfer.testing`."""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from flashinfer.gating.warn_once import ExperimentalWarning

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
    # bool and every integer dtype, by name: torch has no predicate for them all.
    name = str(dtype).removeprefix("torch.")
    return name == "bool" or name.removeprefix("u").removeprefix("int").isdigit()


def _element(t: torch.Tensor, k: int) -> object:
    try:
        return t.reshape(-1)[k].item()
    except (RuntimeError, NotImplementedError):  # a sub-byte dtype has no scalar: its byte
        return "0x" + bytes(t.reshape(-1)[k : k + 1].view(torch.uint8).tolist()).hex()


def _compare_exactly(path: str, actual: torch.Tensor, expected: torch.Tensor) -> None:
    # Bytewise: no rounding through float64, and dtypes torch has no ``!=`` for.
    n, width = expected.numel(), expected.dtype.itemsize
    if n == 0:
        return
    a, e = (t.detach().cpu().contiguous() for t in (actual, expected))
    bad = (a.reshape(-1).view(torch.uint8) != e.reshape(-1).view(torch.uint8)).reshape(n, width)
    bad = bad.any(dim=1)
    if bad.any():
        k = int(torch.nonzero(bad)[0])
        idx = tuple(int(i) for i in torch.unravel_index(torch.tensor(k), e.shape))
        raise AssertionError(
            f"{path}: {int(bad.sum())} of {n} elements differ ({expected.dtype} compares "
            f"exactly); first at {idx}: {_element(a, k)!r} vs expected {_element(e, k)!r}"
        )


def _comparator(
    name: str,
    table: Mapping[torch.dtype, Any],
    every_float: float | None,
    check: Callable[[str, torch.Tensor, torch.Tensor, Any, torch.dtype], None],
) -> Comparator:
    # Each output against its dtype's tolerance (``every_float`` for other floats); bool and
    # integers without one compare exactly; any other dtype without one is a TypeError.

    def compare(actual: Any, expected: Any) -> None:
        for path, a, e in _pairs(actual, expected):
            tolerance = table.get(e.dtype, every_float if e.dtype.is_floating_point else None)
            if tolerance is not None:
                a64, e64 = a.detach().cpu().double(), e.detach().cpu().double()
                check(path, a64, e64, tolerance, e.dtype)
            elif _is_exact_dtype(e.dtype):
                _compare_exactly(path, a, e)
            else:
                known = ", ".join(str(d).removeprefix("torch.") for d in table)
                example = "(rtol, atol)" if name == "allclose" else "bound"
                raise TypeError(
                    f"{path}: {name} has no default tolerance for {e.dtype} results (defaults: "
                    f"{known}; bool and integer results compare exactly); pass one, e.g. "
                    f"{name}({{{e.dtype}: {example}}})"
                )

    compare.__qualname__ = f"{name}({dict(table)})"
    return compare


def allclose(
    tolerances: Mapping[torch.dtype, tuple[float, float]] | None = None,
) -> Comparator:
    """Elementwise ``|actual - expected| <= atol + rtol * |expected|``, per dtype
    (``tolerances`` overrides :data:`ALLCLOSE_TOLERANCES`); shapes and dtypes must match."""

    def check(path: str, a: torch.Tensor, e: torch.Tensor, tol: Any, dtype: torch.dtype) -> None:
        rtol, atol = tol
        bad = ~torch.isclose(a, e, rtol=rtol, atol=atol)
        if bad.any():
            idx = tuple(int(i) for i in torch.nonzero(bad)[0])
            raise AssertionError(
                f"{path}: {int(bad.sum())} of {bad.numel()} elements differ beyond "
                f"rtol={rtol}, atol={atol} ({dtype}); max abs error "
                f"{(a - e).abs().max().item():.3g}; first at {idx}: {a[idx].item()!r} vs "
                f"expected {e[idx].item()!r}"
            )

    return _comparator("allclose", {**ALLCLOSE_TOLERANCES, **(tolerances or {})}, None, check)


def rel_frobenius(bounds: Mapping[torch.dtype, float] | float | None = None) -> Comparator:
    """``||actual - expected||_F <= bound * ||expected||_F`` per dtype (a float: every
    floating dtype; a mapping overrides :data:`FROBENIUS_BOUNDS`): what a matmul wants."""

    def check(path: str, a: torch.Tensor, e: torch.Tensor, bound: Any, dtype: torch.dtype) -> None:
        if not torch.isfinite(a).all():
            raise AssertionError(f"{path}: result has non-finite values")
        norm, err = e.norm().item(), (a - e).norm().item()
        rel = err / norm if norm else err
        if rel > bound:
            raise AssertionError(
                f"{path}: relative Frobenius error {rel:.3g} exceeds {bound:g} ({dtype})"
            )

    if isinstance(bounds, (int, float)):
        return _comparator(
            "rel_frobenius", dict.fromkeys(FROBENIUS_BOUNDS, float(bounds)), float(bounds), check
        )
    return _comparator("rel_frobenius", {**FROBENIUS_BOUNDS, **(bounds or {})}, None, check)


@dataclass(frozen=True)
class Case:
    """One declared test case: ``name`` (unique per op), ``inputs(generator) -> {parameter:
    value}`` (built on CPU from ``seed``, then moved), ``reference(**inputs)`` (run first, on
    copies), ``compare(actual, expected)`` and ``result(inputs, returned) -> actual``
    (default: what the op returned; an in-place op says what it wrote)."""

    name: str
    inputs: Callable[[torch.Generator], Inputs]
    reference: Callable[..., Any]
    compare: Comparator
    seed: int = 0
    result: Callable[[Inputs, Any], Any] | None = field(default=None)

    def make_inputs(self, device: torch.device | str = "cpu") -> Inputs:
        """The case's inputs on ``device``, freshly generated from the seed."""
        made = self.inputs(torch.Generator().manual_seed(self.seed))
        return {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in made.items()}


def expected_output(case: Case, args: Inputs) -> Any:
    return case.reference(
        **{k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in args.items()}
    )


def op_key(op: Any) -> str:
    return getattr(op, "api_key", None) or f"{op.__module__}.{op.__qualname__}"


def api_name_of(op: Any) -> str:
    return getattr(op, "api_name", None) or op.__name__


def support_reason(op: Any, backend: str | None, inputs: Inputs) -> str | None:
    """Why ``backend`` of ``op`` does not support ``inputs`` (``"<backend>: <reason>"``, as
    ``backend="auto"`` lists it, without running the op), or ``None`` if it does."""
    if backend is None:
        return None
    args, kwargs = call_arguments(op, inputs)
    reason = op.dispatcher.backend_support_reason(backend, *args, **kwargs)
    return None if reason is None else f"{backend}: {reason}"


def call_arguments(op: Any, inputs: Inputs) -> tuple[list[Any], dict[str, Any]]:
    """``(args, kwargs)`` passing ``inputs`` to ``op``: positional-only parameters and
    ``*args`` (with those before it) by position, the rest by keyword."""
    params = list(inspect.signature(op).parameters.values())
    rest = dict(inputs)
    spread = any(p.kind is p.VAR_POSITIONAL and p.name in rest for p in params)
    args: list[Any] = []
    for p in params:
        if p.kind is p.VAR_POSITIONAL:
            args.extend(rest.pop(p.name, ()))
            break
        by_position = p.kind is p.POSITIONAL_ONLY or (spread and p.kind is p.POSITIONAL_OR_KEYWORD)
        if not by_position or p.name not in rest:
            break
        args.append(rest.pop(p.name))
    return args, rest


def call_quietly(op: Any, inputs: Inputs, options: dict[str, Any]) -> Any:
    """``op(inputs, **options)``, experimental warnings silenced (run on purpose)."""
    args, kwargs = call_arguments(op, inputs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ExperimentalWarning)
        return op(*args, **kwargs, **options)


def run_and_compare(op: Any, case: Case, args: Inputs, options: dict[str, Any]) -> None:
    expected = expected_output(case, args)
    returned = call_quietly(op, args, options)
    case.compare(returned if case.result is None else case.result(args, returned), expected)


@dataclass(frozen=True)
class ConformanceItem:
    """One (op, backend, case) triple; ``backend`` is ``None`` for an API without backends."""

    op: Any
    backend: str | None
    case: Case

    @property
    def experimental(self) -> bool:
        """Whether the op is an experimental API or the backend an experimental backend."""
        if getattr(self.op, "is_experimental", False):
            return True
        return self.backend not in (None, "auto") and self.op.is_experimental_backend(self.backend)

    def __str__(self) -> str:
        return f"{api_name_of(self.op)}-{self.backend or 'api'}-{self.case.name}"

    def run(self, device: torch.device | str = "cpu") -> str | None:
        """``None`` if the case matched on ``device``, the reason if unsupported;
        ``AssertionError`` on a mismatch."""
        inputs = self.case.make_inputs(device)
        reason = support_reason(self.op, self.backend, inputs)
        if reason is None:
            options = {} if self.backend is None else {"backend": self.backend}
            run_and_compare(self.op, self.case, inputs, options)
        return reason


def conformance_devices() -> list[Any]:
    """``"cpu"``, and ``"cuda"`` marked ``gpu``: a conformance test's devices."""
    import pytest

    return ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]


def run_or_skip(item: ConformanceItem, device: str) -> None:
    """Run ``item`` in a test: skip with the backend's reason when unsupported."""
    import pytest

    reason = item.run(device)
    if reason is not None:
        pytest.skip(reason)
