"""Dispatcher overhead: nanoseconds per call of trivial APIs through each path.

Run:  python benchmarks/bench_dispatch.py [--number 20000] [--repeat 9] [--reference]

One op with two stable backends, one experimental backend, a ``common_check`` and a
heuristic, all doing trivial work on small CPU tensors.  Each row is the best of ``--repeat``
runs of ``--number`` calls.  The runs are interleaved (a run of every row, then the next
round), so that a noisy stretch of a shared machine slows every row a little rather than
the few rows timed during it: ratios from one run stay comparable.  "limit" rows call the
same checker bodies directly and then the bare function: the work the dispatcher cannot
avoid.  ``--reference`` also times the readable
reference path (``op.call_reference``: ``inspect.Signature.bind`` + ``apply_defaults`` per
call, upstream's design), the "before" of the generated path.  "autotuned op, tuned key" is
the same op registered ``direct=True`` (the dispatcher routes auto calls to the tuner);
"autotuned via body's run()" is the older form, whose body calls ``AutoTuner.get().run``;
the "untuned key" rows call each with inputs of a bucket nobody tuned (a program that never
tunes pays this).  "auto inside use_backends" restricts the op to ['a', 'b'] (the restricted
path); "... of another op" restricts a different op (this one pays the look-up that finds no
restriction); "auto with FLASHINFER_BACKENDS set" is timed in a child process started with
FLASHINFER_BACKENDS=rmsnorm=torch (the variable is read once per process).
The last line is JSON with every figure.  Prints figures only; nothing here asserts on time.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import subprocess
import sys
import timeit
import warnings
from collections.abc import Callable
from typing import Any

import torch

import flashinfer
from flashinfer.api_logging import flashinfer_api, flashinfer_experimental_api
from flashinfer.backend_dispatch import (
    backend_requirement,
    experimental_backend,
    supported_compute_capability,
)

GATE = "FLASHINFER_ALLOW_EXPERIMENTAL_AUTO_BACKENDS"


# ---- the op: trivial checkers, trivial body -------------------------------------------


def _common(x, w, scale=1.0, backend="auto"):
    return x.dim() == 2


@supported_compute_capability([80, 90], cpu=True)
def _check_a(x, w, scale=1.0, backend="auto"):
    return x.shape[1] == w.shape[0]


@supported_compute_capability([80, 90], cpu=True)
def _check_b(x, w, scale=1.0, backend="auto"):
    return x.shape[1] == w.shape[0]


@experimental_backend
@supported_compute_capability([90], cpu=True)
def _check_exp(x, w, scale=1.0, backend="auto"):
    return x.shape[1] == w.shape[0]


def _heuristic(candidates, x, w, scale=1.0, backend="auto"):
    return candidates


def bare(x, w, scale=1.0, backend="auto"):
    return x


op = backend_requirement(
    {"a": _check_a, "b": _check_b, "exp": _check_exp},
    common_check=_common,
    heuristic_func=_heuristic,
)(bare)


@flashinfer_experimental_api
def experimental_bare(x, w, scale=1.0, backend="auto"):
    return x


def _stable_bare(x, w, scale=1.0, backend="auto"):
    return x


stable_marked = flashinfer_api(_stable_bare)


# ---- the autotuned variant (only when the autotuner exists) ---------------------------


def _tuned_op(direct: bool) -> Callable[..., Any] | None:
    """The op, autotuned, with its one key tuned.  ``direct``: the dispatcher routes auto
    calls straight to the tuner (``register(direct=True)``, inputs ``(x, w, scale)``);
    otherwise the body calls ``AutoTuner.get().run`` with ``(x, w)``."""
    try:
        from flashinfer.autotuner import AutoTuner, autotune
    except ImportError:
        return None

    class Runner:
        def tactic_space(self):
            return [None]

        def tactics(self, inputs):
            return [None]

        def __call__(self, inputs, tactic=None):
            return inputs[0]

    runners = {"a": Runner(), "b": Runner(), "exp": Runner()}

    def tuned(x, w, scale=1.0, backend="auto"):
        if backend == "auto":
            return AutoTuner.get().run(tuned_op, runners, (x, w))
        return runners[backend]((x, w))

    tuned.__qualname__ += "_direct" if direct else "_via_body"  # two ops, two api keys
    tuned_op = backend_requirement(
        {"a": _check_a, "b": _check_b, "exp": _check_exp},
        common_check=_common,
        heuristic_func=_heuristic,
    )(tuned)
    AutoTuner.register(tuned_op, runners, direct=direct)
    x, w = _inputs()
    with autotune():
        tuned_op(x, w)  # tunes this key once
    return tuned_op


_RESTRICTED_ROWS = (
    "auto inside use_backends",
    "auto inside use_backends of another op",
    "auto with FLASHINFER_BACKENDS set",
)


def _restricted_rows(x: Any, w: Any, number: int, repeat: int) -> dict[str, float]:
    """The rows of a restricted process: each in its own loop, the block entered once."""
    found: dict[str, float] = {}
    with flashinfer.use_backends({op: ["b", "a"]}):
        found[_RESTRICTED_ROWS[0]] = _time(lambda: op(x, w), number, repeat)
    with flashinfer.use_backends(rmsnorm=["torch"]):
        found[_RESTRICTED_ROWS[1]] = _time(lambda: op(x, w), number, repeat)
    child = [sys.executable, __file__, "--auto-only", f"--number={number}", f"--repeat={repeat}"]
    env = {**os.environ, "FLASHINFER_BACKENDS": "rmsnorm=torch"}
    proc = subprocess.run(child, env=env, capture_output=True, text=True, check=True)
    found[_RESTRICTED_ROWS[2]] = float(proc.stdout.strip().splitlines()[-1])
    return found


def _inputs() -> tuple[torch.Tensor, torch.Tensor]:
    return torch.zeros(4, 8), torch.zeros(8, 4)


def _time(fn: Callable[[], Any], number: int, repeat: int) -> float:
    best = min(timeit.repeat(fn, number=number, repeat=repeat))
    return best / number * 1e9


def _time_interleaved(
    rows: dict[str, Callable[[], Any]], number: int, repeat: int
) -> dict[str, float]:
    """ns per call of each row: the best of ``repeat`` rounds, each round timing every row."""
    best = dict.fromkeys(rows, float("inf"))
    for _ in range(repeat):
        for name, fn in rows.items():
            best[name] = min(best[name], timeit.timeit(fn, number=number))
    return {name: t / number * 1e9 for name, t in best.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--number", type=int, default=20000)
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--reference", action="store_true", help="also time op.call_reference")
    parser.add_argument("--auto-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    os.environ.pop(GATE, None)
    warnings.simplefilter("ignore", flashinfer.ExperimentalWarning)

    x, w = _inputs()
    if args.auto_only:  # the child of the FLASHINFER_BACKENDS row
        print(json.dumps(_time(lambda: op(x, w), args.number, args.repeat)))
        return 0
    ca, ce, cm, h = _check_a, _check_exp, _common, _heuristic

    def limit_explicit():
        cm(x, w, 1.0, "a")
        ca(x, w, 1.0, "a")
        return bare(x, w, 1.0, "a")

    def limit_auto():
        cm(x, w, 1.0, "auto")
        ca(x, w, 1.0, "auto")
        _check_b(x, w, 1.0, "auto")
        ce(x, w, 1.0, "auto")
        h(["a", "b"], x, w, 1.0, "auto")
        return bare(x, w, 1.0, "auto")

    def limit_explicit_kw():
        cm(x=x, w=w, scale=2.0, backend="a")
        ca(x=x, w=w, scale=2.0, backend="a")
        return bare(x=x, w=w, scale=2.0, backend="a")

    rows: dict[str, Callable[[], Any]] = {
        "bare function": lambda: bare(x, w),
        "limit: explicit (checker bodies + bare)": limit_explicit,
        "limit: auto (checker bodies + bare)": limit_auto,
        "explicit stable backend": lambda: op(x, w, backend="a"),
        "explicit experimental backend (warned)": lambda: op(x, w, backend="exp"),
        "auto, gate off": lambda: op(x, w),
        "skip_check=True": lambda: op(x, w, backend="a", skip_check=True),
        "@flashinfer_experimental_api (warned)": lambda: experimental_bare(x, w),
        "@flashinfer_api, logging off": lambda: stable_marked(x, w),
        "bare function, keywords": lambda: bare(x=x, w=w, scale=2.0, backend="a"),
        "limit: explicit, keywords": limit_explicit_kw,
        "explicit stable backend, keywords": lambda: op(x=x, w=w, scale=2.0, backend="a"),
        "auto, gate off, keywords": lambda: op(x=x, w=w, scale=2.0),
        "bare function, defaults": lambda: bare(x, w),
        "auto, gate off, defaults": lambda: op(x, w),
    }
    if args.reference:
        ref = op.call_reference
        rows["reference path: explicit stable backend"] = lambda: ref(x, w, backend="a")
        rows["reference path: auto, gate off"] = lambda: ref(x, w)
        rows["reference path: skip_check=True"] = lambda: ref(x, w, backend="a", skip_check=True)

    # Each tuned op has one key tuned (x, w); (x_other, w) falls in another, untuned bucket.
    x_other = torch.zeros(40, 8)
    tuned_rows = {
        True: ("autotuned op, tuned key", "autotuned op, untuned key"),
        False: ("autotuned via body's run()", "autotuned via body's run(), untuned key"),
    }
    for direct, (row, untuned_row) in tuned_rows.items():
        tuned = _tuned_op(direct)
        if tuned is not None:
            tuned(x, w)
            rows[row] = functools.partial(tuned, x, w)
            rows[untuned_row] = functools.partial(tuned, x_other, w)

    op(x, w, backend="exp")  # the one warning happens outside the timed loop
    experimental_bare(x, w)
    results = _time_interleaved(rows, args.number, args.repeat)

    os.environ[GATE] = "1"  # its own loop: setting the variable per call would be timed
    results["auto, gate on"] = _time(lambda: op(x, w), args.number, args.repeat)
    os.environ.pop(GATE, None)
    results.update(_restricted_rows(x, w, args.number, args.repeat))
    for row in (r for pair in tuned_rows.values() for r in pair):  # print them last
        if row in results:
            results[row] = results.pop(row)

    base = results["bare function"]
    width = max(len(k) for k in results)
    print(
        f"python {sys.version.split()[0]}, torch {torch.__version__}, {args.number} calls x "
        f"best of {args.repeat}"
    )
    print(f"{'row':<{width}}  {'ns/call':>9}  {'x bare':>7}")
    for name, ns in results.items():
        print(f"{name:<{width}}  {ns:9.0f}  {ns / base:7.2f}")
    checks = {
        "explicit / limit": results["explicit stable backend"]
        / results["limit: explicit (checker bodies + bare)"],
        "auto / limit": results["auto, gate off"] / results["limit: auto (checker bodies + bare)"],
        "skip_check / bare": results["skip_check=True"] / base,
        "experimental API / bare": results["@flashinfer_experimental_api (warned)"] / base,
        "stable marker / bare": results["@flashinfer_api, logging off"] / base,
    }
    for row in _RESTRICTED_ROWS:
        if row in results:
            checks[f"{row} / auto"] = results[row] / results["auto, gate off"]
    if "autotuned op, tuned key" in results:
        checks["tuned / auto limit"] = (
            results["autotuned op, tuned key"] / results["limit: auto (checker bodies + bare)"]
        )
    print(
        "targets: explicit/limit <= 2.0, auto/limit <= 2.0, skip_check/bare <= 3.0, "
        "tuned/auto-limit <= 2.5, markers/bare <= 2.0, restricted/auto <= 1.3"
    )
    for name, ratio in checks.items():
        print(f"  {name}: {ratio:.2f}")
    print(json.dumps({"ns_per_call": results, "ratios": checks}, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
