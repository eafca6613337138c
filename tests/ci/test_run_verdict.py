"""``scripts/ci/run_verdict.py``: a requested run whose tests skip is not green, and the
verdict says how many requested tests did not run and why (on real pytest JUnit reports)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from . import SCRIPTS

# Like tests/test_cuda_graphs.py on a CPU runner: 1 test runs, 7 skip for want of a GPU.
GPU_FILE = """\
import pytest

needs_gpu = pytest.mark.skip(reason="needs a CUDA device")


def test_on_cpu():
    pass


@needs_gpu
@pytest.mark.parametrize("n", range(7))
def test_on_gpu(n):
    pass


@pytest.mark.xfail(reason="known")
def test_expected_failure():
    raise AssertionError
"""


def _junit(tmp_path: Path, source: str, *args: str) -> Path:
    (tmp_path / "test_req.py").write_text(source, encoding="utf-8")
    report = tmp_path / "report.xml"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:hypothesispytest",  # the file draws no examples: a second of start-up saved
            f"--junitxml={report}",
            *args,
            "test_req.py",
        ],
        cwd=tmp_path,
        capture_output=True,
    )
    return report


def _verdict(report: Path, fail_on: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            str(SCRIPTS / "run_verdict.py"),
            "--junit",
            str(report),
            "--fail-on",
            fail_on,
            *extra,
        ],
        capture_output=True,
        text=True,
    )


def test_a_requested_run_with_skipped_tests_is_not_green(tmp_path: Path) -> None:
    proc = _verdict(_junit(tmp_path, GPU_FILE), "any")
    assert proc.returncode == 1
    assert "9 requested test(s): 2 ran, 7 did not run (7 needs a CUDA device)" in proc.stdout
    assert "not green" in proc.stdout


def test_the_gpu_job_fails_only_when_nothing_ran(tmp_path: Path) -> None:
    report = _junit(tmp_path, GPU_FILE)
    assert _verdict(report, "all").returncode == 0
    only_gpu = _junit(tmp_path, GPU_FILE, "-k", "on_gpu")
    proc = _verdict(only_gpu, "all")
    assert proc.returncode == 1 and "0 ran, 7 did not run" in proc.stdout


def test_a_run_that_ran_everything_passes_and_writes_the_summary(tmp_path: Path) -> None:
    report = _junit(tmp_path, "def test_one():\n    pass\n")
    summary = tmp_path / "summary.md"
    proc = _verdict(report, "any", "--summary", str(summary))
    assert proc.returncode == 0, proc.stdout
    assert "1 requested test(s): 1 ran" in summary.read_text(encoding="utf-8")


def test_a_run_with_no_test_is_not_green(tmp_path: Path) -> None:
    report = _junit(tmp_path, "def helper():\n    pass\n")
    proc = _verdict(report, "all")
    assert proc.returncode == 1 and "holds no test" in proc.stdout


@pytest.mark.parametrize("content", [None, "<not xml"])
def test_a_missing_or_broken_report_is_a_usage_error(tmp_path: Path, content) -> None:
    report = tmp_path / "report.xml"
    if content is not None:
        report.write_text(content, encoding="utf-8")
    assert _verdict(report, "any").returncode == 2
