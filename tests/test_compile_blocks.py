"""``use_backends`` and ``autotune()`` blocks written inside a compiled function (issue 34,
items 11 and 12; issue 31, item 2: a block entered inside the compiled function is obeyed).

- ``use_backends`` inside the function, with or without ``fullgraph``: every call it holds
  chooses among the listed backends, the same backend eager runs (a spy on the op's
  implementations, drawn over the lists a user can write), on every compiled run, with no
  recompilation and no block flag set;
- nested blocks, one outside the compiled call and one inside it, combine as eager's do;
- a bad block is refused while tracing with eager's message, and leaves nothing behind
  for the next trace;
- ``autotune()`` inside: without ``fullgraph`` a clean graph break, obeyed; with it, an
  error that names the block and says where to enter it (the block saves a file when
  it closes, which a graph cannot hold).

Stable backends only (read from ``op.stable_backends``); the experimental lane checks a
listed experimental backend (tests/experimental/test_compile_experimental.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
import torch
from autotuner_fakes import clean_tuner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch._dynamo.testing import CompileCounter

import flashinfer
from flashinfer.autotuner import autotune
from flashinfer.dispatch.guarded_state import GUARDED
from flashinfer.dispatch.restrictions import block_flag, reset_block_flags

flashinfer.load_all_apis()


@pytest.fixture(autouse=True)
def _fresh_dynamo() -> Iterator[None]:
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def _inputs() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    x, w = torch.randn(4, 64, generator=g), torch.rand(64, generator=g) + 0.5
    a, b = torch.randn(8, 32, generator=g), torch.randn(32, 16, generator=g)
    return x, w, a, b


def _orders(name: str) -> st.SearchStrategy[list[str]]:
    """A list a user can write for ``name``: some of its stable backends, in any order."""
    backends = list(getattr(flashinfer, name).stable_backends)
    return st.permutations(backends).flatmap(
        lambda p: st.integers(1, len(p)).map(lambda k: list(p[:k]))
    )


@settings(
    max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(norms=_orders("rmsnorm"), mms=_orders("mm"), fullgraph=st.booleans())
def test_a_block_inside_a_compiled_function_is_obeyed_by_every_call_it_holds(
    ran: list[str], norms: list[str], mms: list[str], fullgraph: bool
) -> None:
    """Each call in the block runs what eager runs: the first listed backend that can run
    it.  The calls after the block are not restricted.  Run twice: nothing recompiles.
    (The spy's list is cleared per draw; each draw compiles afresh.)"""
    x, w, a, b = _inputs()

    def program(x, w, a, b):
        with flashinfer.use_backends(rmsnorm=norms, mm=mms):
            y = flashinfer.rmsnorm(x, w) * 2
            z = flashinfer.mm(a, b) + 1
        return y, z, flashinfer.rmsnorm(x, w)

    ran.clear()
    expected = program(x, w, a, b)
    eager_ran = list(ran)
    reset_block_flags()  # the eager blocks set them; compiled ones must not
    torch._dynamo.reset()
    counted = CompileCounter()
    compiled = torch.compile(program, backend=counted, fullgraph=fullgraph)
    for _ in range(2):
        ran.clear()
        got = compiled(x, w, a, b)
        torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)
        # a transparent call (torch code in the graph) does not reach the spy
        assert [r for r in ran if r != "torch"] == [r for r in eager_ran if r != "torch"]
        assert eager_ran[:2] == [norms[0], mms[0]]
    assert counted.frame_count == 1
    assert not block_flag(flashinfer.rmsnorm.api_key).named
    assert not block_flag(flashinfer.mm.api_key).named


BREAKS = ["none", "before-block", "first-in-block", "between-calls", "last-in-block", "after"]


