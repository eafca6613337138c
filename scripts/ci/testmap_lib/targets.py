"""A selection (``select --json``) as one lane's pytest command: the test files to collect
and the tests to keep among them (``scripts/ci/testmap_keep.py``)."""

from __future__ import annotations

from typing import Any

LANE_ROOTS = {"stable": "tests", "experimental": "tests/experimental"}


def lane_targets(selection: dict[str, Any], lane: str) -> tuple[list[str], list[str] | None]:
    """``(files, keep)`` for ``lane``: pytest collects ``files``; ``keep`` lists what to run
    among them, or is None to run all they hold.  ``([], None)``: the lane has nothing to run.

    A selection of everything runs the lane's folder whole, not the map's list: a test added
    since the map was recorded would otherwise be left out.
    """
    if lane not in LANE_ROOTS:
        raise ValueError(f"lane must be one of {sorted(LANE_ROOTS)}, got {lane!r}")
    if selection.get("mode") == "all":
        return [LANE_ROOTS[lane]], None
    tests = list(selection.get("tests", {}).get(lane, []))
    if not tests:
        return [], None
    files = sorted({t.split("::", 1)[0] for t in tests})
    return files, sorted(set(tests))
