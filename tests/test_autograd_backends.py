"""Autograd through every stable backend of rmsnorm and mm, in eager (issue 19, item 4).

Every backend in ``op.stable_backends`` × {grad required, no grad}: with grad required the
gradients of ``input``/``weight`` (``a``/``b``) match those autograd gives through the torch
backend; with none required the result has no ``grad_fn``.  ``out=`` with grad required is
refused by every backend alike (torch's rule for ``out=`` functions).  The backward formulas
(``rmsnorm_backward``, ``mm_backward``), which the compiled operators register too, are
checked against autograd through the torch backend directly.  Triton backends run on CPU
through the interpreter (tests/conftest.py) and are skipped where Triton cannot run.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

import flashinfer
from flashinfer import mm, rmsnorm
from flashinfer.dispatch.families import TRITON, family_of
from flashinfer.gemm import mm_backward
from flashinfer.kernels import triton_device_reason
from flashinfer.kernels.autograd import OutWithGradError
from flashinfer.norm import rmsnorm_backward

TOL = {
    torch.float32: {"rtol": 1e-5, "atol": 1e-5},
    torch.float16: {"rtol": 1e-2, "atol": 1e-2},
    torch.bfloat16: {"rtol": 2e-2, "atol": 2e-2},
}


def _rand(*shape: int, dtype: torch.dtype = torch.float32, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


def _skip_unless_runs(op: Any, backend: str, tensor: torch.Tensor) -> None:
    """Skip a Triton-family backend where Triton cannot run (its own reason)."""
    if family_of(op.backend_checks[backend]) is TRITON:
        reason = triton_device_reason(tensor)
        if reason is not None:
            pytest.skip(reason)


def _leaves(*tensors: torch.Tensor, grad: tuple[bool, ...]) -> list[torch.Tensor]:
    return [t.clone().requires_grad_(g) for t, g in zip(tensors, grad, strict=True)]


def _grads(
    fn: Any, tensors: tuple[torch.Tensor, ...], grad: tuple[bool, ...], seed: int
) -> tuple[torch.Tensor, list[torch.Tensor | None]]:
    """``fn(*leaves)`` and the gradients of ``sum(result * r)`` (r random) w.r.t. the leaves
    that require grad (``None`` for the others)."""
    leaves = _leaves(*tensors, grad=grad)
    y = fn(*leaves)
    assert y.grad_fn is not None, "the result is detached from the autograd graph"
    (y.float() * _rand(*y.shape, seed=seed)).sum().backward()
    return y.detach(), [t.grad for t in leaves]


def _assert_grads_match(got: list, want: list, tensors: tuple, dtype: torch.dtype) -> None:
    for g, w, t in zip(got, want, tensors, strict=True):
        if w is None:
            assert g is None
            continue
        assert g is not None and g.dtype == t.dtype and g.shape == t.shape
        torch.testing.assert_close(g, w, **TOL[dtype])


# ---- rmsnorm ---------------------------------------------------------------------------

REQUIRES = [(True, True), (True, False), (False, True)]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("grad", REQUIRES, ids=["both", "input", "weight"])
@pytest.mark.parametrize("backend", rmsnorm.stable_backends)
def test_rmsnorm_gradients_match_the_torch_backend(backend, grad, dtype):
    x, w = _rand(3, 5, 48, dtype=dtype), (1 + 0.1 * _rand(48, seed=1)).to(dtype)
    _skip_unless_runs(rmsnorm, backend, x)
    y, got = _grads(lambda x, w: rmsnorm(x, w, 1e-5, backend=backend), (x, w), grad, 2)
    y_ref, want = _grads(lambda x, w: rmsnorm(x, w, 1e-5, backend="torch"), (x, w), grad, 2)
    torch.testing.assert_close(y, y_ref, **TOL[dtype])
    _assert_grads_match(got, want, (x, w), dtype)


@pytest.mark.parametrize("backend", rmsnorm.stable_backends)
def test_rmsnorm_with_grad_computes_what_it_computes_without(backend):
    """The grad path runs the same kernel: its values are the no-grad call's, bit for bit."""
    x, w = _rand(4, 64), _rand(64, seed=1)
    _skip_unless_runs(rmsnorm, backend, x)
    plain = rmsnorm(x, w, backend=backend)
    tracked = rmsnorm(x.clone().requires_grad_(), w, backend=backend)
    assert torch.equal(tracked.detach(), plain)


