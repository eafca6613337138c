"""The experimental API flashinfer.fused_add_rmsnorm (thin entry point in
flashinfer/fused_norm.py, implementation in flashinfer/experimental/fused_add_rmsnorm)."""

from __future__ import annotations

import contextlib
import re
import warnings

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import flashinfer
from flashinfer import ExperimentalWarning, fused_add_rmsnorm, rmsnorm
from flashinfer.experimental.fused_add_rmsnorm.implementation import (
    kernel_unsupported_reason,
)
from flashinfer.gating.messages import experimental_api_banner, experimental_api_used
from flashinfer.testing import assert_runs_in_fresh_interpreter

pytestmark = pytest.mark.experimental


def _rand(*shape, dtype=torch.float32, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


def _unfused(x, r, w, eps=1e-6):
    r = r.clone()
    r.add_(x)
    return rmsnorm(r, w, eps, backend="torch"), r


FP32_UNIT_ROUNDOFF = 2.0**-24


def fp32_rtol(hidden):
    """The relative difference the kernel and the unfused torch composition may honestly
    show in fp32 on rows of ``hidden`` elements.

    Both form the same residual sum and the same squares; they differ in rounding only,
    with ``u = 2**-24``: each sums the squares in its own order, within ``(hidden - 1) u``
    of the exact sum (all terms are positive), then divides by ``hidden`` and adds ``eps``
    (half a ``u`` each, each side), so the two mean squares differ by up to ``2 hidden u``;
    the square root halves that, and ``rsqrt`` against ``1 / sqrt`` rounds up to ``u`` each
    side; then ``x * rstd`` and ``* w`` round half a ``u`` each, each side.  That is
    ``(hidden + 4) u`` to first order; products do not cancel, so the bound is relative for
    every element, zeros included.  (A fixed ``2e-7``, about ``3.4 u``, failed at
    ``hidden=5``.)
    """
    return (hidden + 4) * FP32_UNIT_ROUNDOFF


@pytest.fixture
def quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ExperimentalWarning)
        yield


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("hidden", [96, 5000])  # one block / two passes
def test_equals_the_unfused_composition(quiet, dtype, hidden):
    """The residual sum bit for bit; the norm up to summation order (one ulp)."""
    x, r, w = _rand(3, hidden, dtype=dtype), _rand(3, hidden, dtype=dtype, seed=1), _rand(hidden)
    w = w.to(dtype)
    expected_x, expected_r = _unfused(x, r, w)
    assert kernel_unsupported_reason(x, r, w) is None  # the Triton kernel runs (interpreter)
    assert fused_add_rmsnorm(x, r, w) is None
    assert torch.equal(r, expected_r)
    ulp = {torch.float32: 2e-7, torch.float16: 1e-3, torch.bfloat16: 8e-3}[dtype]
    torch.testing.assert_close(x, expected_x, rtol=ulp, atol=ulp)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("path", ["kernel", "composition"])
@pytest.mark.parametrize("autocast", [False, True], ids=["plain", "autocast"])
def test_a_float32_weight_with_16_bit_activations(quiet, monkeypatch, dtype, path, autocast):
    """A mixed-precision model's float32 weight is accepted, as rmsnorm accepts it (issue 31,
    item 5); input and residual keep their dtype (written in place: torch never casts an
    in-place operation under autocast); the result is the unfused composition's."""
    x, r, w = _rand(3, 96, dtype=dtype), _rand(3, 96, dtype=dtype, seed=1), _rand(96) + 2
    expected_x, expected_r = _unfused(x, r, w)
    if path == "composition":
        monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    assert (kernel_unsupported_reason(x, r, w) is None) == (path == "kernel")
    context = torch.autocast("cpu", dtype) if autocast else contextlib.nullcontext()
    with context:
        fused_add_rmsnorm(x, r, w)
    assert x.dtype == r.dtype == dtype and w.dtype == torch.float32
    assert torch.equal(r, expected_r)
    ulp = {torch.float16: 1e-3, torch.bfloat16: 8e-3}[dtype]
    torch.testing.assert_close(x, expected_x, rtol=ulp, atol=ulp)


