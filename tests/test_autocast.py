"""Mixed precision (issue 31, item 5): under ``torch.autocast`` each op follows the rule its
torch counterpart follows (``torch.mm``: the autocast dtype; ``torch.rms_norm``: not cast
on CPU), eagerly, compiled and through ``torch.ops.flashinfer.*``, on every stable backend.

- the result's dtype is the counterpart's, and its values are the counterpart's within
  the autocast dtype's tolerance, drawn over shapes, both autocast dtypes and the routes;
- gradients under autocast reach the float32 leaves and match the counterpart's;
- ``out=`` is never cast, as torch's ``out=`` forms are not;
- a rule's float32 policy (``torch.rms_norm`` on CUDA) on an op a test declares for CPU;
- leaving and entering autocast recompiles once per state, not per call;
- a rule that cannot hold is refused at decoration, naming the API.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch._dynamo.testing import CompileCounter

import flashinfer
from flashinfer.backend_dispatch import (
    FP32,
    LOWER_PRECISION,
    AutocastRule,
    Backend,
    backend_requirement,
)
from flashinfer.backend_families import TORCH, backend_family

flashinfer.load_all_apis()

DTYPES = [torch.bfloat16, torch.float16]
TOLERANCE = {torch.bfloat16: 2e-2, torch.float16: 2e-3, torch.float32: 1e-5}


@pytest.fixture(autouse=True)
def _fresh_dynamo() -> Iterator[None]:
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def _counterpart(name: str) -> Callable[..., torch.Tensor]:
    """torch's own op, as a model would call it."""
    if name == "mm":
        return torch.mm
    return lambda x, w: F.rms_norm(x, (x.shape[-1],), w, 1e-6)


