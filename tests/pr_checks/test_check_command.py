"""scripts/check.sh, the one check command: its modes, that a failing step fails it, and that
CI runs exactly its steps (``.ci/run`` through README's command and scripts/test.sh, the
pull request workflow split over jobs), every repository check included."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from . import REPO

CHECK = REPO / "scripts" / "check.sh"
ALL = ["lint", "types", "stable", "experimental", "checks", "docs"]
FAST = ["lint", "types", "stable", "experimental", "checks"]


def _check(*args: str, script: Path = CHECK, env: dict[str, str] | None = None):
    return subprocess.run(
        ["bash", str(script), *args], capture_output=True, text=True, timeout=120, env=env
    )


def _listed(*args: str, script: Path = CHECK) -> list[str]:
    result = _check(*args, "--list", script=script)
    assert result.returncode == 0, result.stderr
    return result.stdout.split()


def test_fast_by_default_and_everything_with_all() -> None:
    assert _listed() == FAST
    assert _listed("--all") == ALL


def test_steps_run_in_one_order_each_once() -> None:
    assert _listed("--step", "docs", "--step", "lint", "--step", "docs") == ["lint", "docs"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--step", "nope"], "--step needs one of: lint types stable experimental checks docs"),
        (["--step"], "--step needs one of"),
        (["--all", "--step", "lint"], "use it or --step, not both"),
        (["--fast"], "unknown argument '--fast'"),
    ],
)
def test_bad_arguments_are_usage_errors(args: list[str], message: str) -> None:
    result = _check(*args)
    assert result.returncode == 2 and message in result.stderr


def test_readmes_test_script_is_check_all() -> None:
    """.ci/run runs README's command (tests/test_readme.py), which ends in scripts/test.sh."""
    assert _listed(script=REPO / "scripts" / "test.sh") == ALL


def _stub_path(tmp_path: Path, exit_code: int) -> dict[str, str]:
    """A PATH whose ``ruff`` is a stub that exits with ``exit_code``."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    stub = bin_dir / "ruff"
    stub.write_text(f'#!/bin/sh\necho "ruff $*"\nexit {exit_code}\n')
    stub.chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}


def test_a_failing_step_fails_the_command(tmp_path: Path) -> None:
    failing = _check("--step", "lint", env=_stub_path(tmp_path, 1))
    assert failing.returncode != 0
    assert "all checks passed" not in failing.stdout


def test_a_passing_step_says_which_ran(tmp_path: Path) -> None:
    passing = _check("--step", "lint", env=_stub_path(tmp_path, 0))
    assert passing.returncode == 0, passing.stderr
    assert "ruff check ." in passing.stdout and "ruff format --check ." in passing.stdout
    assert passing.stdout.rstrip().endswith("all checks passed: lint")


def _workflow_steps() -> list[str]:
    """The check.sh steps that pr-test.yml's jobs run (their ``run:`` scripts)."""
    yaml = pytest.importorskip("yaml")
    text = (REPO / ".github" / "workflows" / "pr-test.yml").read_text(encoding="utf-8")
    steps: list[str] = []
    for job in yaml.safe_load(text)["jobs"].values():
        for step in job.get("steps") or []:
            for line in (step.get("run") or "").splitlines():
                if "scripts/check.sh" in line:
                    assert "--all" not in line, "the workflow splits --all over jobs"
                    steps += re.findall(r"--step ([a-z]+)", line)
    return steps


def test_the_pull_request_workflow_runs_the_same_steps_as_ci_run() -> None:
    steps = _workflow_steps()
    assert sorted(steps) == sorted(ALL), "each step of check.sh --all exactly once"


def _check_step_body() -> str:
    text = CHECK.read_text(encoding="utf-8")
    start = text.index("step_checks() {")
    return text[start : text.index("\n}\n", start)]


def test_every_repository_check_runs_somewhere() -> None:
    """A script added to scripts/pr_checks/ is run by check.sh's checks step, or is a tool a
    workflow calls (the bot command); nothing sits there unrun."""
    workflows = "".join(
        p.read_text(encoding="utf-8") for p in (REPO / ".github" / "workflows").glob("*.yml")
    )
    body = _check_step_body()
    for script in sorted((REPO / "scripts" / "pr_checks").iterdir()):
        if script.suffix not in (".py", ".sh"):
            continue
        where = f"scripts/pr_checks/{script.name}"
        assert where in body or where in workflows, f"{where} is run by nothing"


def test_the_checks_step_runs_the_placement_and_lifecycle_checks() -> None:
    body = _check_step_body()
    for name in (
        "containment.py",
        "experimental_placement.py",
        "experimental_public_names.py",
        "api_inventory.py",
        "experimental_lifecycle.py",
        "run_actionlint.sh",
    ):
        assert f"scripts/pr_checks/{name}" in body


def test_check_sh_is_shellcheck_clean() -> None:
    shellcheck = shutil.which("shellcheck")
    assert shellcheck, "shellcheck comes with the test extra: pip install -e '.[test]'"
    for script in (CHECK, REPO / "scripts" / "test.sh"):
        result = subprocess.run([shellcheck, str(script)], capture_output=True, text=True)
        assert result.returncode == 0, result.stdout


def _stubs(tmp_path: Path, **exits: int) -> dict[str, str]:
    """A PATH whose ``python``, ``ruff`` and ``mypy`` are stubs that say what they were asked
    and exit with the status given by name (0 unless given); CI=true (no generated files)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("python", "ruff", "mypy"):
        stub = bin_dir / tool
        stub.write_text(f'#!/bin/sh\necho "{tool} $*"\nexit {exits.get(tool, 0)}\n')
        stub.chmod(0o755)
    return {**os.environ, "CI": "true", "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}


def test_types_checks_and_docs_run_beside_the_lanes_and_show_after_them(tmp_path: Path) -> None:
    """One core each, while the lanes fill the others: started before the stable lane, their
    output shown after the experimental one, in their order; the run passes when all do."""
    steps = ["--step", "types", "--step", "stable", "--step", "experimental", "--step", "docs"]
    ran = _check(*steps, env=_stubs(tmp_path))
    assert ran.returncode == 0, ran.stdout + ran.stderr
    out = ran.stdout
    assert "beside the lanes, in the background: types docs" in out
    order = ["==> stable lane", "==> experimental lane", "==> types", "mypy flashinfer", "==> docs"]
    at = [out.index(mark) for mark in order]
    assert at == sorted(at), out
    assert out.rstrip().endswith("all checks passed: types stable experimental docs")


@pytest.mark.parametrize("failing", ["mypy", "python"], ids=["beside", "lane"])
def test_a_step_failing_beside_the_lanes_or_in_one_fails_the_command(
    tmp_path: Path, failing: str
) -> None:
    ran = _check("--step", "types", "--step", "stable", env=_stubs(tmp_path, **{failing: 1}))
    assert ran.returncode != 0, ran.stdout
    assert "all checks passed" not in ran.stdout
