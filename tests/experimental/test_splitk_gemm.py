"""The experimental split-K backend of mm (flashinfer/experimental/splitk_gemm), and the rows
of the behaviour table (DESIGN.md section 1) through it, on the real op."""

from __future__ import annotations

import json
import re
import types
import warnings

import pytest
import torch
from autotuner_fakes import SpyRunner

import flashinfer.gemm as gemm
from flashinfer import BackendSupportedError, ExperimentalWarning, mm
from flashinfer.autotuner import AutoTuner, autotune
from flashinfer.backend_dispatch import backend_requirement, supported_compute_capability
from flashinfer.experimental.splitk_gemm import support
from flashinfer.experimental.splitk_gemm.support import (
    SPLITK,
    TACTIC_SPACE,
    check_splitk,
    valid_tactics,
)
from flashinfer.gating.messages import (
    automatic_selection,
    explicit_selection,
    unrecognised_gate_value,
)
from flashinfer.testing import assert_runs_in_fresh_interpreter

GATE = "FLASHINFER_ALLOW_EXPERIMENTAL_AUTO_BACKENDS"


def _rand(*shape, dtype=torch.float32, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


def _rel_err(y, a, b):
    ref = a.double() @ b.double()
    return ((y.double() - ref).norm() / ref.norm()).item()


def _small_m_large_k(dtype=torch.float16):
    """A shape every mm backend supports, split-K included (M <= 64, K >= 1024)."""
    return _rand(4, 1024, dtype=dtype), _rand(1024, 16, dtype=dtype, seed=1)


@pytest.fixture(autouse=True)
def _quiet():
    """Split-K warns once per process when named; the rows that assert on the warning
    record it themselves (pytest.warns, recwarn) inside this."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ExperimentalWarning)
        yield


pytestmark = [pytest.mark.experimental, pytest.mark.usefixtures("isolated_op_registry")]


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
    assert torch.equal(buf, before)  # the dispatcher refused it: the runner never ran


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


def test_support_module_is_light_mm_loads_it_at_import_and_the_kernel_on_first_use():
    """One fresh interpreter (seconds each): mm's module imports split-K's support and that
    imports no Triton; calls of other backends leave the kernel unloaded, split-K's loads it."""
    code = (
        "import sys, torch\n"
        "import flashinfer.gemm\n"
        "assert 'flashinfer.experimental.splitk_gemm.support' in sys.modules\n"
        "assert 'triton' not in sys.modules\n"
        "import flashinfer.experimental.splitk_gemm\n"
        "assert 'triton' not in sys.modules\n"
        "assert 'flashinfer.experimental.splitk_gemm.kernel' not in sys.modules\n"
        "import warnings; warnings.simplefilter('ignore')\n"
        "import flashinfer\n"
        "flashinfer.mm(torch.ones(2, 2), torch.ones(2, 2))\n"
        "assert 'flashinfer.experimental.splitk_gemm.kernel' not in sys.modules\n"
        "flashinfer.mm(torch.ones(2, 2), torch.ones(2, 2), backend='triton')\n"
        "assert 'flashinfer.experimental.splitk_gemm.kernel' not in sys.modules\n"
        "flashinfer.mm(torch.ones(2, 1024), torch.ones(1024, 4), backend='splitk')\n"
        "assert 'flashinfer.experimental.splitk_gemm.kernel' in sys.modules\n"
    )
    assert_runs_in_fresh_interpreter(code)


def test_limits_are_module_constants():
    assert (support.MAX_M, support.MIN_K) == (64, 1024)


# ---- the declaration -------------------------------------------------------------------


def test_split_k_is_one_declaration_in_its_feature_folder():
    """The checker the dispatcher runs, the runner the body and the tuner run, and the
    preference "auto" reads all come from SPLITK, declared in the feature's support.py."""
    assert mm.backends["splitk"] is SPLITK
    assert mm.backend_checks["splitk"] is check_splitk is SPLITK.check
    assert gemm.MM_RUNNERS["splitk"] is SPLITK.run
    assert mm.experimental_backends == {"splitk"}
    assert 75 not in check_splitk._supported_ccs  # bf16 tl.dot needs Ampere


@pytest.mark.parametrize(
    "a, b, match",
    [
        (torch.ones(4), torch.ones(4, 2), r"a must be a 2-D matrix"),
        (torch.ones(2, 4), torch.ones(5, 3), r"inner dimensions differ"),
        (torch.ones(2, 4, dtype=torch.int8), torch.ones(4, 3, dtype=torch.int8), "dtype int8"),
    ],
)
def test_malformed_inputs_raise_before_the_kernel(monkeypatch, a, b, match):
    def boom(*args, **kwargs):
        raise AssertionError("split-K ran although the inputs were invalid")

    monkeypatch.setitem(mm.implementations, "splitk", boom)
    with pytest.raises(ValueError, match=match):
        mm(a, b, backend="splitk")


def test_unknown_backend_lists_split_k():
    with pytest.raises(BackendSupportedError, match="'torch', 'triton', 'splitk', or 'auto'"):
        mm(torch.ones(2, 2), torch.ones(2, 2), backend="cublas")


# ---- heuristic and declared preference ---------------------------------------------------


def test_gate_on_cpu_keeps_torch_first_and_split_k_last(monkeypatch):
    a, b = _small_m_large_k()
    monkeypatch.setenv(GATE, "1")
    mm(a, b)
    assert mm.suitable_auto_backends == ["torch", "triton", "splitk"]


def test_split_k_prefers_cuda_so_auto_orders_it_first_there():
    """mm's heuristic ranks only its stable backends; split-K's declared preference
    (prefer_splitk: on CUDA) puts it first, ahead of cuBLAS."""
    ordered = gemm._heuristic(["splitk", "torch", "triton"], None, None)
    assert ordered == ["torch", "triton", "splitk"]  # the heuristic does not know split-K
    for is_cuda, first in ((True, "splitk"), (False, "torch")):
        a = types.SimpleNamespace(is_cuda=is_cuda)
        assert mm.dispatcher.prefer_first(ordered, {"a": a, "b": None})[0] == first


def test_tuning_with_the_gate_on_times_split_k_too(monkeypatch):
    tuner = AutoTuner.get()
    tuner.clear()
    monkeypatch.setattr(tuner, "warmup", 0)
    monkeypatch.setattr(tuner, "repeat", 1)
    timed = []
    for name, runner in list(gemm.MM_RUNNERS.items()):
        monkeypatch.setitem(gemm.MM_RUNNERS, name, SpyRunner(name, runner, timed))
    monkeypatch.setenv(GATE, "1")
    try:
        with autotune():
            _assert_close(mm(*_small_m_large_k()), *_small_m_large_k())
    finally:
        tuner.clear()
    assert set(timed) == {"torch", "triton", "splitk"}


def _assert_close(y, a, b, bound=2e-3):
    assert _rel_err(y, a, b) < bound


# ---- the behaviour table, row by row (DESIGN.md section 1), through split-K ----------------


def test_row_auto_gate_off_lists_viable_experimental_backends_as_dropped(recwarn):
    a, b = _small_m_large_k()
    _assert_close(mm(a, b), a, b)
    assert mm.dropped_experimental_backends == ("splitk",)
    assert "splitk" not in mm.suitable_auto_backends
    mm(_rand(128, 64), _rand(64, 32))  # split-K does not fit: nothing dropped
    assert mm.dropped_experimental_backends == ()
    assert not [w for w in recwarn if issubclass(w.category, ExperimentalWarning)]


def test_row_auto_gate_on_lets_split_k_join_without_warning_unless_picked(monkeypatch, recwarn):
    monkeypatch.setenv(GATE, "1")
    a, b = _small_m_large_k()
    mm(a, b)
    assert "splitk" in mm.suitable_auto_backends and mm.dropped_experimental_backends == ()
    # On CPU torch is first, so split-K is a candidate but not picked: no warning.
    assert not [w for w in recwarn if issubclass(w.category, ExperimentalWarning)]


@pytest.mark.parametrize("gate", [None, "0", "1"])
def test_row_explicit_split_k_runs_and_warns_once_per_op_and_backend(monkeypatch, gate):
    if gate is not None:
        monkeypatch.setenv(GATE, gate)
    a, b = _small_m_large_k()
    explicit = re.escape(explicit_selection(mm.api_key, "splitk"))
    with pytest.warns(ExperimentalWarning, match=explicit) as record:
        y = mm(a, b, backend="splitk")
    assert record[0].filename == __file__  # points at the caller's line
    _assert_close(y, a, b)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ExperimentalWarning)
        mm(a, b, backend="splitk")  # second time: silent


