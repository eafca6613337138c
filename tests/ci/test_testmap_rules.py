"""The selection rules of ``scripts/ci/testmap.py select`` on small synthetic git
repositories and hand-written maps: each rule, the fail-open errors, the JSON shape."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from testmap_lib import mapfile
from testmap_lib.mapfile import TestMap, TestRecord
from testmap_lib.rules import result_json, select

from . import TESTMAP, commit, git, write

MOD = '''\
"""A module."""
import functools

LIMIT = 3


def used_by_a(x):
    return x + 1


def used_by_b(x):
    return x * 2


def never_run(x):
    return x - 1


@functools.lru_cache
def cached(x):
    return x


def at_session_start():
    return 0
'''

FILES = {
    "flashinfer/__init__.py": "",
    "flashinfer/mod.py": MOD,
    "flashinfer/other.py": "def lonely():\n    return 1\n",
    "flashinfer/kernels/__init__.py": "",
    "tests/test_a.py": "from flashinfer.mod import used_by_a\n\n\ndef test_a():\n    pass\n",
    "tests/test_b.py": "from flashinfer.mod import used_by_b\n\n\ndef test_b():\n    pass\n",
    "tests/test_docs.py": "def test_reads_docs():\n    pass\n",
    "tests/experimental/test_exp.py": "def test_exp():\n    pass\n",
    "docs/guide.md": "# Guide\n",
    "docs/unread.md": "# Nobody reads this\n",
    "pyproject.toml": "[project]\nname = 'x'\n",
}

A, B = "tests/test_a.py::test_a", "tests/test_b.py::test_b"
DOCS, EXP = "tests/test_docs.py::test_reads_docs", "tests/experimental/test_exp.py::test_exp"


def _map(commit_sha: str) -> TestMap:
    base = {"flashinfer/__init__.py", "flashinfer/mod.py"}
    return TestMap(
        commit_sha,
        {
            A: TestRecord(
                "stable", 1.0, base | {"tests/test_a.py"}, {"flashinfer/mod.py::used_by_a"}
            ),
            B: TestRecord(
                "stable",
                3.0,
                base | {"tests/test_b.py"},
                {"flashinfer/mod.py::used_by_b", "flashinfer/mod.py::cached"},
            ),
            DOCS: TestRecord(
                "stable",
                2.0,
                {"tests/test_docs.py"},
                set(),
                {"docs/guide.md", "flashinfer/kernels/"},
            ),
            EXP: TestRecord("experimental", 4.0, base | {"tests/experimental/test_exp.py"}, set()),
        },
        session_functions={"flashinfer/mod.py::at_session_start"},
    )


@pytest.fixture
def repo(tmp_path: Path) -> tuple[Path, str, TestMap]:
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    write(root, FILES)
    sha = commit(root, "base")
    return root, sha, _map(sha)


def _select(root: Path, m: TestMap | None, base: str, head: str | None = None) -> dict:
    return result_json(select(root, m, base, head), m)


def _edit(root: Path, path: str, old: str, new: str) -> None:
    text = (root / path).read_text(encoding="utf-8")
    assert old in text
    write(root, {path: text.replace(old, new)})


def _rules(result: dict) -> set[str]:
    return {r["rule"] for r in result["reasons"]}


def _ids(result: dict) -> set[str]:
    return set(result["tests"]["stable"]) | set(result["tests"]["experimental"])


def test_the_json_shape(repo) -> None:
    root, base, m = repo
    _edit(root, "flashinfer/mod.py", "return x + 1", "return x + 2")
    result = _select(root, m, base)
    assert set(result) == {"mode", "reasons", "tests", "share"}
    assert set(result["tests"]) == {"stable", "experimental"}
    assert result["mode"] == "subset" and result["tests"]["stable"] == [A]
    assert result["share"] == pytest.approx(1.0 / 10.0)
    (reason,) = result["reasons"]
    assert reason["file"] == "flashinfer/mod.py" and reason["rule"] == "function"


def test_changed_lines_in_a_function_select_the_tests_that_ran_it(repo) -> None:
    root, base, m = repo
    _edit(root, "flashinfer/mod.py", "return x * 2", "return x * 3")
    head = commit(root)
    assert _ids(_select(root, m, base, head)) == {B}


def test_module_level_lines_select_every_test_that_imported_the_module(repo) -> None:
    root, base, m = repo
    _edit(root, "flashinfer/mod.py", "LIMIT = 3", "LIMIT = 4")
    result = _select(root, m, base)
    assert "module-level" in _rules(result)
    assert _ids(result) == {A, B, EXP}


def test_a_cached_function_counts_as_module_level(repo) -> None:
    """lru_cache credits only the first caller: every importer is selected."""
    root, base, m = repo
    _edit(
        root, "flashinfer/mod.py", "def cached(x):\n    return x", "def cached(x):\n    return -x"
    )
    assert _ids(_select(root, m, base)) == {A, B, EXP}


def test_a_function_no_test_ran_selects_nothing(repo) -> None:
    root, base, m = repo
    _edit(root, "flashinfer/mod.py", "return x - 1", "return x - 2")
    result = _select(root, m, base)
    assert result["mode"] == "none" and _rules(result) == {"unrun-function"}


def test_a_function_run_at_session_start_runs_everything(repo) -> None:
    root, base, m = repo
    _edit(root, "flashinfer/mod.py", "return 0", "return 1")
    result = _select(root, m, base)
    assert result["mode"] == "all" and result["share"] == 1.0
    assert _ids(result) == set(m.tests)


def test_a_changed_test_file_selects_all_its_tests(repo) -> None:
    root, base, m = repo
    write(root, {"tests/test_a.py": FILES["tests/test_a.py"] + "\n\ndef test_new():\n    pass\n"})
    result = _select(root, m, base)
    # The file itself, so the tests it adds run too.
    assert result["tests"] == {"stable": ["tests/test_a.py"], "experimental": []}
    assert _rules(result) == {"test-file"}


@pytest.mark.parametrize(
    "path",
    [
        "pyproject.toml",
        "tests/conftest.py",
        ".github/workflows/x.yml",
        ".ci/run",
        "scripts/test.sh",
        "scripts/ci/testmap.py",
        "setup.py",
        "pytest.ini",
    ],
)
def test_build_ci_and_config_files_run_everything(repo, path: str) -> None:
    root, base, m = repo
    write(root, {path: "# changed\n"})
    commit(root)  # added files count only once committed (the work tree's untracked are not)
    result = _select(root, m, base, "HEAD")
    assert result["mode"] == "all" and "run-all-file" in _rules(result)


def test_the_replay_under_scripts_ci_selects_by_the_map(repo) -> None:
    """No CI job runs the replay or its estimate: a change to them selects the tests that
    ran them, as any Python file does (here none did: it runs everything for that)."""
    from testmap_lib.rules import NOT_RUN_ALL, runs_everything

    root, base, m = repo
    for path in sorted(NOT_RUN_ALL):
        assert runs_everything(path) is None
        write(root, {path: "# changed\n"})
    assert runs_everything("scripts/ci/testmap_lib/record.py")
    commit(root)
    result = _select(root, m, base, "HEAD")
    assert "run-all-file" not in _rules(result)


def test_a_package_file_no_test_used_runs_everything(repo) -> None:
    root, base, m = repo
    _edit(root, "flashinfer/other.py", "return 1", "return 2")
    result = _select(root, m, base)
    assert result["mode"] == "all" and _rules(result) == {"unused-python-file"}


def test_an_added_file_selects_through_the_files_that_use_it(repo) -> None:
    root, base, m = repo
    write(root, {"flashinfer/helper.py": "def h():\n    return 1\n"})
    commit(root)
    alone = _select(root, m, base, "HEAD")
    assert alone["mode"] == "none" and _rules(alone) == {"added-file"}
    _edit(root, "flashinfer/mod.py", "return x + 1", "return x + 1  # uses helper")
    with_user = _select(root, m, base)
    assert _ids(with_user) == {A}


def test_an_added_file_selects_the_tests_that_listed_its_folder(repo) -> None:
    root, base, m = repo
    write(root, {"flashinfer/kernels/new_kernel.py": "X = 1\n"})
    commit(root)
    assert _ids(_select(root, m, base, "HEAD")) == {DOCS}


def test_renames_count_on_both_sides(repo) -> None:
    root, base, m = repo
    git(root, "mv", "docs/guide.md", "docs/renamed_guide.md")
    head = commit(root)
    result = _select(root, m, base, head)
    assert _ids(result) == {DOCS}  # the old side: its reader
    git(root, "mv", "flashinfer/other.py", "docs/other.py")  # unused code moved out of code
    result = _select(root, m, head, commit(root))
    assert result["mode"] == "all"  # the removed side is still a package file no test used


def test_a_file_read_as_data_selects_its_readers_and_an_unread_one_nothing(repo) -> None:
    root, base, m = repo
    write(root, {"docs/guide.md": "# Guide, edited\n"})
    assert _ids(_select(root, m, base)) == {DOCS}
    git(root, "checkout", "docs/guide.md")
    write(root, {"docs/unread.md": "# still unread\n"})
    result = _select(root, m, base)
    assert result["mode"] == "none" and _rules(result) == {"unread-file"}


def test_experimental_tests_are_their_own_lane(repo) -> None:
    root, base, m = repo
    _edit(root, "flashinfer/mod.py", "LIMIT = 3", "LIMIT = 5")
    assert _select(root, m, base)["tests"]["experimental"] == [EXP]


@pytest.mark.parametrize("case", ["no map", "unknown base", "unknown head", "unknown map commit"])
def test_any_error_runs_everything_and_says_why(repo, case: str) -> None:
    root, base, m = repo
    args = {
        "no map": (None, base, None),
        "unknown base": (m, "nope", None),
        "unknown head": (m, base, "f" * 40),
        "unknown map commit": (_map("0" * 40), base, None),
    }
    chosen_map, b, h = args[case]
    result = _select(root, chosen_map, b, h)
    assert result["mode"] == "all" and result["share"] == 1.0
    (reason,) = result["reasons"]
    assert reason["rule"] == "error" and "running everything" in reason["detail"]


def test_a_stale_map_says_how_many_commits_stale(repo) -> None:
    root, base, m = repo
    write(root, {"docs/unread.md": "one\n"})
    commit(root)
    write(root, {"docs/unread.md": "two\n"})
    newer = commit(root)
    _edit(root, "flashinfer/mod.py", "return x * 2", "return x * 5")
    result = _select(root, m, newer)
    stale = [r for r in result["reasons"] if r["rule"] == "stale-map"]
    assert len(stale) == 1 and "2 commit(s) stale" in stale[0]["detail"]
    # Changes on the base since the map still count, and say so.
    assert any("since the map" in r["detail"] for r in result["reasons"])
    assert _ids(result) == {B}


def _cli(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(TESTMAP), "select", *args],
        cwd=root,
        capture_output=True,
        text=True,
    )


def test_the_command_prints_the_json(repo, tmp_path: Path) -> None:
    root, base, m = repo
    mapfile.save(m, tmp_path / "testmap.json")
    _edit(root, "flashinfer/mod.py", "return x * 2", "return x * 3")
    proc = _cli(root, "--map", str(tmp_path / "testmap.json"), "--base", base, "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["tests"] == {"stable": [B], "experimental": []}
    missing = _cli(root, "--map", str(tmp_path / "absent.json"), "--base", base, "--json")
    result = json.loads(missing.stdout)
    assert result["mode"] == "all" and "no map at" in result["reasons"][0]["detail"]


def test_the_map_round_trips_and_names_its_format(repo, tmp_path: Path) -> None:
    _, _, m = repo
    mapfile.save(m, tmp_path / "m.json")
    raw = json.loads((tmp_path / "m.json").read_text())
    assert raw["format"] == "flashinfer-testmap" and raw["version"] == 1
    assert raw["commit"] == m.commit
    assert mapfile.load(tmp_path / "m.json").tests == m.tests
    raw["version"] = 99
    (tmp_path / "m.json").write_text(json.dumps(raw))
    with pytest.raises(mapfile.MapError, match="version 99"):
        mapfile.load(tmp_path / "m.json")
