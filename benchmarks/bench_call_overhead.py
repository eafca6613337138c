"""What a call of a real op adds to the backend it runs: ``flashinfer.rmsnorm`` and
``flashinfer.mm`` against the chosen implementation called directly (issue 20's figures).

Run:  python benchmarks/bench_call_overhead.py [--number N] [--repeat 100] [--fresh 30]
                                               [--interpret {0,1}]

One row per op x path x shape, float32 on CPU, one thread (``torch.set_num_threads(1)``,
``OMP_NUM_THREADS=1``).  Paths:

* ``auto``: ``op(*args)``;
* ``explicit stable``: ``backend="torch"``;
* ``explicit experimental``: the op's experimental backend by name (``mm``: ``"splitk"``),
  only where its support checker accepts the inputs (on CPU: ``TRITON_INTERPRET=1``,
  ``M <= 64``, ``K >= 1024``); otherwise the row is skipped with the checker's reason;
* ``skip_check``: ``backend="torch", skip_check=True``;
* ``wrapper floor``: no flashinfer code at all: a Python function taking the call's
  arguments that does one dict lookup and calls the implementation.  The least any dispatcher
  written in Python adds, on this machine, between real kernel calls: the targets' scale;
* ``metadata floor``: the wrapper floor plus reading each tensor's shape, dtype and device and
  looking that tuple up in a dict: the least a Python dispatcher that checks its inputs, or
  caches what it found about them, adds (the bar under the explicit target);
* ``signature floor``: the same with each tensor's strides too: what the verdict cache's key
  reads (``flashinfer.dispatch.verdicts``), the least a metadata-keyed cache of ``"auto"``
  verdicts adds in Python (the bar under the auto and tuned targets);
* ``use_backends``: ``"auto"`` inside ``flashinfer.use_backends(<op>=["torch"])``;
* ``tuned``: the key tuned once inside ``flashinfer.autotuner.autotune()``, then plain
  ``"auto"`` calls (only for an op registered with the autotuner).  The tuning runs inside
  ``use_backends(<op>=["torch"])``: under the interpreter, timing the Triton backends' tactics
  takes minutes, and on CPU torch wins anyway; the timed calls are not restricted;
* ``first call``: one ``"auto"`` call per signature never seen before: the small shape with
  ``--fresh`` other row counts (from 9 up, none of the other rows'), each call timed once,
  right after the chosen backend called directly on the same inputs; the minimum of each
  side over the signatures.

Columns: the call; the chosen implementation called directly (``op.implementations[b]``
with the body's convention: ``(input, weight, eps, None)`` for rmsnorm, ``((a, b, None,
None), tactic)`` for mm; the chosen backend is ``op.suitable_auto_backends[0]`` after a call,
or for ``tuned`` the choice ``op.explain`` reports); their ratio; the microseconds the call
adds (call minus direct); ``+-``, the noise of that figure (below); and, where issue 20 sets
one, the target on the added time (printed, never asserted).  With these shapes split-K's
checker refuses both ``mm`` shapes (K < 1024, M > 64), so on CPU its rows print the reason.

Timing: a call's overhead is a few microseconds against a noise of several on a shared
two-core machine, so the rows are timed interleaved, ``timeit``-style: ``--repeat`` passes
over every row, each pass one round of ``--number`` calls per side of each row (call, then
direct; direct first on odd passes), each round after one untimed call of its side (the
caches are that side's, not the previous row's).  A side's figure is its best round.
``--number`` defaults to enough calls for a round of about 2 milliseconds: many short
rounds spread over the whole run find the quiet stretches that a few long ones miss.  The
``tuned`` rows come in a second, shorter list of rows (tuning a key turns its ``"auto"``
calls into tuned ones), which makes passes until it has lasted as long as the first.
``+-`` is the larger gap, over the two sides, between the best even and the best odd
round: where it exceeds a target (the medium shapes, whose calls take hundreds of
microseconds), the verdict on that row is noise.

``TRITON_INTERPRET`` must be set before Triton is imported, and with it set the Triton
support checkers accept CPU tensors (``"auto"`` evaluates more of them), so the script
measures in child processes (``sys.executable``), one with the variable unset and one with
it set, and prints both tables; ``--interpret {0,1}`` runs one of them.  The children run
with ``FLASHINFER_ALLOW_EXPERIMENTAL_AUTO_BACKENDS`` and ``FLASHINFER_BACKENDS`` cleared,
one thread, and glibc's mmap threshold raised (see ``QUIET``).
Only public API is used, so the script runs on older commits too:
``PYTHONPATH=<checkout> python benchmarks/bench_call_overhead.py``.
The last line is JSON with every figure.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import inspect
import itertools
import json
import math
import os
import statistics
import subprocess
import sys
import time
import timeit
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

INTERPRET = "TRITON_INTERPRET"
CLEARED = ("FLASHINFER_ALLOW_EXPERIMENTAL_AUTO_BACKENDS", "FLASHINFER_BACKENDS")
SHAPES: dict[str, dict[str, tuple[int, ...]]] = {
    "rmsnorm": {"small": (4, 256), "medium": (64, 4096)},  # (rows, hidden)
    "mm": {"small": (8, 64, 64), "medium": (128, 512, 512)},  # (M, K, N)
}
#: The first-call rows' row counts: from here on, skipping those of the shapes above, so
#: that each signature is new while the work stays close to the small shape's.
FRESH_FROM = 9
PATHS = (
    "auto",
    "explicit stable",
    "explicit experimental",
    "skip_check",
    "wrapper floor",
    "metadata floor",
    "signature floor",
    "use_backends",
    "tuned",
)
PATHS_ORDER = (*PATHS, "first call")
#: Issue 20's targets on the microseconds a repeated signature adds (call minus direct).
TARGETS_US = {"auto": 2.0, "explicit stable": 1.0, "explicit experimental": 1.0, "tuned": 2.5}
STABLE = "torch"
#: The measuring children's settings: one thread; and glibc's mmap threshold raised, so that
#: the medium shapes' buffers (a MiB or so) come from the heap again instead of being mapped
#: and page-faulted afresh by every call, a cost many times the dispatcher's that swings
#: with the machine's memory pressure (both sides pay it alike, but its noise hides the
#: difference).  Other C libraries ignore the two variables.
QUIET = {
    "OMP_NUM_THREADS": "1",
    "MALLOC_MMAP_THRESHOLD_": str(64 << 20),
    "MALLOC_TRIM_THRESHOLD_": str(128 << 20),
}
ROUND_S = 0.002  # a round's length per side when --number is not given


# ---- the ops, through their public API --------------------------------------------------


@dataclass
class Op:
    """One op: how to build its inputs, call it, and call one backend's implementation."""

    name: str
    fn: Any  # the public API function

    def inputs(self, shape: tuple[int, ...]) -> tuple[Any, Any]:
        import torch

        gen = torch.Generator().manual_seed(0)
        if self.name == "rmsnorm":
            rows, hidden = shape
            return (torch.randn(rows, hidden, generator=gen), torch.ones(hidden))
        m, k, n = shape
        return (torch.randn(m, k, generator=gen), torch.randn(k, n, generator=gen))

    def call(
        self, args: tuple[Any, Any], backend: str | None = None, skip_check: bool = False
    ) -> Callable[[], Any]:
        """The API call, its arguments spelled out (no ``*args``/``**kwargs`` of the harness
        in the figure)."""
        fn, (x, y) = self.fn, args
        if backend is None:
            return lambda: fn(x, y)
        if skip_check:
            return lambda: fn(x, y, backend=backend, skip_check=True)
        return lambda: fn(x, y, backend=backend)

    def direct(self, backend: str, args: tuple[Any, Any], tactic: Any = None) -> Callable[[], Any]:
        """``backend``'s implementation called as the op's body calls it."""
        impl = self.fn.implementations[backend]
        if self.name == "rmsnorm":
            x, w = args
            eps = inspect.signature(self.fn).parameters["eps"].default
            return lambda: impl(x, w, eps, None)
        inputs = (*args, None, None)  # (a, b, out, out_dtype): what mm's body builds
        return lambda: impl(inputs, tactic)

    def experimental_backend(self) -> str | None:
        found = [b for b in self.fn.backend_checks if self.fn.is_experimental_backend(b)]
        return found[0] if found else None

    def refusal(self, backend: str, args: tuple[Any, Any]) -> str | None:
        """Why ``backend``'s support checker refuses ``args``, or None if it accepts."""
        try:
            ok = self.fn.backend_checks[backend](*args)
        except ValueError as exc:
            return str(exc)
        return None if ok else "its support check returned False"

    def restricted(self, backends: list[str]) -> contextlib.AbstractContextManager[Any]:
        import flashinfer

        return flashinfer.use_backends(**{self.name: backends})


