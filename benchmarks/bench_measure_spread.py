"""The spread of one measurement, quiet and under load: what ``NOISY_SPREAD`` rests on.

Times two calls the way the tuner times a pair (``measure`` with its defaults) ``--runs``
times each, with 0, 2 and 4 other processes spinning on the CPU, and prints, per load, the
median, 90th percentile and largest relative spread (interquartile range of the timed calls
over their median) of each call: a 20 us busy loop and a 128x256x128 CPU matmul.

Run:  python benchmarks/bench_measure_spread.py [--runs 25]

Prints figures only (JSON, one line); nothing here asserts on time.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from typing import Any

import torch

from flashinfer.autotuner.timing import measure


def busy(us: float) -> None:
    end = time.perf_counter() + us * 1e-6
    while time.perf_counter() < end:
        pass


def spreads(fn: Any, runs: int) -> dict[str, float]:
    found = []
    for _ in range(runs):
        m = measure(fn, ())
        found.append(m.iqr_s / float(m))
    q = statistics.quantiles(found, n=10, method="inclusive")
    return {"median": statistics.median(found), "p90": q[8], "max": max(found)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=25)
    args = parser.parse_args()
    a, b = torch.randn(128, 256), torch.randn(256, 128)
    calls = {"busy_20us": lambda: busy(20), "mm_128x256x128": lambda: a @ b}
    report: dict[str, Any] = {}
    for load in (0, 2, 4):
        spin = [sys.executable, "-c", "while True: pass"]
        spinning = [subprocess.Popen(spin) for _ in range(load)]
        try:
            time.sleep(0.2)
            report[f"load_{load}"] = {name: spreads(fn, args.runs) for name, fn in calls.items()}
        finally:
            for p in spinning:
                p.kill()
                p.wait()
    print(json.dumps(report))


if __name__ == "__main__":
    main()
