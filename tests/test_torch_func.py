"""torch.func and forward-mode AD through every stable op, on every path a call can take.

The paths: the public function with ``"auto"`` and with each stable backend named (the
Triton ones run their kernel through the interpreter here), the torch operator
(``torch.ops.flashinfer.<name>``), and compiled calls (transparent and opaque).  The
transforms: ``torch.func.jvp``, a ``forward_ad`` dual tensor, ``grad``, ``jacrev``,
``jacfwd`` and ``vmap`` (one batched argument, both batched, and ``vmap`` of ``grad``).
Each result is compared with the same transform of the op's math written in torch here,
so that a zero or dropped tangent, or a gradient from the wrong formula, fails.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
import torch
import torch.autograd.forward_ad as fwAD
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.func import grad, jacfwd, jacrev, jvp, vmap

import flashinfer

OPS = ("rmsnorm", "mm")
EPS = 1e-6
SETTINGS = settings(max_examples=12, deadline=None)


def _math(name: str) -> Callable[..., torch.Tensor]:
    """The op's math in torch: the reference every transform is compared against."""
    if name == "rmsnorm":

        def rmsnorm(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS) * w

        return rmsnorm
    return torch.mm


def _paths(name: str) -> dict[str, Callable[..., torch.Tensor]]:
    """Every way to call the op eagerly, by label."""
    op = getattr(flashinfer, name)
    paths: dict[str, Callable[..., torch.Tensor]] = {"auto": lambda x, y: op(x, y)}
    for backend in op.stable_backends:
        paths[backend] = lambda x, y, b=backend: op(x, y, backend=b)
    paths["operator"] = lambda x, y: getattr(torch.ops.flashinfer, name)(x, y)
    return paths


def _path_ids(name: str) -> list[str]:
    return [f"{name}-{p}" for p in _paths(name)]


CASES = [(name, path) for name in OPS for path in _paths(name)]


def _draw_inputs(data: st.DataObject, name: str) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(data.draw(st.integers(0, 2**16), label="seed"))
    if name == "rmsnorm":
        rows = data.draw(st.integers(1, 5), label="rows")
        cols = data.draw(st.integers(1, 24), label="cols")
        return torch.randn(rows, cols, generator=g), torch.randn(cols, generator=g) + 1
    m, k, n = (data.draw(st.integers(1, 9), label=d) for d in "mkn")
    return torch.randn(m, k, generator=g), torch.randn(k, n, generator=g)


def _close(actual: torch.Tensor | None, expected: torch.Tensor) -> None:
    assert actual is not None, "the tangent was dropped"
    torch.testing.assert_close(actual, expected, atol=1e-4, rtol=1e-4)


@pytest.fixture(autouse=True)
def _fresh_dynamo() -> Iterator[None]:
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


# ---- forward mode ----------------------------------------------------------------------


@pytest.mark.parametrize(("name", "path"), CASES, ids=[f"{n}-{p}" for n, p in CASES])
@SETTINGS
@given(data=st.data())
def test_jvp_gives_the_tangent_of_the_ops_math(name: str, path: str, data: st.DataObject) -> None:
    f = _paths(name)[path]
    x, y = _draw_inputs(data, name)
    tx, ty = torch.randn_like(x), torch.randn_like(y)
    value, tangent = jvp(f, (x, y), (tx, ty))
    expected_value, expected_tangent = jvp(_math(name), (x, y), (tx, ty))
    _close(value, expected_value)
    _close(tangent, expected_tangent)


@pytest.mark.parametrize(("name", "path"), CASES, ids=[f"{n}-{p}" for n, p in CASES])
@SETTINGS
@given(data=st.data(), which=st.sampled_from(["first", "second", "both"]))
def test_a_dual_tensor_keeps_its_tangent(
    name: str, path: str, data: st.DataObject, which: str
) -> None:
    f = _paths(name)[path]
    x, y = _draw_inputs(data, name)
    tx = torch.randn_like(x) if which != "second" else torch.zeros_like(x)
    ty = torch.randn_like(y) if which != "first" else torch.zeros_like(y)
    with fwAD.dual_level():
        dx = fwAD.make_dual(x, tx) if which != "second" else x
        dy = fwAD.make_dual(y, ty) if which != "first" else y
        tangent = fwAD.unpack_dual(f(dx, dy)).tangent
    _close(tangent, jvp(_math(name), (x, y), (tx, ty))[1])


@pytest.mark.parametrize(("name", "path"), CASES, ids=[f"{n}-{p}" for n, p in CASES])
def test_jacfwd_and_jacrev_agree_with_the_ops_math(name: str, path: str) -> None:
    f = _paths(name)[path]
    g = torch.Generator().manual_seed(3)
    x, y = (torch.randn(3, 5, generator=g), torch.randn(5, generator=g) + 1)
    if name == "mm":
        y = torch.randn(5, 4, generator=g)
    for transform in (jacfwd, jacrev):
        for argnums in (0, 1):
            expected = transform(_math(name), argnums=argnums)(x, y)
            _close(transform(f, argnums=argnums)(x, y), expected)