@pytest.mark.parametrize("where", BREAKS)
def test_a_graph_break_anywhere_keeps_the_block_obeyed(ran: list[str], where: str) -> None:
    """Without fullgraph, a graph break inside the block makes Dynamo run the function as
    Python from the block on: the block's methods then run eagerly (never compiled as a
    frame of their own, which would enter nothing), so every call in it is restricted."""
    x, w, _, _ = _inputs()
    backend = next(b for b in flashinfer.rmsnorm.stable_backends if b != "torch")

    def brk(here: str) -> None:
        if here == where:
            torch._dynamo.graph_break()

    def program(x):
        brk("before-block")
        with flashinfer.use_backends(rmsnorm=[backend]):
            brk("first-in-block")
            y = flashinfer.rmsnorm(x, w)
            brk("between-calls")
            y = flashinfer.rmsnorm(y, w)
            brk("last-in-block")
        brk("after")
        return y + flashinfer.rmsnorm(x, w, backend="torch")

    ran.clear()
    expected = program(x)
    eager_ran = [r for r in ran if r != "torch"]
    assert eager_ran == [backend, backend]
    compiled = torch.compile(program)
    for _ in range(2):
        ran.clear()
        torch.testing.assert_close(compiled(x), expected, rtol=1e-5, atol=1e-5)
        assert [r for r in ran if r != "torch"] == eager_ran


def test_a_block_naming_the_op_by_its_object_is_obeyed(ran: list[str]) -> None:
    """``use_backends({op: [...]})`` written in the compiled function: Dynamo hands the op's
    stand-in, whose api_key names it."""
    x, w, _, _ = _inputs()
    backend = next(b for b in flashinfer.rmsnorm.stable_backends if b != "torch")

    def program(x):
        with flashinfer.use_backends({flashinfer.rmsnorm: [backend]}):
            return flashinfer.rmsnorm(x, w)

    ran.clear()
    torch.compile(program, fullgraph=True)(x)
    assert ran == [backend]


def test_the_first_trace_of_two_ops_reads_every_guarded_variable(ran: list[str]) -> None:
    """Two ops whose choices read different variables, traced for the first time in one
    graph: the first op's watch keeps the second's variables too (Dynamo reads the guarded
    dict once per trace; a key added later in the trace was a KeyError, and the function ran
    eagerly)."""
    x, w, a, b = _inputs()

    def program(x, w, a, b):
        with flashinfer.use_backends(rmsnorm=["torch"], mm=["torch"]):
            return flashinfer.rmsnorm(x, w) * 2, flashinfer.mm(a, b) + 1

    expected = program(x, w, a, b)
    reset_block_flags()
    saved = dict(GUARDED.environment)
    GUARDED.environment.clear()  # as in a process that has compiled nothing yet
    try:
        counted = CompileCounter()
        got = torch.compile(program, backend=counted, fullgraph=True)(x, w, a, b)
    finally:
        GUARDED.environment.update(saved)
    torch.testing.assert_close(got, expected)
    assert counted.frame_count == 1


def test_a_block_built_outside_and_entered_inside_is_entered_eagerly(ran: list[str]) -> None:
    """A block object made outside the compiled function: Dynamo 2.13 cannot enter it, so
    without fullgraph the function runs as Python from the block on (obeyed); with
    fullgraph, compiling is refused naming the block.  Dynamo 2.14 enters it while tracing,
    and the compiled call obeys it (docs/compile.rst says both)."""
    x, w, _, _ = _inputs()
    backend = next(b for b in flashinfer.rmsnorm.stable_backends if b != "torch")
    block = flashinfer.use_backends(rmsnorm=[backend])

    def program(x):
        with block:
            return flashinfer.rmsnorm(x, w)

    ran.clear()
    torch.compile(program)(x)
    assert ran == [backend]
    torch._dynamo.reset()
    ran.clear()
    if _DYNAMO_ENTERS_BLOCK_OBJECTS:
        torch.compile(program, fullgraph=True)(x)
        assert ran == [backend]
    else:
        with pytest.raises(Exception, match="use_backends"):
            torch.compile(program, fullgraph=True)(x)


_DYNAMO_ENTERS_BLOCK_OBJECTS = tuple(int(p) for p in torch.__version__.split(".")[:2]) >= (2, 14)