# ---- timing -----------------------------------------------------------------------------


class Timed:
    """One row of a repeated signature, being timed: call and direct, ``number`` calls a
    round, and each side's best round so far (seconds) among the even and the odd passes:
    the overall best is the figure, the two halves' disagreement its noise."""

    def __init__(
        self,
        call: Callable[[], Any],
        direct: Callable[[], Any],
        number: int | None,
        within: Callable[[], contextlib.AbstractContextManager[Any]] = contextlib.nullcontext,
    ) -> None:
        self.within = within
        # One Timer per side, built once: building one compiles its loop.
        self._timers = {"call": timeit.Timer(call), "direct": timeit.Timer(direct)}
        self.best = {side: [float("inf"), float("inf")] for side in self._timers}
        with within():
            self.number = number or calls_per_round(self._timers["call"])

    def round(self, parity: int) -> None:
        """One round of each side, each after an untimed call of its own, so that neither
        side starts on the caches another row or the other side left; odd passes time the
        direct side first."""
        with self.within():
            for side in ("direct", "call") if parity else ("call", "direct"):
                self._timers[side].timeit(1)
                took = self._timers[side].timeit(self.number)
                self.best[side][parity] = min(self.best[side][parity], took)

    def figures(self) -> tuple[float, float, float | None]:
        """(call, direct, noise) in microseconds per call; noise is the larger gap between a
        side's best even and best odd round (None after a single pass)."""
        scale = 1e6 / self.number
        call, direct = (min(self.best[side]) * scale for side in ("call", "direct"))
        gaps = [abs(even - odd) * scale for even, odd in self.best.values()]
        noise = max(gaps) if all(map(math.isfinite, gaps)) else None
        return call, direct, noise


