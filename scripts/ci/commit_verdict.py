#!/usr/bin/env python3
"""The ``results`` verdict of a pr-test run that did not start the lanes (a description edit,
another label): the verdict of the run of the same commit that did.  Standard library only
(and the ``gh`` CLI for ``--repo``).

``results`` is the one required check, and GitHub shows the newest check of that name on a
commit.  Skipped on edit runs, whether the check was satisfied depended on which run GitHub
showed; reporting a bare success there would turn a red commit green by editing its
description.  So an edit run's ``results`` waits for the lanes' run of its commit and
reports what that run concluded.

    python3 scripts/ci/commit_verdict.py --repo OWNER/NAME --sha SHA --current-run ID
                                         [--wait-minutes M]
    python3 scripts/ci/commit_verdict.py --runs-file RUNS.json --current-run ID

``RUNS.json``: ``[{"id", "created_at", "jobs": [{"name", "status", "conclusion"}]}]``.
Exit codes: 0 the lanes passed, 1 they failed (or never reported in time), 2 usage.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections.abc import Sequence
from typing import Any

WORKFLOW = "pr-test"
VERDICT_JOB = "results"
LANE_JOB = "stable"  # started only by a run that runs the lanes


def decide(runs: list[dict[str, Any]], current_run: int) -> tuple[str, str]:
    """``("pass" | "fail" | "wait", why)`` from the commit's other runs."""
    lanes = []
    for run in runs:
        if int(run["id"]) == current_run:
            continue
        jobs = {j["name"]: j for j in run.get("jobs") or []}
        lane = jobs.get(LANE_JOB)
        if lane is None or lane.get("conclusion") == "skipped":
            continue  # another run that did not start the lanes
        lanes.append((str(run.get("created_at", "")), int(run["id"]), jobs))
    if not lanes:
        return "wait", "no run of the lanes for this commit has started yet"
    _, run_id, jobs = max(lanes)
    verdict = jobs.get(VERDICT_JOB)
    if verdict is None or verdict.get("status") != "completed":
        return "wait", f"the lanes' run {run_id} has not reported yet"
    conclusion = verdict.get("conclusion")
    if conclusion == "success":
        return "pass", f"the lanes' run {run_id} of this commit passed"
    return "fail", f"the lanes' run {run_id} of this commit concluded {conclusion!r}"


def _gh(path: str) -> Any:
    out = subprocess.run(["gh", "api", path], capture_output=True, text=True, check=True).stdout
    return json.loads(out)


def fetch(repo: str, sha: str) -> list[dict[str, Any]]:
    """The commit's pr-test runs with their jobs."""
    runs = _gh(f"repos/{repo}/actions/runs?head_sha={sha}&per_page=100")["workflow_runs"]
    out = []
    for run in runs:
        if run.get("name") != WORKFLOW:
            continue
        jobs = _gh(f"repos/{repo}/actions/runs/{run['id']}/jobs?per_page=100")["jobs"]
        out.append({"id": run["id"], "created_at": run.get("created_at", ""), "jobs": jobs})
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--runs-file")
    source.add_argument("--repo")
    parser.add_argument("--sha")
    parser.add_argument("--current-run", type=int, required=True)
    parser.add_argument("--wait-minutes", type=float, default=0.0)
    args = parser.parse_args(argv)
    if args.repo and not args.sha:
        parser.error("--repo needs --sha")
    deadline = time.monotonic() + 60 * args.wait_minutes
    while True:
        if args.runs_file:
            with open(args.runs_file, encoding="utf-8") as fh:
                runs = json.load(fh)
        else:
            runs = fetch(args.repo, args.sha)
        state, why = decide(runs, args.current_run)
        if state != "wait" or time.monotonic() >= deadline:
            break
        print(f"waiting: {why}", flush=True)
        time.sleep(60)
    if state == "pass":
        print(why)
        return 0
    if state == "wait":
        why += f" after {args.wait_minutes:g} minutes: re-run this job once it has"
    print(f"results: {why}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
