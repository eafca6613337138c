"""The heuristic rule for experimental backends, on both operators: a backend says when it
should win ``backend="auto"`` with its declaration's ``prefer``, never by an edit of the
stable heuristic.  With the gate on, ``"auto"`` picks it exactly when its preference says
so; with the gate off it never does (it is dropped, and listed as dropped).

Each test adds a throwaway experimental backend to a copy of the real op's table (the
op's own declarations, common check and heuristic), installed where the op's body looks
it up, for the test only.
"""

from __future__ import annotations

import datetime
import re
import warnings

import pytest
import torch

import flashinfer
import flashinfer.gemm as gemm
import flashinfer.norm as norm
from flashinfer import Backend, ExperimentalWarning, backend_requirement, experimental_backend
from flashinfer.autotuner import AutoTuner
from flashinfer.backend_families import TORCH, backend_family
from flashinfer.gating.messages import automatic_selection

pytestmark = pytest.mark.experimental

GATE = "FLASHINFER_ALLOW_EXPERIMENTAL_AUTO_BACKENDS"
SOON = (datetime.date.today() + datetime.timedelta(days=60)).isoformat()  # a valid date


@pytest.fixture(autouse=True)
def _isolated(isolated_op_registry):
    """Ops built here stay out of the registry, and no tuned choice of mm steers "auto"."""
    AutoTuner.get().clear()
    yield
    AutoTuner.get().clear()


def _marked(fn):
    mark = experimental_backend(owner="@kernel-author", tracking_issue=1, graduate_by=SOON)
    return mark(backend_family(TORCH)(fn))


def _with_backend(monkeypatch, module, name, extra, heuristic):
    """The op ``module.name`` rebuilt with ``extra`` added to its table, installed as
    ``module.name`` (what its body reads) and ``flashinfer.name`` for this test."""
    op = getattr(module, name)
    rebuilt = backend_requirement(
        [*op.backends.values(), extra], common_check=op.common_check, heuristic_func=heuristic
    )(op.dispatcher.__wrapped__)
    # flashinfer's lazy name first: reading it caches the op as it is before the patch.
    monkeypatch.setattr(flashinfer, name, rebuilt)
    monkeypatch.setattr(module, name, rebuilt)
    return rebuilt


# ---- rmsnorm: "wide" prefers rows of at least 64 elements ----------------------------------


@pytest.fixture
def rmsnorm_with_wide(monkeypatch):
    ran = []

    @_marked
    def check_wide(input):
        return True

    def run_wide(input, weight, eps, out):
        ran.append(input.shape)
        return norm.rmsnorm.implementations["torch"](input, weight, eps, out)

    wide = Backend(
        "wide", check=check_wide, run=run_wide, prefer=lambda input: input.shape[-1] >= 64
    )
    op = _with_backend(monkeypatch, norm, "rmsnorm", wide, norm._heuristic)
    return op, ran


def test_rmsnorm_gate_on_auto_picks_the_backend_its_preference_names(
    monkeypatch, rmsnorm_with_wide
):
    op, ran = rmsnorm_with_wide
    monkeypatch.setenv(GATE, "1")
    x = torch.randn(3, 128)
    picked = re.escape(automatic_selection(op.api_key, "wide"))
    with pytest.warns(ExperimentalWarning, match=picked):
        y = op(x, torch.ones(128))
    assert op.suitable_auto_backends[0] == "wide" and ran == [x.shape]
    torch.testing.assert_close(y, op(x, torch.ones(128), backend="torch"))
    op(torch.randn(3, 16), torch.ones(16))  # short rows: not preferred, the heuristic's order
    assert op.suitable_auto_backends[0] == "torch" and "wide" in op.suitable_auto_backends
    assert len(ran) == 1


def test_rmsnorm_gate_off_auto_never_picks_it(rmsnorm_with_wide):
    op, ran = rmsnorm_with_wide
    with warnings.catch_warnings():
        warnings.simplefilter("error", ExperimentalWarning)
        op(torch.randn(3, 128), torch.ones(128))
    assert "wide" not in op.suitable_auto_backends and ran == []
    assert op.dropped_experimental_backends == ("wide",)


def test_rmsnorm_heuristic_is_not_edited_for_it():
    """The stable heuristic knows only the stable backends; an unknown name comes last."""
    cuda_like = type("T", (), {"is_cuda": True})()
    assert norm._heuristic(["wide", "torch", "triton"], cuda_like, None) == [
        "triton",
        "torch",
        "wide",
    ]


# ---- mm: "skinny" prefers M <= 8 ----------------------------------------------------------


@pytest.fixture
def mm_with_skinny(monkeypatch):
    ran = []

    @_marked
    def check_skinny(a, b):
        return True

    class SkinnyRunner:
        def tactic_space(self):
            return [None]

        def tactics(self, inputs):
            return [None]

        def __call__(self, inputs, tactic=None):
            ran.append(inputs[0].shape)
            return gemm.MM_RUNNERS["torch"](inputs, tactic)

    skinny = Backend(
        "skinny", check=check_skinny, run=SkinnyRunner(), prefer=lambda a: a.shape[0] <= 8
    )
    op = _with_backend(monkeypatch, gemm, "mm", skinny, gemm._heuristic)
    return op, ran


def test_mm_gate_on_auto_picks_the_backend_its_preference_names(monkeypatch, mm_with_skinny):
    op, ran = mm_with_skinny
    monkeypatch.setenv(GATE, "1")
    a, b = torch.randn(4, 32), torch.randn(32, 8)
    picked = re.escape(automatic_selection(op.api_key, "skinny"))
    with pytest.warns(ExperimentalWarning, match=picked):
        y = op(a, b)
    assert op.suitable_auto_backends[0] == "skinny" and ran == [a.shape]
    torch.testing.assert_close(y, a @ b)
    op(torch.randn(32, 32), b)  # M > 8: not preferred, the heuristic's order
    assert op.suitable_auto_backends[0] == "torch" and "skinny" in op.suitable_auto_backends
    assert len(ran) == 1


def test_mm_gate_off_auto_never_picks_it(mm_with_skinny):
    op, ran = mm_with_skinny
    with warnings.catch_warnings():
        warnings.simplefilter("error", ExperimentalWarning)
        op(torch.randn(4, 32), torch.randn(32, 8))
    assert "skinny" not in op.suitable_auto_backends and ran == []
    assert "skinny" in op.dropped_experimental_backends


def test_mm_preferences_compose_split_k_and_the_new_one(mm_with_skinny):
    """Two experimental backends preferring the same call: both ahead of the heuristic's
    order, in the table's order; each only where its own preference says so."""
    op, _ = mm_with_skinny
    ordered = gemm._heuristic(["torch", "triton", "splitk", "skinny"], None, None)
    cuda_like = type("T", (), {"is_cuda": True, "shape": (4, 32)})()
    order = op.dispatcher.prefer_first(ordered, {"a": cuda_like})
    assert order == ["splitk", "skinny", "torch", "triton"]
    cpu_like = type("T", (), {"is_cuda": False, "shape": (4, 32)})()
    order = op.dispatcher.prefer_first(ordered, {"a": cpu_like})
    assert order == ["skinny", "torch", "triton", "splitk"]