def calls_per_round(timer: timeit.Timer) -> int:
    """Calls for a round of about ``ROUND_S``, from the best of a few short runs (after a
    few calls: a first call can cost many times the next ones)."""
    timer.timeit(3)
    per_call = min(timer.repeat(repeat=3, number=3)) / 3
    return max(1, min(20000, round(ROUND_S / max(per_call, 1e-9))))


def time_interleaved(rows: list[Timed], repeat: int, min_seconds: float = 0.0) -> int:
    """At least ``repeat`` passes over every row (more until ``min_seconds`` have passed),
    a round of each side per pass, the side that goes first alternating from pass to pass:
    a noisy stretch of a shared machine costs each row a round or two, not all of its
    rounds, and hits both sides of a row alike.  Returns the number of passes."""
    start = time.perf_counter()
    passes = 0
    while rows and (passes < repeat or time.perf_counter() - start < min_seconds):
        for row in rows:
            row.round(passes % 2)
        passes += 1
    return passes


def time_first_calls(
    op: Op, shapes: list[tuple[int, ...]], backend: str
) -> tuple[list[float], list[float]]:
    """Per fresh shape: the direct call (first, so that torch has seen the shape), then one
    ``"auto"`` call, the first of its signature.  Microseconds each."""
    cases = [op.inputs(s) for s in shapes]
    calls: list[float] = []
    directs: list[float] = []
    clock = time.perf_counter_ns
    gc.disable()
    try:
        for args in cases:
            direct, call = op.direct(backend, args), op.call(args)
            t0 = clock()
            direct()
            t1 = clock()
            call()
            t2 = clock()
            directs.append((t1 - t0) / 1e3)
            calls.append((t2 - t1) / 1e3)
    finally:
        gc.enable()
    return calls, directs


