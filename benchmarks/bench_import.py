"""Import cost of flashinfer with torch already imported, as ``python -X importtime`` reports it.

Run:  python benchmarks/bench_import.py [-n 7] [--top 8]

Each of ``-n`` fresh interpreters runs ``python -X importtime -c "import torch; import
flashinfer"``; the figure is the cumulative column of the top-level ``flashinfer`` line of
stderr (torch's own import, which varies by hundreds of milliseconds, is not in it).
A first warm-up run (not counted) lets the children write their bytecode caches.
Prints every run, the median with min and max, the slowest modules imported under
flashinfer in the median run, and whether ``triton`` or ``flashinfer.experimental`` got
imported; the last line is JSON with every figure.  Target (issue 6): median at most 30 ms.
Prints figures only; nothing here asserts on time.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

TARGET_MS = 30.0
REPO = Path(__file__).resolve().parents[1]

_CHILD = (
    "import torch\n"
    "import flashinfer\n"
    "import json, sys\n"
    "print(json.dumps({\n"
    "    'triton': 'triton' in sys.modules,\n"
    "    'experimental': sorted(m for m in sys.modules if m == 'flashinfer.experimental'\n"
    "                           or m.startswith('flashinfer.experimental.')),\n"
    "    'torch': torch.__version__,\n"
    "}))\n"
)

# "import time:       self |  cumulative | <indent>name"
_LINE = re.compile(r"^import time:\s*(\d+)\s*\|\s*(\d+)\s*\|( *)(\S+)\s*$")


def parse_importtime(stderr: str) -> list[tuple[int, int, int, str]]:
    """(self us, cumulative us, nesting depth, module) for each ``-X importtime`` line."""
    rows = []
    for line in stderr.splitlines():
        m = _LINE.match(line)
        if m:
            depth = (len(m.group(3)) - 1) // 2
            rows.append((int(m.group(1)), int(m.group(2)), depth, m.group(4)))
    return rows


def flashinfer_subtree(rows: list[tuple[int, int, int, str]]) -> tuple[int, list]:
    """Cumulative us of the top-level flashinfer import, and the rows imported under it.

    ``-X importtime`` prints a module after everything it imported, so the modules under
    the flashinfer line are the deeper lines just above it.
    """
    for i, (_, cumulative, depth, name) in enumerate(rows):
        if name == "flashinfer" and depth == 0:
            below = []
            for row in reversed(rows[:i]):
                if row[2] <= depth:
                    break
                below.append(row)
            return cumulative, below
    raise ValueError("no top-level 'flashinfer' line in the -X importtime output")


def _child_env() -> dict[str, str]:
    """The environment of the children: this one, but allowed to write bytecode caches.

    With ``PYTHONDONTWRITEBYTECODE`` set (as in some sandboxes), an edited module would be
    compiled from source in every child, and the figure would be the compiler's time, not
    the import's (an installed package ships its ``.pyc`` files).
    """
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def run_once(python: str) -> dict:
    proc = subprocess.run(
        [python, "-X", "importtime", "-c", _CHILD],
        cwd=REPO,
        env=_child_env(),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"child interpreter failed:\n{proc.stderr[-4000:]}")
    cumulative, below = flashinfer_subtree(parse_importtime(proc.stderr))
    info = json.loads(proc.stdout.strip().splitlines()[-1])
    return {"ms": cumulative / 1000.0, "below": below, **info}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--runs", type=int, default=7, help="fresh interpreters")
    parser.add_argument("--top", type=int, default=8, help="slowest submodules to list")
    parser.add_argument("--python", default=sys.executable, help="interpreter to measure")
    parser.add_argument(
        "--no-warmup", action="store_true", help="count the first run too (cold caches)"
    )
    args = parser.parse_args(argv)

    if not args.no_warmup:
        # Writes the bytecode caches (see _child_env) and warms the file cache; not counted.
        warm = run_once(args.python)
        print(f"warm-up run (not counted): import flashinfer {warm['ms']:7.2f} ms")
    runs = []
    for i in range(args.runs):
        run = run_once(args.python)
        runs.append(run)
        print(f"run {i + 1}/{args.runs}: import flashinfer {run['ms']:7.2f} ms (cumulative)")
    figures = [r["ms"] for r in runs]
    median = statistics.median(figures)
    triton = any(r["triton"] for r in runs)
    experimental = sorted({m for r in runs for m in r["experimental"]})
    median_run = min(runs, key=lambda r: abs(r["ms"] - median))

    print(
        f"python {sys.version.split()[0]}, torch {runs[0]['torch']}, {args.runs} fresh "
        "interpreters, torch imported first"
    )
    print(
        f"import flashinfer: median {median:.2f} ms, min {min(figures):.2f} ms, "
        f"max {max(figures):.2f} ms (target <= {TARGET_MS:.0f} ms)"
    )
    print(f"triton imported: {'yes' if triton else 'no'}")
    print(f"flashinfer.experimental imported: {', '.join(experimental) if experimental else 'no'}")
    slowest = sorted(median_run["below"], key=lambda row: -row[0])[: args.top]
    if slowest:
        print("slowest modules under flashinfer (self time, run nearest the median):")
        for self_us, cum_us, _depth, name in slowest:
            print(f"  {self_us / 1000:7.2f} ms self  {cum_us / 1000:7.2f} ms cumulative  {name}")
    print(
        json.dumps(
            {
                "import_flashinfer_ms": {
                    "median": median,
                    "min": min(figures),
                    "max": max(figures),
                    "runs": figures,
                },
                "target_ms": TARGET_MS,
                "within_target": median <= TARGET_MS,
                "triton_imported": triton,
                "experimental_imported": experimental,
                "runs": args.runs,
                "python": sys.version.split()[0],
                "torch": runs[0]["torch"],
            },
            sort_keys=True,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
