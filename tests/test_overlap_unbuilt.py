"""Overlap attacks that cannot be built for a case's tensors (issue 34, item 19) are not
dropped silently: ``overlap_items`` records each, once, with its reason
(``flashinfer.testing.unbuilt_overlap_attacks``), and a test run's summary counts them per op
and reason (tests/conftest.py's ``pytest_terminal_summary``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from flashinfer import testing
from flashinfer.dispatch.overlap import OverlapRule
from flashinfer.testing import (
    Case,
    UnbuiltAttack,
    allclose,
    overlap_items,
    unbuilt_overlap_attacks,
    unbuilt_overlap_summary,
)

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.usefixtures("isolated_op_registry")


@pytest.fixture
def fresh_records(isolated_op_registry, monkeypatch):
    """No declared op, overlap rule or unbuilt record but the test's own (the package's APIs
    are loaded first, by isolated_op_registry: one loaded later would declare into them)."""
    monkeypatch.setattr(testing, "_declared", {})
    monkeypatch.setattr(testing, "_unbuilt", {})
    monkeypatch.setattr(testing, "load_all_apis", lambda: None)


def _toy_op(*, experimental: bool = False):
    """``out = x * w``: ``w`` is a row, so ``out`` and ``w`` can never be the same tensor."""

    def toy_scale(x, w, *, out=None):
        return torch.mul(x, w, out=out)

    toy_scale.is_experimental = experimental
    case = Case(
        "f32_4x8",
        inputs=lambda gen: {
            "x": torch.randn(4, 8, generator=gen),
            "w": torch.randn(8, generator=gen),
            "out": torch.empty(4, 8),
        },
        reference=lambda x, w, out: x * w,
        compare=allclose(),
    )
    testing.declare_cases(toy_scale, [case], overlap=OverlapRule("toy_scale", ("out",), ("x", "w")))
    return toy_scale


UNBUILT = UnbuiltAttack("toy_scale", "f32_4x8", "out-same-w", "out and w differ in shape or dtype")


@pytest.mark.usefixtures("fresh_records")
def test_an_attack_that_cannot_be_built_is_recorded_with_its_reason_once():
    _toy_op()
    collected = {str(i.attack) for i in overlap_items()}
    assert "out-same-x" in collected and "out-same-w" not in collected  # left out, as before
    assert unbuilt_overlap_attacks() == [UNBUILT]
    overlap_items()  # collected again (both lanes, a re-collection): still counted once
    assert unbuilt_overlap_attacks() == [UNBUILT]
    assert unbuilt_overlap_summary() == (
        "1 overlap attack could not be built (left out at collection, run for no backend):\n"
        "  toy_scale: out and w differ in shape or dtype: 1"
    )


@pytest.mark.usefixtures("fresh_records")
def test_nothing_unbuilt_is_an_empty_summary():
    assert unbuilt_overlap_attacks() == [] and unbuilt_overlap_summary() == ""


@pytest.mark.usefixtures("fresh_records")
def test_an_op_no_longer_declared_is_not_reported(monkeypatch):
    _toy_op()
    overlap_items()
    monkeypatch.setattr(testing, "_declared", {})  # a test's toy registry, put back
    assert unbuilt_overlap_attacks() == []


@pytest.mark.usefixtures("fresh_records")
@pytest.mark.parametrize("experimental", [False, True])
def test_the_lane_filter_holds_for_the_record(experimental):
    _toy_op(experimental=experimental)
    overlap_items(experimental=not experimental)  # the other lane: this op is not its
    assert unbuilt_overlap_attacks() == []
    overlap_items(experimental=experimental)
    assert unbuilt_overlap_attacks() == [UNBUILT]


def test_the_run_summary_counts_the_real_ops_unbuilt_attacks(monkeypatch):
    monkeypatch.setattr(testing, "_unbuilt", {})
    overlap_items(experimental=False)
    expected = unbuilt_overlap_summary()
    assert expected, "the declared cases have attacks that cannot be built"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FLASHINFER_", "PYTEST_"))}
    env["PYTHONPATH"] = str(ROOT)
    argv = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--collect-only", "-q"]
    argv.append("tests/test_overlap_conformance.py")
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    lines = done.stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if "overlap attacks not built" in line)
    assert lines[header].startswith("-") and lines[header].endswith("-")
    assert lines[header + 1 : header + 1 + len(expected.splitlines())] == expected.splitlines()