# ---- the rows ---------------------------------------------------------------------------


def _figures(
    call_us: float,
    direct_us: float,
    noise_us: float | None,
    target: float | None,
    **extra: Any,
) -> dict[str, Any]:
    added = call_us - direct_us
    fields: dict[str, Any] = {
        "call_us": round(call_us, 3),
        "direct_us": round(direct_us, 3),
        "ratio": round(call_us / direct_us, 3),
        "added_us": round(added, 3),
        "noise_us": None if noise_us is None else round(noise_us, 3),
        **extra,
    }
    if target is not None:
        fields["target_us"] = target
        fields["met"] = added <= target
    return fields


def _shape_text(shape: tuple[int, ...]) -> str:
    return "(" + ", ".join(map(str, shape)) + ")"


def _tuner_registration(op: Op) -> str | None:
    """Why ``op`` has no ``tuned`` row, or None when it is registered with the autotuner."""
    try:
        from flashinfer.autotuner import AutoTuner
    except ImportError:
        return "this build has no flashinfer.autotuner"
    if op.fn.api_key not in AutoTuner.get().registered():
        return f"{op.name} is not registered with the autotuner"
    return None


def prepare(
    op: Op, path: str, args: tuple[Any, Any], number: int | None
) -> tuple[dict[str, Any], Timed | None]:
    """A row's fixed fields and its timer, or (fields saying why it is skipped, None)."""
    if path in ("explicit stable", "skip_check"):
        call = op.call(args, STABLE, skip_check=path == "skip_check")
        return {"backend": STABLE}, Timed(call, op.direct(STABLE, args), number)
    if path == "wrapper floor":
        # No dispatcher: a Python function with the API's arguments that does one dict
        # lookup and calls the implementation: what any Python-level dispatch costs at least.
        direct, memo = op.direct(STABLE, args), {"auto": STABLE}
        x, y = args

        def floor(a: Any, b: Any, backend: str = "auto") -> Any:
            memo.get(backend)
            return direct()

        return {"backend": STABLE}, Timed(lambda: floor(x, y), direct, number)
    if path in ("metadata floor", "signature floor"):
        # No dispatcher either, but the wrapper reads each tensor's metadata: shape, dtype
        # and device (the least any check of the inputs reads), plus the strides for the
        # signature a verdict cache keys on; then one dict lookup of that tuple.
        direct, seen = op.direct(STABLE, args), {}
        x, y = args

        def metadata(a: Any, b: Any, backend: str = "auto") -> Any:
            seen.setdefault((a.shape, a.dtype, a.device, b.shape, b.dtype, b.device), STABLE)
            return direct()

        def signature(a: Any, b: Any, backend: str = "auto") -> Any:
            k = (a.shape, a.stride(), a.dtype, a.device, b.shape, b.stride(), b.dtype, b.device)
            seen.setdefault(k, STABLE)
            return direct()

        keyed = signature if path == "signature floor" else metadata
        return {"backend": STABLE}, Timed(lambda: keyed(x, y), direct, number)
    if path in ("auto", "use_backends"):
        within: Callable[[], contextlib.AbstractContextManager[Any]] = contextlib.nullcontext
        if path == "use_backends":
            within = lambda: op.restricted([STABLE])  # noqa: E731 - entered for every round
        call = op.call(args)
        with within():
            call()
            backend = op.fn.suitable_auto_backends[0]
        return {"backend": backend}, Timed(call, op.direct(backend, args), number, within)
    if path == "explicit experimental":
        exp = op.experimental_backend()
        if exp is None:
            return {"skipped": f"{op.name} has no experimental backend"}, None
        why = op.refusal(exp, args)
        if why is not None:
            return {"backend": exp, "skipped": f"its checker refuses: {why}"}, None
        call = op.call(args, exp)
        call()  # its one warning, outside the timed rounds
        return {"backend": exp}, Timed(call, op.direct(exp, args), number)
    assert path == "tuned", path
    why = _tuner_registration(op)
    if why is not None:
        return {"skipped": why}, None
    from flashinfer.autotuner import autotune

    call = op.call(args)
    with op.restricted([STABLE]), autotune():
        call()
    seen = op.fn.explain(*args)
    backend, tactic = seen.chosen, seen.tactic
    note = f"choice from {seen.source}" + ("" if tactic is None else f", tactic {tactic!r}")
    timed = Timed(call, op.direct(backend, args, tactic), number)
    return {"backend": backend, "note": note}, timed


