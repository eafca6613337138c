"""The workflows: actionlint + shellcheck clean, and no untrusted value in script text."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
WORKFLOWS = REPO / ".github" / "workflows"
RUN_ACTIONLINT = REPO / "scripts" / "pr_checks" / "run_actionlint.sh"
WORKFLOW_FILES = sorted(WORKFLOWS.glob("*.yml")) + sorted(WORKFLOWS.glob("*.yaml"))


def _tool_path() -> str:
    scripts = sysconfig.get_path("scripts")
    return os.pathsep.join([scripts, os.environ.get("PATH", "")])


def _run_actionlint(script: Path) -> subprocess.CompletedProcess[str]:
    path = _tool_path()
    missing = [t for t in ("actionlint", "shellcheck") if shutil.which(t, path=path) is None]
    # Not a skip: both come with the test extra, so a missing one is a broken install.
    assert not missing, f"{' and '.join(missing)} missing: pip install -e '.[test]'"
    env = {**os.environ, "PATH": path, "PYTHON": sys.executable}
    return subprocess.run(
        ["bash", str(script)], capture_output=True, text=True, timeout=300, env=env
    )


def test_run_actionlint() -> None:
    proc = _run_actionlint(RUN_ACTIONLINT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "clean" in proc.stdout


BAD_WORKFLOW = """\
on: issue_comment
jobs:
  bad:
    runs-on: ubuntu-latest
    steps:
      - run: echo ${{ github.event.comment.body }}
      - run: pytest $TEST_PATH
"""


def test_run_actionlint_fails_on_findings(tmp_path: Path) -> None:
    script = tmp_path / "scripts" / "pr_checks" / "run_actionlint.sh"
    script.parent.mkdir(parents=True)
    shutil.copy(RUN_ACTIONLINT, script)
    (tmp_path / ".github" / "workflows").mkdir(parents=True)
    (tmp_path / ".github" / "workflows" / "bad.yml").write_text(BAD_WORKFLOW)
    proc = _run_actionlint(script)
    assert proc.returncode != 0
    assert "untrusted" in proc.stdout  # expression injection
    assert "SC2086" in proc.stdout  # shellcheck: unquoted expansion


def _steps(workflow: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    steps = []
    for job_name, job in (workflow.get("jobs") or {}).items():
        for step in job.get("steps") or []:
            steps.append((job_name, step))
    return steps


@pytest.mark.parametrize("path", WORKFLOW_FILES, ids=lambda p: p.name)
def test_no_expression_in_script_text(path: Path) -> None:
    """Untrusted values travel through env:, never ${{ }} inside run: scripts."""
    yaml = pytest.importorskip("yaml")
    workflow = yaml.safe_load(path.read_text(encoding="utf-8"))
    for job_name, step in _steps(workflow):
        script = step.get("run")
        if script is not None:
            assert "${{" not in script, f"{path.name}: job {job_name}: {step.get('name')}"


@pytest.mark.parametrize("path", WORKFLOW_FILES, ids=lambda p: p.name)
def test_called_scripts_exist(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    for script in set(re.findall(r"scripts/pr_checks/[A-Za-z0-9_.-]+", text)):
        assert (REPO / script).is_file(), script


def test_workflows_present_and_use_the_lanes() -> None:
    names = {p.name for p in WORKFLOW_FILES}
    assert {"ci-bot-commands.yml", "pr-test.yml"} <= names
    pr_test = (WORKFLOWS / "pr-test.yml").read_text(encoding="utf-8")
    assert "pytest -p no:cacheprovider tests/\n" in pr_test
    assert "pytest -p no:cacheprovider tests/experimental\n" in pr_test
    # The targeted lane reads the scope into an array with globbing off.
    assert "set -f" in pr_test and 'read -r -a targets <<<"$TEST_PATH"' in pr_test
    assert '"${targets[@]}"' in pr_test
