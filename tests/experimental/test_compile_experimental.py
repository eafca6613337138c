"""Experimental code inside ``torch.compile``, fake and meta tensors and
``torch.library.opcheck`` (issue 19's "done when", experimental lane; the stable lane is
tests/test_compile.py).

- mm's experimental backend, named: one graph, right result, and it warns exactly once over
  repeated compiled calls (the warning is a run-time matter: the operator's real
  implementation is the dispatcher);
- ``"auto"`` with the gate turned on after compiling: the compiled function's next call
  has the experimental backend among its candidates, with no recompilation;
- the experimental API ``fused_add_rmsnorm`` (in place on ``input`` and ``residual``): one
  graph on every compiler backend, the same writes as eager, its warning once; opcheck on
  its declared cases; fake and meta tensors.

Split-K needs K >= 1024 (its checker says why); Triton runs through the interpreter on CPU
(tests/conftest.py sets ``TRITON_INTERPRET=1``).
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Iterator

import pytest
import torch
from torch._dynamo.testing import CompileCounter
from torch._subclasses.fake_tensor import FakeTensorMode

import flashinfer
from flashinfer import ExperimentalWarning, fused_add_rmsnorm, mm
from flashinfer.testing import call_arguments, cases_for, support_reason

pytestmark = pytest.mark.experimental

GATE = "FLASHINFER_ALLOW_EXPERIMENTAL_AUTO_BACKENDS"

flashinfer.load_all_apis()  # torch.ops.flashinfer.* exist once their API modules are loaded


@pytest.fixture(autouse=True)
def _fresh_dynamo() -> Iterator[None]:
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def _experimental_backend() -> str:
    (backend,) = mm.experimental_backends  # the one shipped: a second one needs its own row
    return backend


def _small_m_large_k(rows: int = 4) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(rows)
    return torch.randn(rows, 1024, generator=g), torch.randn(1024, 16, generator=g)


def _assert_same(actual, expected) -> None:
    torch.testing.assert_close(actual, expected, rtol=1e-5, atol=1e-4)


def _experimental_warnings(record: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in record if issubclass(w.category, ExperimentalWarning)]


# ---- mm's experimental backend -------------------------------------------------------------


def _mm_program(backend: str):
    def program(a, b):
        out = a.new_empty(a.shape[0], b.shape[1])
        mm(a, b, out=out, backend=backend)
        return mm(a, b, backend=backend) * 2, out

    return program


@pytest.mark.parametrize("compiler", ["eager", "aot_eager", "inductor"])
def test_the_named_experimental_backend_compiles_in_one_graph(compiler):
    program = _mm_program(_experimental_backend())
    inputs = _small_m_large_k()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ExperimentalWarning)
        compiled = torch.compile(program, backend=compiler, fullgraph=True)
        _assert_same(compiled(*inputs), program(*inputs))
        if compiler == "eager":
            torch._dynamo.reset()
            assert torch._dynamo.explain(program)(*inputs).graph_break_count == 0


def test_the_named_experimental_backend_warns_once_over_compiled_calls():
    backend = _experimental_backend()
    counted = CompileCounter()
    compiled = torch.compile(_mm_program(backend), backend=counted, fullgraph=True)
    inputs = _small_m_large_k()
    flashinfer.reset_experimental_warnings()
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        for _ in range(3):
            compiled(*inputs)
    (message,) = _experimental_warnings(record)
    assert repr(backend) in message and "'mm'" in message
    flashinfer.reset_experimental_warnings()  # warns again once reset: at run time, not traced
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        compiled(*inputs)
        compiled(*inputs)
    assert len(_experimental_warnings(record)) == 1
    assert counted.frame_count == 1


def test_the_gate_turned_on_after_compiling_is_honoured(monkeypatch):
    backend = _experimental_backend()
    counted = CompileCounter()
    compiled = torch.compile(lambda a, b: mm(a, b) + 1, backend=counted, fullgraph=True)
    inputs = _small_m_large_k()
    compiled(*inputs)
    assert backend not in mm.suitable_auto_backends
    assert list(mm.dropped_experimental_backends) == [backend]
    monkeypatch.setenv(GATE, "1")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ExperimentalWarning)  # if "auto" puts it first here
        _assert_same(compiled(*inputs), inputs[0] @ inputs[1] + 1)
    assert backend in mm.suitable_auto_backends
    assert list(mm.dropped_experimental_backends) == []
    monkeypatch.delenv(GATE)
    compiled(*inputs)
    assert backend not in mm.suitable_auto_backends
    # The gate is guarded: a transparent call traces once per gate value and reuses each
    # graph (an opaque one, mm while the autotuner is loaded, traces once).
    frames = counted.frame_count
    monkeypatch.setenv(GATE, "1")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ExperimentalWarning)
        compiled(*inputs)
    monkeypatch.delenv(GATE)
    compiled(*inputs)
    assert counted.frame_count == frames <= 2


def test_a_use_backends_block_naming_it_after_compiling_runs_it_and_warns_once():
    backend = _experimental_backend()
    counted = CompileCounter()
    compiled = torch.compile(lambda a, b: mm(a, b) + 1, backend=counted, fullgraph=True)
    inputs = _small_m_large_k()
    compiled(*inputs)
    flashinfer.reset_experimental_warnings()
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        with flashinfer.use_backends(mm=[backend]):
            for _ in range(3):
                _assert_same(compiled(*inputs), inputs[0] @ inputs[1] + 1)
                assert mm.suitable_auto_backends == [backend]
    (message,) = _experimental_warnings(record)
    assert repr(backend) in message
    assert counted.frame_count == 1


def test_a_block_inside_a_compiled_function_listing_it_runs_it_and_warns_once_here():
    """Listing the experimental backend in a block written in the compiled function opts in
    as eagerly: it runs with the gate off, and warns once, at this file's line."""
    backend = _experimental_backend()
    counted = CompileCounter()

    def program(a, b):
        with flashinfer.use_backends(mm=[backend]):
            return mm(a, b) + 1

    compiled = torch.compile(program, backend=counted, fullgraph=True)
    inputs = _small_m_large_k()
    flashinfer.reset_experimental_warnings()
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        for _ in range(3):
            _assert_same(compiled(*inputs), inputs[0] @ inputs[1] + 1)
            assert mm.suitable_auto_backends == [backend]
    (warned,) = [w for w in record if issubclass(w.category, ExperimentalWarning)]
    assert repr(backend) in str(warned.message)
    assert warned.filename == __file__
    assert counted.frame_count == 1


