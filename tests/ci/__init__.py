"""Tests of ``scripts/ci/`` (test selection: the map, the rules, the shards, the recorder).

The scripts are plain files, not an installed package: importing ``testmap`` puts
``scripts/ci`` on ``sys.path`` so its parts import as ``testmap_lib.*``, as the script does.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = REPO / "scripts" / "ci"
TESTMAP = SCRIPTS / "testmap.py"
if str(SCRIPTS) not in sys.path:
    sys.path.insert(0, str(SCRIPTS))


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false", *args],
        cwd=repo,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


def write(repo: Path, files: dict[str, str | None]) -> None:
    """Write (or, for None, delete) files under ``repo``."""
    for rel, text in files.items():
        path = repo / rel
        if text is None:
            path.unlink()
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def commit(repo: Path, message: str = "change") -> str:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "--allow-empty", "-m", message)
    return git(repo, "rev-parse", "HEAD")


@pytest.fixture(scope="module", autouse=True)
def no_hypothesis_plugin() -> Iterator[None]:
    """For a test module that imports it: the synthetic projects' tests draw no examples, so
    their pytest runs leave Hypothesis' pytest plugin out (about a second of start-up each)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PYTEST_ADDOPTS", "-p no:hypothesispytest")
        yield
