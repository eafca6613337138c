"""flashinfer.rmsnorm: validation, checker reasons, heuristic order, auto vs explicit.

Numerical agreement of every backend with the reference is the conformance test's job
(tests/test_conformance.py); these tests pin the op's behaviour around the kernels.  They
name only stable backends, and read any list of backends from the op
(``rmsnorm.stable_backends``, ``rmsnorm.implementations``): an experimental backend added
to the table changes none of them (tests/experimental/test_kernel_author_walk.py runs this
module over one).
"""

from __future__ import annotations

import types

import pytest
import torch
from hypothesis import event, given, settings
from hypothesis import strategies as st

import flashinfer
import flashinfer.norm as norm
from flashinfer import BackendSupportedError, rmsnorm
from flashinfer.testing import assert_runs_in_fresh_interpreter


def _x(*shape, dtype=torch.float32):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(0)).to(dtype)


@pytest.fixture
def no_kernels(monkeypatch):
    """Backends that fail loudly if reached: validation must reject before any kernel."""

    def boom(*args, **kwargs):
        raise AssertionError("a backend ran although the inputs were invalid")

    for name in rmsnorm.implementations:
        monkeypatch.setitem(rmsnorm.implementations, name, boom)


# ---- shared validation ----------------------------------------------------------------


@pytest.mark.parametrize("backend", ["auto", "torch", "triton"])
@pytest.mark.parametrize(
    "make, match",
    [
        (lambda: (torch.tensor(1.0), torch.ones(1)), "at least one dimension"),
        (lambda: (torch.ones(3, 0), torch.ones(0)), "hidden size"),
        (lambda: (torch.ones(2, 4, dtype=torch.int32), torch.ones(4)), "dtype int32"),
        (lambda: (torch.ones(2, 4, dtype=torch.float64), torch.ones(4)), "float64"),
        (
            lambda: (torch.ones(2, 4), torch.ones(5)),
            r"weight must be 1-D of the hidden size \(4,\)",
        ),
        (lambda: (torch.ones(2, 4), torch.ones(2, 4)), r"got weight of shape \(2, 4\)"),
        (lambda: (torch.ones(2, 4), torch.ones(4, dtype=torch.float64)), "weight dtype"),
        (lambda: (torch.ones(2, 4), torch.ones(4, device="meta")), "same device"),
    ],
)
def test_malformed_inputs_raise_before_any_kernel(no_kernels, backend, make, match):
    x, w = make()
    with pytest.raises(ValueError, match=match):
        rmsnorm(x, w, backend=backend)


@pytest.mark.parametrize(
    "out, match",
    [
        (torch.empty(2, 5), r"out has shape \(2, 5\).*empty_like"),
        (torch.empty(2, 4, dtype=torch.float16), "out has dtype float16"),
        (torch.empty(2, 4, device="meta"), "out is on meta"),
        ([0.0] * 8, "out must be a torch.Tensor"),
    ],
)
def test_bad_out_is_rejected_before_any_kernel(no_kernels, out, match):
    with pytest.raises(ValueError, match=match):
        rmsnorm(torch.ones(2, 4), torch.ones(4), out=out)


@pytest.mark.parametrize("eps", [-1e-6, float("nan"), float("inf"), "1e-6", True])
def test_bad_eps_is_rejected(no_kernels, eps):
    with pytest.raises(ValueError, match="eps must be a finite float"):
        rmsnorm(torch.ones(2, 4), torch.ones(4), eps)


def test_unknown_backend_lists_the_real_ones():
    with pytest.raises(BackendSupportedError) as info:
        rmsnorm(torch.ones(2, 4), torch.ones(4), backend="cuda_graph")
    message = str(info.value)
    assert "does not support backend 'cuda_graph'" in message
    assert all(repr(b) in message for b in rmsnorm.stable_backends)
    assert message.endswith("or 'auto'.")


# ---- semantics ------------------------------------------------------------------------


