"""``scripts/ci/testmap.py replay``: the selection over a repository's history, one row per
commit, read with one map standing for each commit's parent."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from testmap_lib import mapfile

from . import TESTMAP, commit, write
from .test_testmap_rules import repo  # noqa: F401 - the synthetic repository fixture


def _replay(root: Path, map_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(TESTMAP), "replay", "--map", str(map_path), *args],
        cwd=root,
        capture_output=True,
        text=True,
    )


def test_each_commit_is_selected_against_its_parent(repo, tmp_path: Path) -> None:  # noqa: F811
    root, _, m = repo
    text = (root / "flashinfer/mod.py").read_text(encoding="utf-8")
    write(root, {"flashinfer/mod.py": text.replace("return x * 2", "return x * 3")})
    commit(root, "used_by_b changed")
    write(root, {"docs/unread.md": "# still unread\n"})
    commit(root, "an unread doc")
    write(root, {"pyproject.toml": "[project]\nname = 'y'\n"})
    commit(root, "build file")
    map_path = tmp_path / "map.json"
    mapfile.save(m, map_path)
    proc = _replay(root, map_path, "--commits", "3")
    assert proc.returncode == 0, proc.stderr
    rows = {line.split("   ")[-1].strip(): line for line in proc.stdout.splitlines()[1:4]}
    # Each row is the commit against its parent, not against the map's commit: the
    # function change selects test_b alone (3 of 10 recorded seconds), later rows do not
    # inherit it.
    assert "30.0%  subset  function(1)" in rows["used_by_b changed"]
    assert " 0.0%  none    unread-file(1)" in rows["an unread doc"]
    assert "100.0%  all     run-all-file(1)" in rows["build file"]
    assert "median share over 3 commits: 30.0%" in proc.stdout
    assert "run-all-file: pyproject.toml" in proc.stdout


def test_a_missing_map_is_a_usage_error(tmp_path: Path) -> None:
    proc = _replay(tmp_path, tmp_path / "none.json")
    assert proc.returncode == 2 and "no map" in proc.stderr