def test_row_unrecognised_gate_value_is_off_and_warns_naming_the_variable(monkeypatch):
    monkeypatch.setenv(GATE, "yes")
    a, b = _small_m_large_k()
    with pytest.warns(RuntimeWarning, match=re.escape(unrecognised_gate_value("yes"))):
        mm(a, b)
    assert mm.dropped_experimental_backends == ("splitk",)


def _mm_without_reference():
    """mm's real split-K declaration beside a stable backend that declines small M.

    The real ``mm`` cannot reach the rows "only experimental backends fit" and "nothing
    fits" on any machine: its torch reference accepts every valid input.  This op is mm
    without the reference, with the Triton kernel restricted to large M (as a persistent
    GEMM tuned for big batches would be), so both rows run through the real split-K
    checker, gate and kernel.
    """

    @supported_compute_capability([80, 90], cpu=True)
    def check_large_m(a, b):
        if a.shape[0] <= 64:
            raise ValueError(f"needs M > 64, got M={a.shape[0]}")
        return gemm._check_triton(a, b)

    @backend_requirement(
        {"large_m": check_large_m, "splitk": check_splitk},
        common_check=gemm._common_check,
        heuristic_func=gemm._heuristic,
    )
    def mm_large_m(a, b, *, out=None, out_dtype=None, backend="auto"):
        if backend == "auto":
            backend = mm_large_m.suitable_auto_backends[0]
        runner = gemm.MM_RUNNERS["triton" if backend == "large_m" else backend]
        return runner((a, b, out, out_dtype))

    return mm_large_m


