"""The map: for each test node ID, what it ran and how long it took, at one commit.

Format (JSON, ``"format": "flashinfer-testmap"``, ``"version": 1``)::

    {"format": "flashinfer-testmap", "version": 1,
     "commit": "<40 hex>",                  # the tree the map describes
     "recorded_at": "<ISO 8601 UTC>", "python": "3.11.7", "pytest_args": [...],
     "files": ["flashinfer/gemm.py", ...],  # interned paths (repository-relative)
     "functions": ["flashinfer/gemm.py::mm", ...],   # interned "path::qualname"
     "data": ["README.md", "docs/", ...],   # interned data reads ("dir/": a listing)
     "session": {"functions": [i, ...]},    # ran outside any test (conftest, plugins)
     "tests": {"<node id>": {"lane": "stable" | "experimental", "duration": 0.12,
                             "files": [i, ...],       # ran or imported (import closure)
                             "functions": [i, ...],   # functions it ran
                             "data": [i, ...]}}}      # files it read as data

``files`` of a test hold every file it executed a line of (itself, its fixtures, what it
imported while collecting, its subprocesses) and the static import closure of its test file:
the module-level rule ("every test that imported the module") reads them.

The map is a CI artifact, not a committed file: it changes on every push to main (durations,
new tests), so a committed copy would be a bot commit per push and a merge conflict in every
open pull request; the selection reads it by commit, so a stale artifact is measured (commits
behind), never silently trusted.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

FORMAT = "flashinfer-testmap"
VERSION = 1
LANES = ("stable", "experimental")


class MapError(Exception):
    """The map cannot be used (missing, unreadable, another format or version)."""


@dataclass
class TestRecord:
    __test__ = False  # a record, not a pytest test class
    lane: str
    duration: float
    files: set[str] = field(default_factory=set)
    functions: set[str] = field(default_factory=set)  # "path::qualname"
    data: set[str] = field(default_factory=set)


@dataclass
class TestMap:
    __test__ = False
    commit: str
    tests: dict[str, TestRecord]
    session_functions: set[str] = field(default_factory=set)
    meta: dict[str, Any] = field(default_factory=dict)

    def total_duration(self) -> float:
        return sum(t.duration for t in self.tests.values())

    def used_files(self) -> set[str]:
        used = set()
        for t in self.tests.values():
            used |= t.files
        used |= {f.split("::", 1)[0] for f in self.session_functions}
        return used


def lane_of(nodeid: str) -> str:
    return "experimental" if nodeid.startswith("tests/experimental/") else "stable"


class _Interner:
    def __init__(self) -> None:
        self.items: list[str] = []
        self.index: dict[str, int] = {}

    def __call__(self, values: Iterable[str]) -> list[int]:
        out = []
        for v in sorted(set(values)):
            if v not in self.index:
                self.index[v] = len(self.items)
                self.items.append(v)
            out.append(self.index[v])
        return out


def to_json(m: TestMap) -> dict[str, Any]:
    files, functions, data = _Interner(), _Interner(), _Interner()
    tests = {}
    for nodeid in sorted(m.tests):
        t = m.tests[nodeid]
        tests[nodeid] = {
            "lane": t.lane,
            "duration": round(t.duration, 4),
            "files": files(t.files),
            "functions": functions(t.functions),
            "data": data(t.data),
        }
    session = {"functions": functions(m.session_functions)}
    return {
        "format": FORMAT,
        "version": VERSION,
        "commit": m.commit,
        **m.meta,
        "files": files.items,
        "functions": functions.items,
        "data": data.items,
        "session": session,
        "tests": tests,
    }


def from_json(raw: Any) -> TestMap:
    if not isinstance(raw, dict) or raw.get("format") != FORMAT:
        raise MapError(f'not a {FORMAT} file (no "format": "{FORMAT}")')
    if raw.get("version") != VERSION:
        raise MapError(
            f"map format version {raw.get('version')!r}, this selector reads {VERSION}: "
            "record a new map with this checkout's scripts/ci/testmap.py"
        )
    try:
        files, functions, data = raw["files"], raw["functions"], raw["data"]
        tests = {
            nodeid: TestRecord(
                lane=t["lane"],
                duration=float(t["duration"]),
                files={files[i] for i in t["files"]},
                functions={functions[i] for i in t["functions"]},
                data={data[i] for i in t["data"]},
            )
            for nodeid, t in raw["tests"].items()
        }
        session = {functions[i] for i in raw["session"]["functions"]}
        commit = str(raw["commit"])
    except (KeyError, IndexError, TypeError, ValueError) as exc:
        raise MapError(f"malformed map: {type(exc).__name__}: {exc}") from None
    meta = {k: raw[k] for k in ("recorded_at", "python", "pytest_args") if k in raw}
    return TestMap(commit, tests, session, meta)


def save(m: TestMap, path: Path) -> None:
    path.write_text(json.dumps(to_json(m), separators=(",", ":")) + "\n", encoding="utf-8")


def load(path: Path) -> TestMap:
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise MapError(f"no map at {path}") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise MapError(f"cannot read the map {path}: {exc}") from None
    return from_json(raw)