@pytest.mark.parametrize("backend", rmsnorm.stable_backends)
def test_rmsnorm_gradients_through_a_non_contiguous_gradient(backend):
    """The upstream gradient may have any layout (here a transposed use of the result)."""
    x, w = _rand(6, 32), _rand(32, seed=1)
    _skip_unless_runs(rmsnorm, backend, x)

    def loss_grads(b: str) -> list[torch.Tensor]:
        xs, ws = _leaves(x, w, grad=(True, True))
        y = rmsnorm(xs, ws, backend=b)
        (y.t() @ _rand(6, 3, seed=3)).pow(2).sum().backward()
        return [xs.grad, ws.grad]

    _assert_grads_match(loss_grads(backend), loss_grads("torch"), (x, w), torch.float32)


@pytest.mark.parametrize("backend", rmsnorm.stable_backends)
def test_rmsnorm_without_grad_is_detached(backend):
    x, w = _rand(4, 64), _rand(64, seed=1)
    _skip_unless_runs(rmsnorm, backend, x)
    assert rmsnorm(x, w, backend=backend).grad_fn is None  # nothing requires grad
    xg, wg = _leaves(x, w, grad=(True, True))
    with torch.no_grad():
        y = rmsnorm(xg, wg, backend=backend)
    assert y.grad_fn is None and not y.requires_grad
    with torch.inference_mode():
        assert rmsnorm(xg, wg, backend=backend).grad_fn is None


# ---- mm --------------------------------------------------------------------------------

MM_DTYPES = [
    (torch.float32, None),
    (torch.float16, None),
    (torch.bfloat16, None),
    (torch.float16, torch.float32),
    (torch.float32, torch.bfloat16),
]


@pytest.mark.parametrize("dtype, out_dtype", MM_DTYPES, ids=lambda d: str(d).split(".")[-1])
@pytest.mark.parametrize("grad", REQUIRES, ids=["both", "a", "b"])
@pytest.mark.parametrize("backend", mm.stable_backends)
def test_mm_gradients_match_the_torch_backend(backend, grad, dtype, out_dtype):
    a, b = _rand(9, 40, dtype=dtype), _rand(40, 24, dtype=dtype, seed=1)
    _skip_unless_runs(mm, backend, a)
    y, got = _grads(lambda a, b: mm(a, b, out_dtype=out_dtype, backend=backend), (a, b), grad, 2)
    assert y.dtype == (out_dtype or dtype)
    y_ref, want = _grads(
        lambda a, b: mm(a, b, out_dtype=out_dtype, backend="torch"), (a, b), grad, 2
    )
    torch.testing.assert_close(y, y_ref, **TOL[out_dtype or dtype])
    _assert_grads_match(got, want, (a, b), dtype)


@pytest.mark.parametrize("backend", mm.stable_backends)
def test_mm_gradients_when_a_and_b_are_one_tensor(backend):
    """``a`` and ``b`` may alias: both gradients reach the one leaf."""
    m = _rand(16, 16)
    _skip_unless_runs(mm, backend, m)
    got = _grads(lambda t: mm(t, t, backend=backend), (m,), (True,), 5)[1]
    want = _grads(lambda t: mm(t, t, backend="torch"), (m,), (True,), 5)[1]
    _assert_grads_match(got, want, (m,), torch.float32)


@pytest.mark.parametrize("backend", mm.stable_backends)
def test_mm_without_grad_is_detached(backend):
    a, b = _rand(8, 32), _rand(32, 16, seed=1)
    _skip_unless_runs(mm, backend, a)
    assert mm(a, b, backend=backend).grad_fn is None
    ag, bg = _leaves(a, b, grad=(True, True))
    with torch.no_grad():
        y = mm(ag, bg, backend=backend)
    assert y.grad_fn is None and not y.requires_grad
    torch.testing.assert_close(y, mm(a, b, backend="torch"))