def _experimental_opcheck_items() -> list:
    backend = _experimental_backend()
    return [pytest.param(case, id=f"mm-{backend}-{case.name}") for case in cases_for(mm)]


@pytest.mark.parametrize("case", _experimental_opcheck_items())
def test_opcheck_passes_on_mms_declared_cases_with_the_experimental_backend(case):
    backend = _experimental_backend()
    inputs = case.make_inputs()
    reason = support_reason(mm, backend, inputs)
    if reason is not None:
        pytest.skip(reason)
    args, kwargs = call_arguments(mm, inputs)
    overload = (
        torch.ops.flashinfer.mm.out
        if kwargs.get("out") is not None
        else torch.ops.flashinfer.mm.default
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ExperimentalWarning)
        torch.library.opcheck(overload, tuple(args), {**kwargs, "backend": backend})


@pytest.mark.parametrize("device", ["meta", "fake"])
def test_the_experimental_backend_gives_the_result_metadata(device):
    backend = _experimental_backend()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ExperimentalWarning)
        with FakeTensorMode() if device == "fake" else torch.device("meta"):
            a, b = (
                torch.empty(4, 1024, dtype=torch.float16),
                torch.empty(1024, 24, dtype=torch.float16),
            )
            y = mm(a, b, backend=backend)
            assert (tuple(y.shape), y.dtype) == ((4, 24), torch.float16)
            y = mm(a, b, out_dtype=torch.float32, backend=backend)
            assert (tuple(y.shape), y.dtype) == ((4, 24), torch.float32)
            out = torch.empty(4, 24)
            assert mm(a, b, out=out, out_dtype=torch.float32, backend=backend) is out


def test_the_experimental_backends_refusal_is_raised_at_trace_time():
    """A named backend's checker runs on fake tensors too: K below split-K's minimum."""
    with FakeTensorMode():
        with pytest.raises(ValueError, match="K >= 1024"):
            mm(torch.empty(4, 64), torch.empty(64, 16), backend=_experimental_backend())