def test_an_opaque_call_in_the_block_runs_the_listed_backend(ran: list[str]) -> None:
    """The restriction travels with the operator call and is obeyed when it runs."""
    x, w, _, _ = _inputs()
    backend = next(b for b in flashinfer.rmsnorm.stable_backends if b != "torch")

    def program(x):
        with flashinfer.use_backends(rmsnorm=[backend]):
            return flashinfer.rmsnorm(x, w)

    graph = torch._dynamo.explain(program)(x)
    assert graph.graph_break_count == 0
    # the no-grad operator takes its arguments positionally: the token is its 4th
    assert f"1e-06, 'auto|{backend}', False)" in graph.graphs[0].code
    ran.clear()
    torch.compile(program, fullgraph=True)(x)
    assert ran == [backend]
    assert flashinfer.rmsnorm.suitable_auto_backends == [backend]


def test_an_exported_program_carries_the_block_and_obeys_it(ran: list[str]) -> None:
    """torch.export keeps the operator (never transparent) with the block's list in its
    ``backend`` argument: the exported program obeys the block when it runs."""
    x, w, _, _ = _inputs()
    backend = next(b for b in flashinfer.rmsnorm.stable_backends if b != "torch")

    class Model(torch.nn.Module):
        def forward(self, x):
            with flashinfer.use_backends(rmsnorm=[backend]):
                return flashinfer.rmsnorm(x, w)

    program = torch.export.export(Model(), (x,))
    (node,) = [n for n in program.graph.nodes if "flashinfer" in str(n.target)]
    assert node.kwargs["backend"] == f"auto|{backend}"
    ran.clear()
    torch.testing.assert_close(program.module()(x), Model()(x))
    assert ran == [backend, backend]  # the exported program's call, then eager's


def test_a_block_listing_only_torch_is_transparent(ran: list[str]) -> None:
    """Listing the torch backend makes the call certain torch code: it is in the graph."""
    x, w, _, _ = _inputs()

    def program(x):
        with flashinfer.use_backends(rmsnorm=["torch"]):
            return flashinfer.rmsnorm(x, w)

    code = torch._dynamo.explain(program)(x).graphs[0].code
    assert "torch.ops.flashinfer" not in code and "rms_norm" in code
    ran.clear()
    torch.testing.assert_close(torch.compile(program, fullgraph=True)(x), program(x))
    assert ran == ["torch"]  # only eager's run reached the spy


def test_nested_blocks_inside_and_outside_combine_as_in_eager(ran: list[str]) -> None:
    """The inner block (in the compiled function) replaces the outer one's list for the API
    it names; an API it does not name keeps the outer block's list; leaving the inner block
    restores the outer one's."""
    x, w, a, b = _inputs()
    other = next(b for b in flashinfer.rmsnorm.stable_backends if b != "torch")
    mm_backend = flashinfer.mm.stable_backends[-1]

    def program(x, a, b):
        with flashinfer.use_backends(rmsnorm=["torch"]):
            y = flashinfer.rmsnorm(x, w)
        return y, flashinfer.rmsnorm(x, w), flashinfer.mm(a, b)

    compiled = torch.compile(program, fullgraph=True)
    with flashinfer.use_backends(rmsnorm=[other], mm=[mm_backend]):
        ran.clear()
        expected = program(x, a, b)
        eager_ran = list(ran)
        ran.clear()
        got = compiled(x, a, b)
        outer = flashinfer.use_backends  # still open: the outer block's list holds
        assert outer is not None and flashinfer.rmsnorm.suitable_auto_backends == [other]
    assert eager_ran == ["torch", other, mm_backend]
    assert [r for r in ran if r != "torch"] == [other, mm_backend]
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)


