"""Forward-mode AD through compiled and operator calls (issue 42, item 6): a dual tensor's
tangent is the one the eager call gives, on every route, and ``torch.func.jvp`` of a
compiled function is right and leaves no forward-AD level open behind it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.autograd.forward_ad as fwAD

import flashinfer

W = torch.rand(8) + 0.5
B = torch.randn(8, 3)


def _mm(x: torch.Tensor, **kw: Any) -> torch.Tensor:
    return flashinfer.mm(x, B, **kw)


def _rmsnorm(x: torch.Tensor, **kw: Any) -> torch.Tensor:
    return flashinfer.rmsnorm(x, W, **kw)


OPS: dict[str, tuple[Callable[..., torch.Tensor], Callable[[torch.Tensor], torch.Tensor]]] = {
    "mm": (_mm, lambda x: x @ B),
    "rmsnorm": (_rmsnorm, lambda x: torch.nn.functional.rms_norm(x, (8,), W, 1e-6)),
}


def _route(route: str, name: str, backend: str) -> Callable[[torch.Tensor], torch.Tensor]:
    fn = OPS[name][0]
    if route == "operator":
        operator = getattr(flashinfer, name).dispatcher.torch_op.default
        other = B if name == "mm" else W
        return lambda x: operator(x, other, backend=backend)
    compiled = torch.compile(lambda x: fn(x, backend=backend) * 2, backend="aot_eager")
    if route == "compiled before the level":
        compiled(torch.randn(4, 8))  # its graph is traced outside any dual level
    return lambda x: compiled(x) / 2


def _backends(name: str) -> list[str]:
    return ["auto", *getattr(flashinfer, name).stable_backends]


@pytest.mark.parametrize("route", ["compiled", "compiled before the level", "operator"])
@pytest.mark.parametrize(("name", "backend"), [(n, b) for n in OPS for b in _backends(n)])
def test_a_dual_tensor_gets_the_eager_tangent_on_every_route(
    name: str, backend: str, route: str
) -> None:
    torch._dynamo.reset()
    call = _route(route, name, backend)
    x, tangent = torch.randn(4, 8), torch.randn(4, 8)
    reference = OPS[name][1]
    with fwAD.dual_level():
        out = call(fwAD.make_dual(x, tangent))
        got = fwAD.unpack_dual(out).tangent
    with fwAD.dual_level():
        expected = fwAD.unpack_dual(reference(fwAD.make_dual(x, tangent))).tangent
    assert got is not None, "the tangent was dropped"
    torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("compiler", ["aot_eager", "inductor"])
@pytest.mark.parametrize("name", list(OPS))
def test_jvp_of_a_compiled_function_is_right_and_leaves_no_level_open(
    name: str, compiler: str
) -> None:
    torch._dynamo.reset()
    fn, reference = OPS[name]
    compiled = torch.compile(lambda x: fn(x) * 2, backend=compiler)
    x, tangent = torch.randn(4, 8), torch.randn(4, 8)
    for _ in range(2):  # traced under jvp, then its graph reused
        _, got = torch.func.jvp(compiled, (x,), (tangent,))
        _, expected = torch.func.jvp(lambda t: reference(t) * 2, (x,), (tangent,))
        torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-4)
    assert fwAD._current_level == -1
    with fwAD.dual_level():  # the next level opens: none was left behind
        assert fwAD.unpack_dual(fwAD.make_dual(x, tangent)).tangent is not None