def test_gradients_through_the_compiled_experimental_backend_match_eager():
    backend = _experimental_backend()
    a, b = _small_m_large_k()

    def loss(a, b, backend):
        return (mm(a, b, backend=backend) * 2).square().sum()

    def grads(fn, backend):
        x, y = a.clone().requires_grad_(), b.clone().requires_grad_()
        return torch.autograd.grad(fn(x, y, backend), (x, y))

    expected = grads(loss, "torch")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ExperimentalWarning)
        compiled = torch.compile(loss, backend="aot_eager", fullgraph=True)
        torch.testing.assert_close(grads(compiled, backend), expected, rtol=1e-4, atol=1e-3)


# ---- fused_add_rmsnorm: an experimental API that writes in place ---------------------------


def _fused(x, r, w):
    fused_add_rmsnorm(x, r, w)
    return x * 2, r + 1


def _fused_inputs(rows: int = 4):
    g = torch.Generator().manual_seed(rows)
    return (
        torch.randn(rows, 64, generator=g),
        torch.randn(rows, 64, generator=g),
        torch.randn(64, generator=g),
    )


@pytest.mark.parametrize("compiler", ["eager", "aot_eager", "inductor"])
def test_fused_add_rmsnorm_compiles_in_one_graph_and_writes_as_eager(compiler):
    x, r, w = _fused_inputs()
    x2, r2 = x.clone(), r.clone()
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore", ExperimentalWarning)
        compiled = torch.compile(_fused, backend=compiler, fullgraph=True)
        actual = compiled(x, r, w)
        expected = _fused(x2, r2, w)
    _assert_same(actual, expected)
    _assert_same((x, r), (x2, r2))  # the inputs themselves were written, as eager writes them


def test_fused_add_rmsnorm_is_one_graph_and_warns_once_over_compiled_calls():
    x, r, w = _fused_inputs()
    with torch.no_grad(), warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        explanation = torch._dynamo.explain(_fused)(x.clone(), r.clone(), w)
        torch._dynamo.reset()
        flashinfer.reset_experimental_warnings()
        del record[:]
        compiled = torch.compile(_fused, backend="aot_eager", fullgraph=True)
        for _ in range(3):
            compiled(x, r, w)
    assert explanation.graph_break_count == 0
    (message,) = _experimental_warnings(record)
    assert "fused_add_rmsnorm" in message


def test_fused_add_rmsnorm_refuses_a_leaf_that_requires_grad_when_compiled():
    """As torch's in-place ops do, and as the eager call does: never a silent write into a
    leaf autograd tracks."""
    x, r, w = _fused_inputs()
    compiled = torch.compile(_fused, backend="aot_eager", fullgraph=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ExperimentalWarning)
        with pytest.raises(Exception, match=r"requires grad.*torch\.no_grad\(\)"):
            compiled(x.requires_grad_(), r, w)


@pytest.mark.parametrize("case", cases_for(fused_add_rmsnorm), ids=lambda c: c.name)
def test_opcheck_passes_on_fused_add_rmsnorms_declared_cases(case):
    args, kwargs = call_arguments(fused_add_rmsnorm, case.make_inputs())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ExperimentalWarning)
        torch.library.opcheck(torch.ops.flashinfer.fused_add_rmsnorm.default, tuple(args), kwargs)


@pytest.mark.parametrize("device", ["meta", "fake"])
def test_fused_add_rmsnorm_on_meta_and_fake_tensors(device):
    """Metadata only: no false overlap (fake tensors have no addresses), the shapes kept,
    and malformed metadata refused as the eager call refuses it."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ExperimentalWarning)
        with FakeTensorMode() if device == "fake" else torch.device("meta"):
            x, r, w = torch.empty(3, 5, 64), torch.empty(3, 5, 64), torch.empty(64)
            assert fused_add_rmsnorm(x, r, w) is None
            assert x.shape == r.shape == (3, 5, 64)
            with pytest.raises(ValueError):
                fused_add_rmsnorm(x, torch.empty(3, 5, 32), w)


def test_fused_add_rmsnorms_generated_code_lives_in_real_modules():
    for fn in (fused_add_rmsnorm, fused_add_rmsnorm._torchdynamo_inline):
        module = importlib.import_module(fn.__globals__["__name__"])
        assert module.__dict__ is fn.__globals__
    public = importlib.import_module(fused_add_rmsnorm.__module__)
    assert getattr(public, fused_add_rmsnorm.__name__) is fused_add_rmsnorm
