"""Every stable op inside ``torch.compile``, ``torch.export``, fake and meta tensors and
``torch.library.opcheck`` (issue 19's "done when", stable lane).

Each API is a torch operator, ``torch.ops.flashinfer.<name>``, whose real implementation is
the dispatcher (flashinfer/dispatch/torch_op.py): so a compiled call is one graph with no
break, and every choice (``use_backends``, the autotuner, tuned results) is still made when
the compiled function runs, not when it was traced.  The tests check both halves:

- the matrix: every op (functional and ``out=``) compiles with ``fullgraph=True`` on the
  ``eager``, ``aot_eager`` and ``inductor`` backends, static and dynamic, and matches eager;
- the paths: ``"auto"``, each stable backend by name, inside ``use_backends`` and inside
  ``autotune()`` entered outside the compiled function: one graph (``explain``), right
  result, the backend the path asks for ran (a spy on the op's implementations:
  tests/compile_spies.py);
- run time: a function compiled once honours a ``use_backends`` block and a tuned result
  loaded afterwards, and ``autotune()`` tunes its calls, with no recompilation;
- writes into the caller's tensors (``out=``, in place) are eager's; a float argument is
  never a stale constant; gradients through a compiled call match the torch backend's, and
  ``out=`` with a tensor that requires grad is refused;
- export (strict and not) keeps the operators in the graph; ``opcheck`` passes on every
  declared case and every backend that runs here; fake and meta tensors give the result's
  metadata; the generated code's globals are a real module;
- ops a kernel author declares in a test: a fake derived from a torch-family backend, a
  declared ``fake=``, and neither (a graph break, never a crash); such an op should run
  outside Dynamo after the break (xfail: Dynamo traces its dispatcher today).

Backends are read from ``op.stable_backends``; the experimental lane has the experimental
paths (tests/experimental/test_compile_experimental.py).  Triton kernels run through the
interpreter on CPU (tests/conftest.py sets ``TRITON_INTERPRET=1``).
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from throwaway_experimental import OWNER, SOON
from torch._dynamo.testing import CompileCounter
from torch._subclasses.fake_tensor import FakeTensorMode

import flashinfer
from flashinfer.api_logging import flashinfer_experimental_api
from flashinfer.autotuner import (
    AutoTuner,
    Choice,
    autotune,
    load_tuning_file,
    make_key,
    save_tuning_file,
)
from flashinfer.backend_dispatch import Backend, backend_requirement
from flashinfer.backend_families import TORCH, TRITON, backend_family
from flashinfer.dispatch.restrictions import block_flag, reset_block_flags
from flashinfer.testing import call_arguments, cases_for, support_reason

flashinfer.load_all_apis()  # torch.ops.flashinfer.* exist once their API modules are loaded

OPS = ("rmsnorm", "mm")
"""The public stable ops (each has an ``out=`` form)."""


def _op(name: str) -> Any:
    return getattr(flashinfer, name)


def _operator(name: str) -> Any:
    return getattr(torch.ops.flashinfer, name)


def _no_grad_operator(name: str) -> Any:
    """The operator a compiled call runs when nothing requires grad (torch_op.NO_GRAD_SUFFIX)."""
    return getattr(torch.ops.flashinfer, f"{name}_no_grad").default


TUNABLE = tuple(n for n in OPS if _op(n).api_key in AutoTuner.get().registered())
"""The ops the autotuner tunes (read from its registrations)."""


@pytest.fixture(autouse=True)
def _fresh_dynamo() -> Iterator[None]:
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def _inputs(name: str, rows: int = 4) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(rows)
    if name == "rmsnorm":
        return torch.randn(rows, 64, generator=g), torch.randn(64, generator=g) + 1
    return torch.randn(rows, 32, generator=g), torch.randn(32, 16, generator=g)


def _empty_result(name: str, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    if name == "rmsnorm":
        return torch.empty_like(x)
    return x.new_empty(x.shape[0], y.shape[1])


def _program(name: str, **options: Any) -> Callable[..., Any]:
    """A model's use of the op: its functional form, its ``out=`` form, torch around both."""
    op = _op(name)

    def program(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        out = _empty_result(name, x, y)
        op(x, y, out=out, **options)
        return op(x * 1, y, **options) * 2 + 1, out - 1

    return program


def _call(name: str, **options: Any) -> Callable[..., Any]:
    """One functional call of the op, nothing around it."""
    op = _op(name)

    def call(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return op(x, y, **options)

    return call


def _graphs_compiled() -> int:
    """Graphs Dynamo has compiled in this process (a restart of one frame's analysis, as
    ``aot_eager`` does for a float argument under ``dynamic=True``, is not a new graph)."""
    return torch._dynamo.utils.counters["stats"]["unique_graphs"]


def _assert_same(actual: Any, expected: Any) -> None:
    torch.testing.assert_close(actual, expected, rtol=1e-5, atol=1e-5)


# ---- the matrix: every op, every compiler backend, static and dynamic ----------------------


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
@pytest.mark.parametrize("compiler", ["eager", "aot_eager", "inductor"])
@pytest.mark.parametrize("name", OPS)
def test_every_op_compiles_in_one_graph_and_matches_eager(name, compiler, dynamic):
    program = _program(name)
    compiled = torch.compile(program, backend=compiler, fullgraph=True, dynamic=dynamic)
    graphs = _graphs_compiled()
    inputs = _inputs(name)
    _assert_same(compiled(*inputs), program(*inputs))
    if dynamic:  # another number of rows runs the same graph
        other = _inputs(name, rows=7)
        _assert_same(compiled(*other), program(*other))
    assert _graphs_compiled() == graphs + 1


def test_the_graph_holds_the_operators_and_no_line_of_the_dispatcher():
    """Opaque calls (a Triton backend named; ``out=``) are one operator node each."""
    graphs: list[torch.fx.GraphModule] = []

    def keep(gm: torch.fx.GraphModule, example_inputs: Any) -> Any:
        graphs.append(gm)
        return gm.forward

    def model(x, w, a, b):
        return _program("rmsnorm", backend="triton")(x, w), _program("mm", backend="triton")(a, b)

    torch.compile(model, backend=keep, fullgraph=True)(*_inputs("rmsnorm"), *_inputs("mm"))
    (graph,) = graphs
    targets = [n.target for n in graph.graph.nodes if n.op == "call_function"]
    for name in OPS:
        # nothing requires grad: the operator without a Python Autograd kernel
        assert targets.count(_no_grad_operator(name)) == 1, targets
        assert targets.count(_operator(name).out) == 1, targets


@pytest.mark.parametrize("grad", ["requires grad", "no_grad()", "inference_mode()", "none"])
@pytest.mark.parametrize("name", OPS)
def test_an_opaque_call_pays_the_autograd_kernel_only_when_an_input_requires_grad(name, grad):
    """The no-grad operator (no Python Autograd kernel) whenever autograd has nothing to
    record: no input requires grad, or grad mode is off; the API's operator otherwise."""
    x, y = _inputs(name)
    if grad != "none":
        x.requires_grad_()
    mode = {"no_grad()": torch.no_grad, "inference_mode()": torch.inference_mode}.get(grad)
    call = _call(name, backend="triton")
    graphs: list[torch.fx.GraphModule] = []

    def keep(gm: torch.fx.GraphModule, example_inputs: Any) -> Any:
        graphs.append(gm)
        return gm.forward

    with mode() if mode else nullcontext():
        result = torch.compile(call, backend=keep, fullgraph=True)(x, y)
        expected = call(x.detach(), y)
    targets = [n.target for g in graphs for n in g.graph.nodes]
    requires = grad == "requires grad"
    assert (_operator(name).default in targets) is requires, targets
    assert (_no_grad_operator(name) in targets) is not requires, targets
    _assert_same(result.detach(), expected)
    assert result.requires_grad is requires


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_a_float_argument_is_never_a_stale_constant(dynamic):
    """``eps`` passed into the compiled function: each value gives its own result (the
    operator's ``float`` argument is guarded on, never baked in from the first call)."""

    def norm(x, w, eps):
        return flashinfer.rmsnorm(x, w, eps) + 1

    compiled = torch.compile(norm, backend="aot_eager", fullgraph=True, dynamic=dynamic)
    x, w = _inputs("rmsnorm")
    for eps in (1e-6, 0.25, 4.0, 1e-6):
        _assert_same(compiled(x, w, eps), norm(x, w, eps))


def _in_place(name: str, backend: str):
    """The op writing into tensors the caller passed: the input itself (rmsnorm), a
    caller's ``out`` (both)."""
    op = _op(name)

    def program(x, y, out):
        op(x, y, out=out, backend=backend)
        if name == "rmsnorm":
            op(x, y, out=x, backend=backend)
        return out * 2

    return program


@pytest.mark.parametrize("compiler", ["eager", "aot_eager"])
@pytest.mark.parametrize("name", OPS)
def test_writes_into_the_callers_tensors_are_as_eager(name, compiler):
    for backend in ["auto", *_op(name).stable_backends]:
        torch._dynamo.reset()
        program = _in_place(name, backend)
        x, y = _inputs(name)
        out = _empty_result(name, x, y)
        x2, out2 = x.clone(), out.clone()
        compiled = torch.compile(program, backend=compiler, fullgraph=True)
        _assert_same(compiled(x, y, out), program(x2, y, out2))
        _assert_same((x, out), (x2, out2))


@pytest.mark.parametrize("name", OPS)
def test_writes_into_the_callers_tensors_are_as_eager_under_inductor(name):
    program = _in_place(name, "auto")
    x, y = _inputs(name)
    out = _empty_result(name, x, y)
    x2, out2 = x.clone(), out.clone()
    _assert_same(torch.compile(program, fullgraph=True)(x, y, out), program(x2, y, out2))
    _assert_same((x, out), (x2, out2))


# ---- the paths: auto, named, use_backends and autotune() entered outside ------------------


def _paths() -> list[Any]:
    params = []
    for name in OPS:
        params.append(pytest.param(name, "auto", None, id=f"{name}-auto"))
        for backend in _op(name).stable_backends:
            params.append(pytest.param(name, "named", backend, id=f"{name}-backend={backend}"))
            params.append(pytest.param(name, "use_backends", backend, id=f"{name}-use={backend}"))
        params.append(pytest.param(name, "autotune", None, id=f"{name}-autotune"))
    return params


def _block(name: str, path: str, backend: str | None) -> AbstractContextManager[Any]:
    if path == "use_backends":
        return flashinfer.use_backends({_op(name): [backend]})
    if path == "autotune":
        return autotune()
    return nullcontext()


@pytest.mark.parametrize("name, path, backend", _paths())
def test_each_path_is_one_graph_and_runs_the_backend_it_asks_for(ran, name, path, backend):
    op = _op(name)
    options = {"backend": backend} if path == "named" else {}
    program = _program(name, **options)
    inputs = _inputs(name)
    with _block(name, path, backend):  # entered outside the compiled function
        explanation = torch._dynamo.explain(program)(*inputs)
        torch._dynamo.reset()
        compiled = torch.compile(program, backend="aot_eager", fullgraph=True)
        ran.clear()
        actual = compiled(*inputs)
        compiled_ran = list(ran)
        if path in ("auto", "use_backends", "autotune"):
            expected_backend = backend or op.suitable_auto_backends[0]
            assert op.suitable_auto_backends[0] == expected_backend
        expected = program(*inputs)
    assert explanation.graph_count == 1 and explanation.graph_break_count == 0
    _assert_same(actual, expected)
    # The functional call is transparent (its torch code is in the graph, nothing runs it
    # at run time) when the choice is the torch backend, certain for every call the graph
    # accepts: named, or "auto" of an op that is not tuned, outside any use_backends block.
    chosen = backend or "torch"
    transparent = chosen == "torch" and (
        path == "named" or (path != "use_backends" and name not in TUNABLE)
    )
    targets = [n.target for g in explanation.graphs for n in g.graph.nodes]
    opaque = _operator(name).default in targets or _no_grad_operator(name) in targets
    assert opaque is not transparent, targets
    assert _operator(name).out in targets  # out= stays opaque: it writes the caller's tensor
    if path in ("named", "use_backends"):
        # the out= call, then the functional one unless it is in the graph
        assert compiled_ran == [backend] * (1 if transparent else 2)
    else:
        assert compiled_ran and set(compiled_ran) <= set(op.stable_backends)


# ---- run time: choices made when the compiled function runs, never recompiled -------------


@pytest.mark.parametrize("name", OPS)
def test_a_use_backends_block_entered_after_compiling_is_honoured(ran, name):
    op = _op(name)
    counted = CompileCounter()
    compiled = torch.compile(_call(name), backend=counted, fullgraph=True)
    inputs = _inputs(name)
    compiled(*inputs)
    default = op.explain(*inputs).chosen
    expected = _call(name, backend="torch")(*inputs)
    for backend in [*op.stable_backends, default]:
        ran.clear()
        with flashinfer.use_backends({op: [backend]}):
            _assert_same(compiled(*inputs), expected)
            assert op.suitable_auto_backends == [backend]
        assert ran == [backend]
    ran.clear()
    _assert_same(compiled(*inputs), expected)  # the block left: the default again
    # decided by the operator at run time: tuned ops always, the others because a block
    # named the API (the flag stays set, so no thread's block can race a guard)
    assert ran == [default] and op.suitable_auto_backends[0] == default
    assert counted.frame_count == (1 if name in TUNABLE else 2)
    reset_block_flags()
    ran.clear()
    _assert_same(compiled(*inputs), expected)
    if name in TUNABLE:  # opaque still
        assert ran == [default] and counted.frame_count == 1
    else:  # transparent again: the first graph, kept, holds the default's code
        assert ran == [] and default == "torch"
        assert counted.frame_count == 2


@pytest.mark.parametrize("name", OPS)
def test_the_block_flag_stays_set_when_its_blocks_close(name):
    """A flag that threads could flip back and forth would let Dynamo's guard reads race
    (every cached graph fails between two reads: one recompile per race); the flag changes
    once, when a block first names the API, and only ``reset_block_flags`` clears it."""
    op = _op(name)
    flag = block_flag(op.api_key)
    other = _op(next(n for n in OPS if n != name))
    assert not flag.named
    with flashinfer.use_backends({other: ["torch"]}):
        assert not flag.named  # a block naming another API
    with flashinfer.use_backends({op: ["torch"]}):
        assert flag.named
        reset_block_flags()  # an open block keeps its flags
        assert flag.named
    assert flag.named
    reset_block_flags()
    assert not flag.named


@pytest.mark.parametrize("name", OPS)
def test_each_thread_calling_one_compiled_function_gets_its_own_restriction(ran, name):
    """Choices are made in the caller's thread: two threads in ``use_backends`` blocks of
    different backends call one compiled function in lockstep, each runs its own."""
    op = _op(name)
    counted = CompileCounter()
    compiled = torch.compile(_call(name), backend=counted, fullgraph=True)
    inputs = _inputs(name)
    compiled(*inputs)
    with flashinfer.use_backends({op: ["torch"]}):  # each state compiled before the threads:
        compiled(*inputs)  # two threads missing at once may both compile (Dynamo's own race)
    backends = list(op.stable_backends)
    rounds = 4
    barrier = threading.Barrier(len(backends))
    seen: dict[str, list[list[str]]] = {}
    errors: list[BaseException] = []

    def worker(backend: str) -> None:
        try:
            with flashinfer.use_backends({op: [backend]}):
                for _ in range(rounds):
                    barrier.wait(timeout=60)
                    compiled(*inputs)
                    seen.setdefault(backend, []).append(list(op.suitable_auto_backends))
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)
            barrier.abort()

    ran.clear()
    threads = [threading.Thread(target=worker, args=(b,)) for b in backends]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert seen == {b: [[b]] * rounds for b in backends}
    assert sorted(ran) == sorted(backends * rounds)
    assert counted.frame_count == (1 if name in TUNABLE else 2)  # see the test above


@pytest.mark.parametrize("name", OPS)
def test_threads_alternating_a_block_and_none_do_not_recompile_per_call(ran, name):
    """One thread calls inside a ``use_backends`` block, another outside any, in lockstep:
    each gets its own choice, and after the first call of each state nothing recompiles
    (the graphs are guarded on the block flag, a two-valued state, not a per-call one)."""
    op = _op(name)
    counted = CompileCounter()
    compiled = torch.compile(_call(name), backend=counted, fullgraph=True)
    inputs = _inputs(name)
    expected = _call(name, backend="torch")(*inputs)
    compiled(*inputs)
    with flashinfer.use_backends({op: ["triton"]}):
        compiled(*inputs)
    frames = counted.frame_count
    rounds = 20
    barrier = threading.Barrier(2)
    results: dict[str, list[torch.Tensor]] = {"block": [], "none": []}
    errors: list[BaseException] = []

    def worker(kind: str) -> None:
        try:
            for _ in range(rounds):
                barrier.wait(timeout=60)
                if kind == "block":
                    with flashinfer.use_backends({op: ["triton"]}):
                        results[kind].append(compiled(*inputs))
                else:
                    results[kind].append(compiled(*inputs))
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)
            barrier.abort()

    ran.clear()
    threads = [threading.Thread(target=worker, args=(k,)) for k in results]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for kind in results:
        assert len(results[kind]) == rounds
        for r in results[kind]:
            _assert_same(r, expected)
    assert ran.count("triton") == rounds  # every call in the block ran its backend
    assert counted.frame_count == frames  # no recompilation while they alternate
    assert frames == (1 if name in TUNABLE else 2)