def test_row_only_experimental_fits_gate_off_names_the_variable():
    op = _mm_without_reference()
    with pytest.raises(BackendSupportedError) as info:
        op(*_small_m_large_k())
    message = str(info.value)
    assert GATE in message and "backend='splitk'" in message
    assert "needs M > 64" in message  # and why the stable backend declined


def test_row_only_experimental_fits_gate_on_runs_it_and_warns_once(monkeypatch):
    monkeypatch.setenv(GATE, "1")
    op = _mm_without_reference()
    a, b = _small_m_large_k()
    picked = re.escape(automatic_selection(op.api_key, "splitk"))
    with pytest.warns(ExperimentalWarning, match=picked) as record:
        y = op(a, b)
    assert record[0].filename == __file__
    _assert_close(y, a, b)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ExperimentalWarning)
        op(a, b)


@pytest.mark.parametrize("gate", [None, "1"])
def test_row_nothing_fits_lists_every_reason_without_the_variable(monkeypatch, gate):
    if gate is not None:
        monkeypatch.setenv(GATE, gate)
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    op = _mm_without_reference()
    with pytest.raises(BackendSupportedError) as info:
        op(*_small_m_large_k())
    message = str(info.value)
    assert "large_m: support check rejected the inputs: needs M > 64" in message
    assert "splitk: support check rejected the inputs: on CPU, needs TRITON_INTERPRET=1" in message
    assert GATE not in message


@pytest.mark.gpu
def test_row_auto_gate_on_picks_split_k_on_cuda_and_warns(monkeypatch):
    monkeypatch.setenv(GATE, "1")
    a, b = (t.cuda() for t in _small_m_large_k())
    with pytest.warns(
        ExperimentalWarning, match=re.escape(automatic_selection(mm.api_key, "splitk"))
    ):
        y = mm(a, b)
    assert mm.suitable_auto_backends[0] == "splitk"
    _assert_close(y.cpu(), a.cpu(), b.cpu())


# ---- split-K through the stable lane's general tools (moved from tests/*.py, which derive
# their experimental backends from the op and so no longer name split-K) ------------------


