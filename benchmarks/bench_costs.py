"""Costs behind choices the code explains: each pair of ways to do one thing, timed here.

Run:  python benchmarks/bench_costs.py [--number 200000] [--repeat 7]

The package's comments say *why* a choice was made ("storing into a thread-local costs more
than reading one"); the figures live here, where they are measured on the machine at hand
instead of going stale in a comment.  Each section names the code whose comment points
here and times the two ways side by side (best of ``--repeat`` runs of ``--number`` calls,
interleaved so that a noisy stretch slows both alike), with their ratio.  The last line is
JSON with every figure.  Prints figures only; nothing here asserts on time.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import timeit
from collections.abc import Callable
from typing import Any

import torch

from flashinfer.dispatch.overlap import OverlapRule

Row = tuple[str, Callable[[], Any]]


def _thread_local() -> tuple[str, Row, Row]:
    """``flashinfer/dispatch/thread_state.py``: the hot path reads the per-thread record
    once and writes its slots, never the thread-local itself."""

    class Record:
        __slots__ = ("suitable",)

        def __init__(self) -> None:
            self.suitable: list[str] = []

    class State(threading.local):
        def __init__(self) -> None:
            self.r = Record()
            self.suitable: list[str] = []

    state, value = State(), ["a"]

    def on_the_thread_local() -> None:
        state.suitable = value

    def on_the_record() -> None:
        state.r.suitable = value

    return (
        "recording a call's candidates (thread_state.py)",
        ("store on the thread-local", on_the_thread_local),
        ("read it, store on its record", on_the_record),
    )


def _environment() -> tuple[str, Row, Row] | None:
    """``flashinfer/gating/gate.py``: the gate reads ``os.environ``'s bytes dict on
    POSIX instead of ``os.environ.get``, which encodes the key on every call."""
    data = getattr(os.environ, "_data", None)
    if os.name != "posix" or data is None:
        return None
    key = "FLASHINFER_ALLOW_EXPERIMENTAL_AUTO_BACKENDS"
    key_bytes = os.fsencode(key)
    return (
        "gate variable read (settings/__init__.py)",
        ("os.environ.get(key)", lambda: os.environ.get(key)),
        ("bytes dict .get(key)", lambda: data.get(key_bytes)),
    )


def _not_a_tensor() -> tuple[str, Row, Row]:
    """``flashinfer/autotuner/keys.py``: types that are certainly not tensors are sorted out
    by a set lookup before ``isinstance(x, torch.Tensor)``."""
    not_tensor = frozenset({type(None), bool, int, float, str, torch.dtype, torch.device})
    value = None
    return (
        "is it a tensor? for None (keys.py)",
        ("isinstance(x, torch.Tensor)", lambda: isinstance(value, torch.Tensor)),
        ("type(x) in frozenset", lambda: type(value) in not_tensor),
    )


def _overlap_check() -> tuple[str, Row, Row]:
    """``flashinfer/dispatch/overlap.py`` and ``flashinfer/norm.py``: an op with an ``out`` checks
    it for overlap on every call, also under ``skip_check=True``."""
    rule = OverlapRule("rmsnorm", ("out",), ("input", "weight"))
    x, w, out = torch.randn(8, 64), torch.randn(64), torch.empty(8, 64)
    return (
        "overlap check, one output and two inputs (overlap.py, norm.py)",
        ("out=None: the caller skips it", lambda: None),
        ("check(out, input, weight)", lambda: rule.check(out, x, w)),
    )


def _call_object() -> tuple[str, Row, Row]:
    """``flashinfer/dispatch/op.py``: the decorator returns a plain function, not the op
    object with a ``__call__``."""

    def api(x: Any, w: Any, backend: str = "auto") -> Any:
        return x

    class Op:
        function = staticmethod(api)

        def __call__(self, *args: Any, **kwargs: Any) -> Any:
            return self.function(*args, **kwargs)

    op = Op()
    return (
        "calling the API (op.py)",
        ("the function itself", lambda: api(1, 2, backend="a")),
        ("an object whose __call__ calls it", lambda: op(1, 2, backend="a")),
    )


def _time(rows: list[Row], number: int, repeat: int) -> dict[str, float]:
    """ns per call of each row: the best of ``repeat`` rounds, each round timing every row."""
    best = dict.fromkeys((name for name, _ in rows), float("inf"))
    for _ in range(repeat):
        for name, fn in rows:
            best[name] = min(best[name], timeit.timeit(fn, number=number))
    return {name: t / number * 1e9 for name, t in best.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--number", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args(argv)
    pairs = [_thread_local(), _environment(), _not_a_tensor(), _overlap_check(), _call_object()]
    print(
        f"python {sys.version.split()[0]}, torch {torch.__version__}, {args.number} calls x "
        f"best of {args.repeat}; the lambda around each call is in both figures"
    )
    figures: dict[str, dict[str, float]] = {}
    for pair in pairs:
        if pair is None:
            continue
        section, first, second = pair
        ns = _time([first, second], args.number, args.repeat)
        figures[section] = ns
        print(f"\n{section}")
        for name, value in ns.items():
            print(f"  {name:<32} {value:9.0f} ns")
        print(f"  {'ratio (second / first)':<32} {ns[second[0]] / ns[first[0]]:9.2f}")
    print(json.dumps({"ns_per_call": figures}, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
