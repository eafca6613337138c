"""``--shards K --shard I``: the selection dealt over K shards by recorded durations."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st
from testmap_lib import mapfile
from testmap_lib.mapfile import TestMap, TestRecord
from testmap_lib.shards import deal

from . import TESTMAP, commit, git, write


def _map(durations: list[float]) -> TestMap:
    tests = {f"tests/test_x.py::t{i}": TestRecord("stable", d) for i, d in enumerate(durations)}
    return TestMap("0" * 40, tests)


@given(st.lists(st.floats(0.0, 100.0), min_size=0, max_size=40), st.integers(1, 6))
def test_every_test_lands_in_exactly_one_shard_and_the_shards_are_balanced(
    durations: list[float], k: int
) -> None:
    m = _map(durations)
    shards = deal(m.tests, m, k)
    assert len(shards) == k
    flat = [t for s in shards for t in s]
    assert sorted(flat) == sorted(m.tests)
    loads = [sum(m.tests[t].duration for t in s) for s in shards]
    # Longest first to the least loaded: no shard exceeds another by more than one test.
    assert max(loads) - min(loads) <= max(durations, default=0.0) + 1e-9


def test_a_whole_file_weighs_what_its_tests_weigh() -> None:
    m = _map([5.0, 5.0])
    m.tests["tests/test_y.py::t"] = TestRecord("stable", 1.0)
    assert deal(["tests/test_x.py", "tests/test_y.py::t", "tests/test_z.py"], m, 2) == [
        ["tests/test_x.py"],
        ["tests/test_y.py::t", "tests/test_z.py"],
    ]


def test_the_command_deals_the_selection(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q")
    write(root, {"tests/test_x.py": "def t0():\n    pass\n"})
    sha = commit(root)
    m = _map([3.0, 2.0, 2.0, 1.0])
    m.commit = sha
    mapfile.save(m, tmp_path / "m.json")
    write(root, {"pyproject.toml": "[x]\n"})
    commit(root)
    got = []
    for i in (1, 2):
        proc = subprocess.run(
            [
                sys.executable,
                str(TESTMAP),
                "select",
                "--map",
                str(tmp_path / "m.json"),
                "--base",
                sha,
                "--head",
                "HEAD",
                "--json",
                "--shards",
                "2",
                "--shard",
                str(i),
            ],
            cwd=root,
            capture_output=True,
            text=True,
        )
        assert proc.returncode == 0, proc.stderr
        result = json.loads(proc.stdout)
        assert result["mode"] == "all" and result["share"] == 0.5
        got.append(result["tests"]["stable"])
    assert sorted(got[0] + got[1]) == sorted(m.tests)
    bad = subprocess.run(
        [
            sys.executable,
            str(TESTMAP),
            "select",
            "--map",
            "m.json",
            "--base",
            "HEAD",
            "--shards",
            "2",
            "--shard",
            "3",
        ],
        cwd=root,
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 2 and "--shard must be 1..2" in bad.stderr
