"""A copy of the repository for the walks: tests that change a copy in a temporary folder and
run its tests, checks and commands in subprocesses (tests/test_op_author_walk.py,
tests/experimental/test_kernel_author_walk.py).

The copy holds the files git sees in the working tree: tracked ones, and untracked ones git
does not ignore, so that a change in progress is copied whole (a tracked module that imports a
new, not yet committed one still imports) while caches, build outputs and virtual
environments stay behind.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
"""The repository these tests belong to."""


def repository_files(root: Path = ROOT) -> list[str]:
    """Paths (relative to ``root``) of the files git sees in the working tree; skips the
    calling test when ``root`` is not a git checkout (an unpacked source archive)."""
    argv = ["git", "-C", str(root), "ls-files", "-z", "--cached", "--others", "--exclude-standard"]
    try:
        listed = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        pytest.skip(f"{root} is not a git checkout (git ls-files: {exc}); a walk copies one")
    # A tracked file deleted in the working tree is listed but absent: it is not copied.
    return sorted({p for p in listed.split("\0") if p and (root / p).is_file()})


def copy_repository(dest: Path, root: Path = ROOT) -> Path:
    """Copy the files git sees in ``root``'s working tree into ``dest``; return ``dest``."""
    for relative in repository_files(root):
        target = dest / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / relative, target)
    return dest


RUN_AS_MAIN = """
import runpy, sys
for argv in ARGV:
    sys.argv = list(argv)
    try:
        if argv[0] == "-m":
            sys.argv = list(argv[1:])
            runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
        else:
            runpy.run_path(argv[0], run_name="__main__")
    except SystemExit as exit:
        if exit.code not in (0, None):
            sys.exit(f"{' '.join(argv)} exited {exit.code}")
"""


def as_main(*commands: str) -> str:
    """Code that runs each command (``"path args"`` or ``"-m module args"``) as
    ``__main__``, in order, in the one interpreter that runs it, and exits non-zero at the
    first that does: the walks' checks share an interpreter instead of importing torch and
    flashinfer again in one each (seconds of CPU apiece)."""
    return f"ARGV = {[command.split() for command in commands]!r}\n{RUN_AS_MAIN}"
