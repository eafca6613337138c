"""The autotuner and the experimental split-K backend of the real ``flashinfer.mm``: the
gate decides whether split-K is timed, picked and loaded from a persisted cache."""

from __future__ import annotations

import json
import re
import warnings

import pytest
import torch

import flashinfer
from flashinfer.api_logging import ExperimentalWarning
from flashinfer.autotuner import (
    AutoTuner,
    TuningFileWarning,
    autotune,
    load_tuning_file,
    save_tuning_file,
)
from flashinfer.autotuner import timing as tuner_module
from flashinfer.gating.messages import automatic_selection
from flashinfer.gemm import MM_RUNNERS

pytestmark = pytest.mark.experimental

GATE = "FLASHINFER_ALLOW_EXPERIMENTAL_AUTO_BACKENDS"


@pytest.fixture(autouse=True)
def scripted_timings(monkeypatch):
    """Every runner is really called once per timing, but the measured time is scripted:
    the later a candidate comes in the dispatcher's list, the faster it 'is', so split-K
    (last on CPU) wins whenever it is a candidate."""
    timed: list[str] = []
    tuner = AutoTuner.get()
    tuner.clear()

    def fake_measure(fn, inputs, **kwargs):
        fn()
        return 1.0 / (len(timed) + 1)

    for name, runner in list(MM_RUNNERS.items()):

        def counting(inputs, tactic=None, _name=name, _runner=runner):
            timed.append(_name)
            return _runner(inputs, tactic)

        counting.tactic_space = runner.tactic_space
        counting.tactics = runner.tactics
        monkeypatch.setitem(MM_RUNNERS, name, counting)
    monkeypatch.setattr(tuner_module, "measure", fake_measure)
    yield timed
    tuner.clear()


def small_m_large_k():
    return torch.randn(4, 1024), torch.randn(1024, 16)


@pytest.mark.skipif(torch.cuda.is_available(), reason="the CPU candidate order is scripted")
def test_gate_off_split_k_is_never_timed(scripted_timings):
    a, b = small_m_large_k()
    with autotune():
        out = flashinfer.mm(a, b)
    torch.testing.assert_close(out, a @ b, rtol=1e-4, atol=1e-4)
    assert "splitk" not in scripted_timings
    assert "splitk" in flashinfer.mm.dropped_experimental_backends


@pytest.mark.skipif(torch.cuda.is_available(), reason="the CPU candidate order is scripted")
def test_gate_on_split_k_is_timed_picked_persisted_and_gated_on_load(
    scripted_timings, monkeypatch, tmp_path
):
    monkeypatch.setenv(GATE, "1")
    a, b = small_m_large_k()
    picked = re.escape(automatic_selection(flashinfer.mm.api_key, "splitk"))
    with pytest.warns(ExperimentalWarning, match=picked) as rec:
        with autotune():
            out = flashinfer.mm(a, b)
    assert rec[0].filename == __file__  # the user's line, not flashinfer's
    torch.testing.assert_close(out, a @ b, rtol=1e-4, atol=1e-4)
    assert "splitk" in scripted_timings
    path = tmp_path / "tuned.json"
    save_tuning_file(path)
    (entry,) = json.loads(path.read_text())["entries"]
    assert entry["backend"] == "splitk" and entry["experimental"] is True

    # Gate off: the entry is skipped on load, with one warning, and the stable choice runs.
    monkeypatch.setenv(GATE, "0")
    AutoTuner.get().clear()
    with pytest.warns(TuningFileWarning, match="1 name an experimental backend") as rec:
        assert load_tuning_file(path).loaded == 0
    assert len(rec) == 1
    scripted_timings.clear()
    torch.testing.assert_close(flashinfer.mm(a, b), a @ b, rtol=1e-4, atol=1e-4)
    assert scripted_timings == ["torch"]  # the heuristic's first stable candidate, no timing

    # Gate on again: the entry loads and split-K runs without timing.
    monkeypatch.setenv(GATE, "1")
    with warnings.catch_warnings():
        warnings.simplefilter("error", TuningFileWarning)
        assert load_tuning_file(path).loaded == 1
    scripted_timings.clear()
    flashinfer.mm(a, b)
    assert scripted_timings == ["splitk"]