@pytest.mark.parametrize("name", TUNABLE)
def test_a_tuned_result_loaded_after_compiling_is_used(ran, name, tmp_path):
    op = _op(name)
    counted = CompileCounter()
    compiled = torch.compile(_call(name), backend=counted, fullgraph=True)
    inputs = _inputs(name)
    a, b = inputs
    compiled(*inputs)
    default = op.suitable_auto_backends[0]
    other = next(b for b in op.stable_backends if b != default)
    tuner = AutoTuner.get()
    tactic = op.implementations[other].tactics((a, b, None, None))[0]
    tuner.set_choice(make_key(op.api_key, (a, b, None, None)), Choice(other, tactic, 1e-6))
    path = tmp_path / "tuned.json"
    save_tuning_file(path)
    tuner.clear()
    ran.clear()
    compiled(*inputs)
    assert ran == [default]
    before = tuner.stats()[op.api_key].calls_tuned
    assert load_tuning_file(path).loaded == 1
    expected = _call(name, backend="torch")(*inputs)
    ran.clear()
    _assert_same(compiled(*inputs), expected)
    assert ran == [other]
    assert tuner.stats()[op.api_key].calls_tuned == before + 1
    assert counted.frame_count == 1


@pytest.mark.parametrize("name", TUNABLE)
def test_autotune_tunes_compiled_calls(ran, name):
    op = _op(name)
    counted = CompileCounter()
    compiled = torch.compile(_call(name), backend=counted, fullgraph=True)
    inputs = _inputs(name)
    compiled(*inputs)
    tuner = AutoTuner.get()
    key = make_key(op.api_key, (*inputs, None, None))
    assert tuner.choice(key) is None
    ran.clear()
    with autotune():
        compiled(*inputs)
    record = tuner.last_tuning()
    assert record is not None and record.key == key and record.timed
    assert tuner.choice(key) is not None and tuner.choice(key).backend in op.stable_backends
    assert set(ran) == set(op.stable_backends)  # every candidate was timed
    assert counted.frame_count == 1