# ---- out= with grad: refused alike by every backend -----------------------------------


def _rmsnorm_call(backend: str, grad: tuple[bool, bool, bool]) -> tuple[Any, torch.Tensor]:
    x, w, out = _leaves(_rand(4, 64), _rand(64, seed=1), torch.full((4, 64), 7.0), grad=grad)
    return (lambda: rmsnorm(x, w, out=out, backend=backend)), out


def _mm_call(backend: str, grad: tuple[bool, bool, bool]) -> tuple[Any, torch.Tensor]:
    a, b, out = _leaves(_rand(8, 32), _rand(32, 16, seed=1), torch.full((8, 16), 7.0), grad=grad)
    return (lambda: mm(a, b, out=out, backend=backend)), out


OUT_CASES = [
    pytest.param(op, make, backend, id=f"{op.__name__}-{backend}")
    for op, make in ((rmsnorm, _rmsnorm_call), (mm, _mm_call))
    for backend in op.stable_backends
]


@pytest.mark.parametrize("op, make, backend", OUT_CASES)
@pytest.mark.parametrize(
    "grad, names",
    [
        ((True, False, False), r"'(input|a)' requires grad"),
        ((False, True, False), r"'(weight|b)' requires grad"),
        ((True, True, False), r"'(input|a)', '(weight|b)' require grad"),
        ((False, False, True), r"'out' requires grad"),
    ],
    ids=["first", "second", "both", "out"],
)
def test_out_with_grad_is_refused_by_every_backend(op, make, backend, grad, names):
    call, out = make(backend, grad)
    _skip_unless_runs(op, backend, out)
    with pytest.raises(OutWithGradError, match=names) as info:
        call()
    message = str(info.value)
    assert f"backend {backend!r}" in message
    assert "Drop out=" in message and "torch.no_grad()" in message
    # torch's own type for this refusal, too, and nothing was written.
    assert isinstance(info.value, ValueError) and isinstance(info.value, RuntimeError)
    assert torch.all(out.detach() == 7.0)


@pytest.mark.parametrize("op, make, backend", OUT_CASES)
def test_out_under_no_grad_writes_as_usual(op, make, backend):
    call, out = make(backend, (True, True, False))
    _skip_unless_runs(op, backend, out)
    with torch.no_grad():
        assert call() is out
    assert not torch.all(out == 7.0) and out.grad_fn is None


@pytest.mark.parametrize("backend", rmsnorm.stable_backends)
def test_rmsnorm_in_place_with_grad_is_refused(backend):
    """``out=input`` on a non-leaf that requires grad: refused like any out=, not a broken
    graph (torch's copy_ would overwrite a value its backward needs)."""
    x0 = _rand(4, 64).requires_grad_()
    x = x0 * 1.0
    _skip_unless_runs(rmsnorm, backend, x)
    with pytest.raises(ValueError, match="cannot differentiate a call with out="):
        rmsnorm(x, _rand(64, seed=1), out=x, backend=backend)


# ---- auto ------------------------------------------------------------------------------


def test_auto_with_grad_gives_the_right_gradients():
    x, w = _rand(4, 64), _rand(64, seed=1)
    a, b = _rand(8, 32), _rand(32, 16, seed=1)
    for op, args in ((rmsnorm, (x, w)), (mm, (a, b))):
        got = _grads(lambda *t, op=op: op(*t), args, (True, True), 4)[1]
        want = _grads(lambda *t, op=op: op(*t, backend="torch"), args, (True, True), 4)[1]
        _assert_grads_match(got, want, args, torch.float32)


