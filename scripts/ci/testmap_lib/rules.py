"""The selection rules: from a diff (the map's commit to the head) and a map, what to run.

Each rule fails open: a change the map cannot see runs everything and says why.

- A changed test file selects all its tests (the file itself is the selection, so tests it
  adds run too).
- Build, CI and config files run everything (:data:`RUN_ALL_FILES`, :data:`RUN_ALL_DIRS`,
  any ``conftest.py``).
- A Python file no test used runs everything; so does a package file (``flashinfer/``) that
  no test read.
- Changed lines inside a function select the tests that ran it; module-level lines (and
  functions that run once and are cached, or are Triton kernels: :mod:`.scopes`) select
  every test that imported the module; a function run outside any test (session start,
  conftest) runs everything.
- An added file selects through the changed files that use it, and the tests that listed
  its folder.
- Renames count on both sides: the old path as removed, the new one as added.
- A file a test read as data selects that test; other non-Python files no test read select
  nothing.
- Any error (no map, unreadable diff, unknown commit) runs everything and says why.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from testmap_lib.gitdiff import DiffError, FileChange, diff, git, resolve, show
from testmap_lib.inert import (
    LISTS_NAMES,
    DocReaders,
    bare_string_lines,
    code_lines,
    docstring_readers,
    named_in_tree,
    new_private_defs,
    scopes_matching,
)
from testmap_lib.mapfile import TestMap, lane_of
from testmap_lib.scopes import MODULE, Scopes, parse_scopes

RUN_ALL_FILES = frozenset(
    {
        "pyproject.toml",
        "setup.py",
        "setup.cfg",
        "pytest.ini",
        "tox.ini",
        "scripts/test.sh",
        "scripts/check.sh",
    }
)
RUN_ALL_DIRS = (".ci/", ".github/", "scripts/ci/")  # scripts/ci/: the recorder itself
NOT_RUN_ALL = frozenset({"scripts/ci/testmap_lib/replay.py", "scripts/ci/testmap_lib/walltime.py"})
"""Under scripts/ci/ but run by no CI job: the replay and its wall-time estimate (only
``testmap.py replay`` imports them, lazily).  A change selects their tests by the map."""
PACKAGE = "flashinfer/"


@dataclass
class Selection:
    mode: str = "subset"  # "all" | "subset" | "none"
    reasons: list[dict[str, Any]] = field(default_factory=list)
    tests: set[str] = field(default_factory=set)  # node IDs and whole test files
    run_all: bool = False
    chosen: list[tuple[str, set[str]]] = field(default_factory=list)  # (rule, its tests)

    def fire(self, file: str | None, rule: str, detail: str, tests: Iterable[str] = ()) -> None:
        chosen = set(tests)
        self.tests |= chosen
        self.reasons.append({"file": file, "rule": rule, "detail": detail, "tests": len(chosen)})
        self.chosen.append((rule, chosen))

    def everything(self, file: str | None, rule: str, detail: str) -> None:
        self.run_all = True
        self.reasons.append({"file": file, "rule": rule, "detail": detail, "tests": "all"})


def is_test_file(path: str) -> bool:
    p = PurePosixPath(path)
    return (
        p.parts[:1] == ("tests",)
        and p.suffix == ".py"
        and (p.name.startswith("test_") or p.name.endswith("_test.py"))
    )


def runs_everything(path: str) -> str | None:
    """Why a change to ``path`` runs everything, or None."""
    if path in RUN_ALL_FILES:
        return "a build, CI or config file"
    if PurePosixPath(path).name == "conftest.py":
        return "conftest.py: its fixtures and hooks reach every test below it"
    for prefix in RUN_ALL_DIRS:
        if path.startswith(prefix) and path not in NOT_RUN_ALL:
            return f"under {prefix} (CI, or the selector itself)"
    return None


class _Index:
    """The map inverted: who used each file, function and data path."""

    def __init__(self, m: TestMap) -> None:
        self.by_file: dict[str, set[str]] = {}
        self.by_function: dict[str, set[str]] = {}
        self.by_data: dict[str, set[str]] = {}
        for nodeid, t in m.tests.items():
            for f in t.files:
                self.by_file.setdefault(f, set()).add(nodeid)
            for fn in t.functions:
                self.by_function.setdefault(fn, set()).add(nodeid)
            for d in t.data:
                self.by_data.setdefault(d, set()).add(nodeid)
        self.session = m.session_functions
        self.session_files = {f.split("::", 1)[0] for f in m.session_functions}

    def listed_folder(self, path: str) -> set[str]:
        parent = PurePosixPath(path).parent.as_posix()
        return self.by_data.get("./" if parent == "." else parent + "/", set())


def _code_only(lines: set[int], text: str | None) -> set[int]:
    """``lines`` less those that hold only comments or blanks (all of them when ``text``
    is missing or does not tokenize)."""
    code = code_lines(text) if text is not None else None
    return set(lines) if code is None else lines & code


@functools.lru_cache(maxsize=8)
def _matching(repo: Path, commit: str, pattern: str) -> frozenset[str] | None:
    found = scopes_matching(repo, commit, pattern)
    return None if found is None else frozenset(found)


@functools.lru_cache(maxsize=8)
def _doc_readers(repo: Path, commit: str) -> DocReaders | None:
    return docstring_readers(repo, commit)


def _ran_matching(idx: _Index, repo: Path, commit: str, pattern: str) -> set[str] | None:
    """The tests that ran code matching ``pattern`` (:data:`.inert.LISTS_NAMES`); None
    when unknown."""
    scopes = _matching(repo, commit, pattern)
    return None if scopes is None else _ran(idx, scopes)


def _ran(idx: _Index, scopes: Iterable[str]) -> set[str]:
    """The tests that ran ``scopes``: a function's, or import-time code's (every test that
    imported its file)."""
    ran: set[str] = set()
    for key in scopes:
        path, scope = key.split("::", 1)
        if scope == MODULE:
            ran |= idx.by_file.get(path, set())
        else:
            ran |= idx.by_function.get(key, set())
    return ran


def _removed_side(sel: Selection, idx: _Index, path: str, how: str) -> None:
    """``path`` is gone from the head (deleted, or renamed away)."""
    if runs_everything(path):
        sel.everything(path, "run-all-file", f"{how}: {runs_everything(path)}")
        return
    if is_test_file(path):
        sel.fire(path, "test-file-removed", f"{how}: its tests are gone")
        return
    users = idx.by_file.get(path, set()) | idx.by_data.get(path, set())
    users |= idx.listed_folder(path)
    if path.endswith(".py") and path in idx.session_files:
        sel.everything(path, "session-code", f"{how}: it ran at session start")
    elif path.endswith(".py") and not users:
        sel.everything(path, "unused-python-file", f"{how}, and no test used it")
    else:
        sel.fire(path, "file-removed", f"{how}: every test that used, read or listed it", users)


def _added_side(sel: Selection, idx: _Index, path: str, how: str) -> None:
    """``path`` is new at the head (added, or renamed to)."""
    if runs_everything(path):
        sel.everything(path, "run-all-file", f"{how}: {runs_everything(path)}")
    elif is_test_file(path):
        sel.fire(path, "test-file", f"{how}: a test file selects all its tests", [path])
    else:
        sel.fire(
            path,
            "added-file",
            f"{how}: selects through the changed files that use it, and the tests that "
            "listed its folder",
            idx.listed_folder(path),
        )


def _modified(
    sel: Selection, idx: _Index, repo: Path, ch: FileChange, old: str, head: str | None
) -> None:
    path = ch.path
    if runs_everything(path):
        sel.everything(path, "run-all-file", runs_everything(path) or "")
        return
    if is_test_file(path):
        sel.fire(path, "test-file", "a changed test file selects all its tests", [path])
        return
    readers = idx.by_data.get(path, set())
    if not path.endswith(".py") or ch.binary:
        if readers:
            sel.fire(path, "data-file", "read as data by these tests", readers)
        elif path.startswith(PACKAGE):
            sel.everything(path, "unused-package-file", "a package file no test read")
        else:
            sel.fire(path, "unread-file", "not Python, and no test read it")
        return
    if path not in idx.by_file and path not in idx.session_files and not readers:
        sel.everything(path, "unused-python-file", "a Python file no test used or imported")
        return
    if readers:
        sel.fire(path, "data-file", "its source is read as data by these tests", readers)
    old_text = show(repo, old, ch.old_path or path)
    old_scopes = parse_scopes(old_text) if old_text is not None else Scopes([MODULE])
    if head is None:
        try:
            new_text: str | None = (repo / path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            new_text = None
    else:
        new_text = show(repo, head, path)
    new_scopes = parse_scopes(new_text) if new_text is not None else Scopes([MODULE])
    old_lines = _code_only(ch.old_lines, old_text)
    new_lines = _code_only(ch.new_lines, new_text)
    if (ch.old_lines or ch.new_lines) and not old_lines and not new_lines:
        sel.fire(path, "comment-only", "only comments or blank lines changed: no code")
        return
    if new_text is not None and new_lines:
        added = new_private_defs(new_text, ch.new_lines, named_in_tree(repo, old))
        enumerators = _ran_matching(idx, repo, old, LISTS_NAMES) if added else None
        if enumerators is None:
            added = {}  # who lists names is unknown: the defs stay module-level lines
        for qualname, lines in sorted(added.items()):
            assert enumerators is not None
            new_lines -= lines
            listers = enumerators & idx.by_file.get(path, set())
            sel.fire(
                path,
                "new-private-function",
                f"{qualname} is new, private, undecorated and named nowhere else: selects "
                "through its callers, and the tests that ran code listing names",
                listers,
            )
    _docstrings(sel, idx, repo, ch, old, (old_text, old_lines), (new_text, new_lines))
    touched = {old_scopes.effective(n) for n in old_lines} | {
        new_scopes.effective(n) for n in new_lines
    }
    known = old_scopes.functions()
    for scope in sorted(touched):
        key = f"{path}::{scope}"
        old_key = f"{ch.old_path or path}::{scope}"
        if scope == MODULE:
            users = idx.by_file.get(path, set()) | idx.by_file.get(ch.old_path or path, set())
            sel.fire(path, "module-level", "module-level lines: every test that imported it", users)
        elif key in idx.session or old_key in idx.session:
            sel.everything(path, "session-code", f"{scope} runs at session start (conftest)")
        elif key in idx.by_function or old_key in idx.by_function:
            users = idx.by_function.get(key, set()) | idx.by_function.get(old_key, set())
            sel.fire(path, "function", f"{scope}: the tests that ran it", users)
        elif scope not in known:
            sel.fire(path, "new-function", f"{scope} is new: selects through its callers")
        else:
            sel.fire(path, "unrun-function", f"{scope}: no test ran it")


def _docstrings(
    sel: Selection,
    idx: _Index,
    repo: Path,
    ch: FileChange,
    old: str,
    old_side: tuple[str | None, set[int]],
    new_side: tuple[str | None, set[int]],
) -> None:
    """Take the changed lines that are bare strings of the module or a class out of
    ``old_side``/``new_side``'s line sets (in place).  An attribute's docstring selects
    nothing (the compiler drops it); a module's or a class's docstring selects the tests
    that imported the module and ran code that can read it (:class:`.inert.DocReaders`).
    Readers of the file as data are selected by the ``data-file`` rule either way."""
    module: list[set[int]] = []
    classes: list[set[int]] = []
    inert: list[set[int]] = []
    for text, lines in (old_side, new_side):
        mod, cls, i = bare_string_lines(text) if text is not None else (set(), set(), set())
        module.append(lines & mod)
        classes.append(lines & cls)
        inert.append(lines & i)
    if any(inert):
        for (_, lines), strings in zip((old_side, new_side), inert, strict=True):
            lines -= strings
        sel.fire(ch.path, "attribute-docstring", "a bare string after the first: no code")
    if not any(module) and not any(classes):
        return
    readers = _doc_readers(repo, old)
    if readers is None:
        return  # who reads docstrings is unknown: the lines stay module-level
    users = idx.by_file.get(ch.path, set()) | idx.by_file.get(ch.old_path or ch.path, set())
    paths = {ch.path, ch.old_path or ch.path}
    for docs, whose, can_read in (
        (module, "the module's docstring", readers.of_module),
        (classes, "a class's docstring", readers.of_class),
    ):
        if not any(docs):
            continue
        for (_, lines), strings in zip((old_side, new_side), docs, strict=True):
            lines -= strings
        scopes = set().union(*(can_read(p) for p in paths))
        sel.fire(
            ch.path,
            "docstring",
            f"{whose}: the tests that imported it and ran code that can read it",
            users & _ran(idx, scopes),
        )


def select(
    repo: Path, m: TestMap | None, base: str, head: str | None, described: str | None = None
) -> Selection:
    """The selection for the change from ``base`` to ``head`` (None: the work tree).

    ``described``: the commit whose tree the map stands for (default: the map's own commit).
    The replay reads one map for every commit of the history, as if recorded at its parent,
    so it passes the parent; the staleness is then not measured.
    """
    sel = Selection()
    try:
        if m is None:
            raise DiffError("no map")
        base_sha = resolve(repo, base)
        head_sha = resolve(repo, head) if head is not None else None
        if described is not None:
            map_sha = resolve(repo, described)
        else:
            try:
                map_sha = resolve(repo, m.commit)
            except DiffError:
                raise DiffError(
                    f"the map's commit {m.commit[:12]} is unknown here (a map from another "
                    "repository, or a shallow clone: fetch-depth: 0)"
                ) from None
            _staleness(sel, repo, map_sha, base_sha)
        idx = _Index(m)
        # The map describes the tree at its commit: every difference from it to the head
        # counts, the pull request's own and whatever main did since the map.
        changes = diff(repo, map_sha, head_sha)
        pr_files = {c.path for c in diff(repo, base_sha, head_sha)} | {
            c.old_path for c in diff(repo, base_sha, head_sha) if c.old_path
        }
        for ch in changes:
            before = len(sel.reasons)
            if ch.status == "A":
                _added_side(sel, idx, ch.path, "added")
            elif ch.status == "D":
                _removed_side(sel, idx, ch.path, "deleted")
            elif ch.status == "R":
                _removed_side(sel, idx, ch.old_path or "", f"renamed to {ch.path}")
                _added_side(sel, idx, ch.path, f"renamed from {ch.old_path}")
            else:
                _modified(sel, idx, repo, ch, map_sha, head_sha)
            if ch.path not in pr_files and ch.old_path not in pr_files:
                for r in sel.reasons[before:]:
                    r["detail"] += " (changed on the base since the map was recorded)"
    except DiffError as exc:
        sel.everything(None, "error", f"{exc}: running everything")
    return sel


def _staleness(sel: Selection, repo: Path, map_sha: str, base_sha: str) -> None:
    if map_sha == base_sha:
        return
    behind = int(git(repo, "rev-list", "--count", f"{map_sha}..{base_sha}").strip() or 0)
    ahead = int(git(repo, "rev-list", "--count", f"{base_sha}..{map_sha}").strip() or 0)
    detail = f"the map is {behind} commit(s) stale: recorded at {map_sha[:12]}"
    if ahead:
        detail += f", {ahead} commit(s) of it not on the base"
    sel.reasons.append({"file": None, "rule": "stale-map", "detail": detail, "tests": 0})


def result_json(sel: Selection, m: TestMap | None, tests: Iterable[str] | None = None) -> dict:
    """The ``--json`` shape: mode, reasons, tests by lane, share of recorded time."""
    chosen = set(sel.tests if tests is None else tests)
    if sel.run_all:
        mode = "all"
        chosen = set(m.tests) if m is not None and tests is None else chosen
    else:
        mode = "subset" if chosen else "none"
    whole_files = {t for t in chosen if "::" not in t}
    chosen = {t for t in chosen if t in whole_files or t.split("::", 1)[0] not in whole_files}
    lanes: dict[str, list[str]] = {"stable": [], "experimental": []}
    for t in sorted(chosen):
        lanes[lane_of(t)].append(t)
    return {"mode": mode, "reasons": sel.reasons, "tests": lanes, "share": share(chosen, m, mode)}


def share(chosen: Iterable[str], m: TestMap | None, mode: str = "subset") -> float:
    if m is None or mode == "all":
        return 1.0
    total = m.total_duration()
    if total <= 0:
        return 0.0
    chosen = set(chosen)
    files = {t for t in chosen if "::" not in t}
    picked = sum(
        t.duration
        for nodeid, t in m.tests.items()
        if nodeid in chosen or nodeid.split("::", 1)[0] in files
    )
    return round(min(1.0, picked / total), 4)
