"""Tracers that record real calls, over every stable op on every path.

``torch.jit.trace`` records the op's operator as one node (``flashinfer::<name>``), which
decides its backend when the trace runs.  Recording the call as it ran instead crashed
(mm's tuner key read traced sizes), baked one shape's choice in, or recorded nothing of a
Triton kernel's launch.  ``make_fx`` on real tensors, and any torch dispatch mode
(``FlopCounterMode``), see a Triton backend as its operator: Triton's launcher failed on
the storage the mode hands it."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.fx.experimental.proxy_tensor import make_fx
from torch.utils.flop_counter import FlopCounterMode

import flashinfer

OPS = ("rmsnorm", "mm")


def _inputs(name: str, rows: int, cols: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    if name == "rmsnorm":
        return torch.randn(rows, cols, generator=g), torch.rand(cols, generator=g) + 0.5
    return torch.randn(rows, cols, generator=g), torch.randn(cols, 3, generator=g)


def _named(op: Callable[..., torch.Tensor], backend: str, *, skip_check: bool) -> Callable:
    """A two-argument call (tracers take every parameter, defaults too, as an input)."""

    def call(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return op(x, y, backend=backend, skip_check=skip_check)

    return call


def _paths(name: str) -> dict[str, Callable[..., torch.Tensor]]:
    op = getattr(flashinfer, name)
    paths: dict[str, Callable[..., torch.Tensor]] = {"auto": lambda x, y: op(x, y)}
    for backend in op.stable_backends:
        paths[backend] = _named(op, backend, skip_check=False)
        paths[f"{backend}-unchecked"] = _named(op, backend, skip_check=True)
    paths["out"] = lambda x, y: op(x, y, out=torch.empty(op(x, y).shape))
    return paths


CASES = [(name, path) for name in OPS for path in _paths(name)]


@pytest.mark.parametrize(("name", "path"), CASES, ids=[f"{n}-{p}" for n, p in CASES])
@settings(max_examples=5, deadline=None)
@given(rows=st.integers(1, 6), cols=st.integers(1, 20), seed=st.integers(0, 2**16))
def test_a_trace_records_the_operator_and_runs_any_shape(
    name: str, path: str, rows: int, cols: int, seed: int
) -> None:
    call = _paths(name)[path]
    x, y = _inputs(name, 4, 8, 0)
    traced = torch.jit.trace(call, (x, y))  # check_trace reruns it: the graphs must agree
    kinds = {node.kind() for node in traced.graph.nodes()}
    assert f"flashinfer::{name}" in kinds, kinds
    x2, y2 = _inputs(name, rows, cols, seed)
    torch.testing.assert_close(traced(x2, y2), call(x2, y2))


@pytest.mark.parametrize("mode", ["real", "fake", "symbolic"])
@pytest.mark.parametrize(("name", "path"), CASES, ids=[f"{n}-{p}" for n, p in CASES])
def test_make_fx_graphs_replay_the_call(name: str, path: str, mode: str) -> None:
    call = _paths(name)[path]
    x, y = _inputs(name, 4, 8, 0)
    graph = make_fx(call, tracing_mode=mode)(x, y)
    x2, y2 = _inputs(name, 4, 8, 1)
    torch.testing.assert_close(graph(x2, y2), call(x2, y2))


@pytest.mark.parametrize(("name", "path"), CASES, ids=[f"{n}-{p}" for n, p in CASES])
def test_a_dispatch_mode_sees_every_backend_run(name: str, path: str) -> None:
    call = _paths(name)[path]
    x, y = _inputs(name, 4, 8, 0)
    with FlopCounterMode(display=False):
        result = call(x, y)
    torch.testing.assert_close(result, call(x, y))


def test_a_thread_that_never_traced_reads_no_restriction() -> None:
    """Outside any TracingContext, a fresh thread's first read of the traced blocks found
    no stack: it passed only after an earlier test had traced on the same thread (random
    order, seed 3)."""
    import threading

    from flashinfer.dispatch.traced_blocks import traced_restriction

    seen: list[object] = []
    worker = threading.Thread(target=lambda: seen.append(traced_restriction("x.y")))
    worker.start()
    worker.join()
    assert seen == [None]
