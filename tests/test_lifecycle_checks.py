"""The lifecycle check's exit rules (``flashinfer.dispatch.lifecycle_checks``): each stale
state of issue 32's item 5 fails, naming the three exits or what finishes the exit taken, and
the same state with the exit finished passes.  States are synthetic (duck-typed ops, records
given), so each test fails without its rule."""

from __future__ import annotations

import datetime as dt
import textwrap
import types
from pathlib import Path

import pytest

from flashinfer.dispatch.declarations import Backend
from flashinfer.dispatch.lifecycle_checks import exit_problems
from flashinfer.gating.history import THREE_EXITS, Graduated, Removed, Renamed
from flashinfer.gating.lifecycle import ExperimentalFeature, lifecycle_problems
from flashinfer.gating.records import make_experimental_info


def _check(x, backend="auto"):
    return True


def fake_op(experimental=(), checks=None, backends=None):
    checks = checks or {"base": _check, "fast": _check}
    return types.SimpleNamespace(
        api_key="pkg.ops.mm",
        api_name="mm",
        backend_checks=checks,
        experimental_backends=frozenset(experimental),
        backends=backends or {},
    )


def test_a_passed_graduate_by_date_fails_naming_the_three_exits():
    info = make_experimental_info("fast", "@alice", 12, "2030-01-31")
    feature = ExperimentalFeature(
        "backend", "pkg.ops.mm[backend=fast]", "m", "pkg.ops.mm", "fast", info
    )
    assert lifecycle_problems([feature], today=dt.date(2030, 1, 31)) == []
    (problem,) = lifecycle_problems([feature], today=dt.date(2030, 2, 1))
    assert "past its graduation date 2030-01-31" in problem and THREE_EXITS in problem
    for exit_ in ("graduate it", "extend it", "remove it"):
        assert exit_ in THREE_EXITS


def test_a_graduated_backend_still_marked_experimental_fails():
    record = Graduated("pkg.ops.mm", "0.2.0", backend="fast")
    (problem,) = exit_problems([fake_op(experimental={"fast"})], records=[record])
    assert "'fast' of pkg.ops.mm graduated in 0.2.0" in problem
    assert "still marked @experimental_backend" in problem and THREE_EXITS in problem
    assert exit_problems([fake_op()], records=[record]) == []  # the marker dropped: fine


def test_a_graduated_api_still_marked_experimental_fails():
    record = Graduated("pkg.norm.fused", "0.2.0")
    (problem,) = exit_problems([], ["pkg.norm.fused"], records=[record])
    assert "still marked @flashinfer_experimental_api" in problem
    assert exit_problems([], [], records=[record]) == []


@pytest.mark.parametrize(
    "record",
    [
        Renamed("pkg.ops.mm", "old", "new", "0.2.0", "0.4.0"),
        Renamed("pkg.norm.new", "pkg.norm.old", "pkg.norm.new", "0.2.0", "0.4.0", backend=False),
        Removed("pkg.ops.mm", "gone", "0.2.0", "base", "0.4.0"),
        Removed("pkg.norm.gone", "gone", "0.2.0", "pkg.norm.rmsnorm", "0.4.0", backend=False),
    ],
)
def test_an_alias_or_tombstone_past_its_expiry_fails(record):
    assert exit_problems([], records=[record], version="0.3.9") == []
    (problem,) = exit_problems([], records=[record], version="0.4.0")
    assert "expired in 0.4.0 (flashinfer is 0.4.0)" in problem
    assert "delete its record from flashinfer/gating/history.py" in problem
    assert exit_problems([], records=[record], version="1.0.0")  # later still


def _experimental_checker():
    namespace: dict = {}
    exec("def check(x, backend='auto'):\n    return True\n", namespace)
    fn = namespace["check"]
    fn.__module__ = "flashinfer.experimental.fast_mm.support"
    return fn


def test_a_stable_backend_living_under_flashinfer_experimental_fails():
    checks = {"base": _check, "fast": _experimental_checker()}
    (problem,) = exit_problems([fake_op(checks=checks)], records=[])
    assert "stable backend 'fast' of pkg.ops.mm: its checker is defined in module" in problem
    assert "flashinfer.experimental.fast_mm.support" in problem and THREE_EXITS in problem
    # Marked experimental, it may live there.
    assert exit_problems([fake_op(experimental={"fast"}, checks=checks)], records=[]) == []


def test_a_stable_backend_whose_implementation_imports_experimental_code_fails():
    def run(inputs, tactic=None):
        from flashinfer.experimental.fast_mm.kernel import fast_matmul  # noqa: F401

    declared = {"fast": Backend("fast", check=_check, run=run)}
    (problem,) = exit_problems([fake_op(backends=declared)], records=[])
    assert "its implementation imports 'flashinfer.experimental.fast_mm.kernel'" in problem


def test_the_real_package_passes_the_exit_rules():
    import flashinfer
    from flashinfer.gating.op_registry import registered_ops
    from flashinfer.gating.records import api_inventory

    flashinfer.load_all_apis()
    apis = [r.name for r in api_inventory(experimental=True)]
    assert exit_problems(registered_ops(), apis) == []


def test_the_ci_script_fails_on_a_graduated_backend_still_marked(tmp_path: Path):
    from pr_checks import run_script

    source = """
        from flashinfer import backend_requirement, experimental_backend
        from flashinfer import supported_compute_capability
        from flashinfer.gating import history

        history.HISTORY = (history.Graduated(__name__ + ".op", "0.1.0", backend="fast"),)

        @supported_compute_capability([90], cpu=True)
        def _stable_ok(x, backend):
            return True

        @experimental_backend(owner="@alice", tracking_issue=12, graduate_by="2030-01-31")
        @supported_compute_capability([90], cpu=True)
        def _fast_ok(x, backend):
            return True

        @backend_requirement({"stable": _stable_ok, "fast": _fast_ok})
        def op(x, backend="auto"):
            return x
    """
    (tmp_path / "fi_life_grad.py").write_text(textwrap.dedent(source), encoding="utf-8")
    result = run_script(
        "experimental_lifecycle",
        "--module",
        "fi_life_grad",
        "--today",
        "2030-01-01",
        pythonpath=tmp_path,
    )
    assert result.returncode == 1, result.stdout
    assert "backend 'fast' of fi_life_grad.op graduated in 0.1.0" in result.stdout
    assert "graduate it" in result.stdout and "remove it" in result.stdout


def test_a_backend_alias_that_leads_nowhere_fails():
    ok = Renamed("pkg.ops.mm", "quick", "fast", "0.2.0", "0.4.0")
    assert exit_problems([fake_op()], records=[ok], version="0.2.0") == []
    missing = Renamed("pkg.ops.mm", "quick", "faster", "0.2.0", "0.4.0")
    (problem,) = exit_problems([fake_op()], records=[missing], version="0.2.0")
    assert "names backend 'faster', which it does not have" in problem
    shadowed = Renamed("pkg.ops.mm", "base", "fast", "0.2.0", "0.4.0")
    (problem,) = exit_problems([fake_op()], records=[shadowed], version="0.2.0")
    assert "still declares backend 'base'" in problem
