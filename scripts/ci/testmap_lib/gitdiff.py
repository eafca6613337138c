"""A diff between two commits: the files, how each changed, and its changed lines on both
sides (old-side lines name the old file's scopes, new-side lines the new file's)."""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path


class DiffError(Exception):
    """The diff cannot be read (unknown commit, not a repository, an odd path)."""


@dataclass
class FileChange:
    status: str  # "A" added, "D" deleted, "M" modified, "R" renamed (old_path set)
    path: str  # the new path (the old one for a deletion)
    old_path: str | None = None
    old_lines: set[int] = field(default_factory=set)  # removed or replaced, old numbering
    new_lines: set[int] = field(default_factory=set)  # added or replacing, new numbering
    insert_after: set[int] = field(default_factory=set)  # pure insertions: old line before
    binary: bool = False


def git(repo: Path, *args: str) -> str:
    proc = subprocess.run(
        ["git", "-c", "core.quotePath=false", *args],
        cwd=repo,
        capture_output=True,
        text=True,
        encoding="utf-8",
        errors="replace",
    )
    if proc.returncode != 0:
        raise DiffError(f"git {' '.join(args)} failed: {proc.stderr.strip() or proc.returncode}")
    return proc.stdout


def resolve(repo: Path, ref: str) -> str:
    """The commit ``ref`` names (40 hex), or :class:`DiffError` saying it is unknown."""
    try:
        return git(repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}").strip()
    except DiffError:
        raise DiffError(
            f"unknown commit {ref!r} (fetch it, or check out with fetch-depth: 0)"
        ) from None


def show(repo: Path, commit: str, path: str) -> str | None:
    """``path``'s text at ``commit``, or None where it does not exist there."""
    proc = subprocess.run(["git", "show", f"{commit}:{path}"], cwd=repo, capture_output=True)
    if proc.returncode != 0:
        return None
    return proc.stdout.decode("utf-8", errors="replace")


_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


def _unquote(path: str) -> str:
    if path.startswith('"'):
        raise DiffError(f"a path git quotes (control characters): {path}")
    return path


def parse_diff(text: str) -> list[FileChange]:
    """``git diff -M --unified=0`` output as :class:`FileChange` entries."""
    changes: list[FileChange] = []
    cur: FileChange | None = None
    for line in text.splitlines():
        if line.startswith("diff --git "):
            m = re.match(r"diff --git a/(.*) b/(.*)$", line)
            if not m:
                raise DiffError(f"unreadable diff header: {line}")
            cur = FileChange("M", _unquote(m[2]), _unquote(m[1]))
            changes.append(cur)
            continue
        if cur is None:
            continue
        if line.startswith("new file mode"):
            cur.status, cur.old_path = "A", None
        elif line.startswith("deleted file mode"):
            cur.status, cur.path, cur.old_path = "D", cur.old_path or cur.path, None
        elif line.startswith("rename from "):
            cur.status, cur.old_path = "R", _unquote(line[len("rename from ") :])
        elif line.startswith("rename to "):
            cur.path = _unquote(line[len("rename to ") :])
        elif line.startswith("Binary files "):
            cur.binary = True
        elif line.startswith("@@"):
            m = _HUNK.match(line)
            if not m:
                raise DiffError(f"unreadable hunk header: {line}")
            a, b = int(m[1]), int(m[2]) if m[2] is not None else 1
            c, d = int(m[3]), int(m[4]) if m[4] is not None else 1
            cur.old_lines.update(range(a, a + b))
            cur.new_lines.update(range(c, c + d))
            if b == 0:
                cur.insert_after.add(a)
    for ch in changes:
        if ch.status == "M" and ch.old_path == ch.path:
            ch.old_path = None
    return changes


def diff(repo: Path, old: str, new: str | None) -> list[FileChange]:
    """The changes from commit ``old`` to commit ``new`` (None: the work tree)."""
    args = ["diff", "--no-color", "--no-ext-diff", "-M", "--unified=0", old]
    if new is not None:
        args.append(new)
    return parse_diff(git(repo, *args))
