"""A selection dealt over K shards by recorded durations (longest first, each to the shard
with the least time so far), so the shards finish together and the dealing is the same on
every machine (ties broken by node ID)."""

from __future__ import annotations

import heapq
from collections.abc import Iterable

from testmap_lib.mapfile import TestMap


def duration_of(test: str, m: TestMap | None, default: float) -> float:
    """A node ID's recorded duration; a whole test file's, the sum of its tests'."""
    if m is None:
        return default
    if "::" in test:
        t = m.tests.get(test)
        return t.duration if t is not None else default
    prefix = test + "::"
    found = [t.duration for nodeid, t in m.tests.items() if nodeid.startswith(prefix)]
    return sum(found) if found else default


def deal(tests: Iterable[str], m: TestMap | None, shards: int) -> list[list[str]]:
    """``shards`` lists, together every test once."""
    if shards < 1:
        raise ValueError(f"--shards must be at least 1, got {shards}")
    durations = [t.duration for t in m.tests.values()] if m is not None else []
    default = sorted(durations)[len(durations) // 2] if durations else 1.0
    weighted = sorted(
        ((duration_of(t, m, default), t) for t in set(tests)), key=lambda x: (-x[0], x[1])
    )
    heap = [(0.0, i) for i in range(shards)]
    out: list[list[str]] = [[] for _ in range(shards)]
    for weight, test in weighted:
        load, i = heapq.heappop(heap)
        out[i].append(test)
        heapq.heappush(heap, (load + weight, i))
    return [sorted(s) for s in out]