def test_torch_path_when_the_kernel_cannot_run(quiet, monkeypatch):
    x, r, w = _rand(4, 32), _rand(4, 32, seed=1), torch.ones(32)
    expected = _unfused(x, r, w)
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    assert "TRITON_INTERPRET" in kernel_unsupported_reason(x, r, w)
    fused_add_rmsnorm(x, r, w)
    torch.testing.assert_close((x, r), expected)


def test_non_contiguous_rows_use_the_torch_path(quiet):
    x, r = _rand(32, 4).t(), _rand(32, 4, seed=1).t()  # (4, 32), last-dim stride 4
    w = torch.ones(32)
    expected = _unfused(x.clone(), r.clone(), w)
    assert "contiguous last dimension" in kernel_unsupported_reason(x, r, w)
    fused_add_rmsnorm(x, r, w)
    torch.testing.assert_close((x, r), expected)


@pytest.mark.parametrize(
    "args, match",
    [
        ((torch.ones(2, 4), torch.ones(2, 5), torch.ones(4)), "residual has shape"),
        ((torch.ones(2, 4), torch.ones(2, 4), torch.ones(5)), "weight must be 1-D"),
        ((torch.ones(2, 4), torch.ones(2, 4).half(), torch.ones(4)), "residual has dtype"),
        ((torch.ones(2, 4), torch.ones(2, 4), torch.ones(4).double()), "weight has dtype"),
        ((torch.ones(2, 4).double(),) * 2 + (torch.ones(4).double(),), "not supported"),
        ((torch.ones(2, 4), torch.ones(2, 4, device="meta"), torch.ones(4)), "is on meta"),
        ((torch.tensor(1.0), torch.tensor(1.0), torch.ones(1)), "at least one dimension"),
    ],
)
def test_malformed_inputs_raise_before_anything_is_written(quiet, args, match):
    before = [a.clone() if a.device.type != "meta" else None for a in args]
    with pytest.raises(ValueError, match=match):
        fused_add_rmsnorm(*args)
    for a, b in zip(args, before, strict=True):
        if b is not None:
            assert torch.equal(a, b)


def test_aliased_input_and_residual_are_refused(quiet):
    x = torch.ones(2, 4)
    with pytest.raises(ValueError, match="input and residual overlap"):
        fused_add_rmsnorm(x, x, torch.ones(4))


_FP32_VALUES = st.builds(
    lambda magnitude, negative: -magnitude if negative else magnitude,
    st.just(0.0) | st.floats(2.0**-10, 2.0**10, width=32),  # no subnormal results
    st.booleans(),
)


@st.composite
def _fp32_rows(draw):
    rows, hidden = draw(st.integers(1, 3)), draw(st.integers(1, 64))
    row = st.lists(_FP32_VALUES, min_size=hidden, max_size=hidden)
    values = [draw(st.lists(row, min_size=rows, max_size=rows)) for _ in range(2)]
    weight = draw(row)
    return [torch.tensor(v, dtype=torch.float32) for v in (*values, weight)]


@pytest.mark.filterwarnings("ignore::flashinfer.ExperimentalWarning")
@settings(max_examples=60, deadline=None)
@given(tensors=_fp32_rows())
def test_fp32_result_within_the_stated_rounding_bound_of_the_unfused(tensors):
    """fp32_rtol is a bound the two computations keep on any values, not one example's."""
    x, r, w = tensors
    expected_x, expected_r = _unfused(x, r, w)
    assert kernel_unsupported_reason(x, r, w) is None  # the kernel, not the torch path
    fused_add_rmsnorm(x, r, w)
    assert torch.equal(r, expected_r)
    torch.testing.assert_close(x, expected_x, rtol=fp32_rtol(x.shape[-1]), atol=0)


# ---- overlap: input, residual and weight placed anywhere in one buffer ---------------------
# (every declared case under every attack: tests/experimental/test_overlap_conformance_...)

BUF = 10