@pytest.mark.parametrize("backend", ["torch", "triton"])
@pytest.mark.parametrize("shape", [(8,), (3, 8), (2, 3, 8), (0, 8), (2, 0, 8)])
def test_any_leading_shape(backend, shape):
    x, w = _x(*shape), torch.ones(8)
    y = rmsnorm(x, w, backend=backend)
    assert y.shape == x.shape and y.dtype == x.dtype
    if x.numel():
        torch.testing.assert_close(y.pow(2).mean(-1), torch.ones(shape[:-1]), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("backend", ["torch", "triton"])
def test_fp32_accumulation_in_fp16(backend):
    # 300**2 = 90000 overflows fp16 (max 65504): only an fp32 sum of squares gets this right.
    x = torch.full((2, 64), 300.0, dtype=torch.float16)
    y = rmsnorm(x, torch.ones(64, dtype=torch.float16), backend=backend)
    assert torch.equal(y, torch.ones_like(y))


@pytest.mark.parametrize("backend", ["torch", "triton"])
def test_out_is_written_and_returned_also_in_place(backend):
    x, w = _x(4, 16), _x(16) + 2
    expected = rmsnorm(x, w, backend="torch")
    out = torch.empty_like(x)
    assert rmsnorm(x, w, out=out, backend=backend) is out
    torch.testing.assert_close(out, expected)
    assert rmsnorm(x, w, out=x, backend=backend) is x  # in place
    torch.testing.assert_close(x, expected)


# ---- overlap: out, input and weight placed anywhere in one buffer --------------------------
# (every declared case under every attack: tests/test_overlap_conformance.py)


BUF_ROWS, BUF_COLS = 10, 12


def _placement(draw, rows, cols):
    """(rows, cols, row step, first row, first col) of a view of a (10, 12) buffer."""
    step = draw(st.sampled_from([1, 2]))
    row0 = draw(st.integers(0, BUF_ROWS - 1 - (rows - 1) * step))
    col0 = draw(st.integers(0, BUF_COLS - cols))
    return rows, cols, step, row0, col0


@st.composite
def _x_and_out(draw):
    rows, cols = draw(st.integers(1, 4)), draw(st.integers(1, 6))
    x_at = _placement(draw, rows, cols)
    out_at = x_at if draw(st.booleans()) else _placement(draw, rows, cols)  # in place, often
    return x_at, out_at


def _view(buf, rows, cols, step, row0, col0):
    return buf[row0 : row0 + (rows - 1) * step + 1 : step, col0 : col0 + cols]


def _cells(rows, cols, step, row0, col0):
    return {(row0 + r * step, col0 + c) for r in range(rows) for c in range(cols)}


def _same_view(a_at, b_at):
    """Whether two placements are one view: every index on the same cell (a one-row view's
    row step does not matter)."""

    def cell_of_each_index(rows, cols, step, row0, col0):
        return [(row0 + r * step, col0 + c) for r in range(rows) for c in range(cols)]

    return cell_of_each_index(*a_at) == cell_of_each_index(*b_at)


@settings(max_examples=150, deadline=None)
@given(
    backend=st.sampled_from(["torch", "triton", "auto"]),
    skip_check=st.booleans(),
    placed=_x_and_out(),
    w_in_buffer=st.booleans(),
)
def test_out_overlapping_input_or_weight_raises_else_is_right(
    backend, skip_check, placed, w_in_buffer
):
    """Wherever out, input and weight sit in one buffer: out = input (the same view) is an
    in-place update; any other overlap of out raises ValueError before anything is written;
    everything else, input and weight overlapping included, matches the reference."""
    x_at, o_at = placed
    buf = torch.randn(BUF_ROWS, BUF_COLS, generator=torch.Generator().manual_seed(1))
    x, out = _view(buf, *x_at), _view(buf, *o_at)
    cols = x.shape[1]
    w = buf[BUF_ROWS - 1, :cols] if w_in_buffer else torch.randn(cols)
    w_cells = {(BUF_ROWS - 1, c) for c in range(cols)} if w_in_buffer else set()
    expected = norm._reference(x.clone(), w.clone())
    before = buf.clone()
    out_cells = _cells(*o_at)
    in_place = _same_view(x_at, o_at)
    if not in_place and out_cells & _cells(*x_at) or out_cells & w_cells:
        with pytest.raises(ValueError, match=r"rmsnorm: out overlaps (itself|input|weight)"):
            rmsnorm(x, w, out=out, backend=backend, skip_check=skip_check)
        assert torch.equal(buf, before)
        event("refused")
        return
    event("in place" if in_place else "separate out")
    assert rmsnorm(x, w, out=out, backend=backend, skip_check=skip_check) is out
    torch.testing.assert_close(out, expected)
    untouched = torch.ones_like(buf, dtype=torch.bool)
    for r, c in out_cells:
        untouched[r, c] = False
    assert torch.equal(buf[untouched], before[untouched])  # only out was written


@pytest.mark.parametrize("backend", ["torch", "triton", "auto"])
def test_the_reported_attacks_raise_before_any_kernel(no_kernels, backend):
    buf = torch.randn(5, 8)
    with pytest.raises(ValueError, match="out overlaps input but is not the same view"):
        rmsnorm(buf[:4], torch.ones(8), out=buf[1:], backend=backend)
    with pytest.raises(ValueError, match=r"out overlaps itself.*strides \(0, 1\)"):
        rmsnorm(buf[:4], torch.ones(8), out=torch.zeros(1, 8).expand(4, 8), backend=backend)


def test_auto_matches_every_stable_backend():
    x, w = _x(3, 5, 40, dtype=torch.float16), _x(40, dtype=torch.float16)
    auto = rmsnorm(x, w)
    for backend in rmsnorm.stable_backends:
        torch.testing.assert_close(rmsnorm(x, w, backend=backend), auto, rtol=2e-3, atol=2e-3)


# ---- support checkers: real limits, with reasons ----------------------------------------


def test_triton_rejects_a_non_unit_last_stride_with_the_reason():
    x = _x(16, 4).t()  # (4, 16) with last-dim stride 4
    with pytest.raises(ValueError, match="contiguous last dimension.*contiguous\\(\\)"):
        rmsnorm(x, torch.ones(16), backend="triton")
    y = rmsnorm(x, torch.ones(16))  # auto falls back to torch
    assert rmsnorm.suitable_auto_backends == ["torch"]
    torch.testing.assert_close(y, rmsnorm(x.contiguous(), torch.ones(16), backend="triton"))


def test_triton_accepts_rows_with_a_row_stride():
    big = _x(6, 32)
    x = big[::2, :16]  # row stride 64, unit last stride: a stack of rows
    y = rmsnorm(x, torch.ones(16), backend="triton")
    torch.testing.assert_close(y, rmsnorm(x.contiguous(), torch.ones(16), backend="torch"))


def test_triton_rejects_a_strided_weight():
    w = torch.ones(32)[::2]
    with pytest.raises(ValueError, match="weight must be contiguous"):
        rmsnorm(torch.ones(2, 16), w, backend="triton")


def test_triton_on_cpu_needs_the_interpreter(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    with pytest.raises(ValueError, match="TRITON_INTERPRET=1"):
        rmsnorm(torch.ones(2, 4), torch.ones(4), backend="triton")
    rmsnorm(torch.ones(2, 4), torch.ones(4))
    assert rmsnorm.suitable_auto_backends == ["torch"]


def test_checkers_declare_capabilities():
    assert norm._check_torch._supports_cpu and norm._check_triton._supports_cpu
    assert 90 in norm._check_torch._supported_ccs and 90 in norm._check_triton._supported_ccs
    assert 70 not in norm._check_triton._supported_ccs  # Triton 3 needs Turing or newer


# ---- heuristic ------------------------------------------------------------------------


def test_heuristic_puts_torch_first_on_cpu():
    rmsnorm(torch.ones(2, 4), torch.ones(4))
    assert rmsnorm.suitable_auto_backends == ["torch", "triton"]


def test_heuristic_puts_triton_first_on_cuda():
    cuda_like = types.SimpleNamespace(is_cuda=True)
    assert norm._heuristic(["torch", "triton"], cuda_like, None) == ["triton", "torch"]
    assert norm._heuristic(["torch"], cuda_like, None) == ["torch"]


@pytest.mark.gpu
def test_auto_picks_triton_on_cuda():
    x = _x(4, 128).cuda()
    y = rmsnorm(x, torch.ones(128, device="cuda"))
    assert rmsnorm.suitable_auto_backends[0] == "triton"
    torch.testing.assert_close(y, rmsnorm(x, torch.ones(128, device="cuda"), backend="torch"))


# ---- packaging --------------------------------------------------------------------------


def test_rmsnorm_is_a_recorded_stable_api():
    names = {r.name for r in flashinfer.api_inventory(experimental=False)}
    assert "flashinfer.norm.rmsnorm" in names
    assert flashinfer.rmsnorm is rmsnorm


def test_triton_is_imported_only_when_a_triton_kernel_first_runs():
    code = (
        "import sys, torch, flashinfer\n"
        "flashinfer.rmsnorm(torch.ones(2, 4), torch.ones(4))\n"
        "assert 'triton' not in sys.modules, 'import or a torch call pulled in triton'\n"
        "flashinfer.rmsnorm(torch.ones(2, 4), torch.ones(4), backend='triton')\n"
        "assert 'triton' in sys.modules\n"
    )
    assert_runs_in_fresh_interpreter(code)
