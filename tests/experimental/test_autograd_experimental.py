"""Autograd through the experimental code, in eager (issue 19, item 4): mm's split-K backend
× {grad required, no grad}, and the in-place ``fused_add_rmsnorm`` (a leaf that requires grad
refused as torch's in-place operations refuse it; non-leaf inputs differentiated through the
torch composition, checked against the unfused composition)."""

from __future__ import annotations

import warnings
from typing import Any

import pytest
import torch

import flashinfer
from flashinfer import ExperimentalWarning, fused_add_rmsnorm, mm, rmsnorm
from flashinfer.experimental.fused_add_rmsnorm import kernel as fused_kernel
from flashinfer.kernels import triton_device_reason
from flashinfer.kernels.autograd import OutWithGradError

pytestmark = pytest.mark.experimental

GATE = "FLASHINFER_ALLOW_EXPERIMENTAL_AUTO_BACKENDS"


def _rand(*shape: int, dtype: torch.dtype = torch.float32, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ExperimentalWarning)
        yield


@pytest.fixture
def triton_runs():
    reason = triton_device_reason(torch.empty(1))
    if reason is not None:
        pytest.skip(reason)


def _mm_grads(backend: str, a: torch.Tensor, b: torch.Tensor, grad: tuple[bool, bool]) -> Any:
    al, bl = a.clone().requires_grad_(grad[0]), b.clone().requires_grad_(grad[1])
    y = mm(al, bl, backend=backend)
    assert y.grad_fn is not None, "the result is detached from the autograd graph"
    (y.float() * _rand(*y.shape, seed=9)).sum().backward()
    return y.detach(), al.grad, bl.grad, type(y.grad_fn).__name__


# ---- split-K ---------------------------------------------------------------------------


@pytest.mark.usefixtures("triton_runs")
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("grad", [(True, True), (True, False), (False, True)])
def test_splitk_gradients_match_the_torch_backend(dtype, grad):
    a, b = _rand(4, 1024, dtype=dtype), _rand(1024, 16, dtype=dtype, seed=1)
    y, ga, gb, fn = _mm_grads("splitk", a, b, grad)
    y_ref, ga_ref, gb_ref, _ = _mm_grads("torch", a, b, grad)
    assert fn == "_TiledMatmulBackward"
    tol = {"rtol": 1e-5, "atol": 1e-4} if dtype == torch.float32 else {"rtol": 1e-2, "atol": 5e-2}
    torch.testing.assert_close(y, y_ref, **tol)
    for got, want in ((ga, ga_ref), (gb, gb_ref)):
        if want is None:
            assert got is None
        else:
            assert got is not None and got.dtype == dtype
            torch.testing.assert_close(got, want, **tol)


@pytest.mark.usefixtures("triton_runs")
def test_splitk_without_grad_is_detached():
    a, b = _rand(4, 1024), _rand(1024, 16, seed=1)
    assert mm(a, b, backend="splitk").grad_fn is None
    with torch.no_grad():
        y = mm(a.requires_grad_(), b.requires_grad_(), backend="splitk")
    assert y.grad_fn is None and not y.requires_grad


@pytest.mark.usefixtures("triton_runs")
def test_splitk_out_with_grad_is_refused():
    a, b = _rand(4, 1024).requires_grad_(), _rand(1024, 16, seed=1)
    out = torch.full((4, 16), 7.0)
    with pytest.raises(OutWithGradError, match="backend 'splitk' cannot differentiate") as info:
        mm(a, b, out=out, backend="splitk")
    assert "torch.no_grad()" in str(info.value) and "Drop out=" in str(info.value)
    assert torch.all(out == 7.0)
    with torch.no_grad():
        assert mm(a, b, out=out, backend="splitk") is out


