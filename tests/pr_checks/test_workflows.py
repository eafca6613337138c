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


def _load(name: str) -> dict[str, Any]:
    yaml = pytest.importorskip("yaml")
    workflow = yaml.safe_load((WORKFLOWS / name).read_text(encoding="utf-8"))
    if True in workflow:  # YAML 1.1 reads the key `on` as a boolean
        workflow["on"] = workflow.pop(True)
    return workflow


def test_workflows_present_and_use_the_lanes() -> None:
    names = {p.name for p in WORKFLOW_FILES}
    assert {"ci-bot-commands.yml", "pr-test.yml"} <= names
    pr_test = (WORKFLOWS / "pr-test.yml").read_text(encoding="utf-8")
    # The lanes run through the one check command (test_check_command.py pins the split).
    assert "bash scripts/check.sh --step stable\n" in pr_test
    assert "bash scripts/check.sh --step experimental\n" in pr_test
    # The targeted lane lists the scope with globbing off, and runs the arguments the
    # validator prints for it (a conformance scope is an option and tests), one per line.
    assert "set -f" in pr_test and 'read -r -a targets <<<"$TEST_PATH"' in pr_test
    assert '"${targets[@]}"' in pr_test
    assert '--check-exists . --pytest-args >"$RUNNER_TEMP/pytest-args"' in pr_test
    assert 'mapfile -t args <"$RUNNER_TEMP/pytest-args"' in pr_test
    assert '--junitxml="$RUNNER_TEMP/targeted.xml" \\\n            "${args[@]}"' in pr_test


BLOCK_JOB = "experimental-tests-block"


def _block_job() -> dict[str, Any]:
    return _load("pr-test.yml")["jobs"][BLOCK_JOB]


def test_the_pr_block_is_checked_on_every_pull_request_event_that_can_change_it() -> None:
    workflow = _load("pr-test.yml")
    types = set(workflow["on"]["pull_request"]["types"])
    assert {"opened", "synchronize", "reopened", "edited"} <= types
    condition = _block_job()["if"]
    assert "github.event_name == 'pull_request'" in condition
    # An edit re-runs only this job: the lanes' first job skips edits, and edits have a
    # concurrency group of their own (they cannot cancel the lanes of a push).
    assert "github.event.action != 'edited'" in workflow["jobs"]["scope"]["if"]
    assert "'edited'" in workflow["concurrency"]["group"]


def test_the_pr_block_job_runs_the_trusted_validator_on_the_real_body() -> None:
    steps = _block_job()["steps"]
    trusted = [s for s in steps if (s.get("with") or {}).get("path") == "trusted"]
    assert len(trusted) == 1
    assert trusted[0]["with"]["ref"] == "${{ github.event.pull_request.base.sha }}"
    assert trusted[0]["with"]["sparse-checkout"] == "scripts/pr_checks"
    (validate,) = [s for s in steps if "experimental_test_scope.py" in (s.get("run") or "")]
    assert validate["env"]["PR_BODY"] == "${{ github.event.pull_request.body }}"
    script = validate["run"]
    assert "python3 trusted/scripts/pr_checks/experimental_test_scope.py" in script
    for option in ("--body-file", "--changed-files", "--check-exists .", "--test-path"):
        assert option in script
    assert "printf '%s' \"$PR_BODY\"" in script  # data to a file, never evaluated


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
    )


@pytest.fixture
def pr_checkout(tmp_path: Path) -> tuple[Path, str]:
    """A pull request's checkout: a base commit, then a commit that adds an experimental
    test; the trusted scripts beside it, as the job's two checkouts leave them."""
    repo = tmp_path / "repo"
    (repo / "tests" / "experimental").mkdir(parents=True)
    (repo / "README.md").write_text("base\n")
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "base")
    base = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True, check=True
    ).stdout.strip()
    shutil.copytree(REPO / "scripts" / "pr_checks", repo / "trusted" / "scripts" / "pr_checks")
    return repo, base


def _run_block_step(repo: Path, base: str, body: str) -> subprocess.CompletedProcess[str]:
    (validate,) = [
        s for s in _block_job()["steps"] if "experimental_test_scope" in s.get("run", "")
    ]
    runner_temp = repo.parent / "runner_temp"
    runner_temp.mkdir(exist_ok=True)
    env = {**os.environ, "PR_BODY": body, "BASE_SHA": base, "RUNNER_TEMP": str(runner_temp)}
    return subprocess.run(
        ["bash", "-e", "-c", validate["run"]],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


GOOD_BODY = "Adds a test.\n\n```experimental-tests\ntests/experimental/test_new.py\n```\n"


def test_the_block_steps_script_decides_on_the_real_diff(pr_checkout) -> None:
    repo, base = pr_checkout
    # No experimental change: any description passes.
    (repo / "README.md").write_text("docs only\n")
    _git(repo, "commit", "-q", "-am", "docs")
    quiet = _run_block_step(repo, base, "No block at all.")
    assert quiet.returncode == 0, quiet.stdout + quiet.stderr
    assert "block is not required" in quiet.stdout
    # An experimental test added: the block is required, and must name existing paths.
    (repo / "tests" / "experimental" / "test_new.py").write_text("def test_x(): pass\n")
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "experimental test")
    missing = _run_block_step(repo, base, "No block at all.")
    assert missing.returncode == 2 and "no ```experimental-tests block" in missing.stderr
    typo = _run_block_step(repo, base, GOOD_BODY.replace("test_new", "test_nwe"))
    assert typo.returncode == 2 and "does not exist" in typo.stderr
    good = _run_block_step(repo, base, GOOD_BODY)
    assert good.returncode == 0, good.stdout + good.stderr
    assert good.stdout.strip() == "tests/experimental/test_new.py"


def test_the_block_steps_script_never_evaluates_the_body(pr_checkout) -> None:
    repo, base = pr_checkout
    (repo / "tests" / "experimental" / "test_new.py").write_text("")
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "experimental test")
    marker = repo.parent / "pwned"
    body = (
        f"$(touch {marker})\n`touch {marker}`\n"
        f"```experimental-tests\ntests/experimental/test_new.py; touch {marker}\n```\n"
    )
    result = _run_block_step(repo, base, body)
    assert result.returncode == 2 and "shell metacharacter" in result.stderr
    assert not marker.exists()