def _inputs(name: str, rows: int, hidden: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(rows * 1000 + hidden)
    if name == "mm":
        return torch.randn(rows, hidden, generator=g), torch.randn(hidden, 8, generator=g)
    return torch.randn(rows, hidden, generator=g), torch.rand(hidden, generator=g) + 0.5


def _route(name: str, route: str, backend: str) -> Callable[..., torch.Tensor]:
    op = getattr(flashinfer, name)
    if route == "eager":
        return lambda x, y: op(x, y, backend=backend)
    if route == "operator":
        return lambda x, y: getattr(torch.ops.flashinfer, name)(x, y, backend=backend)
    return torch.compile(lambda x, y: op(x, y, backend=backend), fullgraph=True)


def _cases() -> list[Any]:
    return [
        pytest.param(name, backend, id=f"{name}-{backend}")
        for name in ("rmsnorm", "mm")
        for backend in ["auto", *getattr(flashinfer, name).stable_backends]
    ]


@pytest.mark.parametrize(("name", "backend"), _cases())
@settings(max_examples=8, deadline=None)
@given(
    route=st.sampled_from(["eager", "operator", "compiled"]),
    dtype=st.sampled_from(DTYPES),
    rows=st.integers(1, 9),
    hidden=st.sampled_from([16, 32, 48]),
    weight_16bit=st.booleans(),
)
def test_the_result_follows_the_torch_counterparts_rule(
    name: str,
    backend: str,
    route: str,
    dtype: torch.dtype,
    rows: int,
    hidden: int,
    weight_16bit: bool,
) -> None:
    x, y = _inputs(name, rows, hidden)
    if weight_16bit:  # a model already in the autocast dtype (activations or weights)
        y = y.to(dtype)
    torch._dynamo.reset()
    call = _route(name, route, backend)
    with torch.autocast("cpu", dtype):
        expected = _counterpart(name)(x, y)
        got = call(x, y)
    assert got.dtype == expected.dtype, (route, got.dtype, expected.dtype)
    tol = TOLERANCE[expected.dtype]
    torch.testing.assert_close(got.float(), expected.float(), rtol=tol, atol=tol)


@pytest.mark.parametrize(("name", "backend"), _cases())
@pytest.mark.parametrize("route", ["eager", "compiled"])
def test_gradients_under_autocast_match_the_counterparts(
    name: str, backend: str, route: str
) -> None:
    op = getattr(flashinfer, name)
    if backend != "auto" and not op.backends[backend].differentiable and backend != "torch":
        pytest.skip(f"{name}'s {backend} backend does not differentiate")
    x, y = _inputs(name, 4, 32)
    grads = []
    for fn in (_counterpart(name), _route(name, route, backend)):
        leaves = [x.clone().requires_grad_(), y.clone().requires_grad_()]
        with torch.autocast("cpu", torch.bfloat16):
            result = fn(*leaves)
        result.float().square().sum().backward()
        assert all(t.grad is not None and t.grad.dtype == torch.float32 for t in leaves)
        grads.append([t.grad for t in leaves])
    for got, expected in zip(grads[1], grads[0], strict=True):
        torch.testing.assert_close(got, expected, rtol=3e-2, atol=3e-2)


OUT_DTYPES = [None, torch.float32, torch.float16, torch.bfloat16]


@pytest.mark.parametrize("backend", ["auto", *flashinfer.mm.stable_backends])
@settings(max_examples=12, deadline=None)
@given(
    route=st.sampled_from(["eager", "operator", "compiled"]),
    autocast_dtype=st.sampled_from(DTYPES),
    dtype=st.sampled_from([torch.float32, *DTYPES]),
    out_dtype=st.sampled_from(OUT_DTYPES),
    with_out=st.booleans(),
    m=st.integers(1, 9),
    k=st.sampled_from([16, 48, 64]),
)
def test_mm_under_autocast_is_mm_of_the_cast_inputs_with_its_out_dtype(
    backend: str,
    route: str,
    autocast_dtype: torch.dtype,
    dtype: torch.dtype,
    out_dtype: torch.dtype | None,
    with_out: bool,
    m: int,
    k: int,
) -> None:
    """Issue 43, item 1: autocast casts the inputs, and nothing else: the product is the
    one of the cast inputs, accumulated in float32 whatever ``out_dtype`` (the torch
    backend's own ``torch.mm`` is not cast again), bit for bit, on every backend and route.
    ``out=`` is not cast.  Compiled through ``aot_eager``: inductor drops a round trip
    through a 16-bit dtype (``emulate_precision_casts``), more precise than eager."""
    g = torch.Generator().manual_seed(m * 100 + k)
    a = torch.randn(m, k, generator=g).to(dtype)
    b = torch.randn(k, 8, generator=g).to(dtype)

    def call(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor | None) -> torch.Tensor:
        return flashinfer.mm(a, b, out=out, out_dtype=out_dtype, backend=backend)

    def empty_out() -> torch.Tensor | None:
        want = out_dtype or dtype
        return torch.full((m, 8), float("nan"), dtype=want) if with_out else None

    def operator(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor | None) -> torch.Tensor:
        if out is None:
            return torch.ops.flashinfer.mm(a, b, out_dtype=out_dtype, backend=backend)
        torch.ops.flashinfer.mm.out(a, b, out=out, out_dtype=out_dtype, backend=backend)
        return out

    routed: Callable[..., torch.Tensor] = {
        "eager": call,
        "operator": operator,
        "compiled": torch.compile(call, backend="aot_eager", fullgraph=True),
    }[route]
    with torch.autocast("cpu", autocast_dtype):
        got = routed(a, b, empty_out())
    cast = dtype if with_out else autocast_dtype  # out= calls are not cast
    expected = call(a.to(cast), b.to(cast), empty_out())
    assert got.dtype == expected.dtype, (got.dtype, expected.dtype)
    assert torch.equal(got, expected), (got - expected).abs().max()


def test_out_is_never_cast() -> None:
    """torch's out= forms are not autocast: mm(out=) runs in out's dtype, float32 here."""
    a, b = _inputs("mm", 4, 32)
    for backend in flashinfer.mm.stable_backends:
        out = torch.empty(4, 8)
        with torch.autocast("cpu", torch.bfloat16):
            flashinfer.mm(a, b, out=out, backend=backend)
        torch.testing.assert_close(out, a @ b, rtol=1e-5, atol=1e-4)


def test_entering_and_leaving_autocast_recompiles_once_per_state() -> None:
    a, b = _inputs("mm", 4, 32)
    counted = CompileCounter()
    compiled = torch.compile(lambda a, b: flashinfer.mm(a, b), backend=counted, fullgraph=True)
    for _ in range(3):
        assert compiled(a, b).dtype == torch.float32
        with torch.autocast("cpu", torch.bfloat16):
            assert compiled(a, b).dtype == torch.bfloat16
    assert counted.frame_count == 2


def _declared_op(rule: AutocastRule) -> Any:
    @backend_family(TORCH)
    def check(x):
        return True

    def run(x, w):
        return x * w

    @backend_requirement([Backend("reference", check=check, run=run)], autocast=rule)
    def scaled(x: torch.Tensor, w: torch.Tensor, *, backend: str = "auto") -> torch.Tensor:
        if backend == "auto":
            backend = scaled.suitable_auto_backends[0]
        return scaled.implementations[backend](x, w)

    return scaled


@pytest.mark.usefixtures("isolated_op_registry")
@pytest.mark.parametrize("route", ["eager", "operator", "compiled"])
def test_the_float32_policy_casts_16_bit_inputs_up(route: str) -> None:
    op = _declared_op(AutocastRule(cpu=FP32))
    x, w = torch.randn(4, 8, dtype=torch.bfloat16), torch.randn(8, dtype=torch.bfloat16)
    call = {
        "eager": op,
        "operator": op.dispatcher.torch_op.default,
        "compiled": torch.compile(lambda x, w: op(x, w), fullgraph=True),
    }[route]
    assert call(x, w).dtype == torch.bfloat16  # no autocast: no cast
    with torch.autocast("cpu", torch.bfloat16):
        got = call(x, w)
    assert got.dtype == torch.float32
    torch.testing.assert_close(got, x.float() * w.float())


@pytest.mark.usefixtures("isolated_op_registry")
@pytest.mark.parametrize("rule", [None, AutocastRule(cpu=LOWER_PRECISION)], ids=["none", "rule"])
def test_an_op_with_a_fake_gives_metadata_on_meta_tensors_with_or_without_a_rule(
    rule: AutocastRule | None,
) -> None:
    """Declaring a rule or not leaves the operator's other kernels as they were: an op with
    a fake result answers meta tensors (a misplaced registration once gave every op
    without a rule a Meta kernel that refuses)."""

    @backend_family(TORCH)
    def check(x):
        return True

    @backend_requirement(
        [Backend("reference", check=check, run=lambda x: x.sum(-1))],
        fake=lambda x: x.new_empty(x.shape[:-1]),
        autocast=rule,
    )
    def row_sums(x: torch.Tensor, *, backend: str = "auto") -> torch.Tensor:
        return row_sums.implementations["reference"](x)

    result = row_sums.dispatcher.torch_op.default(torch.empty(3, 5, device="meta"))
    assert result.shape == (3,) and result.is_meta


@pytest.mark.usefixtures("isolated_op_registry")
def test_a_nested_call_does_not_cast_again() -> None:
    """A backend that calls another op with the cast arguments: the inner op sees them as
    they are (inside a cast call), however its own rule reads."""
    inner = _declared_op(AutocastRule(cpu=FP32))
    seen: list[torch.dtype] = []

    @backend_family(TORCH)
    def check(x):
        return True

    def run(x, w):
        seen.append(x.dtype)
        return inner(x, w)

    @backend_requirement(
        [Backend("reference", check=check, run=run)],
        autocast=AutocastRule(cpu=LOWER_PRECISION),
    )
    def outer(x: torch.Tensor, w: torch.Tensor, *, backend: str = "auto") -> torch.Tensor:
        return outer.implementations["reference"](x, w)

    with torch.autocast("cpu", torch.bfloat16):
        result = outer(torch.randn(2, 4), torch.randn(4))
    assert seen == [torch.bfloat16] and result.dtype == torch.bfloat16


@pytest.mark.usefixtures("isolated_op_registry")
@pytest.mark.parametrize(
    ("rule", "error", "match"),
    [
        (lambda: AutocastRule(cpu="bf16"), ValueError, r"cpu='bf16' is not a policy"),
        (lambda: "lower_precision_fp", TypeError, r"autocast= takes an AutocastRule"),
    ],
    ids=["bad-policy", "not-a-rule"],
)
def test_a_rule_that_cannot_hold_is_refused(
    rule: Callable[[], Any], error: type, match: str
) -> None:
    with pytest.raises(error, match=match):
        _declared_op(rule())
