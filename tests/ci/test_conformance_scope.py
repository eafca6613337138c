"""A targeted lane scoped to one backend's conformance cases (issue 43 item 22).

Listing the conformance file in a pull request's scope turned the targeted lane red on a
CPU runner: its cuda cases and other backends' rejections were skipped, and a skipped
requested test did not run (``scripts/ci/run_verdict.py``).  A scope,
``conformance:API[:BACKEND]``, runs the cases of that backend that can run here and leaves
the others out (``tests/conformance_scope.py``): green when they pass, red when none can
run.  Run on the real conformance tests, as the targeted lane runs them.
"""

from __future__ import annotations

import importlib
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from . import REPO, SCRIPTS

sys.path.insert(0, str(REPO / "scripts" / "pr_checks"))
scope_targets = importlib.import_module("scope.targets")


def _targeted_lane(tmp_path: Path, *targets: str) -> tuple[int, list[str], str]:
    """The targeted lane's steps: the validator's pytest arguments, pytest with a JUnit
    report, the verdict.  Returns the verdict's exit status, the test ids and its text."""
    args = scope_targets.pytest_arguments(scope_targets.parse_targets(" ".join(targets)))
    report = tmp_path / "targeted.xml"
    subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
         f"--junitxml={report}", *args],
        cwd=REPO, capture_output=True, text=True, check=False,
    )  # fmt: skip
    ids = [case.get("name", "") for case in ET.parse(report).getroot().iter("testcase")]
    verdict = subprocess.run(
        [sys.executable, str(SCRIPTS / "run_verdict.py"), "--junit", str(report), "--fail-on",
         "any"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    return verdict.returncode, ids, verdict.stdout


SCOPES = {
    "conformance:mm:splitk": "mm-splitk-",  # rejects most cases (K < 1024)
    "conformance:rmsnorm:torch": "rmsnorm-torch-",
    "conformance:fused_add_rmsnorm": "fused_add_rmsnorm-api-",
}
"""Scopes and the id prefix of their cases: disjoint, so one targeted lane runs them all (one
pytest, not three) and each case still says which scope took it in."""


def test_a_scope_runs_its_backends_cases_that_can_run_here_and_is_green(tmp_path: Path) -> None:
    status, ids, verdict = _targeted_lane(tmp_path, *SCOPES)
    assert status == 0, verdict
    for prefix in SCOPES.values():  # each scope ran cases, and nothing outside the scopes ran
        assert any(f"[{prefix}" in i for i in ids), (prefix, ids)
    assert all(any(f"[{prefix}" in i for prefix in SCOPES.values()) for i in ids), ids
    if not __import__("torch").cuda.is_available():
        assert not any(i.endswith("-cuda]") for i in ids)


def test_the_same_cases_named_with_k_are_red_on_a_cpu_runner(tmp_path: Path) -> None:
    """What an author could do before: the file and ``-k``: the cuda cases and the
    backend's rejections are skipped, so the lane is red though nothing failed."""
    if __import__("torch").cuda.is_available():
        pytest.skip("on a CUDA machine the cuda cases run")
    report = tmp_path / "k.xml"
    subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={report}",
         "-k", "mm-splitk-", scope_targets.CONFORMANCE_TESTS[2]],
        cwd=REPO, capture_output=True, text=True, check=False,
    )  # fmt: skip
    verdict = subprocess.run(
        [sys.executable, str(SCRIPTS / "run_verdict.py"), "--junit", str(report), "--fail-on",
         "any"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert verdict.returncode == 1 and "did not run" in verdict.stdout


def test_a_scope_that_names_nothing_runnable_is_red(tmp_path: Path) -> None:
    status, ids, verdict = _targeted_lane(tmp_path, "conformance:no_such_api")
    assert status == 1 and ids == [], verdict


def test_a_malformed_scope_option_is_a_usage_error() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
         "--conformance-scope=rms-norm", scope_targets.CONFORMANCE_TESTS[0]],
        cwd=REPO, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert proc.returncode == 4 and "expected API or API:BACKEND" in proc.stderr + proc.stdout


def test_the_conformance_tests_a_scope_names_exist() -> None:
    for node in scope_targets.CONFORMANCE_TESTS:
        path, _, function = node.partition("::")
        assert f"\ndef {function}(" in (REPO / path).read_text(encoding="utf-8"), node