def first_call_row(op: Op, fresh: int) -> dict[str, Any]:
    base = SHAPES[op.name]["small"]
    used = {shape[0] for shapes in SHAPES.values() for shape in shapes.values()}
    counts = list(
        itertools.islice((r for r in itertools.count(FRESH_FROM) if r not in used), fresh)
    )
    shapes = [(r, *base[1:]) for r in counts]
    op.call(op.inputs(base))()  # the op's first call ever (imports, JIT) is not this row
    backend = op.fn.suitable_auto_backends[0]
    calls, directs = time_first_calls(op, shapes, backend)
    rest = ", ".join(map(str, base[1:]))
    extra = {
        "number": 1,
        "fresh": fresh,
        "call_median_us": round(statistics.median(calls), 3),
        "direct_median_us": round(statistics.median(directs), 3),
    }
    return {
        "op": op.name,
        "path": "first call",
        "shape": f"(r, {rest}), r = {counts[0]}..{counts[-1]}",
        "backend": backend,
        **_figures(min(calls), min(directs), None, None, **extra),
    }


def measure(number: int | None, repeat: int, fresh: int) -> dict[str, Any]:
    """Every row of this process's mode.

    Two phases, each timed interleaved: every path but ``tuned``, then ``tuned`` (tuning a
    key turns that key's ``"auto"`` calls into tuned ones, so it comes after them).  The
    second phase, with fewer rows, makes more passes, until it has lasted as long as the
    first: its rounds spread over as long a stretch of the machine's noise.
    """
    import torch

    import flashinfer

    torch.set_num_threads(1)
    warnings.simplefilter("ignore", flashinfer.ExperimentalWarning)
    ops = [Op(name, getattr(flashinfer, name)) for name in SHAPES]
    rows: dict[tuple[str, str, str], dict[str, Any]] = {}
    lasted = 0.0
    for phase in ([p for p in PATHS if p != "tuned"], ["tuned"]):
        timers: dict[tuple[str, str, str], Timed] = {}
        for op in ops:
            for path in phase:
                for shape in SHAPES[op.name].values():
                    where = (op.name, path, _shape_text(shape))
                    fields, timed = prepare(op, path, op.inputs(shape), number)
                    rows[where] = dict(zip(("op", "path", "shape"), where, strict=True))
                    rows[where].update(fields)
                    if timed is not None:
                        timers[where] = timed
        start = time.perf_counter()
        rounds = time_interleaved(list(timers.values()), repeat, min_seconds=lasted)
        lasted = time.perf_counter() - start
        for where, timed in timers.items():
            target = TARGETS_US.get(where[1])
            rows[where].update(
                _figures(*timed.figures(), target, number=timed.number, rounds=rounds)
            )
    ordered = [*rows.values(), *(first_call_row(op, fresh) for op in ops)]
    ordered.sort(key=lambda r: (list(SHAPES).index(r["op"]), PATHS_ORDER.index(r["path"])))
    return {
        "interpret": os.environ.get(INTERPRET, "") == "1",
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "flashinfer": os.path.dirname(os.path.abspath(flashinfer.__file__)),
        "threads": torch.get_num_threads(),
        "malloc": "MALLOC_MMAP_THRESHOLD_="
        + os.environ.get("MALLOC_MMAP_THRESHOLD_", "unset (glibc's default)"),
        "number": number,
        "repeat": repeat,
        "rows": ordered,
    }


# ---- printing ---------------------------------------------------------------------------


