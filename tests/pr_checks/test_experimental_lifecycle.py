"""scripts/pr_checks/experimental_lifecycle.py: passing and failing fake modules, the real repo.

Each fixture is a module under ``tmp_path`` with experimental APIs and backends; the check runs
in a subprocess (``--module``), so they never enter this process's registries.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from . import REPO, run_script

MODULE = """
    from flashinfer import (
        backend_requirement,
        experimental_backend,
        flashinfer_api,
        flashinfer_experimental_api,
        supported_compute_capability,
    )


    @supported_compute_capability([90], cpu=True)
    def _stable_ok(x, backend):
        return True


    @experimental_backend({backend_meta})
    @supported_compute_capability([90], cpu=True)
    def _fast_ok(x, backend):
        return True


    @flashinfer_api
    @backend_requirement({{"stable": _stable_ok, "fast": _fast_ok}})
    def op(x, backend="auto"):
        \"\"\"A stable API with an experimental backend.\"\"\"
        return x


    @flashinfer_experimental_api({api_meta})
    def preview(x):
        \"\"\"An experimental API.\"\"\"
        return x
"""

GOOD = 'owner="@alice", tracking_issue=12, graduate_by="2030-01-31"'


def _run(
    tmp_path: Path, name: str, backend_meta: str = GOOD, api_meta: str = GOOD, *extra: str
) -> subprocess.CompletedProcess:
    source = MODULE.format(backend_meta=backend_meta, api_meta=api_meta)
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(source), encoding="utf-8")
    return run_script("experimental_lifecycle", "--module", name, *extra, pythonpath=tmp_path)


def test_passing_fixture(tmp_path: Path) -> None:
    result = _run(tmp_path, "fi_life_ok", GOOD, GOOD, "--today", "2030-01-31")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "experimental_lifecycle: OK (2 experimental API(s)/backend(s))" in result.stdout
    # the listing names both, with their metadata
    assert "fi_life_ok.op[backend=fast]" in result.stdout
    assert "fi_life_ok.preview" in result.stdout
    assert "@alice" in result.stdout and "2030-01-31" in result.stdout


@pytest.mark.parametrize(
    ("case", "backend_meta", "api_meta", "today", "expected"),
    [
        (
            "backend_no_owner",
            'tracking_issue=12, graduate_by="2030-01-31"',
            GOOD,
            "2030-01-01",
            "experimental backend fi_life_backend_no_owner.op[backend=fast]",
        ),
        (
            "api_no_owner",
            GOOD,
            'owner="  ", tracking_issue=12',
            "2030-01-01",
            "experimental api fi_life_api_no_owner.preview (feature 'preview', "
            "module fi_life_api_no_owner): no owner",
        ),
        (
            "backend_no_issue",
            'owner="@alice"',
            GOOD,
            "2030-01-01",
            "fi_life_backend_no_issue.op[backend=fast] (feature",
        ),
        ("api_no_issue", GOOD, 'owner="@alice"', "2030-01-01", "no tracking issue"),
        (
            "bare_markers",
            "",
            "",
            "2030-01-01",
            "no owner",
        ),
        (
            "past_due",
            GOOD,
            GOOD,
            "2030-02-01",
            "past its graduation date 2030-01-31 (today 2030-02-01)",
        ),
    ],
)
def test_failing_fixtures(
    tmp_path: Path, case: str, backend_meta: str, api_meta: str, today: str, expected: str
) -> None:
    name = f"fi_life_{case}"
    result = _run(tmp_path, name, backend_meta, api_meta, "--today", today)
    assert result.returncode == 1, result.stdout + result.stderr
    assert expected in result.stdout, result.stdout
    assert "experimental_lifecycle:" in result.stderr


def test_past_due_counts_every_late_feature(tmp_path: Path) -> None:
    result = _run(tmp_path, "fi_life_two_late", GOOD, GOOD, "--today", "2031-01-01")
    assert result.returncode == 1
    assert result.stdout.count("past its graduation date") == 2


def test_missing_graduate_by_is_a_note_not_a_failure(tmp_path: Path) -> None:
    meta = 'owner="@alice", tracking_issue=12'
    result = _run(tmp_path, "fi_life_no_date", meta, meta, "--today", "2030-01-01")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "has no graduate_by date" in result.stderr


def test_bad_today_is_a_usage_error(tmp_path: Path) -> None:
    result = _run(tmp_path, "fi_life_bad_today", GOOD, GOOD, "--today", "31/01/2030")
    assert result.returncode == 2
    assert "expected YYYY-MM-DD" in result.stderr


def test_unknown_module_fails(tmp_path: Path) -> None:
    result = run_script("experimental_lifecycle", "--module", "fi_life_does_not_exist")
    assert result.returncode == 1
    assert "cannot import fi_life_does_not_exist" in result.stdout


def test_real_repository_passes() -> None:
    result = run_script("experimental_lifecycle", cwd=REPO, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "experimental_lifecycle: OK" in result.stdout


def test_python_m_flashinfer_experimental_lists_the_real_features() -> None:
    """The listing command: table and JSON agree, every entry has its metadata fields."""
    table = subprocess.run(
        [sys.executable, "-m", "flashinfer.experimental"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
    )
    assert table.returncode == 0, table.stderr
    as_json = subprocess.run(
        [sys.executable, "-m", "flashinfer.experimental", "--json"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
    )
    assert as_json.returncode == 0, as_json.stderr
    entries = json.loads(as_json.stdout)["features"]  # the shape of `flashinfer experimental`
    for entry in entries:
        assert set(entry) >= {"kind", "name", "feature", "owner", "tracking_issue", "graduate_by"}
        assert entry["kind"] in ("api", "backend")
        assert entry["name"] in table.stdout
    if not entries:
        assert "No experimental APIs or backends" in table.stdout
