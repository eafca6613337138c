"""CUDA graphs: every op captured and replayed with its cached choice (``gpu`` lane), and what
can be checked without a device: a cached ``"auto"`` call allocates nothing of the
dispatcher's and never synchronises.

What capture freezes (``docs/compile.rst``): the kernels launched while capturing are the
ones replayed, so the backend chosen at capture is the one replayed, whatever the gate or a
``use_backends`` block say later.
"""

from __future__ import annotations

import pytest
import torch

import flashinfer

gpu = pytest.mark.gpu


def _warm_then_capture(fn, *args):
    """Warm up on a side stream (the choice gets cached, Triton compiles), capture, replay."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            fn(*args)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        result = fn(*args)
    return graph, result


@gpu
@pytest.mark.parametrize("backend", ["auto", *flashinfer.rmsnorm.stable_backends])
def test_rmsnorm_is_captured_and_replayed(backend):
    x = torch.randn(8, 256, device="cuda")
    w = torch.randn(256, device="cuda")
    out = torch.empty_like(x)
    graph, _ = _warm_then_capture(
        lambda: flashinfer.rmsnorm(x, w, out=out, backend=backend),
    )
    x.copy_(torch.randn_like(x))
    graph.replay()
    torch.cuda.synchronize()
    torch.testing.assert_close(out, flashinfer.rmsnorm(x, w, backend="torch"))


@gpu
@pytest.mark.parametrize("backend", ["auto", *flashinfer.mm.stable_backends])
def test_mm_is_captured_and_replayed(backend):
    a = torch.randn(64, 128, device="cuda")
    b = torch.randn(128, 32, device="cuda")
    out = torch.empty(64, 32, device="cuda")
    graph, _ = _warm_then_capture(lambda: flashinfer.mm(a, b, out=out, backend=backend))
    a.copy_(torch.randn_like(a))
    graph.replay()
    torch.cuda.synchronize()
    torch.testing.assert_close(out, a @ b, rtol=2e-2, atol=2e-2)


@gpu
def test_the_choice_made_at_capture_is_the_one_replayed():
    x = torch.randn(8, 256, device="cuda")
    w = torch.randn(256, device="cuda")
    out = torch.empty_like(x)
    with flashinfer.use_backends({"rmsnorm": ["torch"]}):
        graph, _ = _warm_then_capture(lambda: flashinfer.rmsnorm(x, w, out=out))
    assert flashinfer.rmsnorm.suitable_auto_backends == ["torch"]
    graph.replay()  # outside the block: the torch kernels captured inside are replayed
    torch.cuda.synchronize()
    torch.testing.assert_close(out, flashinfer.rmsnorm(x, w, backend="torch"))


def test_a_cached_auto_call_never_synchronises_nor_allocates_for_the_dispatcher(monkeypatch):
    """On the cached path the dispatcher itself calls no synchronisation and makes no tensor:
    the only tensor made is the result (``out=`` given: none at all)."""
    x, w = torch.randn(4, 64), torch.randn(64)
    out = torch.empty_like(x)
    flashinfer.rmsnorm(x, w, out=out)  # learn the pattern, cache the verdict
    flashinfer.rmsnorm(x, w, out=out)

    def refuse(*args, **kwargs):
        raise AssertionError("the cached dispatcher synchronised a device")

    monkeypatch.setattr(torch.cuda, "synchronize", refuse)
    made = []

    class Count(torch.overrides.TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            made.append(getattr(func, "__name__", repr(func)))
            return func(*args, **(kwargs or {}))

    with Count():
        flashinfer.rmsnorm(x, w, out=out)
    factories = {"empty", "empty_like", "zeros", "zeros_like", "ones", "full", "tensor"}
    assert not factories & set(made), made


@gpu
@pytest.mark.parametrize("name", ["rmsnorm", "mm"])
def test_compiled_with_cuda_graphs_equals_eager(name):
    """``torch.compile(mode="reduce-overhead")``: the graph is captured once and replayed;
    every replay equals the eager call on the inputs of that call (issue 31)."""
    torch._dynamo.reset()
    op = getattr(flashinfer, name)
    if name == "rmsnorm":
        make = lambda: (torch.randn(8, 256, device="cuda"), torch.randn(256, device="cuda"))  # noqa: E731
    else:
        make = lambda: (torch.randn(8, 64, device="cuda"), torch.randn(64, 64, device="cuda"))  # noqa: E731
    compiled = torch.compile(lambda x, y: op(x, y) * 2, mode="reduce-overhead", fullgraph=True)
    for _ in range(4):
        x, y = make()
        torch.testing.assert_close(compiled(x, y).clone(), op(x, y) * 2, rtol=1e-4, atol=1e-4)
