"""scripts/ci/commit_verdict.py: a run that did not start the lanes reports the verdict of
the run of its commit that did, never a bare success."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from . import SCRIPTS

SCRIPT = SCRIPTS / "commit_verdict.py"


def _run(run_id: int, created: str, stable: str | None, results: tuple[str, str | None]):
    jobs = [{"name": "results", "status": results[0], "conclusion": results[1]}]
    if stable is not None:
        jobs.append({"name": "stable", "status": "completed", "conclusion": stable})
    return {"id": run_id, "created_at": created, "jobs": jobs}


EDIT = _run(9, "2026-01-01T00:09:00Z", "skipped", ("in_progress", None))


@pytest.mark.parametrize(
    ("runs", "exit_code", "message"),
    [
        (
            [EDIT, _run(1, "2026-01-01T00:00:00Z", "success", ("completed", "success"))],
            0,
            "run 1 of this commit passed",
        ),
        (
            [EDIT, _run(1, "2026-01-01T00:00:00Z", "failure", ("completed", "failure"))],
            1,
            "concluded 'failure'",
        ),
        # The newest run of the lanes decides (a re-run after a fix).
        (
            [
                EDIT,
                _run(1, "2026-01-01T00:00:00Z", "failure", ("completed", "failure")),
                _run(2, "2026-01-01T00:05:00Z", "success", ("completed", "success")),
            ],
            0,
            "run 2",
        ),
        # Still running, or never started: not a success.
        (
            [EDIT, _run(1, "2026-01-01T00:00:00Z", "success", ("in_progress", None))],
            1,
            "has not reported yet",
        ),
        ([EDIT], 1, "no run of the lanes"),
        # Another edit run (its lanes skipped) does not count.
        (
            [EDIT, _run(3, "2026-01-01T00:10:00Z", "skipped", ("completed", "success"))],
            1,
            "no run of the lanes",
        ),
    ],
)
def test_the_verdict_is_the_lanes_run_of_the_commit(
    tmp_path: Path, runs: list, exit_code: int, message: str
) -> None:
    path = tmp_path / "runs.json"
    path.write_text(json.dumps(runs), encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--runs-file", str(path), "--current-run", "9"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == exit_code, proc.stdout + proc.stderr
    assert message in proc.stdout + proc.stderr


def _workflow() -> dict:
    yaml = pytest.importorskip("yaml")
    text = (SCRIPTS.parents[1] / ".github" / "workflows" / "pr-test.yml").read_text("utf-8")
    return yaml.safe_load(text)


def test_the_aggregator_reports_on_every_run() -> None:
    """Edit and other-label runs skip `scope`; `results` still runs there, and reports the
    lanes' run of the commit instead of the (skipped) lanes of its own run."""
    results = _workflow()["jobs"]["results"]
    assert results["if"] == "always()"
    steps = {s.get("name"): s for s in results["steps"]}
    lanes = steps["Every lane passed, and a published scope ran"]
    mirror = steps["The verdict of the run of this commit that ran the lanes"]
    assert lanes["if"] == "needs.scope.result != 'skipped'"
    assert mirror["if"] == "needs.scope.result == 'skipped'"
    assert "scripts/ci/commit_verdict.py" in mirror["run"]
    assert results["permissions"]["actions"] == "read"


def test_the_map_is_refreshed_on_pushes_and_read_by_pull_requests() -> None:
    jobs = _workflow()["jobs"]
    assert jobs["testmap"]["if"] == "github.event_name == 'push'"
    record = "".join(s.get("run", "") for s in jobs["testmap"]["steps"])
    assert "scripts/ci/testmap.py record --out testmap.json" in record
    assert any(s.get("with", {}).get("name") == "testmap" for s in jobs["testmap"]["steps"])
    select = "".join(s.get("run", "") for s in jobs["selection"]["steps"])
    assert "scripts/ci/testmap.py select --map" in select and "--json" in select


def test_the_scripts_the_workflows_call_exist() -> None:
    import re

    workflows = SCRIPTS.parents[1] / ".github" / "workflows"
    for path in workflows.glob("*.yml"):
        for script in set(re.findall(r"scripts/ci/[A-Za-z0-9_.-]+\.py", path.read_text("utf-8"))):
            assert (SCRIPTS.parents[1] / script).is_file(), script