# ---- reverse mode ----------------------------------------------------------------------


@pytest.mark.parametrize(("name", "path"), CASES, ids=[f"{n}-{p}" for n, p in CASES])
@SETTINGS
@given(data=st.data())
def test_grad_matches_the_ops_math(name: str, path: str, data: st.DataObject) -> None:
    f = _paths(name)[path]
    x, y = _draw_inputs(data, name)
    weights = torch.randn(_math(name)(x, y).shape)

    def loss(fn: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
        return lambda a, b: (fn(a, b) * weights).sum()

    actual = grad(loss(f), argnums=(0, 1))(x, y)
    expected = grad(loss(_math(name)), argnums=(0, 1))(x, y)
    for a, e in zip(actual, expected, strict=True):
        _close(a, e)


# ---- vmap --------------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "path"), CASES, ids=[f"{n}-{p}" for n, p in CASES])
@pytest.mark.parametrize("in_dims", [(0, None), (1, None), (None, 0), (0, 0)])
def test_vmap_maps_over_any_batched_argument(name: str, path: str, in_dims: Any) -> None:
    f = _paths(name)[path]
    g = torch.Generator().manual_seed(5)
    x, y = (torch.randn(3, 6, generator=g), torch.randn(6, generator=g) + 1)
    if name == "mm":
        y = torch.randn(6, 4, generator=g)
    batch = 2
    args = [
        a if d is None else torch.stack([torch.randn_like(a) for _ in range(batch)], dim=d)
        for a, d in zip((x, y), in_dims, strict=True)
    ]
    expected = vmap(_math(name), in_dims=in_dims)(*args)
    _close(vmap(f, in_dims=in_dims)(*args), expected)


@pytest.mark.parametrize(("name", "path"), CASES, ids=[f"{n}-{p}" for n, p in CASES])
def test_vmap_of_grad_gives_per_sample_gradients(name: str, path: str) -> None:
    f = _paths(name)[path]
    g = torch.Generator().manual_seed(7)
    x, y = (torch.randn(4, 3, 6, generator=g), torch.randn(6, generator=g) + 1)
    if name == "mm":
        y = torch.randn(6, 4, generator=g)

    def per_sample(fn: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
        return vmap(grad(lambda a, b: fn(a, b).pow(2).sum(), argnums=1), in_dims=(0, None))

    _close(per_sample(f)(x, y), per_sample(_math(name))(x, y))


# ---- compiled ------------------------------------------------------------------------------


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
@pytest.mark.parametrize("compiler", ["aot_eager", "inductor"])
def test_compiled_transforms_match_the_ops_math(compiler: str, dynamic: bool) -> None:
    """``torch.compile`` of ``grad``/``jacrev`` and ``jvp`` of a compiled function, over a
    function using both ops (``mm`` is tuned, so opaque; ``rmsnorm`` transparent when
    static): Dynamo traces ``requires_grad`` under a transform as False, which must not
    send the call to the operator without autograd (zero gradients)."""
    g = torch.Generator().manual_seed(11)
    a, b = torch.randn(4, 6, generator=g), torch.randn(6, 5, generator=g)
    w = torch.randn(5, generator=g) + 1

    def model(rms: Callable[..., Any], mm: Callable[..., Any]) -> Callable[..., torch.Tensor]:
        return lambda a, b, w: rms(mm(a, b), w).pow(2).sum()

    ours = model(flashinfer.rmsnorm, flashinfer.mm)
    theirs = model(_math("rmsnorm"), torch.mm)
    options = {"backend": compiler, "dynamic": dynamic}
    actual = torch.compile(grad(ours, argnums=(0, 1, 2)), **options)(a, b, w)
    for x, e in zip(actual, grad(theirs, argnums=(0, 1, 2))(a, b, w), strict=True):
        _close(x, e)
    _close(
        torch.compile(jacrev(lambda a: flashinfer.mm(a, b)), **options)(a),
        jacrev(lambda a: torch.mm(a, b))(a),
    )
    tangents = (torch.randn_like(a), torch.randn_like(b), torch.randn_like(w))
    _close(
        jvp(torch.compile(ours, **options), (a, b, w), tangents)[1],
        jvp(theirs, (a, b, w), tangents)[1],
    )


def test_a_compiled_functional_call_training_step_gets_the_gradients() -> None:
    from torch.func import functional_call

    from flashinfer.nn import Linear, RMSNorm

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 5, bias=False), torch.nn.RMSNorm(5))
    ours = torch.nn.Sequential(Linear.from_module(model[0]), RMSNorm.from_module(model[1]))
    params = {k: v.detach() for k, v in model.named_parameters()}
    x = torch.randn(3, 6)

    def step(m: torch.nn.Module) -> Callable[..., dict[str, torch.Tensor]]:
        return grad(lambda p, x: functional_call(m, p, (x,)).pow(2).sum())

    expected = step(model)(params, x)
    actual = torch.compile(step(ours), backend="aot_eager")(params, x)
    assert actual.keys() == expected.keys()
    for k in expected:
        _close(actual[k], expected[k])