@pytest.mark.usefixtures("triton_runs")
def test_auto_through_splitk_with_grad(monkeypatch):
    """With the gate on and ``"auto"`` restricted to split-K, a call that requires grad
    differentiates through it."""
    monkeypatch.setenv(GATE, "1")
    a, b = _rand(4, 1024), _rand(1024, 16, seed=1)
    _, ga_ref, gb_ref, _ = _mm_grads("torch", a, b, (True, True))
    with flashinfer.use_backends({"mm": ["splitk"]}):
        _, ga, gb, fn = _mm_grads("auto", a, b, (True, True))
    assert fn == "_TiledMatmulBackward"
    torch.testing.assert_close(ga, ga_ref, rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(gb, gb_ref, rtol=1e-5, atol=1e-4)


# ---- fused_add_rmsnorm: a leaf that requires grad is refused ---------------------------


def _fused_args(dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor, ...]:
    return _rand(3, 64, dtype=dtype), _rand(3, 64, dtype=dtype, seed=1), _rand(64, seed=2)


@pytest.mark.parametrize("written", ["input", "residual"])
@pytest.mark.parametrize("view", [False, True], ids=["leaf", "view-of-leaf"])
def test_fused_add_rmsnorm_refuses_a_leaf_that_requires_grad(written, view):
    x, r, w = _fused_args()
    leaf = (x if written == "input" else r).requires_grad_()
    arg = leaf[:] if view else leaf
    x_arg, r_arg = (arg, r) if written == "input" else (x, arg)
    before = (x.clone(), r.clone())
    what = "a view of a leaf Variable" if view else "a leaf Variable"
    with pytest.raises(RuntimeError, match=f"{written} is {what} that requires grad") as info:
        fused_add_rmsnorm(x_arg, r_arg, w)
    message = str(info.value)
    assert message.startswith("fused_add_rmsnorm: ")
    assert "in-place operation" in message
    assert f"{written}.clone()" in message and "torch.no_grad()" in message
    assert torch.equal(x.detach(), before[0]) and torch.equal(r.detach(), before[1])


def test_fused_add_rmsnorm_writes_leaves_under_no_grad():
    """torch.no_grad() is the documented way out: as for torch's in-place operations, the
    leaves are written and no graph is recorded."""
    x, r, w = _fused_args()
    expected_r = r + x
    expected_x = rmsnorm(expected_r, w, backend="torch")
    x.requires_grad_()
    r.requires_grad_()
    with torch.no_grad():
        fused_add_rmsnorm(x, r, w)
    assert x.is_leaf and r.is_leaf
    torch.testing.assert_close(r.detach(), expected_r)
    torch.testing.assert_close(x.detach(), expected_x, rtol=1e-5, atol=1e-6)


# ---- fused_add_rmsnorm: non-leaf inputs differentiate -----------------------------------


def _losses(x: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
    """A loss over both written tensors: the normalised sum (input) and the sum (residual)."""
    return (x.float() * _rand(*x.shape, seed=7)).sum() + (r.float() * _rand(*r.shape, seed=8)).sum()


def _fused_grads(
    fused: bool, dtype: torch.dtype, grad: tuple[bool, bool, bool]
) -> tuple[list[torch.Tensor | None], torch.Tensor, torch.Tensor]:
    """Gradients w.r.t. the leaves (x0, r0, w) that ``input = x0 * 1``, ``residual = r0 * 1``
    and ``weight = w`` come from, by the fused API or by the unfused torch composition."""
    x0, r0, w0 = _fused_args(dtype)
    leaves = [
        t.clone().requires_grad_(g) for t, g in zip((x0, r0, w0.to(dtype)), grad, strict=True)
    ]
    x, r = leaves[0] * 1, leaves[1] * 1  # non-leaves (or plain tensors)
    w = leaves[2]
    if fused:
        fused_add_rmsnorm(x, r, w)
    else:
        r.add_(x)
        x = rmsnorm(r, w, backend="torch")
    _losses(x, r).backward()
    return [t.grad for t in leaves], x.detach(), r.detach()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize(
    "grad",
    [(True, True, True), (True, False, False), (False, True, False), (False, False, True)],
    ids=["all", "input", "residual", "weight"],
)
def test_fused_add_rmsnorm_gradients_match_the_unfused_composition(monkeypatch, dtype, grad):
    def no_kernel(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the Triton kernel ran although grad is required")

    # The kernel's launch is invisible to autograd: with grad required it must not run.
    monkeypatch.setattr(fused_kernel, "fused_add_rmsnorm_rows", no_kernel)
    got, x, r = _fused_grads(True, dtype, grad)
    want, x_ref, r_ref = _fused_grads(False, dtype, grad)
    tol = {"rtol": 1e-5, "atol": 1e-5} if dtype == torch.float32 else {"rtol": 1e-2, "atol": 1e-2}
    torch.testing.assert_close(x, x_ref, **tol)
    torch.testing.assert_close(r, r_ref, **tol)
    for g, w, needed in zip(got, want, grad, strict=True):
        assert (g is not None) == needed
        if needed:
            torch.testing.assert_close(g, w, **tol)
