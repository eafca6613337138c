"""The benchmarks' smoke manifest (``benchmarks/smoke.json``) and its runner
(``scripts/ci/smoke.py``): every benchmark is in the full tier at tiny counts with options it
has, the pr tier is part of it, and a run that fails or hangs fails the tier."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from . import REPO, SCRIPTS, write

sys.path.insert(0, str(SCRIPTS))
import smoke  # noqa: E402


def test_every_benchmark_smokes_in_the_full_tier_with_options_it_has() -> None:
    runs = smoke.load_manifest(smoke.MANIFEST)
    scripts = {run["argv"][0] for run in runs}
    assert scripts == {
        p.relative_to(REPO).as_posix() for p in (REPO / "benchmarks").glob("bench_*.py")
    }
    for run in runs:
        source = (REPO / run["argv"][0]).read_text(encoding="utf-8")
        for flag in (a for a in run["argv"][1:] if a.startswith("-")):
            assert re.search(rf"[\"']{re.escape(flag)}[\"']", source), (run["name"], flag)
    pr = [run["name"] for run in runs if "pr" in run["tiers"]]
    assert pr and len(pr) < len(runs)  # the pr tier is a part of the full one


def _project(tmp_path: Path, runs: list[dict]) -> Path:
    write(
        tmp_path,
        {
            "benchmarks/ok.py": "print('figures')\n",
            "benchmarks/bad.py": "raise SystemExit(3)\n",
            "benchmarks/slow.py": "import time\ntime.sleep(30)\n",
            "benchmarks/smoke.json": json.dumps({"runs": runs}),
        },
    )
    return tmp_path / "benchmarks" / "smoke.json"


def _run(name: str, tiers: list[str], timeout: float = 20) -> dict:
    return {"name": name, "tiers": tiers, "argv": [f"benchmarks/{name}.py"], "timeout_s": timeout}


def _smoke(manifest: Path, tier: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPTS / "smoke.py"), "--tier", tier, "--manifest", str(manifest)],
        capture_output=True,
        text=True,
    )


def test_a_failing_or_hanging_run_fails_the_tier_and_is_named(tmp_path: Path) -> None:
    manifest = _project(
        tmp_path,
        [_run("ok", ["pr", "full"]), _run("bad", ["full"]), _run("slow", ["full"], timeout=1)],
    )
    full = _smoke(manifest, "full")
    assert full.returncode == 1
    assert "bad: exited 3" in full.stderr and "slow: still running after 1s" in full.stderr
    pr = _smoke(manifest, "pr")
    assert pr.returncode == 0 and "every run passed" in pr.stdout


@pytest.mark.parametrize(
    "runs, message",
    [
        ([_run("ok", ["pr"])], "every run belongs to the full tier"),
        ([_run("ok", ["nightly", "full"])], "tiers must be among"),
        ([_run("ok", ["full"]), _run("ok", ["full"])], "used twice"),
        ([{"name": "ok"}], "needs name, tiers, argv and timeout_s"),
    ],
)
def test_a_bad_manifest_is_a_usage_error(tmp_path: Path, runs: list, message: str) -> None:
    proc = _smoke(_project(tmp_path, runs), "full")
    assert proc.returncode == 2 and message in proc.stderr