# ---- what is refused, and how -------------------------------------------------------------


@pytest.mark.parametrize("name", OPS)
def test_the_out_operator_refuses_a_tangent_rather_than_drop_it(name: str) -> None:
    x, y = torch.randn(3, 4), torch.randn(4) + 1
    if name == "mm":
        y = torch.randn(4, 2)
    out = _math(name)(x, y).new_empty(_math(name)(x, y).shape)
    with fwAD.dual_level(), pytest.raises(RuntimeError, match="forward-mode derivative"):
        getattr(torch.ops.flashinfer, name).out(fwAD.make_dual(x, torch.ones_like(x)), y, out=out)


@pytest.mark.parametrize("name", OPS)
@pytest.mark.parametrize("transform", ["jvp", "vmap"])
def test_a_kernel_backend_refuses_out_under_a_transform_naming_it(
    name: str, transform: str
) -> None:
    op = getattr(flashinfer, name)
    kernel = next(b for b in op.stable_backends if b != "torch")
    x, y = torch.randn(3, 4), torch.randn(4) + 1
    if name == "mm":
        y = torch.randn(4, 2)

    def call(a: torch.Tensor) -> torch.Tensor:
        out = torch.empty(_math(name)(a, y).shape)
        return op(a, y, out=out, backend=kernel)

    with pytest.raises(ValueError, match="forward-mode AD or a torch.func transform") as info:
        if transform == "jvp":
            jvp(call, (x,), (torch.ones_like(x),))
        else:
            vmap(call)(torch.stack([x, x]))
    assert repr(kernel) in str(info.value) and "out=" in str(info.value)


# ---- functionalize, vmap over out=, and the overlap check under tracing -------------------


@SETTINGS
@given(data=st.data())
def test_functionalize_reads_no_false_overlap_and_keeps_the_true_ones(data: st.DataObject) -> None:
    """The overlap verdict under ``functionalize`` is the eager one: a fresh ``out`` is not
    read as aliasing the inputs (functional wrappers have no storage of their own), and an
    ``out`` that is an input is still refused."""
    x, w = _draw_inputs(data, "rmsnorm")

    def into_fresh(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return flashinfer.rmsnorm(x, w, EPS, out=torch.empty_like(x))

    _close(torch.func.functionalize(into_fresh)(x, w), _math("rmsnorm")(x, w))
    a = torch.randn(3, 3)
    with pytest.raises(ValueError, match="out overlaps a"):
        flashinfer.mm(a, a.T.contiguous(), out=a)
    with pytest.raises(ValueError, match="out overlaps a"):
        torch.func.functionalize(lambda a, b: flashinfer.mm(a, b, out=a))(a, a.T.contiguous())


@pytest.mark.parametrize("name", OPS)
def test_vmap_over_a_call_into_out_gives_the_ops_math(name: str) -> None:
    x, y = torch.randn(3, 4), torch.randn(4) + 1
    if name == "mm":
        y = torch.randn(4, 2)
    op = getattr(flashinfer, name)

    def into_out(a: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(_math(name)(a, y))  # batched, as a result written into must be
        op(a, y, out=out)
        return out

    batch = torch.stack([x, 2 * x, x - 1])
    _close(vmap(into_out)(batch), torch.stack([_math(name)(s, y) for s in batch]))


@pytest.mark.parametrize("compiler", ["eager", "aot_eager", "inductor"])
def test_every_compile_backend_refuses_out_overlapping_an_input(compiler: str) -> None:
    """The overlap rule holds at trace time too: ``aot_eager`` used to accept ``out=a``."""
    a, b = torch.randn(4, 4), torch.randn(4, 4)
    compiled = torch.compile(lambda a, b: flashinfer.mm(a, b, out=a), backend=compiler)
    with pytest.raises(Exception, match="out overlaps a"):
        compiled(a.clone(), b)
    fresh = torch.empty(4, 4)
    compiled_fresh = torch.compile(lambda a, b, o: flashinfer.mm(a, b, out=o), backend=compiler)
    _close(compiled_fresh(a, b, fresh), a @ b)


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
@pytest.mark.parametrize("rows", [0, 2, 4], ids=["out-is-a", "out-meets-a", "disjoint"])
def test_a_compiled_verdict_on_views_of_one_buffer_is_the_eager_one(
    dynamic: bool, rows: int
) -> None:
    """``out`` and ``a`` are row blocks of one buffer, ``rows`` apart: the traced check
    (fake tensors, symbolic sizes when dynamic) decides as the eager call does."""
    buf, b = torch.randn(8, 4), torch.randn(4, 4)

    def call(buf: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return flashinfer.mm(buf[:4], b, out=buf[rows : rows + 4])

    try:
        expected = call(buf.clone(), b)
    except ValueError as e:
        with pytest.raises(Exception, match="out overlaps a"):
            torch.compile(call, backend="aot_eager", dynamic=dynamic)(buf.clone(), b)
        assert "out overlaps a" in str(e)
        return
    _close(torch.compile(call, backend="aot_eager", dynamic=dynamic)(buf.clone(), b), expected)
