"""``testmap.py scope-gap``, the bot's note on a declared experimental scope: the
experimental tests the change reaches, read from the map, that the scope leaves out."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from testmap_lib import mapfile
from testmap_lib.mapfile import TestMap, TestRecord
from testmap_lib.scopegap import covers, left_out

from . import TESTMAP, commit, git, write

FILES = {
    "flashinfer/__init__.py": "",
    "flashinfer/experimental/feat.py": "def run(x):\n    return x + 1\n\n\ndef other(x):\n"
    "    return x\n",
    "tests/experimental/test_feat.py": "def test_run():\n    pass\n",
    "tests/experimental/deep/test_more.py": "def test_more():\n    pass\n",
    "tests/experimental/test_other.py": "def test_other():\n    pass\n",
}
RUN = "tests/experimental/test_feat.py::test_run"
MORE = "tests/experimental/deep/test_more.py::test_more"
OTHER = "tests/experimental/test_other.py::test_other"


def _map(sha: str) -> TestMap:
    files = {"flashinfer/__init__.py", "flashinfer/experimental/feat.py"}
    run = {"flashinfer/experimental/feat.py::run"}
    return TestMap(
        sha,
        {
            RUN: TestRecord("experimental", 1.0, files, run),
            MORE: TestRecord("experimental", 1.0, files, run),
            OTHER: TestRecord(
                "experimental", 1.0, files, {"flashinfer/experimental/feat.py::other"}
            ),
        },
    )


@pytest.fixture
def repo(tmp_path: Path) -> tuple[Path, str, Path]:
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    write(root, FILES)
    sha = commit(root, "base")
    map_path = tmp_path / "map.json"
    mapfile.save(_map(sha), map_path)
    text = (root / "flashinfer/experimental/feat.py").read_text(encoding="utf-8")
    write(root, {"flashinfer/experimental/feat.py": text.replace("x + 1", "x + 2")})
    return root, sha, map_path


def _gap(root: Path, map_path: Path, base: str, scope: str) -> str:
    proc = subprocess.run(
        [
            sys.executable,
            str(TESTMAP),
            "scope-gap",
            "--map",
            str(map_path),
            "--base",
            base,
            "--scope",
            scope,
        ],
        cwd=root,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_the_reply_names_the_reached_tests_the_scope_leaves_out(repo) -> None:
    root, base, map_path = repo
    out = _gap(root, map_path, base, "tests/experimental/test_feat.py")
    assert "reaches 2 experimental test(s); the scope leaves out 1 of them" in out
    assert MORE in out
    assert OTHER not in out  # not reached by the change: not the scope's business
    assert RUN not in out.split("```text", 1)[1]


def test_a_scope_that_covers_what_the_change_reaches_says_so(repo) -> None:
    root, base, map_path = repo
    out = _gap(root, map_path, base, "tests/experimental/test_feat.py tests/experimental/deep/")
    assert "the scope covers all of them" in out and "map recorded at" in out


def test_without_a_map_everything_is_reached(repo, tmp_path: Path) -> None:
    root, base, _ = repo
    out = _gap(root, tmp_path / "missing.json", base, "tests/experimental/test_feat.py")
    assert "runs everything" in out and "no usable map" in out


@pytest.mark.parametrize(
    "target, test, expected",
    [
        ("tests/experimental/", MORE, True),
        ("tests/experimental/deep", MORE, True),
        ("tests/experimental/test_feat.py", RUN, True),
        ("tests/experimental/test_feat.py::test_run", RUN + "[a-1]", True),
        ("tests/experimental/test_feat.py::test_run", "tests/experimental/test_feat.py", False),
        ("tests/experimental/test_f", RUN, False),
        ("tests/experimental/test_feat.py", "tests/experimental/test_feat.py/x", False),
    ],
)
def test_what_a_target_covers(target: str, test: str, expected: bool) -> None:
    assert covers(target, test) is expected
    assert left_out([test], [target]) == ([] if expected else [test])


def test_the_bot_reply_carries_the_note() -> None:
    yaml = pytest.importorskip("yaml")
    workflow = Path(TESTMAP).parents[2] / ".github" / "workflows" / "ci-bot-commands.yml"
    steps = yaml.safe_load(workflow.read_text(encoding="utf-8"))["jobs"]["run-command"]["steps"]
    names = [s.get("name", "") for s in steps]
    gap = next(i for i, n in enumerate(names) if n.startswith("Name the experimental tests"))
    reply = next(i for i, n in enumerate(names) if n == "Trigger the lanes")
    assert gap < reply  # the note is in message.md before the reply is posted
    script = steps[gap]["run"]
    assert "scripts/ci/testmap.py scope-gap" in script and '--scope "$TEST_PATH"' in script
    assert '>>"$RUNNER_TEMP/message.md"' in script
    assert '--body-file "$RUNNER_TEMP/message.md"' in steps[reply]["run"]
    pr_tree = next(s for s in steps if s.get("with", {}).get("path") == "pr-tree")
    assert pr_tree["with"]["fetch-depth"] == 0  # the diff is read from the history
