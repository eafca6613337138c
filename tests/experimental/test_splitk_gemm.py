"""The experimental split-K backend of mm (flashinfer/experimental/splitk_gemm)."""

from __future__ import annotations

import json
import warnings

import pytest
import torch

import flashinfer.gemm as gemm
from flashinfer import ExperimentalWarning, mm
from flashinfer.experimental.splitk_gemm import support
from flashinfer.experimental.splitk_gemm.support import TACTIC_SPACE, check_splitk, valid_tactics
from flashinfer.testing import assert_runs_in_fresh_interpreter

pytestmark = pytest.mark.experimental

GATE = "FLASHINFER_ALLOW_EXPERIMENTAL_AUTO_BACKENDS"


def _rand(*shape, dtype=torch.float32, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


def _rel_err(y, a, b):
    ref = a.double() @ b.double()
    return ((y.double() - ref).norm() / ref.norm()).item()


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ExperimentalWarning)
        yield


@pytest.mark.parametrize(
    "dtype, bound", [(torch.float32, 1e-6), (torch.float16, 2e-3), (torch.bfloat16, 1e-2)]
)
def test_split_k_matches_the_reference(dtype, bound):
    a, b = _rand(5, 1100, dtype=dtype), _rand(1100, 24, dtype=dtype, seed=1)  # ragged K
    y = mm(a, b, backend="splitk")
    assert y.dtype == dtype and y.shape == (5, 24)
    assert _rel_err(y, a, b) < bound


def test_out_dtype_out_and_strided_inputs():
    a = _rand(1024, 3, dtype=torch.bfloat16).t()  # (3, 1024), column-major
    b = _rand(1024, 16, dtype=torch.bfloat16, seed=1)
    out = torch.empty(3, 16)
    assert mm(a, b, out=out, out_dtype=torch.float32, backend="splitk") is out
    assert _rel_err(out, a, b) < 1e-6  # exact bf16 products, fp32 sums


def test_results_are_deterministic():
    a, b = _rand(4, 2048, dtype=torch.float16), _rand(2048, 32, dtype=torch.float16, seed=1)
    assert torch.equal(mm(a, b, backend="splitk"), mm(a, b, backend="splitk"))


@pytest.mark.parametrize("skip_check", [False, True])
@pytest.mark.parametrize("where", ["shifted into a", "shifted into b", "zero stride"])
def test_an_overlapping_out_raises_before_anything_is_written(skip_check, where):
    buf = torch.zeros(1100 * 16 + 64)
    a, b = _rand(4, 1024), _rand(1024, 16, seed=1)
    if where == "shifted into a":
        a = buf[: 4 * 1024].view(4, 1024)
        out = buf[1024 : 1024 + 64].view(4, 16)  # rows 1.. of a
    elif where == "shifted into b":
        b = buf[: 1024 * 16].view(1024, 16)
        out = buf[16:80].view(4, 16)
    else:
        out = buf[:16].view(1, 16).expand(4, 16)
    before = buf.clone()
    with pytest.raises(ValueError, match=r"mm: out overlaps (a|b|itself)"):
        mm(a, b, out=out, backend="splitk", skip_check=skip_check)
    assert torch.equal(buf, before)
    with pytest.raises(ValueError, match=r"mm: out overlaps (a|b|itself)"):
        gemm.MM_RUNNERS["splitk"]((a, b, out, None))  # the runner checks too
    assert torch.equal(buf, before)


def test_disjoint_views_of_one_buffer_are_fine():
    buf = _rand(4, 1024 + 16)
    a, out = buf[:, :1024], buf[:, 1024:]  # a's rows and out's rows interleave
    b = _rand(1024, 16, seed=1)
    expected = a.double() @ b.double()
    assert mm(a, b, out=out, backend="splitk") is out
    assert ((out.double() - expected).norm() / expected.norm()).item() < 1e-6


@pytest.mark.parametrize(
    "a, b, match",
    [
        (torch.ones(65, 1024), torch.ones(1024, 8), "small M \\(M <= 64\\), got M=65"),
        (torch.ones(4, 1023), torch.ones(1023, 8), "large K \\(K >= 1024\\), got K=1023"),
        (torch.ones(4, 1024), torch.ones(1024, 0), "output is empty"),
    ],
)
def test_checker_states_its_limits(a, b, match):
    with pytest.raises(ValueError, match=match):
        mm(a, b, backend="splitk")
    with pytest.raises(ValueError, match=match):
        check_splitk(a, b)


def test_checker_needs_the_interpreter_on_cpu(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    with pytest.raises(ValueError, match="TRITON_INTERPRET=1"):
        check_splitk(torch.ones(4, 1024), torch.ones(1024, 8))


def test_checker_is_marked_with_lifecycle_metadata():
    assert check_splitk.is_experimental_backend
    info = check_splitk.experimental_info
    assert info.owner and info.tracking_issue == "3" and info.graduate_by is not None
    assert check_splitk._supports_cpu and 90 in check_splitk._supported_ccs


def test_tactics_are_json_from_the_space_and_all_correct():
    runner = gemm.MM_RUNNERS["splitk"]
    assert runner.tactic_space() == TACTIC_SPACE
    assert json.loads(json.dumps(TACTIC_SPACE)) == TACTIC_SPACE
    a, b = _rand(20, 2048, dtype=torch.float16), _rand(2048, 64, dtype=torch.float16, seed=1)
    tactics = runner.tactics((a, b, None, None))
    assert len(tactics) > 1 and all(t in TACTIC_SPACE for t in tactics)
    for tactic in tactics:
        assert _rel_err(runner((a, b, None, None), tactic), a, b) < 2e-3, tactic
    with pytest.raises(ValueError, match="not a tactic of backend 'splitk'"):
        runner((a, b, None, None), {"SPLIT_K": 3})


def test_tactics_depend_only_on_the_shape_bucket():
    assert valid_tactics(20, 40, 1500) == valid_tactics(32, 64, 2048)
    assert valid_tactics(1, 1, 1) == [TACTIC_SPACE[0]]  # nothing fits: the first is the default


def test_gate_off_drops_split_k_gate_on_offers_it(monkeypatch):
    a, b = _rand(4, 1024), _rand(1024, 8)
    mm(a, b)
    assert mm.dropped_experimental_backends == ("splitk",)
    monkeypatch.setenv(GATE, "1")
    mm(a, b)
    assert mm.suitable_auto_backends[-1] == "splitk"


def test_support_module_is_light_and_the_kernel_loads_on_first_use():
    code = (
        "import sys, torch\n"
        "import flashinfer.experimental.splitk_gemm.support as s\n"
        "assert 'triton' not in sys.modules\n"
        "import flashinfer.experimental.splitk_gemm\n"
        "assert 'triton' not in sys.modules\n"
        "assert 'flashinfer.experimental.splitk_gemm.kernel' not in sys.modules\n"
        "import warnings; warnings.simplefilter('ignore')\n"
        "import flashinfer\n"
        "flashinfer.mm(torch.ones(2, 1024), torch.ones(1024, 4), backend='splitk')\n"
        "assert 'flashinfer.experimental.splitk_gemm.kernel' in sys.modules\n"
    )
    assert_runs_in_fresh_interpreter(code)


def test_limits_are_module_constants():
    assert (support.MAX_M, support.MIN_K) == (64, 1024)
