"""CI wall time of a pull request, estimated from the map's recorded durations.

Before the selection (issue 33) a pull request ran everything serially: both lanes, then
lint, types, the repository checks and the docs, one after the other (what ``.ci/run``
still does).  Now ``.github/workflows/pr-test.yml`` runs its jobs side by side: the
``stable``, ``experimental`` and ``random-order`` lanes each run their selection on
``workers`` pytest-xdist workers, while ``checks`` runs lint, types, the repository checks
and the docs, whole.  A pull request waits for the slowest job.

The lanes' times are the selected tests' recorded durations (one process, on the machine
that recorded the map) divided by the workers; the fixed jobs' times are measured on the
same machine and given as ``--fixed lint=S,types=S,checks=S,docs=S``.  Installation and
queueing are left out of both sides: they add the same minutes to each job.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from testmap_lib.mapfile import TestMap, lane_of

FIXED_STEPS = ("lint", "types", "checks", "docs")


@dataclass(frozen=True)
class LaneSeconds:
    """Recorded seconds of one selection, per lane (a selection of everything: the map's)."""

    stable: float
    experimental: float


def lane_seconds(m: TestMap, chosen: Iterable[str], everything: bool) -> LaneSeconds:
    """The recorded seconds of ``chosen`` (node IDs and whole test files) by lane."""
    chosen = set(chosen)
    files = {t for t in chosen if "::" not in t}
    per = {"stable": 0.0, "experimental": 0.0}
    for nodeid, t in m.tests.items():
        if everything or nodeid in chosen or nodeid.split("::", 1)[0] in files:
            per[lane_of(nodeid)] += t.duration
    return LaneSeconds(per["stable"], per["experimental"])


def parse_fixed(text: str) -> dict[str, float]:
    """``lint=2,types=40,...`` as seconds per step; a ValueError says what is wrong."""
    fixed: dict[str, float] = {}
    for item in filter(None, (p.strip() for p in text.split(","))):
        name, sep, value = item.partition("=")
        if not sep or name not in FIXED_STEPS:
            raise ValueError(
                f"--fixed wants STEP=SECONDS with STEP one of {', '.join(FIXED_STEPS)}, "
                f"got {item!r}"
            )
        try:
            fixed[name] = float(value)
        except ValueError:
            raise ValueError(f"--fixed {name}: {value!r} is not a number of seconds") from None
    return fixed


def serial_seconds(lanes: LaneSeconds, fixed: Mapping[str, float]) -> float:
    """Everything, one step after the other (``.ci/run``; every pull request before)."""
    return lanes.stable + lanes.experimental + sum(fixed.values())


def parallel_seconds(lanes: LaneSeconds, fixed: Mapping[str, float], workers: int) -> float:
    """The slowest job of the pull request workflow: a lane on ``workers`` workers (the
    random-order job runs the stable selection again, on as many), or ``checks``."""
    return max(lanes.stable / workers, lanes.experimental / workers, sum(fixed.values()))


def estimate(
    m: TestMap, selections: list[LaneSeconds], fixed: Mapping[str, float], workers: int
) -> str:
    """The printed estimate: today's serial run against the median pull request's."""
    if workers < 1:
        raise ValueError(f"workers must be at least 1, got {workers}")
    every = lane_seconds(m, (), everything=True)
    today = serial_seconds(every, fixed)
    walls = [parallel_seconds(s, fixed, workers) for s in selections]
    median = statistics.median(walls) if walls else 0.0
    whole = parallel_seconds(every, fixed, workers)
    steps = ", ".join(f"{k} {fixed.get(k, 0.0):.0f}s" for k in FIXED_STEPS)
    missing = [k for k in FIXED_STEPS if k not in fixed]
    lines = [
        f"\nCI wall time (map's durations; fixed steps: {steps}; {workers} workers per lane):",
        f"  today, everything serially (.ci/run):       {today / 60:6.1f} min "
        f"(stable {every.stable:.0f}s + experimental {every.experimental:.0f}s + fixed)",
        f"  everything, jobs side by side on workers:  {whole / 60:6.1f} min",
        f"  median pull request ({len(walls)} commits):        {median / 60:6.1f} min "
        f"= {median / today if today else 0.0:.2f} of today's (target <= 0.33)",
    ]
    if missing:
        lines.append(f"  (no time given for {', '.join(missing)}: counted as 0 s)")
    return "\n".join(lines)
