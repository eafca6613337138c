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
            'owner="  ", tracking_issue=12, graduate_by="2030-01-31"',
            "2030-01-01",
            "experimental api fi_life_api_no_owner.preview (feature 'preview', "
            "module fi_life_api_no_owner): no owner",
        ),
        (
            "backend_no_issue",
            'owner="@alice", graduate_by="2030-01-31"',
            GOOD,
            "2030-01-01",
            "fi_life_backend_no_issue.op[backend=fast] (feature",
        ),
        ("api_no_issue", GOOD, 'owner="@alice"', "2030-01-01", "no tracking issue"),
        ("bare_markers", "", "", "2030-01-01", "no owner"),
        (
            "past_due",
            GOOD,
            GOOD,
            "2030-02-01",
            "past its graduation date 2030-01-31 (today 2030-02-01)",
        ),
        # a person's @handle, not a bare name or a team
        ("owner_no_at", GOOD.replace("@alice", "alice"), GOOD, "2030-01-01",
         "owner 'alice' does not start with '@'"),
        ("owner_team", GOOD.replace("@alice", "@nvidia/flashinfer"), GOOD, "2030-01-01",
         "owner '@nvidia/flashinfer' is a team or bot account, not a person"),
        ("owner_project_team", GOOD, GOOD.replace("@alice", "@flashinfer-norm"), "2030-01-01",
         "owner '@flashinfer-norm' is a team or bot account"),
        ("owner_not_a_handle", GOOD.replace("@alice", "@al ice"), GOOD, "2030-01-01",
         "is not a GitHub handle"),
        # a positive issue number or a URL
        ("issue_tbd", GOOD.replace("12", '"TBD"'), GOOD, "2030-01-01",
         "tracking_issue 'TBD' is neither an issue number nor a URL"),
        ("issue_zero", GOOD.replace("12", "0"), GOOD, "2030-01-01",
         "tracking_issue 0 is not a positive number"),
        ("issue_zero_text", GOOD, GOOD.replace("12", '"#0"'), "2030-01-01",
         "tracking_issue '#0' is not a positive number"),
        # graduate_by: required, a YYYY-MM-DD date, within the horizon
        ("no_graduate_by", 'owner="@alice", tracking_issue=12', GOOD, "2030-01-01",
         "no graduate_by date; pass graduate_by='YYYY-MM-DD', at most 6 months ahead"),
        ("date_malformed", GOOD.replace("2030-01-31", "31/01/2030"), GOOD, "2030-01-01",
         "graduate_by '31/01/2030' is not a date written YYYY-MM-DD"),
        ("date_impossible", GOOD, GOOD.replace("2030-01-31", "2030-02-30"), "2030-01-01",
         "graduate_by '2030-02-30' is not a date written YYYY-MM-DD"),
        ("date_compact", GOOD.replace("2030-01-31", "20300131"), GOOD, "2030-01-01",
         "graduate_by '20300131' is not a date written YYYY-MM-DD"),
        ("date_too_far", GOOD.replace("2030-01-31", "2099-12-31"), GOOD, "2030-01-01",
         "graduate_by 2099-12-31 is more than 6 months ahead (today 2030-01-01, latest "
         "allowed 2030-07-01"),
    ],
)  # fmt: skip
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


def test_horizon_is_inclusive(tmp_path: Path) -> None:
    """Six calendar months ahead is allowed, the day after is not."""
    late = GOOD.replace("2030-01-31", "2030-07-31")
    ok = _run(tmp_path, "fi_life_horizon_ok", late, GOOD, "--today", "2030-01-31")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    over = _run(tmp_path, "fi_life_horizon_over", late, GOOD, "--today", "2030-01-30")
    assert over.returncode == 1
    assert "latest allowed 2030-07-30" in over.stdout


BAD_METADATA = 'owner="x", tracking_issue="TBD", graduate_by="31/05/2027"'


def test_bad_metadata_never_stops_the_stable_api_from_importing(tmp_path: Path) -> None:
    """The stable op of a module whose experimental backend carries malformed metadata
    imports and runs; one ExperimentalMetadataWarning points at the marked checker, with
    every reason; the lifecycle check then fails naming the backend and each reason."""
    name = "fi_life_bad_meta"
    source = MODULE.format(backend_meta=BAD_METADATA, api_meta=GOOD)
    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(source), encoding="utf-8")
    code = textwrap.dedent(
        f"""
        import warnings
        from flashinfer.lifecycle import ExperimentalMetadataWarning
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            import {name}
        meta = [w for w in caught if w.category is ExperimentalMetadataWarning]
        assert len(meta) == 1, [str(w.message) for w in caught]
        print(meta[0].filename, meta[0].lineno)
        print(meta[0].message)
        assert {name}.op(3, backend="stable") == 3
        assert {name}.op(4) == 4
        """
    )
    ran = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    where, message = ran.stdout.splitlines()[:2]
    lines = textwrap.dedent(source).splitlines()
    marker_line = lines.index(f"@experimental_backend({BAD_METADATA})") + 1  # the decorated def
    assert where == f"{path} {marker_line}"
    for reason in ("owner 'x'", "tracking_issue 'TBD'", "graduate_by '31/05/2027'"):
        assert reason in message

    result = run_script("experimental_lifecycle", "--module", name, pythonpath=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    for reason in (
        "owner 'x' does not start with '@'",
        "tracking_issue 'TBD' is neither an issue number nor a URL",
        "graduate_by '31/05/2027' is not a date written YYYY-MM-DD",
    ):
        assert f"{name}.op[backend=fast] (feature" in result.stdout
        assert reason in result.stdout, result.stdout


def test_bad_metadata_escalated_to_an_error_still_imports(tmp_path: Path) -> None:
    """``-W error`` cannot make the stable API unimportable either."""
    name = "fi_life_bad_meta_error"
    source = MODULE.format(backend_meta=BAD_METADATA, api_meta=GOOD)
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(source), encoding="utf-8")
    ran = subprocess.run(
        [sys.executable, "-W", "error", "-c", f"import {name}; assert {name}.op(1) == 1"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr


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