@st.composite
def _placements(draw):
    """(rows, cols, first row, first col) of input, residual and weight in a (10, 10)
    buffer; weight is one row."""
    m, n = draw(st.integers(1, 4)), draw(st.integers(1, 6))
    at = {}
    for name, rows in (("input", m), ("residual", m), ("weight", 1)):
        at[name] = (rows, n, draw(st.integers(0, BUF - rows)), draw(st.integers(0, BUF - n)))
    return at


def _cells(rows, cols, row0, col0):
    return {(row0 + r, col0 + c) for r in range(rows) for c in range(cols)}


@pytest.mark.filterwarnings("ignore::flashinfer.ExperimentalWarning")
@settings(max_examples=100, deadline=None)
@given(at=_placements())
def test_any_overlap_raises_before_writing_else_equals_the_unfused_composition(at):
    """input and residual are both written and weight is read for every row: any two of
    them overlapping (weight a row of input, residual a shifted input, ...) raises
    ValueError before anything is written; otherwise the result is the unfused one."""
    buf = torch.randn(BUF, BUF, generator=torch.Generator().manual_seed(3))
    x, r, w = (buf[r0 : r0 + rows, c0 : c0 + cols] for rows, cols, r0, c0 in at.values())
    w = w[0]
    cells = [_cells(*place) for place in at.values()]
    before = buf.clone()
    if cells[0] & cells[1] or cells[0] & cells[2] or cells[1] & cells[2]:
        with pytest.raises(ValueError, match=r"fused_add_rmsnorm: \w+ (and \w+ )?overlap"):
            fused_add_rmsnorm(x, r, w)
        assert torch.equal(buf, before)
        return
    expected_x, expected_r = _unfused(x.clone(), r.clone(), w.clone())
    fused_add_rmsnorm(x, r, w)
    assert torch.equal(r, expected_r)
    # Relative only: the result is a product, so the bound holds near zero too.
    torch.testing.assert_close(x, expected_x, rtol=fp32_rtol(x.shape[-1]), atol=0)
    untouched = torch.ones_like(buf, dtype=torch.bool)
    for row, col in cells[0] | cells[1]:
        untouched[row, col] = False
    assert torch.equal(buf[untouched], before[untouched])


@pytest.mark.parametrize("written", ["input", "residual"])
def test_a_zero_stride_written_argument_raises_before_writing(quiet, written):
    args = {"input": _rand(4, 8), "residual": _rand(4, 8, seed=1), "weight": torch.ones(8)}
    base = torch.zeros(1, 8)
    args[written] = base.expand(4, 8)
    with pytest.raises(ValueError, match=rf"{written} overlaps itself.*{written}\.contiguous"):
        fused_add_rmsnorm(**args)
    assert not base.any()


def test_weight_a_row_of_input_raises_before_writing(quiet):
    x, r = _rand(4, 8), _rand(4, 8, seed=1)
    before = x.clone(), r.clone()
    with pytest.raises(ValueError, match="input overlaps weight.*weight.clone"):
        fused_add_rmsnorm(x, r, x[1])
    assert torch.equal(x, before[0]) and torch.equal(r, before[1])


def test_bad_eps(quiet):
    with pytest.raises(ValueError, match="eps"):
        fused_add_rmsnorm(torch.ones(2, 4), torch.ones(2, 4), torch.ones(4), -1.0)


def test_warns_once_at_the_callers_line_and_always_runs(monkeypatch):
    monkeypatch.setenv("FLASHINFER_ALLOW_EXPERIMENTAL_AUTO_BACKENDS", "0")  # never read
    x, r, w = torch.ones(2, 4), torch.zeros(2, 4), torch.ones(4)
    said = experimental_api_used("fused_add_rmsnorm", fused_add_rmsnorm.__qualname__)
    with pytest.warns(ExperimentalWarning, match=f"^{re.escape(said)}$") as rec:
        fused_add_rmsnorm(x, r, w)
    assert len(rec) == 1 and rec[0].filename == __file__
    with warnings.catch_warnings():
        warnings.simplefilter("error", ExperimentalWarning)
        fused_add_rmsnorm(x, r, w)