@pytest.mark.parametrize("op", [rmsnorm, mm], ids=["rmsnorm", "mm"])
def test_auto_restricted_to_a_kernel_backend_differentiates_through_it(op):
    """``use_backends`` puts each non-torch stable backend first under ``"auto"``: the call
    goes through that backend's autograd Function (its grad_fn says so), and the gradients
    are right."""
    args = (_rand(4, 64), _rand(64, seed=1)) if op is rmsnorm else (_rand(8, 32), _rand(32, 16))
    want = _grads(lambda *t: op(*t, backend="torch"), args, (True, True), 6)[1]
    kernels = [b for b in op.stable_backends if family_of(op.backend_checks[b]) is TRITON]
    assert kernels, "a stable kernel backend is expected for this op"
    for backend in kernels:
        _skip_unless_runs(op, backend, args[0])
        with flashinfer.use_backends({op.__name__: [backend]}):
            leaves = _leaves(*args, grad=(True, True))
            y = op(*leaves)
            assert type(y.grad_fn).__name__.startswith(("_RMSNormTriton", "_TiledMatmul"))
            (y * _rand(*y.shape, seed=6)).sum().backward()
        _assert_grads_match([t.grad for t in leaves], want, args, torch.float32)


# ---- the backward formulas, directly ---------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("shape", [(64,), (3, 40), (2, 3, 100)])
@pytest.mark.parametrize("eps", [1e-6, 1e-2])
def test_rmsnorm_backward_is_autograd_through_the_torch_backend(dtype, shape, eps):
    x, w = _rand(*shape, dtype=dtype), (1 + 0.1 * _rand(shape[-1], seed=1)).to(dtype)
    grad = _rand(*shape, dtype=dtype, seed=2)
    xs, ws = _leaves(x, w, grad=(True, True))
    rmsnorm(xs, ws, eps, backend="torch").backward(grad)
    # The call's arguments by name, as the compiled operator hands them over.
    inputs = {"input": x, "weight": w, "eps": eps, "out": None, "backend": "auto"}
    got = rmsnorm_backward(grad, inputs)
    assert set(got) == {"input", "weight"}
    _assert_grads_match([got["input"], got["weight"]], [xs.grad, ws.grad], (x, w), dtype)


def test_rmsnorm_backward_defaults_eps():
    x, w, grad = _rand(3, 8), _rand(8, seed=1), _rand(3, 8, seed=2)
    with_default = rmsnorm_backward(grad, {"input": x, "weight": w})
    explicit = rmsnorm_backward(grad, {"input": x, "weight": w, "eps": 1e-6})
    assert all(torch.equal(with_default[k], explicit[k]) for k in ("input", "weight"))


@pytest.mark.parametrize("dtype, out_dtype", MM_DTYPES, ids=lambda d: str(d).split(".")[-1])
def test_mm_backward_is_autograd_through_the_torch_backend(dtype, out_dtype):
    a, b = _rand(7, 33, dtype=dtype), _rand(33, 12, dtype=dtype, seed=1)
    grad = _rand(7, 12, dtype=out_dtype or dtype, seed=2)
    al, bl = _leaves(a, b, grad=(True, True))
    mm(al, bl, out_dtype=out_dtype, backend="torch").backward(grad)
    inputs = {"a": a, "b": b, "out": None, "out_dtype": out_dtype, "backend": "auto"}
    got = mm_backward(grad, inputs)
    assert set(got) == {"a", "b"}
    _assert_grads_match([got["a"], got["b"]], [al.grad, bl.grad], (a, b), dtype)


@pytest.mark.parametrize("op", [rmsnorm, mm], ids=["rmsnorm", "mm"])
def test_torch_func_grad_through_every_backend(op):
    """``torch.func.grad`` differentiates through each backend too (the kernel backends'
    Functions keep ``setup_context`` apart from ``forward``, as functorch needs)."""
    x, y = (_rand(4, 64), _rand(64, seed=1)) if op is rmsnorm else (_rand(8, 32), _rand(32, 16))
    r = _rand(*op(x, y, backend="torch").shape, seed=3)

    def grads(backend: str) -> tuple[torch.Tensor, torch.Tensor]:
        def loss(first: torch.Tensor, second: torch.Tensor) -> torch.Tensor:
            return (op(first, second, backend=backend) * r).sum()

        return torch.func.grad(loss, argnums=(0, 1))(x, y)

    want = grads("torch")
    for backend in op.stable_backends:
        _skip_unless_runs(op, backend, x)
        _assert_grads_match(list(grads(backend)), list(want), (x, y), torch.float32)
