"""``scripts/ci/testmap.py record`` on a small synthetic project: what a test ran directly,
in a subprocess, in a shared fixture and at its file's import, and what it read as data, all
credited to it; durations recorded; the overhead printed."""

from __future__ import annotations

import subprocess
import sys

import pytest
from testmap_lib import mapfile

from . import TESTMAP, commit, git, write

MOD = """\
def direct():
    return 1


def in_child():
    return 2


def fixture_work():
    return 3


def at_collect():
    return [4]


def nobody():
    return 5
"""

TEST = """\
import subprocess
import sys

import pytest

from pkg import mod

CASES = mod.at_collect()  # runs at import, once, before any test


@pytest.fixture(scope="module")
def shared():
    return mod.fixture_work()  # set up during the first test that asks


def test_direct():
    assert mod.direct() == 1


def test_child():
    code = "from pkg import mod; mod.in_child()"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_reads():
    with open("docs/page.md", encoding="utf-8") as fh:
        assert fh.read()


def test_fixture_one(shared):
    pass


def test_fixture_two(shared):
    pass
"""


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[mapfile.TestMap, str]:
    try:
        import coverage  # noqa: F401
    except ImportError:
        pytest.fail("coverage.py missing: it comes with the test extra, pip install -e '.[test]'")
    root = tmp_path_factory.mktemp("recorder") / "project"
    root.mkdir()
    git(root, "init", "-q")
    write(
        root,
        {
            "pytest.ini": "[pytest]\n",
            "pkg/__init__.py": "",
            "pkg/mod.py": MOD,
            "tests/test_rec.py": TEST,
            "docs/page.md": "# A page\n",
        },
    )
    sha = commit(root, "base")
    out = root.parent / "testmap.json"
    proc = subprocess.run(
        [
            sys.executable,
            str(TESTMAP),
            "record",
            "--repo",
            str(root),
            "--out",
            str(out),
            "-q",
            "tests",
        ],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    m = mapfile.load(out)
    assert m.commit == sha
    return m, proc.stdout


def _functions(m: mapfile.TestMap, name: str) -> set[str]:
    return m.tests[f"tests/test_rec.py::{name}"].functions


def test_every_test_is_recorded_with_its_duration(recorded) -> None:
    m, _ = recorded
    assert {n.split("::")[1] for n in m.tests} == {
        "test_direct",
        "test_child",
        "test_reads",
        "test_fixture_one",
        "test_fixture_two",
    }
    assert all(t.duration > 0 and t.lane == "stable" for t in m.tests.values())


def test_what_a_test_runs_is_credited_to_it_alone(recorded) -> None:
    m, _ = recorded
    assert "pkg/mod.py::direct" in _functions(m, "test_direct")
    assert "pkg/mod.py::direct" not in _functions(m, "test_reads")
    assert not any("nobody" in f for t in m.tests.values() for f in t.functions)


def test_a_subprocess_is_credited_to_the_test_that_started_it(recorded) -> None:
    m, _ = recorded
    assert "pkg/mod.py::in_child" in _functions(m, "test_child")
    assert "pkg/mod.py::in_child" not in _functions(m, "test_direct")


def test_a_shared_fixture_is_credited_to_every_test_that_uses_it(recorded) -> None:
    m, _ = recorded
    for name in ("test_fixture_one", "test_fixture_two"):
        assert "pkg/mod.py::fixture_work" in _functions(m, name)
    assert "pkg/mod.py::fixture_work" not in _functions(m, "test_direct")


def test_import_time_code_is_credited_to_the_files_tests(recorded) -> None:
    m, _ = recorded
    assert all("pkg/mod.py::at_collect" in t.functions for t in m.tests.values())
    assert all({"pkg/mod.py", "pkg/__init__.py"} <= t.files for t in m.tests.values())


def test_a_file_read_as_data_is_credited(recorded) -> None:
    m, _ = recorded
    assert "docs/page.md" in m.tests["tests/test_rec.py::test_reads"].data
    assert "docs/page.md" not in m.tests["tests/test_rec.py::test_direct"].data


def test_the_overhead_is_printed(recorded) -> None:
    _, out = recorded
    assert "overhead" in out and "plain run" in out
