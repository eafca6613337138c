"""Autotuner figures: noise of identical work, tuning across gloo ranks, the agreement step,
and the cost of a tuned call.

Run:  python benchmarks/bench_autotune.py [--pairs 16] [--keys 4] [--kernel-ms 2]
                                         [--noise-runs 200] [--no-dispatch]

1. **Noise** (what ``AutoTuner.switch_margin`` is chosen from): the same CPU matmul is timed
   the way the tuner times a pair (``measure`` with its defaults) ``--noise-runs`` times; the
   relative difference between two such medians of *identical* work, by percentile.  A
   margin below the upper percentiles would let noise alone switch the choice.
2. **Tuning wall time** of a fixed plan: one op with ``--pairs`` (backend, tactic) pairs
   whose every call takes ``--kernel-ms`` (a sleep: each rank stands for one GPU, and this
   machine has fewer cores than ranks), ``--keys`` keys tuned, on 1, 2 and 4 gloo ranks (one
   process each, a ``FileStore``), without and with ``shard=True``; "local" is the same
   without a group.  Sharding should divide the time by about the number of ranks.
3. **Agreement per key**: a tuning-mode call of a key every rank already holds with the same
   choice (one ``all_gather_object`` to compare), of a key agreed before (no collective),
   and the same call without a group (the op's own cost).
4. **Tuned call**: ``benchmarks/bench_dispatch.py``'s "tuned / auto limit" ratio (the target
   is <= 2.5); a group changes nothing on that path, which never looks at it.

The last line is JSON with every figure.  Prints figures only; nothing here asserts on time.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent

# ---- 1. noise of identical work --------------------------------------------------------


def noise(runs: int) -> dict[str, dict[str, float]]:
    import torch

    from flashinfer.autotuner.timing import measure

    figures = {}
    for m, n, k in [(64, 64, 64), (256, 256, 256)]:
        a, b = torch.randn(m, k), torch.randn(k, n)
        medians = [
            measure(lambda a=a, b=b: torch.mm(a, b), (a, b), warmup=1, repeat=5)
            for _ in range(runs)
        ]
        rel = [abs(x - y) / min(x, y) for x, y in zip(medians[::2], medians[1::2], strict=False)]
        q = statistics.quantiles(rel, n=100)
        figures[f"mm {m}x{n}x{k}"] = {
            "median_us": statistics.median(medians) * 1e6,
            "p50": q[49],
            "p90": q[89],
            "p95": q[94],
            "p99": q[98],
        }
    return figures


# ---- 2 and 3. a worker rank -------------------------------------------------------------


def _fake_op(name: str, pairs: int, kernel_s: float) -> Any:
    """An op with two backends of ``pairs // 2`` tactics each; every call sleeps."""
    from flashinfer.autotuner import AutoTuner
    from flashinfer.backend_dispatch import backend_requirement, supported_compute_capability

    class Runner:
        def __init__(self, tactics: int) -> None:
            self.space = list(range(tactics))

        def tactic_space(self) -> list[int]:
            return self.space

        def tactics(self, inputs: tuple) -> list[int]:
            return self.space

        def __call__(self, inputs: tuple, tactic: Any = None) -> Any:
            time.sleep(kernel_s)
            return inputs[0]

    runners = {"a": Runner(pairs // 2), "b": Runner(pairs - pairs // 2)}

    @supported_compute_capability([80, 90], cpu=True)
    def ok(x: Any, backend: str = "auto") -> bool:
        return True

    def op(x: Any, backend: str = "auto") -> Any:
        return AutoTuner.get().run(tuned, runners, (x,))

    op.__name__ = op.__qualname__ = name
    tuned = backend_requirement({"a": ok, "b": ok})(op)
    AutoTuner.register(tuned, runners)
    return tuned


def _tune_keys(op: Any, keys: int, **block: Any) -> float:
    """Seconds to tune ``keys`` new keys of ``op`` (inputs of 1, 2, 4, ... rows)."""
    import torch

    from flashinfer.autotuner import autotune

    start = time.perf_counter()
    with autotune(**block):
        for i in range(keys):
            op(torch.zeros(1 << i))
    return time.perf_counter() - start


def worker(rank: int, world: int, store: str, out: str, args: argparse.Namespace) -> None:
    import torch
    import torch.distributed as dist

    from flashinfer.autotuner import AutoTuner, Choice, autotune, make_key

    kernel_s = args.kernel_ms / 1e3
    dist.init_process_group(
        "gloo",
        store=dist.FileStore(store, world),
        rank=rank,
        world_size=world,
        timeout=datetime.timedelta(seconds=120),
    )
    group = dist.group.WORLD
    figures: dict[str, float] = {}
    try:
        for shard in (False, True):
            op = _fake_op(f"plan_shard_{shard}", args.pairs, kernel_s)
            dist.barrier()
            seconds = _tune_keys(op, args.keys, process_group=group, shard=shard)
            figures[f"tune_s_per_key{'_sharded' if shard else ''}"] = seconds / args.keys
        # agreement: every rank holds the same choice for keys it never agreed on
        op = _fake_op("agreement", 2, 0.0)
        sizes = [1, 2, 4, 8, 16, 32]  # powers of two: every shape is a key of its own
        inputs = [torch.zeros(a, b, c) for a in sizes for b in sizes for c in sizes]
        tuner, calls = AutoTuner.get(), len(inputs)
        for x in inputs:
            tuner.set_choice(make_key(op.api_key, (x,)), Choice("a", 0, 1e-3))
        dist.barrier()
        with autotune(process_group=group):
            start = time.perf_counter()
            for x in inputs:
                op(x)  # one all_gather each: compare, then accept
            figures["agreement_us_per_key"] = (time.perf_counter() - start) / calls * 1e6
            start = time.perf_counter()
            for x in inputs:
                op(x)  # agreed before: no collective
            figures["agreed_call_us"] = (time.perf_counter() - start) / calls * 1e6
        with autotune():  # the same tuning-mode calls without a group: the baseline
            start = time.perf_counter()
            for x in inputs:
                op(x)
            figures["no_group_call_us"] = (time.perf_counter() - start) / calls * 1e6
    finally:
        dist.destroy_process_group()
    if rank == 0:
        Path(out).write_text(json.dumps(figures))


def run_group(world: int, args: argparse.Namespace) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "out.json")
        common = [str(world), os.path.join(tmp, "store"), out]
        flags = ["--pairs", str(args.pairs), "--keys", str(args.keys)]
        flags += ["--kernel-ms", str(args.kernel_ms)]
        procs = [
            subprocess.Popen(
                [sys.executable, __file__, "--worker", str(rank), *common, *flags],
                stdout=subprocess.DEVNULL,
            )
            for rank in range(world)
        ]
        try:
            for proc in procs:
                proc.wait(timeout=600)
        finally:
            for proc in procs:
                if proc.poll() is None:
                    proc.kill()
        if any(p.returncode for p in procs):
            raise SystemExit(f"a rank of the {world}-rank group failed: {procs}")
        return json.loads(Path(out).read_text())


def local_tuning(args: argparse.Namespace) -> float:
    op = _fake_op("plan_local", args.pairs, args.kernel_ms / 1e3)
    return _tune_keys(op, args.keys) / args.keys


# ---- 4. the tuned call -------------------------------------------------------------------


def tuned_call_ratio() -> float | None:
    proc = subprocess.run(
        [sys.executable, str(HERE / "bench_dispatch.py"), "--number", "20000", "--repeat", "7"],
        capture_output=True,
        text=True,
        check=True,
    )
    figures = json.loads(proc.stdout.strip().splitlines()[-1])
    return figures["ratios"].get("tuned / auto limit")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=16)
    parser.add_argument("--keys", type=int, default=4)
    parser.add_argument("--kernel-ms", type=float, default=2.0)
    parser.add_argument("--noise-runs", type=int, default=200)
    parser.add_argument("--no-dispatch", action="store_true", help="skip bench_dispatch.py")
    parser.add_argument("--worker", nargs=4, metavar=("RANK", "WORLD", "STORE", "OUT"))
    args = parser.parse_args(argv)
    if args.worker:
        rank, world, store, out = args.worker
        worker(int(rank), int(world), store, out, args)
        return 0

    from flashinfer.autotuner import AutoTuner

    report: dict[str, Any] = {"noise": noise(args.noise_runs)}
    margin = AutoTuner.get().switch_margin
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    report["load_average"] = load
    print(
        f"1. noise: relative difference of two medians (5 calls) of identical work, "
        f"{args.noise_runs} runs, load average {load:.1f} on {os.cpu_count()} CPUs; "
        f"switch_margin = {margin:.0%}"
    )
    for name, q in report["noise"].items():
        print(
            f"   {name} ({q['median_us']:.1f} us): p50 {q['p50']:.2%}  p90 {q['p90']:.2%}  "
            f"p95 {q['p95']:.2%}  p99 {q['p99']:.2%}"
        )

    tuner = AutoTuner.get()  # timings as a user gets them
    tuner.warmup, tuner.repeat = 1, 5
    report["local_s_per_key"] = local_tuning(args)
    report["groups"] = {world: run_group(world, args) for world in (1, 2, 4)}
    plan_s = args.pairs * 6 * args.kernel_ms / 1e3
    print(
        f"2. tuning wall time per key: {args.pairs} pairs x 6 calls x {args.kernel_ms} ms "
        f"(= {plan_s * 1e3:.0f} ms of kernel time), {args.keys} keys"
    )
    print(f"   local (no group): {report['local_s_per_key'] * 1e3:8.1f} ms")
    for world, g in report["groups"].items():
        sharded = g["tune_s_per_key_sharded"]
        print(
            f"   {world} rank(s): {g['tune_s_per_key'] * 1e3:8.1f} ms   sharded "
            f"{sharded * 1e3:8.1f} ms  ({g['tune_s_per_key'] / sharded:.2f}x faster)"
        )
    print(
        "3. tuning-mode call of a key every rank holds: first (agreement, one "
        "all_gather_object), then agreed (no collective), and without a group"
    )
    for world, g in report["groups"].items():
        print(
            f"   {world} rank(s): {g['agreement_us_per_key']:8.1f} us/key   agreed "
            f"{g['agreed_call_us']:6.1f} us/call   no group {g['no_group_call_us']:6.1f} us/call"
        )
    if not args.no_dispatch:
        report["tuned_over_auto_limit"] = ratio = tuned_call_ratio()
        print(f"4. tuned call / 'auto' limit (bench_dispatch.py): {ratio:.2f} (target <= 2.5)")
    print(json.dumps(report, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
