"""Figures for flashinfer.rmsnorm and flashinfer.mm: per op, backend and shape, the median
time, the achieved GB/s (norm) or TFLOP/s (mm), and the ratio to the "torch" backend.

Prints figures; never asserts on time.  Every backend of each op is measured (read from
``op.backend_checks``, experimental ones included and labelled); a backend whose checker
declines a shape is listed with the checker's reason.

On CPU, Triton kernels run through the Triton interpreter (``TRITON_INTERPRET=1``, set here
before Triton is imported), which executes them in Python/NumPy: shapes are tiny, and the
Triton figures measure the interpreter, not the kernel.  On a CUDA device the shapes are
realistic and timing uses CUDA events.

    python benchmarks/bench_ops.py                 # CUDA if available, else CPU
    python benchmarks/bench_ops.py --device cpu --dtype float16 --threads 1

On a shared or loaded CPU, torch's default thread pool can be oversubscribed and its small
GEMMs then take milliseconds instead of microseconds; ``--threads 1`` shows the difference.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import warnings
from collections.abc import Callable
from typing import Any

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

import flashinfer  # noqa: E402
from flashinfer import ExperimentalWarning  # noqa: E402
from flashinfer.testing import support_reason  # noqa: E402

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}

SHAPES = {
    "cpu": {
        "rmsnorm": [(32, 256), (8, 4096)],
        "mm": [(64, 64, 64), (128, 128, 128), (8, 64, 2048)],
    },
    "cuda": {
        "rmsnorm": [(4096, 4096), (16384, 8192), (128, 16384)],
        "mm": [(4096, 4096, 4096), (128, 8192, 8192), (16, 4096, 16384), (8, 8192, 8192)],
    },
}


def _time(fn: Callable[[], Any], device: str, reps: int, budget_s: float) -> float:
    """Median seconds per call: one warm-up, then up to ``reps`` timed calls within budget."""
    fn()
    times: list[float] = []
    deadline = time.perf_counter() + budget_s
    for _ in range(reps):
        if device == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end) / 1e3)
        else:
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        if time.perf_counter() > deadline and len(times) >= 3:
            break
    return statistics.median(times)


def _cases(op_name: str, shape: tuple[int, ...], dtype: torch.dtype, device: str):
    gen = torch.Generator().manual_seed(0)
    if op_name == "rmsnorm":
        rows, hidden = shape
        x = torch.randn(rows, hidden, generator=gen).to(dtype).to(device)
        w = torch.randn(hidden, generator=gen).to(dtype).to(device)
        inputs = {"input": x, "weight": w}
        moved = (2 * x.numel() + w.numel()) * x.element_size()
        return inputs, ("GB/s", lambda t: moved / t / 1e9)
    m, n, k = shape
    a = torch.randn(m, k, generator=gen).to(dtype).to(device)
    b = torch.randn(k, n, generator=gen).to(dtype).to(device)
    flops = 2 * m * n * k
    return {"a": a, "b": b}, ("TFLOP/s", lambda t: flops / t / 1e12)


def _bind(op: Any, inputs: dict[str, Any], backend: str) -> Callable[[], Any]:
    return lambda: op(**inputs, backend=backend)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", choices=["cpu", "cuda"], default=None)
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="float16")
    parser.add_argument("--reps", type=int, default=None)
    parser.add_argument(
        "--threads", type=int, default=None, help="torch CPU threads (default: torch's own)"
    )
    args = parser.parse_args(argv)
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cuda" and not torch.cuda.is_available():
        print("--device cuda: no CUDA device available", file=sys.stderr)
        return 2
    if args.threads:
        torch.set_num_threads(args.threads)
    dtype = DTYPES[args.dtype]
    reps = args.reps or (50 if device == "cuda" else 5)
    budget = 2.0 if device == "cuda" else 3.0

    where = (
        torch.cuda.get_device_name()
        if device == "cuda"
        else f"CPU ({os.cpu_count()} cores, torch threads {torch.get_num_threads()})"
    )
    print(f"flashinfer {flashinfer.__version__}, torch {torch.__version__}, {where}, {args.dtype}")
    if device == "cpu":
        print(
            "NOTE: on CPU the Triton backends run through the Triton interpreter "
            f"(TRITON_INTERPRET={os.environ.get('TRITON_INTERPRET')}); shapes are tiny and the "
            "Triton figures measure the interpreter, not the kernels."
        )
    print(f"median of up to {reps} calls after one warm-up; ratio = torch time / backend time\n")

    header = f"{'op':8} {'backend':22} {'shape':20} {'time':>12} {'rate':>16} {'vs torch':>9}"
    for op in (flashinfer.rmsnorm, flashinfer.mm):
        print(header)
        print("-" * len(header))
        for shape in SHAPES[device][op.api_name]:
            inputs, (unit, rate) = _cases(op.api_name, shape, dtype, device)
            torch_time = None
            for backend in op.backend_checks:
                label = backend + (" (experimental)" if op.is_experimental_backend(backend) else "")
                dims = "x".join(map(str, shape))
                reason = support_reason(op, backend, inputs)
                if reason is not None:
                    print(
                        f"{op.api_name:8} {label:22} {dims:20} skipped: {reason.split(': ', 1)[1]}"
                    )
                    continue
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", ExperimentalWarning)
                    call = _bind(op, inputs, backend)
                    t = _time(call, device, reps, budget)
                if backend == "torch":
                    torch_time = t
                ratio = f"{torch_time / t:8.3f}x" if torch_time else "      n/a"
                print(
                    f"{op.api_name:8} {label:22} {dims:20} {t * 1e3:9.3f} ms "
                    f"{rate(t):10.4g} {unit:<7}{ratio}"
                )
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
