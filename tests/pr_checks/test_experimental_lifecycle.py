"""scripts/pr_checks/experimental_lifecycle.py: passing and failing fake modules, the real repo.

Each fixture is a module under a temporary folder with experimental APIs and backends; the
check runs in a process of its own (``--module``), so they never enter this process's
registries nor each other's: all the cases' runs are forked from one interpreter
(:func:`run_mains`), and the passing fixture also runs as a program, the way CI runs the check.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from . import run_mains, run_script

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


def _write_module(folder: Path, name: str, backend_meta: str, api_meta: str) -> Path:
    path = folder / f"{name}.py"
    source = MODULE.format(backend_meta=backend_meta, api_meta=api_meta)
    path.write_text(textwrap.dedent(source), encoding="utf-8")
    return path


FAILING = [
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
    ]  # fmt: skip


BAD_METADATA = 'owner="x", tracking_issue="TBD", graduate_by="31/05/2027"'

# case: (backend metadata, API metadata, the check's arguments after --module fi_life_<case>)
RUNS = {
    "ok": (GOOD, GOOD, ["--today", "2030-01-31"]),
    **{case: (b, a, ["--today", today]) for case, b, a, today, _ in FAILING},
    "two_late": (GOOD, GOOD, ["--today", "2031-01-01"]),
    "horizon_ok": (GOOD.replace("2030-01-31", "2030-07-31"), GOOD, ["--today", "2030-01-31"]),
    "horizon_over": (GOOD.replace("2030-01-31", "2030-07-31"), GOOD, ["--today", "2030-01-30"]),
    "bad_meta": (BAD_METADATA, GOOD, []),
    "bad_today": (GOOD, GOOD, ["--today", "31/01/2030"]),
}


@pytest.fixture(scope="module")
def fixture_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("lifecycle")
    for case, (backend_meta, api_meta, _) in RUNS.items():
        _write_module(folder, f"fi_life_{case}", backend_meta, api_meta)
    return folder


@pytest.fixture(scope="module")
def runs(fixture_dir: Path) -> dict[str, subprocess.CompletedProcess[str]]:
    """The check over each fixture module, each run in a process of its own."""
    cases = {case: ["--module", f"fi_life_{case}", *args] for case, (_, _, args) in RUNS.items()}
    cases["unknown"] = ["--module", "fi_life_does_not_exist"]
    return run_mains("experimental_lifecycle", cases, pythonpath=fixture_dir)


def _check_passing(result: subprocess.CompletedProcess[str]) -> None:
    assert result.returncode == 0, result.stdout + result.stderr
    assert "experimental_lifecycle: OK (2 experimental API(s)/backend(s))" in result.stdout
    # the listing names both, with their metadata
    assert "fi_life_ok.op[backend=fast]" in result.stdout
    assert "fi_life_ok.preview" in result.stdout
    assert "@alice" in result.stdout and "2030-01-31" in result.stdout


def test_passing_fixture(runs) -> None:
    _check_passing(runs["ok"])


def test_passing_fixture_as_a_program(fixture_dir: Path) -> None:
    """The command line CI runs: the same result from ``python scripts/pr_checks/...``."""
    _check_passing(
        run_script(
            "experimental_lifecycle",
            "--module",
            "fi_life_ok",
            "--today",
            "2030-01-31",
            pythonpath=fixture_dir,
        )
    )


@pytest.mark.parametrize(
    ("case", "backend_meta", "api_meta", "today", "expected"), FAILING
)  # fmt: skip
def test_failing_fixtures(
    runs, case: str, backend_meta: str, api_meta: str, today: str, expected: str
) -> None:
    result = runs[case]
    assert result.returncode == 1, result.stdout + result.stderr
    assert expected in result.stdout, result.stdout
    assert "experimental_lifecycle:" in result.stderr


def test_past_due_counts_every_late_feature(runs) -> None:
    result = runs["two_late"]
    assert result.returncode == 1
    assert result.stdout.count("past its graduation date") == 2


def test_horizon_is_inclusive(runs) -> None:
    """Six calendar months ahead is allowed, the day after is not."""
    ok = runs["horizon_ok"]
    assert ok.returncode == 0, ok.stdout + ok.stderr
    over = runs["horizon_over"]
    assert over.returncode == 1
    assert "latest allowed 2030-07-30" in over.stdout


def test_bad_metadata_never_stops_the_stable_api_from_importing(fixture_dir: Path, runs) -> None:
    """The stable op of a module whose experimental backend carries malformed metadata
    imports and runs, even under ``-W error``; without it, one ExperimentalMetadataWarning
    points at the marked checker, with every reason; the lifecycle check then fails naming
    the backend and each reason."""
    name, copy = "fi_life_bad_meta", "fi_life_bad_meta_error"
    path = _write_module(fixture_dir, name, BAD_METADATA, GOOD)
    _write_module(fixture_dir, copy, BAD_METADATA, GOOD)
    code = textwrap.dedent(
        f"""
        import warnings
        import {copy}  # under -W error: the warning cannot make it unimportable
        assert {copy}.op(1) == 1
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
        [sys.executable, "-W", "error", "-c", code],
        capture_output=True,
        text=True,
        cwd=fixture_dir,
        timeout=300,
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    where, message = ran.stdout.splitlines()[:2]
    lines = path.read_text(encoding="utf-8").splitlines()
    marker_line = lines.index(f"@experimental_backend({BAD_METADATA})") + 1  # the decorated def
    assert where == f"{path} {marker_line}"
    for reason in ("owner 'x'", "tracking_issue 'TBD'", "graduate_by '31/05/2027'"):
        assert reason in message

    result = runs[name.removeprefix("fi_life_")]
    assert result.returncode == 1, result.stdout + result.stderr
    for reason in (
        "owner 'x' does not start with '@'",
        "tracking_issue 'TBD' is neither an issue number nor a URL",
        "graduate_by '31/05/2027' is not a date written YYYY-MM-DD",
    ):
        assert f"{name}.op[backend=fast] (feature" in result.stdout
        assert reason in result.stdout, result.stdout


def test_bad_today_is_a_usage_error(runs) -> None:
    result = runs["bad_today"]
    assert result.returncode == 2
    assert "expected YYYY-MM-DD" in result.stderr


def test_unknown_module_fails(runs) -> None:
    result = runs["unknown"]
    assert result.returncode == 1
    assert "cannot import fi_life_does_not_exist" in result.stdout