def test_split_k_declares_the_triton_family_from_ampere_up():
    from flashinfer.backend_families import TRITON, family_of

    assert family_of(check_splitk) is TRITON
    assert check_splitk._supported_ccs == {cc for cc in TRITON.compute_capabilities if cc >= 80}
    assert check_splitk.is_experimental_backend  # the family mark composes with this one


def test_the_split_k_tactics_round_with_the_shared_function(monkeypatch):
    seen: list[int] = []

    def spy(n: int) -> int:
        seen.append(n)
        return 1 if n <= 1 else 1 << (n - 1).bit_length()

    monkeypatch.setattr(support, "next_positive_power_of_2", spy)
    support.valid_tactics(3, 40, 5000)
    assert sorted(seen) == [3, 40, 5000]


def test_named_split_k_refusal_names_op_backend_and_reason():
    from flashinfer import UnsupportedInputsError

    for fn in (mm, mm.call_reference):
        with pytest.raises(UnsupportedInputsError) as info:
            fn(torch.randn(128, 8), torch.randn(8, 4), backend="splitk")
        error = info.value
        assert str(error).startswith("mm cannot run these inputs with backend 'splitk': ")
        assert str(error.__cause__) in str(error)


def test_skip_check_auto_keeps_split_k_out_with_the_gate_off_although_it_fits():
    a, b = _small_m_large_k(torch.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ExperimentalWarning)
        mm(a, b, skip_check=True)
    assert "splitk" not in mm.suitable_auto_backends
    assert mm.dropped_experimental_backends == ("splitk",)


def test_the_choice_log_line_names_split_k_as_left_out(caplog):
    import logging

    from flashinfer.dispatch.choice_log import forget_logged_choices

    forget_logged_choices()
    AutoTuner.get().clear()
    caplog.set_level(logging.INFO, logger="flashinfer.dispatch")
    try:
        mm(torch.randn(16, 2048), torch.randn(2048, 32))
    finally:
        forget_logged_choices()
    lines = [r.getMessage() for r in caplog.records if r.name == "flashinfer.dispatch"]
    assert lines == [
        "flashinfer.mm: using backend 'torch' (auto; candidates ['torch', 'triton']; "
        "experimental left out: ['splitk'])"
    ]


def test_explain_shows_split_k_left_out_by_the_gate(capsys):
    from flashinfer.cli import main

    assert main(["explain", "mm", "--shapes", "4x32x1024", "--dtype", "bfloat16"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"splitk +experimental +yes +left out \(gate\) +experimental: FLASH", out)


def test_the_listings_name_split_k_with_its_lifecycle(capsys):
    from flashinfer.cli import main

    assert main(["experimental", "--json"]) == 0
    names = {f["name"]: f for f in json.loads(capsys.readouterr().out)["features"]}
    feature = names["flashinfer.gemm.mm[backend=splitk]"]
    assert feature["kind"] == "backend" and feature["owner"] and feature["tracking_issue"]
    assert main(["backends", "--json"]) == 0
    apis = {a["api"]: a for a in json.loads(capsys.readouterr().out)["apis"]}
    rows = {b["name"]: b for b in apis["flashinfer.mm"]["backends"]}
    assert rows["splitk"]["experimental"] is True


def test_the_backends_report_and_a_split_k_call_agree_when_triton_cannot_run(monkeypatch):
    from flashinfer.cli.backends import backends_report
    from flashinfer.kernels import availability

    no = availability.TritonUnavailable("probe says no", "do the thing")
    probed = {(d, i): no for d in ("cpu", "cuda") for i in (True, False)}
    monkeypatch.setattr(availability, "_probed", probed)
    apis = {a["api"]: a for a in backends_report()["apis"]}
    row = next(b for b in apis["flashinfer.mm"]["backends"] if b["name"] == "splitk")
    assert (row["runnable"], row["reason"], row["advice"]) == (False, no.reason, no.fix)
    with pytest.raises(ValueError, match="probe says no; do the thing"):
        mm(*_small_m_large_k(torch.float32), backend="splitk")
