"""What pr-test.yml runs when (docs/ci.rst): pull requests run the selection (everything when
it is missing), pushes to main everything; a random-order job prints its seed; the targeted
lane and the GPU job are not green when requested tests did not run; the GPU job runs on
self-hosted labels with bounded workers and the smoke tier; ``results`` waits for every job."""

from __future__ import annotations

from typing import Any

import pytest

from . import REPO

WORKFLOW = REPO / ".github" / "workflows" / "pr-test.yml"


@pytest.fixture(scope="module")
def jobs() -> dict[str, Any]:
    yaml = pytest.importorskip("yaml")
    return yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))["jobs"]


def _script(job: dict[str, Any]) -> str:
    return "\n".join(step.get("run", "") for step in job["steps"])


@pytest.mark.parametrize("lane", ["stable", "experimental"])
def test_the_lanes_run_the_selection_and_everything_without_it(jobs, lane: str) -> None:
    job = jobs[lane]
    assert "selection" in job["needs"]
    # A failed selection job must not skip the lane: it then runs everything.
    assert "!cancelled()" in job["if"] and "needs.scope.result == 'success'" in job["if"]
    fetch = next(s for s in job["steps"] if s.get("uses", "").startswith("actions/download"))
    assert fetch["with"]["name"] == "selection" and fetch["continue-on-error"] is True
    script = _script(job)
    assert 'if [ -f "$RUNNER_TEMP/selection/selection.json" ]' in script
    assert 'export CI_SELECTION="$RUNNER_TEMP/selection/selection.json"' in script
    assert f"bash scripts/check.sh --step {lane}" in script
    run_step = next(s for s in job["steps"] if "check.sh" in s.get("run", ""))
    assert run_step["env"]["CI_WORKERS"] == "auto"


def test_pull_requests_select_and_pushes_run_everything(jobs) -> None:
    job = jobs["selection"]
    assert "if" not in job  # every run that starts the lanes has a selection
    script = _script(job)
    assert '--base "$BASE_SHA" --head HEAD --json' in script
    assert 'if [ "$EVENT" = pull_request ]' in script and "--everything" in script
    upload = next(s for s in job["steps"] if s.get("uses", "").startswith("actions/upload"))
    assert upload["with"]["name"] == "selection"


def test_the_random_order_job_prints_its_seed(jobs) -> None:
    script = _script(jobs["random-order"])
    assert "export CI_RANDOM_ORDER_SEED=" in script
    assert "bash scripts/ci/run_lane.sh stable" in script
    assert "seed $CI_RANDOM_ORDER_SEED" in script


def test_a_requested_run_is_judged_by_what_ran(jobs) -> None:
    targeted = _script(jobs["targeted"])
    assert '--junitxml="$RUNNER_TEMP/targeted.xml"' in targeted
    assert "scripts/ci/run_verdict.py" in targeted and "--fail-on any" in targeted
    gpu = _script(jobs["gpu"])
    assert "scripts/ci/run_verdict.py" in gpu and "--fail-on all" in gpu


def test_the_gpu_job_runs_on_the_gpu_runner_with_bounded_workers(jobs) -> None:
    job = jobs["gpu"]
    assert job["runs-on"][0] == "self-hosted" and "gpu" in job["runs-on"]
    assert job["if"] == "vars.GPU_RUNNER == 'true'"
    script = _script(job)
    assert "-m gpu" in script and '-n "$GPU_WORKERS"' in script
    assert "'2'" in job["env"]["GPU_WORKERS"]
    assert 'scripts/ci/smoke.py --tier "$TIER"' in script
    actionlint = (REPO / ".github" / "actionlint.yaml").read_text(encoding="utf-8")
    assert "- gpu" in actionlint  # the self-hosted label actionlint must know


def test_results_waits_for_every_job_and_excuses_only_a_missing_gpu_runner(jobs) -> None:
    results = jobs["results"]
    lanes = {"checks", "stable", "experimental", "random-order", "targeted", "gpu"}
    assert lanes <= set(results["needs"])
    script = _script(results)
    assert 'if [ "${GPU_RUNNER:-}" != "true" ]' in script and "--optional gpu" in script