def test_marker_metadata_and_inventory():
    assert fused_add_rmsnorm.is_experimental
    info = fused_add_rmsnorm.experimental_info
    assert info.feature == "fused_add_rmsnorm" and info.owner and info.graduate_by
    assert fused_add_rmsnorm.__doc__.startswith(experimental_api_banner("fused_add_rmsnorm"))
    names = {r.name for r in flashinfer.api_inventory(experimental=True)}
    assert "flashinfer.fused_norm.fused_add_rmsnorm" in names


def test_the_entry_point_imports_the_implementation_only_when_called():
    code = (
        "import sys, warnings, torch\n"
        "import flashinfer.fused_norm\n"
        "# at module level only the light support module (its torch operator's validation)\n"
        "loaded = {m for m in sys.modules if m.startswith('flashinfer.experimental')}\n"
        "feature = 'flashinfer.experimental.fused_add_rmsnorm'\n"
        "assert loaded <= {'flashinfer.experimental', feature, feature + '.support'}, loaded\n"
        "warnings.simplefilter('ignore')\n"
        "flashinfer.fused_add_rmsnorm(torch.ones(2, 4), torch.ones(2, 4), torch.ones(4))\n"
        "assert 'flashinfer.experimental.fused_add_rmsnorm.implementation' in sys.modules\n"
    )
    assert_runs_in_fresh_interpreter(code)


def _in_place(x, r, w):
    """fused_add_rmsnorm as a function of its inputs: the updated input and residual."""
    x, r = x.clone(), r.clone()
    fused_add_rmsnorm(x, r, w)
    return x, r


@settings(max_examples=10, deadline=None)
@given(rows=st.integers(1, 4), hidden=st.integers(1, 40), seed=st.integers(0, 2**16))
def test_torch_func_transforms_give_the_unfused_composition(rows, hidden, seed):
    """``functionalize`` (no false "input and residual overlap"), ``vmap`` (no storage
    error from the kernel) and ``jvp`` each give the unfused composition's result: under a
    transform the kernel, which would see wrapped tensors, is not launched."""
    warnings.simplefilter("ignore", ExperimentalWarning)  # (pytest restores the filters)
    x, r = _rand(rows, hidden, seed=seed), _rand(rows, hidden, seed=seed + 1)
    w = _rand(hidden, seed=seed + 2)
    expected = _unfused(x, r, w)
    torch.testing.assert_close(torch.func.functionalize(_in_place)(x, r, w), expected)
    batched = torch.func.vmap(_in_place, in_dims=(0, 0, None))(
        torch.stack([x, 2 * x]), torch.stack([r, r]), w
    )
    torch.testing.assert_close(batched[0][0], expected[0])
    torch.testing.assert_close(batched[0][1], _unfused(2 * x, r, w)[0])
    tangent = torch.ones_like(x)
    _, got = torch.func.jvp(lambda x: _in_place(x, r, w), (x,), (tangent,))
    _, want = torch.func.jvp(lambda x: _unfused(x, r, w), (x,), (tangent,))
    torch.testing.assert_close(got, want)


@pytest.mark.parametrize("mode", ["real", "fake", "symbolic"])
def test_make_fx_records_a_graph_that_replays_the_update(quiet, mode):
    """On real tensors (``make_fx``'s default) the kernel failed on the storage the proxy
    mode hands it; under a dispatch mode the torch composition runs, which the mode sees."""
    from torch.fx.experimental.proxy_tensor import make_fx

    def update(x, r, w):
        x, r = x.clone(), r.clone()
        fused_add_rmsnorm(x, r, w)
        return x, r

    x, r, w = _rand(3, 16), _rand(3, 16, seed=1), _rand(16, seed=2)
    graph = make_fx(update, tracing_mode=mode)(x, r, w)
    x2, r2 = _rand(3, 16, seed=3), _rand(3, 16, seed=4)
    torch.testing.assert_close(graph(x2, r2, w), _unfused(x2, r2, w))
