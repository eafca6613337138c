"""A compiled call never runs a stale choice, and an experimental backend never changes a
stable compiled call (issue 42, items 2 and 3).

The ops are declared through the public API (``choice_ops``): each backend computes another
multiple of its input, so the result says which backend ran.  For each change of state a
choice reads (the experimental gate, a variable a checker declares with
``reads_environment``, global state a ``reads_tensor_data`` heuristic reads,
``forget_verdicts``) and each route (compiled static, compiled dynamic, the torch operator,
an exported program), the backend that runs is the one an eager call runs now.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import choice_ops
import pytest
import torch
from torch._dynamo.testing import CompileCounter

import flashinfer
from flashinfer.api_logging import ALLOW_EXPERIMENTAL_AUTO_BACKENDS_ENV as GATE
from flashinfer.backend_dispatch import forget_verdicts


@pytest.fixture(autouse=True)
def _fresh(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    choice_ops.fresh_state(monkeypatch)
    yield
    torch._dynamo.reset()


def _graph_targets(fn: Callable[..., Any], *args: Any) -> list[str]:
    explained = torch._dynamo.explain(fn)(*args)
    assert explained.graph_break_count == 0
    return [
        str(n.target) for g in explained.graphs for n in g.graph.nodes if n.op == "call_function"
    ]


def test_an_experimental_backend_leaves_the_stable_compiled_graph_as_it_was() -> None:
    x = torch.ones(4, 8)
    plain = _graph_targets(lambda t: choice_ops.plain(t) * 2, x)
    with_exp = _graph_targets(lambda t: choice_ops.with_experimental(t) * 2, x)
    assert with_exp == plain  # transparent: the torch code, no operator
    assert not any("flashinfer" in t for t in with_exp), with_exp


def _flip_gate(mp: pytest.MonkeyPatch) -> None:
    mp.setenv(GATE, "1")


def _flip_env(mp: pytest.MonkeyPatch) -> None:
    mp.setenv(choice_ops.FAST_ENV, "1")


def _flip_data(mp: pytest.MonkeyPatch) -> None:
    mp.setattr(choice_ops, "PREFERRED", ["ref", "fast"])


def _flip_probe(mp: pytest.MonkeyPatch) -> None:
    # State no signature holds, whose change the program announces with forget_verdicts()
    mp.setattr(choice_ops, "FACTORS", {**choice_ops.FACTORS})
    mp.setenv(choice_ops.FAST_ENV, "1")
    forget_verdicts()


CHANGES = {
    # state change -> (op, setup before the first call)
    "gate": ("with_experimental", _flip_gate),
    "reads_environment": ("plain", _flip_env),
    "reads_tensor_data": ("data_ranked", _flip_data),
    "forget_verdicts": ("plain", _flip_probe),
}


def _route(route: str, op: Any) -> Callable[[torch.Tensor], torch.Tensor]:
    if route == "eager":
        return op
    if route == "static":
        return torch.compile(
            lambda t: op(t) + 0, backend="aot_eager", fullgraph=True, dynamic=False
        )
    if route == "dynamic":
        return torch.compile(lambda t: op(t) + 0, backend="aot_eager", fullgraph=True, dynamic=True)
    if route == "operator":
        operator = op.dispatcher.torch_op.default
        return lambda t: operator(t)
    if route == "export":

        class M(torch.nn.Module):
            def forward(self, t: torch.Tensor) -> torch.Tensor:
                return op(t)

        program = torch.export.export(M(), (torch.ones(4, 8),))
        return program.module()
    raise AssertionError(route)


@pytest.mark.filterwarnings("ignore::flashinfer.ExperimentalWarning")
@pytest.mark.parametrize("route", ["static", "dynamic", "operator", "export"])
@pytest.mark.parametrize("change", sorted(CHANGES))
def test_the_backend_that_runs_compiled_is_the_one_eager_runs_now(
    change: str, route: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    name, flip = CHANGES[change]
    op = getattr(choice_ops, name)
    x = torch.ones(4, 8)
    call = _route(route, op)
    before = choice_ops.ran(op(x))
    assert choice_ops.ran(call(x)) == before
    flip(monkeypatch)
    now = choice_ops.ran(op(x))
    if change != "forget_verdicts":
        assert now != before, "the change must change the eager choice"
    assert choice_ops.ran(call(x)) == now
    monkeypatch.undo()  # and back
    monkeypatch.setattr(choice_ops, "PREFERRED", ["fast", "ref"])
    assert choice_ops.ran(call(x)) == choice_ops.ran(op(x)) == before


def test_a_guarded_change_recompiles_once_and_reuses_the_graphs_after() -> None:
    counter = CompileCounter()
    fn = torch.compile(lambda t: choice_ops.plain(t) + 0, backend=counter, fullgraph=True)
    x = torch.ones(4, 8)
    mp = pytest.MonkeyPatch()
    try:
        for _ in range(3):
            assert choice_ops.ran(fn(x)) == "ref"
            mp.setenv(choice_ops.FAST_ENV, "1")
            assert choice_ops.ran(fn(x)) == "fast"
            mp.delenv(choice_ops.FAST_ENV)
        mp.setenv("FLASHINFER_TEST_UNRELATED", "1")  # a variable no choice reads
        assert choice_ops.ran(fn(x)) == "ref"
    finally:
        mp.undo()
    assert counter.frame_count == 2  # one graph per value, each reused


@pytest.mark.parametrize("threads", [1, 3])
def test_upstreams_body_idiom_compiles_fullgraph_and_runs_the_chosen_backend(threads: int) -> None:
    # ``if backend == "auto": backend = op.suitable_auto_backends[0]`` in the body, with
    # no fake= and no torch-family backend: the operator's fake runs the dispatcher itself.
    op = choice_ops.upstream_style
    fn = torch.compile(lambda t: op(t) + 0, backend="aot_eager", fullgraph=True)
    results: list[str] = []
    errors: list[BaseException] = []

    def call() -> None:
        try:
            results.append(choice_ops.ran(fn(torch.ones(4, 8))))
        except BaseException as exc:  # reported below, in the test's thread
            errors.append(exc)

    workers = [threading.Thread(target=call) for _ in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=120)
    assert not errors, errors
    assert results == [choice_ops.ran(op(torch.ones(4, 8)))] * threads == ["fast"] * threads


def _targets_of_each_graph(
    fn: Callable[..., Any], calls: list[tuple[Any, ...]], **options: Any
) -> list[list[str]]:
    graphs: list[list[str]] = []

    def keep(gm: torch.fx.GraphModule, example_inputs: Any) -> Any:
        graphs.append([str(n.target) for n in gm.graph.nodes if n.op == "call_function"])
        return gm.forward

    compiled = torch.compile(fn, backend=keep, fullgraph=True, **options)
    for args in calls:
        torch.testing.assert_close(compiled(*args), fn(*args))
    return graphs


def test_dynamic_sizes_stay_transparent_when_the_choice_does_not_depend_on_them() -> None:
    def block(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return flashinfer.rmsnorm(x, w) * 2

    w = torch.randn(256)
    calls = [(torch.randn(n, 256), w) for n in (64, 48, 64)]
    for options in ({"dynamic": True}, {}):  # dynamic=True; automatic dynamic after 64, 48
        torch._dynamo.reset()
        graphs = _targets_of_each_graph(block, calls, **options)
        assert graphs and all(not any("flashinfer" in t for t in g) for g in graphs), graphs
    torch._dynamo.reset()
    wide = [(torch.randn(8, h), torch.randn(h)) for h in (128, 96)]  # the hidden size too
    assert len(_targets_of_each_graph(block, wide, dynamic=True)) == 1


def test_a_size_that_decides_the_choice_is_decided_at_run_time_under_dynamic_sizes() -> None:
    op = choice_ops.sized
    fn = torch.compile(lambda t: op(t) + 0, backend="aot_eager", fullgraph=True, dynamic=True)
    for rows in (64, 8, 40, 2):
        x = torch.ones(rows, 4)
        assert choice_ops.ran(fn(x)) == choice_ops.ran(op(x)) == ("fast" if rows >= 32 else "ref")