def _target_text(row: dict[str, Any]) -> str:
    if "target_us" not in row:
        return ""
    return f"<= {row['target_us']:.1f} us: {'met' if row['met'] else 'MISSED'}"


def print_table(run: dict[str, Any]) -> None:
    mode = "1" if run["interpret"] else "unset"
    calls = f"about {ROUND_S * 1e3:g} ms" if run["number"] is None else f"{run['number']} calls"
    print(
        f"TRITON_INTERPRET={mode}: flashinfer from {run['flashinfer']}; python {run['python']}, "
        f"torch {run['torch']}, {run['threads']} thread, {run['malloc']}"
    )
    print(
        f"each row: the best of {run['repeat']}+ rounds ({calls}) per side, call and direct "
        "alternating; +-: the gap between the best even and the best odd round"
    )
    head = ["op", "path", "shape", "backend"]
    nums = ["call us", "direct us", "ratio", "added us", "+- us"]
    cells = [head] + [[r["op"], r["path"], r["shape"], r.get("backend", "-")] for r in run["rows"]]
    widths = [max(len(c[i]) for c in cells) for i in range(len(head))]
    for left, r in zip(cells, [None, *run["rows"]], strict=True):
        text = "  ".join(c.ljust(w) for c, w in zip(left, widths, strict=True))
        if r is None:
            right = "  ".join(c.rjust(9) for c in nums) + "  target"
        elif "skipped" in r:
            right = f"skipped: {r['skipped']}"
        else:
            noise = "" if r["noise_us"] is None else f"{r['noise_us']:.2f}"
            figures = [r["call_us"], r["direct_us"], r["ratio"], r["added_us"]]
            right = "  ".join(f"{f:9.2f}" for f in figures) + f"  {noise:>9}  {_target_text(r)}"
            if "note" in r:
                right += f"  ({r['note']})"
        print(f"{text}  {right}".rstrip())


# ---- the two modes ----------------------------------------------------------------------


def child_environment(mode: str) -> dict[str, str]:
    """The environment of a measuring child: set before torch and Triton are imported."""
    env = dict(os.environ)
    env.pop(INTERPRET, None)
    if mode == "1":
        env[INTERPRET] = "1"
    for name in CLEARED:
        env.pop(name, None)
    env.update(QUIET)
    return env


def run_children(modes: list[str], argv: list[str]) -> int:
    """Measure each mode in a child process of its own; print the tables, then one JSON line."""
    runs: dict[str, Any] = {}
    for mode in modes:
        proc = subprocess.run(
            [sys.executable, os.path.abspath(__file__), *argv, "--child", f"--interpret={mode}"],
            env=child_environment(mode),
            capture_output=True,
            text=True,
        )
        sys.stderr.write(proc.stderr)
        if proc.returncode != 0:
            sys.stdout.write(proc.stdout)
            return proc.returncode
        *table, last = proc.stdout.strip().splitlines()
        print("\n".join(table))
        print()
        runs[mode] = json.loads(last)
    print(json.dumps({"interpret": runs}, sort_keys=True))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--number",
        type=int,
        default=None,
        help="calls per round and side (default: enough for a round of about 2 ms)",
    )
    parser.add_argument("--repeat", type=int, default=100, help="rounds per row (default 100)")
    parser.add_argument(
        "--fresh", type=int, default=30, help="new signatures for the first-call rows (30)"
    )
    parser.add_argument(
        "--interpret",
        choices=("0", "1"),
        help="one mode only: TRITON_INTERPRET unset (0) or 1 (default: both)",
    )
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if (args.number is not None and args.number < 1) or args.repeat < 1 or args.fresh < 1:
        parser.error("--number, --repeat and --fresh must be at least 1")
    if not args.child:
        passed = [f"--repeat={args.repeat}", f"--fresh={args.fresh}"]
        if args.number is not None:
            passed.append(f"--number={args.number}")
        modes = ["0", "1"] if args.interpret is None else [args.interpret]
        return run_children(modes, passed)
    run = measure(args.number, args.repeat, args.fresh)
    print_table(run)
    print(json.dumps(run, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
