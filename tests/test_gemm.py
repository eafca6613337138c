"""flashinfer.mm: validation, checker reasons, heuristic order, auto vs explicit, tactics,
the autotuner call site, and the behaviour table of DESIGN.md section 1 through the real op.

Numerical agreement of every backend with the reference on the declared cases is the
conformance test's job (tests/test_conformance.py).  These tests name only stable backends
and read any list of backends from the op (``mm.stable_backends``, ``mm.implementations``):
they import nothing experimental and pass whatever experimental backends the table has.
The experimental split-K backend, and the behaviour table's rows through it, are tested in
tests/experimental/test_splitk_gemm.py.
"""

from __future__ import annotations

import json
import types
import warnings

import pytest
import torch
from autotuner_fakes import SpyRunner
from hypothesis import given, settings
from hypothesis import strategies as st

import flashinfer
import flashinfer.gemm as gemm
from flashinfer import BackendSupportedError, ExperimentalWarning, mm
from flashinfer.autotuner import AutoTuner, autotune
from flashinfer.testing import assert_runs_in_fresh_interpreter


def _rand(*shape, dtype=torch.float32, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


def _small_m_large_k(dtype=torch.float16):
    """A skinny product (M <= 64, K >= 1024): the shape backends specialised for small M and
    large K accept, so they are candidates (and, with the gate off, dropped ones)."""
    return _rand(4, 1024, dtype=dtype), _rand(1024, 16, dtype=dtype, seed=1)


def _assert_mm_close(y, a, b, bound=2e-3):
    ref = a.double() @ b.double()
    assert ((y.double() - ref).norm() / ref.norm()).item() < bound


pytestmark = pytest.mark.usefixtures("isolated_op_registry")


@pytest.fixture
def no_kernels(monkeypatch):
    """Runners that fail loudly if reached: validation must reject before any kernel."""

    def boom(*args, **kwargs):
        raise AssertionError("a backend ran although the inputs were invalid")

    for name in gemm.MM_RUNNERS:
        monkeypatch.setitem(gemm.MM_RUNNERS, name, boom)


@pytest.fixture
def clean_tuner():
    tuner = AutoTuner.get()
    tuner.clear()
    yield tuner
    tuner.clear()


# ---- shared validation ----------------------------------------------------------------

F16 = torch.float16


@pytest.mark.parametrize("backend", ["auto", *mm.stable_backends])
@pytest.mark.parametrize(
    "make, kwargs, match",
    [
        (lambda: (torch.ones(4), torch.ones(4, 2)), {}, r"a must be a 2-D matrix.*1-D"),
        (lambda: (torch.ones(2, 4), torch.ones(1, 4, 2)), {}, r"b must be a 2-D.*torch.bmm"),
        (lambda: (torch.ones(2, 4), torch.ones(5, 3)), {}, r"inner dimensions differ.*K=4.*K=5"),
        (lambda: (torch.ones(2, 4), torch.ones(4, 3, dtype=F16)), {}, "a is float32 but b is"),
        (lambda: (torch.ones(2, 4, dtype=torch.int8),) * 2, {}, "dtype int8"),
        (lambda: (torch.ones(2, 4), torch.ones(4, 3, device="meta")), {}, "one device"),
        (lambda: (torch.ones(2, 4), torch.ones(4, 3)), {"out_dtype": torch.int32}, "out_dtype="),
        (lambda: (torch.ones(2, 4), torch.ones(4, 3)), {"out": torch.empty(3, 2)}, r"\(2, 3\)"),
        (
            lambda: (torch.ones(2, 4), torch.ones(4, 3)),
            {"out": torch.empty(2, 3, dtype=F16)},
            "out has dtype float16 but the result is float32",
        ),
        (
            lambda: (torch.ones(2, 4, dtype=F16), torch.ones(4, 3, dtype=F16)),
            {"out": torch.empty(2, 3), "out_dtype": torch.bfloat16},
            "out has dtype float32 but the result is bfloat16",
        ),
        (
            lambda: (torch.ones(2, 4), torch.ones(4, 3)),
            {"out": torch.empty(2, 3, device="meta")},
            "out is on meta",
        ),
    ],
)
def test_malformed_inputs_raise_before_any_kernel(no_kernels, backend, make, kwargs, match):
    a, b = make()
    with pytest.raises(ValueError, match=match):
        mm(a, b, backend=backend, **kwargs)


# ---- overlap: a, b and out placed anywhere in one buffer ----------------------------------
# (every declared case under every attack: tests/test_overlap_conformance.py)

BUF = 12


@st.composite
def _placements(draw):
    """(rows, cols, first row, first col) of a, b and out in a (12, 12) buffer."""
    m, k, n = (draw(st.integers(1, 5)) for _ in range(3))
    at = {}
    for name, (rows, cols) in {"a": (m, k), "b": (k, n), "out": (m, n)}.items():
        at[name] = (rows, cols, draw(st.integers(0, BUF - rows)), draw(st.integers(0, BUF - cols)))
    return at


def _cells(rows, cols, row0, col0):
    return {(row0 + r, col0 + c) for r in range(rows) for c in range(cols)}


@settings(max_examples=120, deadline=None)
@given(
    backend=st.sampled_from(["torch", "triton", "auto"]),
    skip_check=st.booleans(),
    at=_placements(),
)
def test_out_overlapping_an_input_raises_else_is_right(backend, skip_check, at):
    """Wherever a, b and out sit in one buffer: out overlapping a or b raises ValueError
    before anything is written (no backend computes in place); otherwise, a and b
    overlapping each other included, the product is right and only out is written."""
    buf = torch.randn(BUF, BUF, generator=torch.Generator().manual_seed(2))
    a, b, out = (buf[r0 : r0 + r, c0 : c0 + c] for r, c, r0, c0 in at.values())
    expected = a.double() @ b.double()
    before = buf.clone()
    out_cells = _cells(*at["out"])
    if out_cells & (_cells(*at["a"]) | _cells(*at["b"])):
        with pytest.raises(ValueError, match=r"mm: out overlaps [ab] and mm cannot run in place"):
            mm(a, b, out=out, backend=backend, skip_check=skip_check)
        assert torch.equal(buf, before)
        return
    assert mm(a, b, out=out, backend=backend, skip_check=skip_check) is out
    torch.testing.assert_close(out.double(), expected, rtol=1e-5, atol=1e-5)
    untouched = torch.ones_like(buf, dtype=torch.bool)
    for r, c in out_cells:
        untouched[r, c] = False
    assert torch.equal(buf[untouched], before[untouched])


def test_tuning_with_an_overlapping_out_raises_and_writes_nothing(clean_tuner):
    buf = torch.zeros(5, 4)
    with autotune(), pytest.raises(ValueError, match="mm: out overlaps a"):
        mm(buf[:4], torch.ones(4, 4), out=buf[1:])
    assert not buf.any()
    assert not clean_tuner.choices()  # nothing was timed, so nothing was kept


def test_unknown_backend_lists_the_real_ones():
    with pytest.raises(BackendSupportedError) as info:
        mm(torch.ones(2, 2), torch.ones(2, 2), backend="cublas")
    message = str(info.value)
    assert "does not support backend 'cublas'" in message
    assert all(repr(b) in message for b in mm.stable_backends)
    assert message.endswith("or 'auto'.")


# ---- semantics ------------------------------------------------------------------------


@pytest.mark.parametrize("backend", ["torch", "triton"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_backends_match_the_reference(backend, dtype):
    a, b = _rand(19, 37, dtype=dtype), _rand(37, 21, dtype=dtype, seed=1)
    y = mm(a, b, backend=backend)
    assert y.shape == (19, 21) and y.dtype == dtype
    _assert_mm_close(y, a, b, bound=1e-2)


@pytest.mark.parametrize("backend", ["torch", "triton"])
def test_fp32_accumulation_of_fp16_inputs(backend):
    # 4096 ones summed in fp16 stall at 2048 (2048 + 1 rounds back to 2048); fp32 does not.
    a, b = torch.ones(2, 4096, dtype=F16), torch.ones(4096, 16, dtype=F16)
    assert torch.equal(mm(a, b, backend=backend), torch.full((2, 16), 4096.0, dtype=F16))


@pytest.mark.parametrize("backend", ["torch", "triton"])
def test_out_dtype_and_out(backend):
    a, b = _rand(8, 24, dtype=torch.bfloat16), _rand(24, 8, dtype=torch.bfloat16, seed=1)
    y = mm(a, b, out_dtype=torch.float32, backend=backend)
    assert y.dtype == torch.float32
    _assert_mm_close(y, a, b, bound=1e-6)  # exact products of bf16 values, fp32 sums
    out = torch.empty(8, 8, dtype=torch.float32)
    assert mm(a, b, out=out, out_dtype=torch.float32, backend=backend) is out
    torch.testing.assert_close(out, y)


@pytest.mark.parametrize("backend", ["torch", "triton"])
def test_strided_inputs(backend):
    a = _rand(20, 10).t()  # (10, 20), column-major
    b = _rand(40, 12)[::2]  # (20, 12), row stride 24
    _assert_mm_close(mm(a, b, backend=backend), a, b, bound=1e-6)


def test_empty_sizes():
    y = mm(torch.ones(0, 4), torch.ones(4, 3))
    assert y.shape == (0, 3) and mm.suitable_auto_backends == ["torch"]
    with pytest.raises(ValueError, match="output is empty"):
        mm(torch.ones(0, 4), torch.ones(4, 3), backend="triton")
    for backend in ("torch", "triton"):  # K = 0: a sum of nothing
        assert torch.equal(
            mm(torch.ones(2, 0), torch.ones(0, 3), backend=backend), torch.zeros(2, 3)
        )


@pytest.mark.parametrize(("m", "k"), [(16, 48), (4, 1024)])
def test_auto_matches_every_stable_backend_that_accepts_the_inputs(m, k):
    """Compared: each stable backend whose checks accept these inputs (a graduated backend
    may take only some shapes: split-K needs a large K); every input is run by at least
    one (issue 43 item 14)."""
    a, b = _rand(m, k, dtype=F16), _rand(k, 24, dtype=F16, seed=1)
    auto = mm(a, b)
    explained = mm.explain(a, b)
    runnable = [x for x in mm.stable_backends if explained.verdict(x).can_run]
    assert runnable
    for backend in runnable:
        torch.testing.assert_close(mm(a, b, backend=backend), auto, rtol=2e-3, atol=2e-3)


# ---- support checkers -------------------------------------------------------------------


def test_triton_on_cpu_needs_the_interpreter(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    a, b = _small_m_large_k()
    with pytest.raises(ValueError, match="TRITON_INTERPRET=1"):
        mm(a, b, backend="triton")
    mm(a, b)
    assert mm.suitable_auto_backends == ["torch"]


def test_checkers_declare_capabilities():
    assert gemm._check_torch._supports_cpu and gemm._check_triton._supports_cpu
    assert mm.stable_backends[:2] == ("torch", "triton")  # a graduated backend follows them
    assert 70 not in gemm._check_triton._supported_ccs  # Triton 3 needs Turing or newer


def test_each_backend_is_declared_with_its_runner():
    """One declaration per backend: the checker the dispatcher runs and the runner the body
    and the autotuner run come from the same Backend."""
    assert gemm.MM_RUNNERS is mm.implementations
    for name in mm.stable_backends:
        declared = mm.backends[name]
        assert mm.backend_checks[name] is declared.check
        assert mm.implementations[name] is declared.run


# ---- heuristic ------------------------------------------------------------------------


def test_heuristic_puts_torch_first_on_cpu():
    a, b = _small_m_large_k()
    mm(a, b)
    # Then any backend the heuristic does not rank (a graduated one, until it is ranked).
    assert mm.suitable_auto_backends[:2] == ["torch", "triton"]
    assert not set(mm.suitable_auto_backends) & mm.experimental_backends  # gate off


@pytest.mark.parametrize("is_cuda", [False, True])
def test_heuristic_puts_cublas_before_the_triton_kernel(is_cuda):
    a = types.SimpleNamespace(is_cuda=is_cuda)
    assert gemm._heuristic(["triton", "torch"], a, None) == ["torch", "triton"]
    # A backend it does not rank (an experimental one) comes last, in the given order.
    assert gemm._heuristic(["other", "triton", "torch"], a, None) == ["torch", "triton", "other"]


# ---- tactics -----------------------------------------------------------------------------


def test_triton_tactic_space_is_json_and_tactics_come_from_it():
    runner = gemm.MM_RUNNERS["triton"]
    space = runner.tactic_space()
    assert json.loads(json.dumps(space)) == space
    inputs = (_rand(40, 70), _rand(70, 50), None, None)
    tactics = runner.tactics(inputs)
    assert tactics and all(t in space for t in tactics)
    assert tactics[0] == max(tactics, key=lambda t: t["BLOCK_M"] * t["BLOCK_N"])  # default
    # Same power-of-two bucket, same tactics (a tuned tactic serves its whole bucket).
    assert runner.tactics((_rand(64, 128), _rand(128, 64), None, None)) == tactics


def test_every_valid_triton_tactic_is_correct():
    a, b = _rand(40, 70, dtype=F16), _rand(70, 50, dtype=F16, seed=1)
    runner = gemm.MM_RUNNERS["triton"]
    for tactic in runner.tactics((a, b, None, None)):
        _assert_mm_close(runner((a, b, None, None), tactic), a, b)


def test_shared_memory_prunes_tactics():
    space = gemm.MM_TRITON_TACTICS
    roomy = gemm.triton_tactics(256, 256, 256, 4, None)
    tight = gemm.triton_tactics(256, 256, 256, 4, 100 * 1024)
    assert len(tight) < len(roomy)
    for i in tight:
        t = space[i]
        assert (t["BLOCK_M"] + t["BLOCK_N"]) * t["BLOCK_K"] * 4 * t["num_stages"] <= 100 * 1024


def test_an_unknown_tactic_is_refused():
    with pytest.raises(ValueError, match="not a tactic of backend 'triton'"):
        gemm.MM_RUNNERS["triton"]((torch.ones(2, 2), torch.ones(2, 2), None, None), {"BLOCK_M": 7})


# ---- the autotuner call site ---------------------------------------------------------------


def test_mm_is_registered_with_the_autotuner():
    op, runners = AutoTuner.get().registered()["flashinfer.gemm.mm"]
    assert op is mm and runners is gemm.MM_RUNNERS


def test_auto_calls_go_through_the_autotuner_and_explicit_ones_do_not():
    """mm is registered direct: the dispatcher routes auto calls, with their candidates and
    inputs, to the tuner's router; explicit ones go to the body."""
    a, b = _rand(4, 8), _rand(8, 4)
    mm(a, b)  # the router learns this input pattern (it would reinstall itself otherwise)
    router = mm.dispatcher.auto_route
    assert router is not None
    seen = []

    def spy(candidates, inputs):
        seen.append((mm, list(candidates), inputs))
        return router(candidates, inputs)

    mm.dispatcher.route_auto(spy)
    try:
        mm(a, b)
        assert seen == [(mm, ["torch", "triton"], (a, b, None, None))]
        mm(a, b, backend="triton")
        assert len(seen) == 1
    finally:
        mm.dispatcher.route_auto(router)


def test_tuning_with_the_gate_off_times_only_stable_backends(monkeypatch, clean_tuner):
    monkeypatch.setattr(clean_tuner, "warmup", 0)
    monkeypatch.setattr(clean_tuner, "repeat", 1)
    timed = []
    for name, runner in list(gemm.MM_RUNNERS.items()):
        monkeypatch.setitem(gemm.MM_RUNNERS, name, SpyRunner(name, runner, timed))
    a, b = _small_m_large_k()
    with warnings.catch_warnings():
        warnings.simplefilter("error", ExperimentalWarning)
        with autotune():
            y = mm(a, b)
    _assert_mm_close(y, a, b)
    assert set(timed) == set(mm.stable_backends)


# ---- the gate, through the real op (rows of DESIGN.md section 1 that need no experimental
# backend by name; the rows through split-K are in tests/experimental/test_splitk_gemm.py) --


def test_auto_with_the_gate_off_never_picks_or_warns_about_an_experimental_backend(recwarn):
    for a, b in (_small_m_large_k(), (_rand(128, 64), _rand(64, 32))):
        _assert_mm_close(mm(a, b), a, b)
        assert not set(mm.suitable_auto_backends) & mm.experimental_backends
        assert set(mm.dropped_experimental_backends) <= mm.experimental_backends
    assert not [w for w in recwarn if issubclass(w.category, ExperimentalWarning)]


# ---- packaging ------------------------------------------------------------------------------


def test_mm_is_a_recorded_stable_api():
    names = {r.name for r in flashinfer.api_inventory(experimental=False)}
    assert "flashinfer.gemm.mm" in names and flashinfer.mm is mm


def test_imports_stay_light():
    """Stable calls load no experimental code but the light support modules of the table."""
    code = (
        "import sys, torch, flashinfer\n"
        "assert 'flashinfer.gemm' not in sys.modules\n"
        "assert 'flashinfer.experimental' not in sys.modules\n"
        "flashinfer.mm(torch.ones(2, 2), torch.ones(2, 2))\n"
        "assert 'triton' not in sys.modules, 'triton imported before a Triton kernel ran'\n"
        "flashinfer.mm(torch.ones(2, 2), torch.ones(2, 2), backend='triton')\n"
        "assert 'triton' in sys.modules\n"
        "loaded = [m for m in sys.modules if m.startswith('flashinfer.experimental.')]\n"
        "heavy = [m for m in loaded if m.count('.') > 2 and not m.endswith('.support')]\n"
        "assert not heavy, f'experimental code beyond support modules was imported: {heavy}'\n"
    )
    assert_runs_in_fresh_interpreter(code)
