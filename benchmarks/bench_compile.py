"""The cost of a compiled call: ``flashinfer.rmsnorm`` inside ``torch.compile`` against the
same math written in torch, both compiled (issue 19's compiled-call row).

Run:  python benchmarks/bench_compile.py [--number 200] [--repeat 51] [--backend inductor]
                                         [--shapes 8x256 128x4096]

Two functions, each ``torch.compile(fullgraph=True, backend=--backend)``, float32 on CPU,
one thread (``torch.set_num_threads(1)``):

* ``flashinfer``: ``flashinfer.rmsnorm(x, w, eps)`` (``"auto"``): in the graph it is the
  operator ``torch.ops.flashinfer.rmsnorm``, whose implementation runs the dispatcher at
  run time (flashinfer/dispatch/torch_op.py), so a compiled call pays the operator's call
  plus the dispatcher's ``"auto"`` path;
* ``torch``: ``x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w``, the torch
  backend's math, which the compiler sees through (inductor fuses it into one kernel).

and, for scale, the same two called eagerly (not compiled).  Rows are timed interleaved:
``--repeat`` rounds, each timing ``--number`` calls of every row after one untimed call;
a row's figure is the median over the rounds of the time per call (microseconds), and
``spread`` is the gap between the 25th and 75th percentile rounds (the noise of a shared
machine).  ``added`` is the row minus the compiled torch row of its shape.  Every function
is called (compiled, warmed) before timing starts.  Prints figures only; the last line is
JSON with every figure.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import torch

import flashinfer

EPS = 1e-6
DEFAULT_SHAPES = ("8x256", "128x4096")


def rmsnorm_flashinfer(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return flashinfer.rmsnorm(x, w, EPS)


def rmsnorm_torch(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + EPS) * w


def parse_shape(text: str) -> tuple[int, int]:
    rows, sep, hidden = text.partition("x")
    if not sep or not rows.isdigit() or not hidden.isdigit() or "0" in (rows[:1], hidden[:1]):
        raise argparse.ArgumentTypeError(
            f"shape {text!r}: expected ROWSxHIDDEN with positive integers, e.g. 8x256"
        )
    return int(rows), int(hidden)


def time_rows(
    rows: dict[str, Callable[[], Any]], number: int, repeat: int
) -> dict[str, list[float]]:
    """Microseconds per call of each row, one figure per round (rounds interleaved)."""
    clock = time.perf_counter
    rounds: dict[str, list[float]] = {name: [] for name in rows}
    for _ in range(repeat):
        for name, fn in rows.items():
            fn()
            start = clock()
            for _ in range(number):
                fn()
            rounds[name].append((clock() - start) / number * 1e6)
    return rounds


def summary(samples: list[float]) -> dict[str, float]:
    quartiles = statistics.quantiles(samples, n=4) if len(samples) > 1 else samples * 3
    return {
        "median_us": round(statistics.median(samples), 3),
        "spread_us": round(quartiles[2] - quartiles[0], 3),
    }


def measure(
    shapes: list[tuple[int, int]], number: int, repeat: int, backend: str
) -> dict[str, Any]:
    torch.set_num_threads(1)
    torch.manual_seed(0)
    compiled = {
        "flashinfer": torch.compile(rmsnorm_flashinfer, fullgraph=True, backend=backend),
        "torch": torch.compile(rmsnorm_torch, fullgraph=True, backend=backend),
    }
    eager = {"flashinfer": rmsnorm_flashinfer, "torch": rmsnorm_torch}
    rows: dict[str, Callable[[], Any]] = {}
    where: dict[str, tuple[str, str, str]] = {}
    for rows_n, hidden in shapes:
        x, w = torch.randn(rows_n, hidden), torch.randn(hidden)
        shape = f"{rows_n}x{hidden}"
        for mode, table in (("compiled", compiled), ("eager", eager)):
            for impl, fn in table.items():
                name = f"{mode} {impl} {shape}"
                rows[name] = lambda fn=fn, x=x, w=w: fn(x, w)
                where[name] = (mode, impl, shape)
        expected = rmsnorm_torch(x, w)
        for fn in compiled.values():  # compiles (one graph per shape) and checks
            torch.testing.assert_close(fn(x, w), expected, atol=1e-5, rtol=1e-5)
    backend_ran = flashinfer.rmsnorm.explain(x, w, EPS).chosen
    samples = time_rows(rows, number, repeat)
    results = []
    for name, fn_samples in samples.items():
        mode, impl, shape = where[name]
        row = {"mode": mode, "impl": impl, "shape": shape, **summary(fn_samples)}
        base = statistics.median(samples[f"compiled torch {shape}"])
        row["added_us"] = round(row["median_us"] - base, 3)
        results.append(row)
    return {
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "compile_backend": backend,
        "flashinfer_backend": backend_ran,
        "threads": torch.get_num_threads(),
        "number": number,
        "repeat": repeat,
        "rows": results,
    }


def print_table(run: dict[str, Any]) -> None:
    print(
        f"python {run['python']}, torch {run['torch']}, torch.compile backend "
        f"{run['compile_backend']!r}, {run['threads']} thread; flashinfer.rmsnorm 'auto' "
        f"ran {run['flashinfer_backend']!r}"
    )
    print(
        f"each row: median over {run['repeat']} rounds of {run['number']} calls (us per call); "
        "spread: 75th - 25th percentile round; added: minus 'compiled torch' of the shape"
    )
    head = (
        f"{'mode':<9} {'impl':<11} {'shape':<9} {'median us':>10} {'spread us':>10} {'added us':>9}"
    )
    print(head)
    for r in run["rows"]:
        print(
            f"{r['mode']:<9} {r['impl']:<11} {r['shape']:<9} {r['median_us']:10.2f} "
            f"{r['spread_us']:10.2f} {r['added_us']:9.2f}"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--number", type=int, default=200, help="calls per round (200)")
    parser.add_argument("--repeat", type=int, default=51, help="rounds per row (51)")
    parser.add_argument(
        "--backend", default="inductor", help="torch.compile backend (default inductor)"
    )
    parser.add_argument(
        "--shapes",
        nargs="+",
        type=parse_shape,
        default=[parse_shape(s) for s in DEFAULT_SHAPES],
        help="ROWSxHIDDEN shapes (default: 8x256 128x4096)",
    )
    args = parser.parse_args(argv)
    if args.number < 1 or args.repeat < 1:
        parser.error("--number and --repeat must be at least 1")
    run = measure(args.shapes, args.number, args.repeat, args.backend)
    print_table(run)
    print(json.dumps(run, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
