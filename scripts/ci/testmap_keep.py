"""pytest plugin (``-p testmap_keep``, CI only): run only the tests a selection named.

``TESTMAP_KEEP`` names a file of node IDs and test files, one per line (written by
``testmap.py targets``).  A collected test is kept when its node ID is listed, when its ID
without the parameters (``test_x[a-b]`` -> ``test_x``) is listed with or without
parameters, or when its file is listed; everything else is deselected, as ``-k`` would.

Why not pass the node IDs to pytest: an ID recorded in the map can vanish (the case list it
was parametrized from changed), and pytest fails on a missing ID; a test whose parameters
are new is not in the map at all.  Keeping by function fails open: every parametrization of
a selected test function runs.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest


def _base(nodeid: str) -> str:
    return nodeid.split("[", 1)[0]


def read_keep(path: str) -> set[str]:
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    return {_base(line.strip()) for line in lines if line.strip()}


def kept(nodeid: str, keep: set[str]) -> bool:
    return _base(nodeid) in keep or nodeid.split("::", 1)[0] in keep


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    path = os.environ.get("TESTMAP_KEEP")
    if not path:
        return
    keep = read_keep(path)
    chosen = [item for item in items if kept(item.nodeid, keep)]
    dropped = [item for item in items if not kept(item.nodeid, keep)]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = chosen


def pytest_report_header(config: pytest.Config) -> str | None:
    path = os.environ.get("TESTMAP_KEEP")
    return f"testmap: only the selected tests ({path})" if path else None