# ---- autograd through compiled calls ------------------------------------------------------


def _loss(name: str, backend: str) -> Callable[..., Any]:
    op = _op(name)

    def loss(x, y):
        return (op(x, y, backend=backend) * 2).square().sum()

    return loss


def _grads(loss: Callable[..., Any], x: torch.Tensor, y: torch.Tensor) -> tuple:
    x, y = x.detach().requires_grad_(), y.detach().requires_grad_()
    return torch.autograd.grad(loss(x, y), (x, y))


def _grad_paths() -> list[Any]:
    params = []
    for name in OPS:
        for backend in ["auto", *_op(name).stable_backends]:
            params.append(pytest.param(name, backend, "aot_eager", id=f"{name}-{backend}"))
        params.append(pytest.param(name, "auto", "inductor", id=f"{name}-auto-inductor"))
    return params


@pytest.mark.parametrize("name, backend, compiler", _grad_paths())
def test_gradients_through_a_compiled_call_match_the_torch_backends(name, backend, compiler):
    inputs = _inputs(name)
    compiled = torch.compile(_loss(name, backend), backend=compiler, fullgraph=True)
    actual = _grads(compiled, *inputs)
    # Compiling must not change the backend's numbers: the same backend, eager, tightly.
    _assert_same(actual, _grads(_loss(name, backend), *inputs))
    # And the gradients are torch's (eager autograd through torch's ops), to float32
    # accumulation order: a Triton matmul sums its products in another order than torch's,
    # which the loss's square amplifies (mm-triton: 9e-5 off at a gradient of 5).
    expected = _grads(_loss(name, "torch"), *inputs)
    torch.testing.assert_close(actual, expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("name", OPS)
def test_a_compiled_out_call_given_a_tensor_that_requires_grad_is_refused(name):
    """``out=`` has no gradient (torch's rule): refused at the call, never detached."""
    op = _op(name)

    def program(x, y):
        out = _empty_result(name, x, y)
        op(x, y, out=out)
        return out

    x, y = _inputs(name)
    compiled = torch.compile(program, backend="aot_eager", fullgraph=True)
    with pytest.raises(Exception, match=r"requires grad.*torch\.no_grad\(\)"):
        compiled(x, y.requires_grad_())


# ---- export ---------------------------------------------------------------------------


class _Block(torch.nn.Module):
    """A layer as a model writes it: a norm, then a projection."""

    def __init__(self) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(3)
        self.norm = torch.nn.Parameter(torch.randn(64, generator=g) + 1)
        self.proj = torch.nn.Parameter(torch.randn(64, 16, generator=g))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return flashinfer.mm(flashinfer.rmsnorm(x, self.norm), self.proj) + 1


@pytest.mark.parametrize("strict", [False, True], ids=["non-strict", "strict"])
def test_export_keeps_the_operators_runs_and_matches_eager(strict):
    model, x = _Block(), torch.randn(5, 64, generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        program = torch.export.export(model, (x,), strict=strict)
        targets = [n.target for n in program.graph.nodes if n.op == "call_function"]
        assert _operator("rmsnorm").default in targets and _operator("mm").default in targets
        _assert_same(program.module()(x), model(x))
        other = torch.randn(5, 64)  # new values through the same program
        _assert_same(program.module()(other), model(other))


# ---- opcheck: every declared case, every backend that runs here ---------------------------


def _opcheck_items() -> list[Any]:
    params = []
    for name in OPS:
        op = _op(name)
        for case in cases_for(op):
            for backend in ["auto", *op.stable_backends]:
                params.append(pytest.param(name, case, backend, id=f"{name}-{backend}-{case.name}"))
    return params


@pytest.mark.parametrize("name, case, backend", _opcheck_items())
def test_opcheck_passes_on_every_declared_case(name, case, backend):
    op = _op(name)
    inputs = case.make_inputs()
    if backend != "auto":
        reason = support_reason(op, backend, inputs)
        if reason is not None:
            pytest.skip(reason)
    args, kwargs = call_arguments(op, inputs)
    overload = _operator(name).out if kwargs.get("out") is not None else _operator(name).default
    torch.library.opcheck(overload, tuple(args), {**kwargs, "backend": backend})
    if kwargs.get("out") is None:  # the no-grad operator: the same kernels, a flat schema
        torch.library.opcheck(
            _no_grad_operator(name),
            _flat_arguments(_operator(name).default, args, {**kwargs, "backend": backend}),
            {},
            test_utils=("test_schema", "test_faketensor", "test_aot_dispatch_dynamic"),
        )


def _flat_arguments(default: Any, args: list[Any], kwargs: dict[str, Any]) -> tuple[Any, ...]:
    """A call of the default overload as the no-grad operator takes it: every argument,
    positionally, in the default overload's order (its defaults where not given)."""
    declared = default._schema.arguments
    given = {**{a.name: v for a, v in zip(declared, args, strict=False)}, **kwargs}
    return tuple(given[a.name] if a.name in given else a.default_value for a in declared)


def test_no_grad_operator_takes_the_default_overloads_arguments_flat():
    """Its schema is the default overload's with every argument positional and none
    defaulted (what a compiled program passes fastest); its arguments are the same."""
    for name in OPS:
        default, flat = _operator(name).default._schema, _no_grad_operator(name)._schema
        assert [a.name for a in flat.arguments] == [a.name for a in default.arguments]
        assert [str(a.type) for a in flat.arguments] == [str(a.type) for a in default.arguments]
        assert not any(a.kwarg_only or a.default_value is not None for a in flat.arguments)
        assert [str(r.type) for r in flat.returns] == [str(r.type) for r in default.returns]


def test_every_op_has_declared_cases_for_opcheck():
    assert all(cases_for(_op(name)) for name in OPS)


# ---- meta and fake tensors -----------------------------------------------------------------


def _metadata_cases() -> list[Any]:
    params = []
    for name in OPS:
        for backend in ["auto", *_op(name).stable_backends]:
            params.append(pytest.param(name, backend, id=f"{name}-{backend}"))
    return params


def _shaped(name: str, device: str) -> list[tuple[tuple, dict[str, Any], tuple, torch.dtype]]:
    """(arguments, options, result shape, result dtype) of a few calls of the op."""
    e = lambda *shape, dtype=torch.float32: torch.empty(*shape, dtype=dtype, device=device)  # noqa: E731
    if name == "rmsnorm":
        return [
            ((e(3, 5, 64), e(64)), {}, (3, 5, 64), torch.float32),
            (
                (e(2, 96, dtype=torch.float16), e(96, dtype=torch.float16)),
                {"eps": 1e-3},
                (2, 96),
                torch.float16,
            ),
        ]
    half = torch.float16
    return [
        ((e(7, 64), e(64, 9)), {}, (7, 9), torch.float32),
        (
            (e(16, 32, dtype=half), e(32, 48, dtype=half)),
            {"out_dtype": torch.float32},
            (16, 48),
            torch.float32,
        ),
    ]


def _check_metadata(name: str, backend: str, device: str, skip_check: bool) -> None:
    op = _op(name)
    for args, options, shape, dtype in _shaped(name, device):
        result = op(*args, **options, backend=backend, skip_check=skip_check)
        assert (tuple(result.shape), result.dtype, result.device.type) == (shape, dtype, device)
        out = torch.empty(shape, dtype=dtype, device=device)
        assert op(*args, **options, out=out, backend=backend, skip_check=skip_check) is out


@pytest.mark.parametrize("skip_check", [False, True], ids=["checked", "skip_check"])
@pytest.mark.parametrize("name, backend", _metadata_cases())
def test_meta_tensors_give_the_result_metadata(name, backend, skip_check):
    """``skip_check=True`` too: a Triton backend failed with "Cannot copy out of meta
    tensor" (no backend can run on meta tensors; the operator gives the shape)."""
    _check_metadata(name, backend, "meta", skip_check)


@pytest.mark.parametrize("skip_check", [False, True], ids=["checked", "skip_check"])
@pytest.mark.parametrize("name, backend", _metadata_cases())
def test_fake_tensors_give_the_result_metadata(name, backend, skip_check):
    with FakeTensorMode():
        _check_metadata(name, backend, "cpu", skip_check)


@pytest.mark.parametrize("name", OPS)
def test_fake_tensors_are_validated_as_eager_calls_are(name):
    """The trace-time checks are the eager call's: malformed metadata raises its error."""
    with FakeTensorMode():
        x, y = (
            (torch.empty(4, 64), torch.empty(65))
            if name == "rmsnorm"
            else (torch.empty(4, 32), torch.empty(33, 8))
        )
        with pytest.raises(ValueError):
            _op(name)(x, y)


# ---- generated code lives in real modules ----------------------------------------------------


@pytest.mark.parametrize("name", OPS)
def test_generated_code_of_each_op_lives_in_a_real_module(name):
    op = _op(name)
    for fn in (op, op._torchdynamo_inline):
        module = importlib.import_module(fn.__globals__["__name__"])
        assert module.__dict__ is fn.__globals__
    public = importlib.import_module(op.__module__)
    assert getattr(public, op.__name__) is op


@pytest.mark.parametrize("name", TUNABLE)
def test_the_autotuner_router_lives_in_a_real_module(name):
    router = _op(name).dispatcher.auto_route
    assert router is not None
    module = importlib.import_module(router.__globals__["__name__"])
    assert module.__dict__ is router.__globals__


def test_the_experimental_marker_wrapper_lives_in_a_real_module():
    @flashinfer_experimental_api(owner=OWNER, tracking_issue=1, graduate_by=SOON)
    def compiled_throwaway(x):
        return x

    module = importlib.import_module(compiled_throwaway.__globals__["__name__"])
    assert module.__dict__ is compiled_throwaway.__globals__
    assert module.__name__ != __name__  # the generated wrapper, not this test's function


# ---- ops a kernel author declares -------------------------------------------------------------


def _row_sums(x: torch.Tensor) -> torch.Tensor:
    return x.sum(-1)


def _author_op(
    *, torch_backend: bool, fake: Callable[..., Any] | None, kernel: Callable[..., Any] = _row_sums
) -> Any:
    """An op whose result has another shape than its input (so a fake result copied from
    the input would be wrong): row sums, a Triton-family backend, and a torch one."""

    @backend_family(TRITON)
    def check_kernel(x):
        return True

    @backend_family(TORCH)
    def check_torch(x):
        return True

    backends = [Backend("kernel", check=check_kernel, run=kernel)]
    if torch_backend:
        backends.insert(0, Backend("reference", check=check_torch, run=_row_sums))

    @backend_requirement(backends, fake=fake)
    def row_sums(x: torch.Tensor, *, backend: str = "auto") -> torch.Tensor:
        if backend == "auto":
            backend = row_sums.suitable_auto_backends[0]
        return row_sums.implementations[backend](x)

    return row_sums


@pytest.mark.usefixtures("isolated_op_registry")
@pytest.mark.parametrize("declared", ["derived", "fake="])
def test_an_authors_op_with_a_fake_compiles_in_one_graph(declared):
    if declared == "derived":  # from its torch-family backend
        op = _author_op(torch_backend=True, fake=None)
    else:
        op = _author_op(torch_backend=False, fake=lambda x: x.new_empty(x.shape[:-1]))
    assert op.dispatcher.torch_op is not None and op.dispatcher.torch_op.fake is not None

    def model(x):
        return op(x) + op(x, backend="kernel")

    x = torch.randn(6, 8)
    for dynamic in (False, True):
        torch._dynamo.reset()
        compiled = torch.compile(model, backend="aot_eager", fullgraph=True, dynamic=dynamic)
        _assert_same(compiled(x), model(x))
    assert torch._dynamo.explain(model)(x).graph_break_count == 0
    with FakeTensorMode():
        assert op(torch.empty(3, 5, 8)).shape == (3, 5)


def _row_sums_on_host(x: torch.Tensor) -> torch.Tensor:
    """A "kernel" that needs real data (as a launch does): it cannot run on fake tensors."""
    return torch.tensor([sum(row) for row in x.tolist()], dtype=x.dtype)


@pytest.mark.usefixtures("isolated_op_registry")
@pytest.mark.parametrize("kernel", [_row_sums, _row_sums_on_host])
def test_an_authors_op_with_no_fake_runs_its_body_on_fakes_or_graph_breaks(kernel):
    # Upstream's declarations: no fake=, no torch-family backend.  A body whose torch code
    # runs on fake tensors compiles in one graph (fullgraph too); one that needs data
    # breaks the graph there and runs eagerly, right either way.
    op = _author_op(torch_backend=False, fake=None, kernel=kernel)
    assert op.dispatcher.torch_op is not None

    def model(x):
        return op(x * 2) + 1

    x = torch.randn(6, 8)
    explanation = torch._dynamo.explain(model)(x)
    assert (explanation.graph_break_count >= 1) is (kernel is _row_sums_on_host)
    if kernel is _row_sums:
        torch._dynamo.reset()
        _assert_same(torch.compile(model, backend="aot_eager", fullgraph=True)(x), model(x))
    for compiler in ("eager", "aot_eager"):
        torch._dynamo.reset()
        _assert_same(torch.compile(model, backend=compiler)(x), model(x))


def _schemaless_op() -> Any:
    """An op whose signature has no torch schema (a ``list`` argument): no operator."""

    @backend_family(TRITON)
    def check_kernel(xs):
        return True

    @backend_requirement([Backend("kernel", check=check_kernel, run=lambda xs: _row_sums(xs[0]))])
    def row_sums_of_first(xs: list, *, backend: str = "auto") -> torch.Tensor:
        if backend == "auto":
            backend = row_sums_of_first.suitable_auto_backends[0]
        return row_sums_of_first.implementations[backend](xs)

    assert row_sums_of_first.dispatcher.torch_op is None
    return row_sums_of_first


@pytest.mark.usefixtures("isolated_op_registry")
@pytest.mark.parametrize("kind", ["no fake", "no schema"])
def test_a_graph_breaking_op_runs_outside_dynamo(kind):
    """An op compilers cannot trace runs as eager code runs: Dynamo compiles the caller's
    frames around the break, never a frame of the dispatcher, the API's body or a backend
    (each would be traced, guarded and graph-broken again on its locks and context
    variables, on every first call)."""
    if kind == "no fake":  # and a body that cannot run on fake tensors
        op = _author_op(torch_backend=False, fake=None, kernel=_row_sums_on_host)
        call = lambda x: op(x * 2)  # noqa: E731
    else:
        op = _schemaless_op()
        call = lambda x: op([x * 2])  # noqa: E731
    graphs: list[torch.fx.GraphModule] = []

    def keep(gm: torch.fx.GraphModule, example_inputs: Any) -> Any:
        graphs.append(gm)
        return gm.forward

    def model(x):
        return call(x) + 1

    x = torch.randn(6, 8)
    _assert_same(torch.compile(model, backend=keep)(x), model(x))
    traced = [str(n.target) for gm in graphs for n in gm.graph.nodes if n.op != "placeholder"]
    assert not any("sum" in t for t in traced), traced  # the backend's x.sum(-1)


@pytest.mark.parametrize("compiler", ["aot_eager", "inductor"])
def test_an_experimental_backend_named_in_a_compiled_call_warns_once_in_the_users_file(compiler):
    """The warning points into the compiled function's file (the user's), not at torch's
    frames between the compiled program and the operator (torch/_ops.py and the like)."""
    import warnings

    flashinfer.reset_experimental_warnings()

    (experimental,) = flashinfer.mm.experimental_backends  # split-K: M <= 64, K >= 1024

    def program(a, b):
        return flashinfer.mm(a, b, backend=experimental)

    a, b = torch.randn(8, 1024), torch.randn(1024, 16)
    compiled = torch.compile(program, backend=compiler, fullgraph=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        compiled(a, b)
        compiled(a, b)
    warned = [w for w in caught if w.category.__name__ == "ExperimentalWarning"]
    assert len(warned) == 1, [str(w.message) for w in caught]
    assert warned[0].filename == __file__
    _assert_same(compiled(a, b), program(a, b))


# ---- number arguments: as the eager call takes them --------------------------------------


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
@pytest.mark.parametrize("flag", [True, False])
def test_a_bool_number_argument_is_refused_compiled_as_eagerly(flag: bool, dynamic: bool) -> None:
    """The schema reads ``eps=True`` as 1.0: the compiled call ran with it."""
    x, w = torch.randn(3, 8), torch.rand(8) + 0.5
    with pytest.raises(ValueError, match="eps"):
        flashinfer.rmsnorm(x, w, eps=flag)
    compiled = torch.compile(lambda x: flashinfer.rmsnorm(x, w, eps=flag), dynamic=dynamic)
    with pytest.raises(Exception, match="eps must be a number, got " + repr(flag)):
        compiled(x)


@settings(max_examples=8, deadline=None)
@given(eps=st.floats(1e-8, 1.0), backend=st.sampled_from(["auto", "torch"]))
def test_a_numpy_float_eps_compiles_and_equals_the_eager_call(eps: float, backend: str) -> None:
    """``np.float64`` (a float, held by a module say) is taken eagerly; Dynamo traces it as
    a 0-dim array, which the operator's ``float`` refused."""
    np = pytest.importorskip("numpy")
    x, w = torch.randn(3, 8), torch.rand(8) + 0.5
    held = np.float64(eps)
    expected = flashinfer.rmsnorm(x, w, eps=held, backend=backend)
    torch._dynamo.reset()
    compiled = torch.compile(
        lambda x: flashinfer.rmsnorm(x, w, eps=held, backend=backend), fullgraph=True
    )
    torch.testing.assert_close(compiled(x), expected)


# ---- what a compiled call pays on every call: its guards -----------------------------------


@pytest.mark.parametrize("name", OPS)
@pytest.mark.parametrize("grad", [False, True])
def test_a_compiled_call_adds_no_python_guard(name, grad):
    """Every guard flashinfer's traced code adds is one of the guard tree's C++ checks:
    none is a Python lambda, which would run in Python on every call of the compiled
    function.  (An object reached through two modules' globals, ``torch.Tensor`` through
    two helpers say, makes Dynamo add such a lambda to check they are the same object.)"""
    from torch._dynamo.eval_frame import _debug_get_cache_entry_list

    op = _op(name)
    inputs = cases_for(op)[0].make_inputs()
    args, kwargs = call_arguments(op, inputs)

    def program(*args: Any) -> Any:
        return op(*args, **kwargs)

    torch._dynamo.reset()
    with torch.set_grad_enabled(grad):
        torch.compile(program, fullgraph=True, dynamic=False, backend="eager")(*args)
    (entry,) = _debug_get_cache_entry_list(program.__code__)
    lambdas = [
        line
        for line in str(entry.guard_manager).splitlines()
        if "LAMBDA_GUARD" in line and "init_ambient_guards" not in line
    ]
    assert lambdas == []
