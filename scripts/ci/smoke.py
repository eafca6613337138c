#!/usr/bin/env python3
"""Run the benchmarks' smoke manifest (``benchmarks/smoke.json``) for one tier, strictly.

    python3 scripts/ci/smoke.py --tier pr|full [--manifest benchmarks/smoke.json] [--list]

Each run of the tier is started with this interpreter from the repository root; the tier
fails when any run exits non-zero, is killed by a signal or outlives its ``timeout_s``, and
the summary names each run that did.  A benchmark prints figures and never asserts on time,
so a smoke run checks only that it still runs to the end at tiny counts.  Tiers: ``pr`` (the
GPU job of a pull request) and ``full`` (pushes to main: every run).  Standard library only.

Exit codes: 0 every run passed, 1 a run failed, 2 usage or a bad manifest.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
MANIFEST = REPO / "benchmarks" / "smoke.json"
TIERS = ("pr", "full")


class ManifestError(Exception):
    """The manifest is unreadable or an entry is malformed."""


def load_manifest(path: Path) -> list[dict[str, Any]]:
    try:
        runs = json.loads(path.read_text(encoding="utf-8"))["runs"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ManifestError(f"cannot read the smoke manifest {path}: {exc}") from None
    names = set()
    for i, run in enumerate(runs):
        where = f"{path}: run {i} ({run.get('name', '?') if isinstance(run, dict) else run!r})"
        if not isinstance(run, dict) or not {"name", "tiers", "argv", "timeout_s"} <= set(run):
            raise ManifestError(f"{where}: needs name, tiers, argv and timeout_s")
        if not set(run["tiers"]) <= set(TIERS) or not run["tiers"]:
            raise ManifestError(f"{where}: tiers must be among {TIERS}, got {run['tiers']}")
        if "full" not in run["tiers"]:
            raise ManifestError(f"{where}: every run belongs to the full tier")
        if run["name"] in names:
            raise ManifestError(f"{where}: the name is used twice")
        names.add(run["name"])
    return runs


def run_tier(runs: list[dict[str, Any]], tier: str, root: Path) -> list[str]:
    """Run the tier's entries; the failures, one sentence each."""
    failures = []
    for run in runs:
        if tier not in run["tiers"]:
            continue
        cmd = [sys.executable, *run["argv"]]
        print(f"==> smoke {run['name']}: {' '.join(cmd)}", flush=True)
        start = time.perf_counter()
        try:
            rc = subprocess.run(cmd, cwd=root, timeout=run["timeout_s"]).returncode
        except subprocess.TimeoutExpired:
            failures.append(f"{run['name']}: still running after {run['timeout_s']}s")
            continue
        took = time.perf_counter() - start
        if rc != 0:
            failures.append(f"{run['name']}: exited {rc} after {took:.0f}s")
        else:
            print(f"==> smoke {run['name']}: ok ({took:.0f}s)", flush=True)
    return failures


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tier", required=True, choices=TIERS)
    parser.add_argument("--manifest", type=Path, default=MANIFEST)
    parser.add_argument("--list", action="store_true", help="print the tier's runs only")
    args = parser.parse_args(argv)
    try:
        runs = load_manifest(args.manifest)
    except ManifestError as exc:
        print(f"smoke: {exc}", file=sys.stderr)
        return 2
    if args.list:
        for run in runs:
            if args.tier in run["tiers"]:
                print(f"{run['name']}: {' '.join(run['argv'])}")
        return 0
    failures = run_tier(runs, args.tier, args.manifest.resolve().parents[1])
    if failures:
        print(f"smoke tier {args.tier}: {len(failures)} run(s) failed:", file=sys.stderr)
        for failure in failures:
            print(f"  {failure}", file=sys.stderr)
        return 1
    print(f"smoke tier {args.tier}: every run passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
