#!/usr/bin/env python3
"""The verdict of a requested test run: how many requested tests did not run, and why.

A run whose requested tests skip reports success to pytest: a scoped request for GPU tests
on a CPU runner "passes" with every GPU test skipped.  That is a false green, the same one
the declared experimental scope closes for a path that collects nothing.  This reads the
run's JUnit report and fails it when requested tests did not run.  Standard library only.

    python3 scripts/ci/run_verdict.py --junit report.xml --fail-on any|all [--summary FILE]

``--fail-on any``: the run fails when any requested test did not run (the targeted lane: a
reviewer asked for exactly these tests).  ``--fail-on all``: it fails when none ran (the GPU
job: its tests carry their own architecture guards, so some skips are expected there, but a
GPU run that ran no GPU test proves nothing).  A report with no test fails either way.  An
expected failure (xfail) ran.  ``--summary`` appends the verdict as Markdown (the job
summary).

Exit codes: 0 the request ran, 1 requested tests did not run, 2 usage (no or bad report).
"""

from __future__ import annotations

import argparse
import collections
import sys
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Counts:
    requested: int = 0
    ran: int = 0
    not_run: collections.Counter[str] = field(default_factory=collections.Counter)

    @property
    def did_not_run(self) -> int:
        return sum(self.not_run.values())


def read_junit(text: str) -> Counts:
    """Count the report's tests: a ``<skipped>`` test did not run, except an xfail."""
    root = ET.fromstring(text)
    counts = Counts()
    for case in root.iter("testcase"):
        counts.requested += 1
        skipped = case.find("skipped")
        if skipped is None or skipped.get("type") == "pytest.xfail":
            counts.ran += 1
            continue
        reason = (skipped.get("message") or "").strip() or "skipped, no reason given"
        counts.not_run[reason] += 1
    return counts


def verdict(counts: Counts, fail_on: str) -> tuple[bool, str]:
    """``(ok, text)``: whether the request counts as run, and the sentence saying so."""
    if counts.requested == 0:
        return False, "the requested run holds no test: nothing it asked for ran"
    text = f"{counts.requested} requested test(s): {counts.ran} ran"
    if counts.did_not_run:
        why = "; ".join(f"{n} {reason}" for reason, n in counts.not_run.most_common())
        text += f", {counts.did_not_run} did not run ({why})"
    bad = counts.did_not_run > 0 if fail_on == "any" else counts.ran == 0
    if bad:
        text += ": not green, a requested test that did not run is not a pass"
    return not bad, text


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--junit", required=True, type=Path)
    parser.add_argument("--fail-on", required=True, choices=("any", "all"))
    parser.add_argument("--summary", type=Path)
    args = parser.parse_args(argv)
    try:
        counts = read_junit(args.junit.read_text(encoding="utf-8"))
    except (OSError, ET.ParseError) as exc:
        print(f"run_verdict: cannot read the JUnit report {args.junit}: {exc}", file=sys.stderr)
        return 2
    ok, text = verdict(counts, args.fail_on)
    print(text if ok else f"error: {text}")
    if args.summary is not None:
        with args.summary.open("a", encoding="utf-8") as out:
            out.write(f"### Requested tests\n\n{'✅' if ok else '❌'} {text}\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