def test_no_listed_backend_can_run_raises_as_eager_does() -> None:
    """A restriction no listed backend can satisfy is refused when the call runs, with the
    eager error (BackendSupportedError naming the restriction)."""
    from flashinfer.backend_dispatch import BackendSupportedError

    x = torch.randn(4, 64)[:, ::2]  # rows with a strided last dimension
    w = torch.ones(32)
    refusing = [v.backend for v in flashinfer.rmsnorm.explain(x, w).verdicts if not v.can_run]
    refusing = [b for b in refusing if b in flashinfer.rmsnorm.stable_backends]
    assert refusing, "a stable rmsnorm backend that refuses strided rows"

    def program(x):
        with flashinfer.use_backends(rmsnorm=refusing):
            return flashinfer.rmsnorm(x, w)

    with pytest.raises(BackendSupportedError) as eager:
        program(x)
    with pytest.raises(BackendSupportedError) as compiled:
        torch.compile(program, fullgraph=True)(x)
    assert str(compiled.value) == str(eager.value)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: flashinfer.use_backends(rmsnorm=["no-such-backend"]), "no-such-backend"),
        (lambda: flashinfer.use_backends(rmsnorm={"torch"}), "a set has no order"),
    ],
    ids=["unknown-backend", "a-set"],
)
def test_a_bad_block_is_refused_while_tracing_and_leaves_nothing_behind(
    ran: list[str], make: Callable[[], Any], message: str
) -> None:
    x, w, _, _ = _inputs()
    with pytest.raises((ValueError, TypeError), match=message):
        make()  # eager's refusal

    def bad(x):
        with make():
            return flashinfer.rmsnorm(x, w)

    with pytest.raises(Exception, match=message):
        torch.compile(bad, fullgraph=True)(x)

    def good(x):
        return flashinfer.rmsnorm(x, w)

    ran.clear()
    torch.compile(good, fullgraph=True)(x)
    default = flashinfer.rmsnorm.explain(x, w).chosen
    assert ran == ([] if default == "torch" else [default])  # no stale restriction


def test_a_trace_that_fails_inside_a_block_leaves_no_restriction_for_the_next() -> None:
    """The stack of traced blocks belongs to one trace."""
    from flashinfer.dispatch.traced_blocks import enter_traced, traced_restriction

    key = flashinfer.rmsnorm.api_key
    enter_traced({key: ("torch",)})  # a block whose trace never left it (no trace here)
    assert traced_restriction(key) == "auto|torch"
    seen: list[Any] = []

    def probe(x):
        seen.append(traced_restriction(key))  # while Dynamo traces: a new trace's stack
        return x + 1

    torch.compile(probe, fullgraph=True)(torch.ones(2))
    assert seen == [None]


def _autotune_blocks() -> list[Any]:
    return [
        pytest.param(lambda: autotune(False), "triton", id="autotune-off-named"),
        pytest.param(lambda: autotune(), "auto", id="autotune-auto"),
    ]


@pytest.mark.parametrize(("block", "backend"), _autotune_blocks())
def test_autotune_inside_a_compiled_function_breaks_cleanly_and_is_obeyed(
    block: Callable[[], Any], backend: str
) -> None:
    """Without fullgraph the function runs eagerly from the block on: Dynamo used to trace
    the dispatcher and Triton's interpreter frame by frame (InterpreterError)."""
    x, w, _, _ = _inputs()

    def program(x: torch.Tensor) -> torch.Tensor:
        with block():
            y = flashinfer.rmsnorm(x, w, backend=backend) * 2
            used = list(flashinfer.rmsnorm.suitable_auto_backends)
        return y + len(used)

    with clean_tuner(warmup=0, repeat=1):
        eager = program(x)
        eager_used = list(flashinfer.rmsnorm.suitable_auto_backends)
        torch._dynamo.reset()
        compiled = torch.compile(program)(x)
    torch.testing.assert_close(compiled, eager)
    assert list(flashinfer.rmsnorm.suitable_auto_backends) == eager_used


@pytest.mark.parametrize(("block", "backend"), _autotune_blocks())
def test_autotune_inside_a_fullgraph_function_is_refused_naming_it(
    block: Callable[[], Any], backend: str
) -> None:
    x, w, _, _ = _inputs()

    def program(x: torch.Tensor) -> torch.Tensor:
        with block():
            return flashinfer.rmsnorm(x, w, backend=backend)

    with (
        clean_tuner(warmup=0, repeat=1),
        pytest.raises(Exception, match=r"flashinfer\.autotune\(\.\.\.\) cannot") as info,
    ):
        torch.compile(program, fullgraph=True)(x)
    assert "around the compiled call" in str(info.value)
