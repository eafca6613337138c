"""``flashinfer autotune``: tune an op for some shapes and write the results to a file.

What it promises (``flashinfer autotune --help`` says the same):

* every (backend, tactic) that failed is counted and listed under the table with a one-line
  reason; a shape for which nothing could be timed makes the command exit 1 (the shapes
  that did tune are still saved);
* Ctrl-C saves the shapes tuned so far, says so, and exits 130;
* a shape that tuned nothing new (every key already in the file) leaves the file untouched:
  a run that only reads never writes nor locks it;
* progress lines fit in 80 columns;
* a bad ``--cache`` (empty, a directory, an unwritable directory, a file of another schema
  version) is a usage error before anything is timed.
"""

from __future__ import annotations

import argparse
import json
import os
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

from .cli_common import DTYPES, PROG, UsageError, _load_apis, _table

#: Progress lines are at most this long: they fit an 80-column terminal, and a line of
#: exactly 80 characters makes some terminals wrap the cursor when redrawn in place.
PROGRESS_WIDTH = 79
#: The reason of a failed pair is cut to this many characters (Triton's can be long).
REASON_WIDTH = 100

_ENVIRONMENT_HELP = """\
environment:
  FLASHINFER_AUTOTUNER_LOG=1   also write every timing, failure and pick to stderr
                               (prefixed [flashinfer.autotuner])
  TRITON_INTERPRET=1           run the Triton backends on CPU through Triton's
                               interpreter (slow; for testing)
  FLASHINFER_ALLOW_EXPERIMENTAL_AUTO_BACKENDS=1
                               let experimental backends compete"""

_EXIT_HELP = """\
exit status:
  0    every shape has a pick (pairs that failed are listed under the table)
  1    nothing could be timed for some shape (the others are saved), or a runtime error
  2    usage error (bad op, shape, dtype or --cache), nothing timed
  130  interrupted (Ctrl-C): the shapes tuned so far are saved"""


# --------------------------------------------------------------------------------------
# Targets: how the command builds the inputs of each tunable op
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _TuneTarget:
    """How the CLI builds the inputs of one tunable op from a shape ``AxBxC``."""

    op_name: str
    shape_help: str
    ndims: tuple[int, ...]  # accepted numbers of dimensions
    call: Callable[[Any, tuple[int, ...], Any, Any], Any]  # (op, dims, dtype, device)
    example: str  # shapes that tune in seconds on a CPU


def _call_mm(op: Any, dims: tuple[int, ...], dtype: Any, device: Any) -> Any:
    import torch

    m, n, k = dims
    a = torch.randn(m, k, dtype=dtype, device=device)
    b = torch.randn(k, n, dtype=dtype, device=device)
    return op(a, b)


def _call_rmsnorm(op: Any, dims: tuple[int, ...], dtype: Any, device: Any) -> Any:
    import torch

    x = torch.randn(*dims, dtype=dtype, device=device)
    w = torch.randn(dims[-1], dtype=dtype, device=device)
    return op(x, w)


_TARGETS = {
    "mm": _TuneTarget("mm", "MxNxK (a is MxK, b is KxN)", (3,), _call_mm, "64x64x64,128x64x32"),
    "rmsnorm": _TuneTarget(
        "rmsnorm",
        "TOKENSxHIDDEN (or any AxBx...xHIDDEN)",
        (1, 2, 3, 4),
        _call_rmsnorm,
        "64x256,128x512",
    ),
}


def _tunable() -> dict[str, tuple[Any, _TuneTarget]]:
    """``api_name -> (op, target)`` of every op registered with the autotuner that the
    command can build inputs for."""
    from .autotuner import AutoTuner

    _load_apis()
    return {
        op.api_name: (op, _TARGETS[op.api_name])
        for op, _ in AutoTuner.get().registered().values()
        if getattr(op, "api_name", None) in _TARGETS
    }


def _resolve_op(name: str) -> tuple[Any, _TuneTarget]:
    from .autotuner import AutoTuner

    tunable = _tunable()
    for key, (op, _) in AutoTuner.get().registered().items():
        if name == key and getattr(op, "api_name", None) in tunable:
            return tunable[op.api_name]
    if name in tunable:
        return tunable[name]
    available = ", ".join(sorted(tunable)) or "none"
    if name in _TARGETS:
        raise UsageError(
            f"--op {name}: this op is not autotunable (it registers no runners with the "
            f"autotuner); autotunable ops: {available}"
        )
    raise UsageError(f"--op {name}: unknown op; autotunable ops: {available}")


def _parse_shapes(text: str, target: _TuneTarget) -> list[tuple[int, ...]]:
    shapes = []
    for item in text.split(","):
        item = item.strip()
        if not item:
            raise UsageError(f"--shapes: empty shape in {text!r}")
        try:
            dims = tuple(int(d) for d in item.lower().split("x"))
        except ValueError:
            raise UsageError(
                f"--shapes: malformed shape {item!r}; expected {target.shape_help}, "
                "e.g. 128x4096x4096, positive integers joined by 'x'"
            ) from None
        if any(d <= 0 for d in dims):
            raise UsageError(f"--shapes: every dimension of {item!r} must be a positive integer")
        if len(dims) not in target.ndims:
            raise UsageError(
                f"--shapes: {item!r} has {len(dims)} dimensions; {target.op_name} takes "
                f"{target.shape_help}"
            )
        shapes.append(dims)
    return shapes


def _check_cache_path(path: str) -> str:
    """``--cache`` must name a file the command can write, and whose results it can merge:
    found out before anything is timed, not after."""
    from .autotuner import AutotuneCacheError, check_mergeable

    if not path:
        raise UsageError("--cache: the path is empty; name a file, e.g. --cache tuned.json")
    if "\0" in path:
        raise UsageError("--cache: the path contains a NUL character")
    if os.path.isdir(path) or path.endswith((os.sep, "/")):
        raise UsageError(f"--cache {path}: names a directory; name a file in it, e.g. tuned.json")
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise UsageError(f"--cache {path}: directory {directory} does not exist")
    if not os.access(directory, os.W_OK | os.X_OK):
        raise UsageError(
            f"--cache {path}: directory {directory} is not writable (the file is replaced "
            "atomically through a temporary file next to it)"
        )
    try:
        check_mergeable(path)
    except AutotuneCacheError as exc:
        raise UsageError(
            f"--cache {path}: {exc.reason}; use another --cache file, or move this one away"
        ) from None
    return path


# --------------------------------------------------------------------------------------
# Progress and summary
# --------------------------------------------------------------------------------------


def _fit(text: str, width: int) -> str:
    """``text`` on one line (control characters become spaces), cut to ``width`` (>= 3)
    characters; ``...`` marks a cut."""
    if not text.isprintable():
        text = "".join(c if c.isprintable() else " " for c in text)
    return text if len(text) <= width else text[: width - 3] + "..."


class _Progress:
    """A plain-text progress bar on stderr (redrawn in place on a terminal), every line at
    most :data:`PROGRESS_WIDTH` characters."""

    def __init__(self, stream: TextIO, total_shapes: int, width: int = 12) -> None:
        self.stream = stream
        self.tty = bool(getattr(stream, "isatty", lambda: False)())
        self.total_shapes = total_shapes
        self.width = width
        self.shape_index = 0
        self.shape_label = ""
        self._last_len = 0

    def start_shape(self, index: int, label: str) -> None:
        self.shape_index = index
        self.shape_label = label

    def line(self, done: int, total: int, label: str) -> str:
        filled = self.width if total == 0 else self.width * min(max(done, 0), total) // total
        bar = "#" * filled + "." * (self.width - filled)
        head = f"[{self.shape_index + 1}/{self.total_shapes}] "
        counts = f" [{bar}] {done}/{total} "
        # The shape keeps what the counts and at least 16 characters of the label leave.
        room = max(PROGRESS_WIDTH - len(head) - len(counts) - 16, 8)
        return _fit(head + _fit(self.shape_label, room) + counts + label, PROGRESS_WIDTH)

    def end_line(self) -> None:
        """End a line left open by an in-place redraw (before other output)."""
        if self._last_len:
            self.stream.write("\n")
            self.stream.flush()
            self._last_len = 0

    def __call__(self, done: int, total: int, label: str) -> None:
        line = self.line(done, total, label)
        if self.tty:
            pad = " " * max(0, self._last_len - len(line))
            self.stream.write(f"\r{line}{pad}")
            self._last_len = len(line)
            if done == total:
                self.stream.write("\n")
                self._last_len = 0
        else:
            self.stream.write(line + "\n")
        self.stream.flush()


@dataclass
class _ShapeResult:
    """What tuning one shape did: the tuner's record, and the call's error if it raised."""

    shape: str
    record: Any  # TuningRecord | None (None: the call never reached the tuner)
    error: str | None = None

    @property
    def choice(self) -> Any:
        return None if self.record is None else self.record.choice

    @property
    def tuned_now(self) -> bool:
        return self.record is not None and self.record.timed and self.choice is not None

    def row(self) -> tuple[str, ...]:
        rec = self.record
        failed = f"{len(rec.failures)}/{rec.tried}" if rec is not None and rec.timed else "-"
        if self.choice is None:
            return (self.shape, "-", "-", "-", failed, "nothing could be timed")
        source = "tuned" if rec.timed else "reused (key already tuned)"
        tactic = json.dumps(self.choice.tactic, sort_keys=True)
        return (
            self.shape,
            self.choice.backend,
            tactic,
            f"{self.choice.median_s * 1e3:.4f}",
            failed,
            source,
        )

    def failure_lines(self) -> list[str]:
        """One line per failed pair: the whole tactic (it tells the pairs apart) and the
        reason, cut to :data:`REASON_WIDTH`."""
        lines = []
        for failure in () if self.record is None else self.record.failures:
            tactic = json.dumps(failure.tactic, sort_keys=True, separators=(",", ":"))
            reason = _fit(failure.reason, REASON_WIDTH)
            lines.append(f"  {self.shape} {failure.backend} {tactic}: {reason}")
        if self.error is not None:
            lines.append(f"  {self.shape} (the call itself): {_fit(self.error, REASON_WIDTH)}")
        return lines


def _print_summary(results: Sequence[_ShapeResult], out: TextIO) -> None:
    header = ("SHAPE", "BACKEND", "TACTIC", "MEDIAN MS", "FAILED", "SOURCE")
    print(_table([header, *(r.row() for r in results)]), file=out)
    tried = sum(r.record.tried for r in results if r.record is not None and r.record.timed)
    failed = [line for r in results for line in r.failure_lines()]
    failures = sum(len(r.record.failures) for r in results if r.record is not None)
    if failed:
        print(file=out)
        print(f"{failures} of {tried} (backend, tactic) pairs failed:", file=out)
        for line in failed:
            print(line, file=out)


# --------------------------------------------------------------------------------------
# The command
# --------------------------------------------------------------------------------------


def _tune_shape(
    target: _TuneTarget, op: Any, dims: tuple[int, ...], args: argparse.Namespace, progress: Any
) -> _ShapeResult:
    import torch

    from .autotuner import AutoTuner, autotune
    from .autotuner.tuner import _one_line

    tuner = AutoTuner.get()
    before = tuner.last_tuning()
    error = None
    with autotune(progress=progress):
        try:
            target.call(op, dims, getattr(torch, args.dtype), args.device)
        except Exception as exc:  # all pairs failed and so did the default, say
            error = _one_line(exc)
    record = tuner.last_tuning()
    return _ShapeResult("x".join(map(str, dims)), None if record is before else record, error)


def _report_cache_warnings(caught: list[warnings.WarningMessage], err: TextIO) -> None:
    from .autotuner import AutotuneCacheWarning

    for w in caught:
        if issubclass(w.category, AutotuneCacheWarning):
            print(f"{PROG} autotune: warning: {w.message}", file=err)
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)


def _save(cache: str, results: Sequence[_ShapeResult], out: TextIO, err: TextIO) -> int | None:
    """Save when a shape was tuned now (a run that only reused keys never writes nor locks
    the file); returns the entry count written, or None."""
    from .autotuner import AutoTuner

    if not any(r.tuned_now for r in results):
        return None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        n = AutoTuner.get().save_configs(cache)
    _report_cache_warnings(caught, err)
    return n


def _cmd_autotune(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    import torch

    from .autotuner import AutoTuner

    op, target = _resolve_op(args.op)
    shapes = _parse_shapes(args.shapes, target)
    if args.device == "cuda" and not torch.cuda.is_available():
        raise UsageError("--device cuda: CUDA is not available on this machine; use --device cpu")
    cache = _check_cache_path(args.cache)

    if not args.force and os.path.exists(cache):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            AutoTuner.get().load_configs(cache)
        _report_cache_warnings(caught, err)
    progress = _Progress(err, len(shapes))
    results: list[_ShapeResult] = []
    try:
        with torch.inference_mode():
            for i, dims in enumerate(shapes):
                progress.start_shape(i, f"{target.op_name} {'x'.join(map(str, dims))}")
                results.append(_tune_shape(target, op, dims, args, progress))
    except KeyboardInterrupt:
        progress.end_line()
        return _interrupted(cache, results, len(shapes), out, err)

    _print_summary(results, out)
    written = _save(cache, results, out, err)
    if written is None:
        print(f"nothing new was tuned: {cache} left unchanged", file=out)
    else:
        print(f"wrote {written} entries to {cache}", file=out)
    empty = [r.shape for r in results if r.choice is None]
    if empty:
        print(
            f"{PROG} autotune: error: nothing could be timed for {len(empty)} of "
            f"{len(results)} shapes ({', '.join(empty)}); see the failures listed above",
            file=err,
        )
        return 1
    return 0


def _interrupted(
    cache: str, results: Sequence[_ShapeResult], total: int, out: TextIO, err: TextIO
) -> int:
    """Ctrl-C: keep what was tuned, say so, exit 130."""
    if results:
        _print_summary(results, out)
    written = _save(cache, results, out, err)
    kept = sum(r.tuned_now for r in results)
    if written is None:
        saved = f"nothing new was tuned; {cache} left unchanged"
    else:
        saved = f"saved the {kept} shape(s) tuned so far ({written} entries) to {cache}"
    print(
        f"{PROG} autotune: interrupted after {len(results)} of {total} shapes; {saved}",
        file=err,
    )
    return 130


# --------------------------------------------------------------------------------------
# The parser
# --------------------------------------------------------------------------------------


def _epilog() -> str:
    """The tunable ops of this build, an example, the exit codes and the environment.
    Computed when ``--help`` is asked for: listing the ops imports them."""
    tunable = _tunable()
    if tunable:
        width = max(len(name) for name in tunable)
        ops = "\n".join(
            f"  {name.ljust(width)}  --shapes {target.shape_help}"
            for name, (_, target) in sorted(tunable.items())
        )
        name = next(n for n in _TARGETS if n in tunable)  # mm first: the simplest
        example = (
            "example (finishes in seconds on a CPU):\n"
            f"  {PROG} autotune --op {name} --shapes {tunable[name][1].example} "
            "--cache tuned.json"
        )
    else:
        ops, example = "  none in this build", ""
    return f"tunable ops:\n{ops}\n\n{example}\n\n{_EXIT_HELP}\n\n{_ENVIRONMENT_HELP}"


class _HelpAction(argparse.Action):
    """``-h/--help`` that fills in the epilog first (the op list needs the ops imported)."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> None:
        parser.epilog = _epilog()
        parser.print_help()
        parser.exit()


def add_autotune_parser(sub: Any) -> None:
    """Add the ``autotune`` sub-command to the ``flashinfer`` parser's sub-parsers."""
    p = sub.add_parser(
        "autotune",
        add_help=False,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        help="tune an op for some shapes and write the results to a cache file",
        description=(
            "Tune OP's backend='auto' choice for each shape: time every (backend, tactic)\n"
            "that automatic selection offers on this machine, keep the fastest, write the\n"
            "picks to the JSON cache file (merged with what it already holds; keys already\n"
            "in it are not timed again unless --force) and print them, with every pair\n"
            "that failed and why.  Use the file with flashinfer.autotune(cache=PATH) or\n"
            "flashinfer.autotuner.load_configs(PATH)."
        ),
    )
    p.add_argument("-h", "--help", action=_HelpAction, help="show this help message and exit")
    p.add_argument("--op", required=True, help="op to tune (see the tunable ops below)")
    p.add_argument(
        "--shapes",
        required=True,
        help="comma-separated shapes, e.g. 64x64x64,128x64x32 for mm (MxNxK)",
    )
    p.add_argument("--cache", required=True, help="JSON file to write (created or merged)")
    p.add_argument(
        "--dtype", default="float32", choices=DTYPES, help="input dtype (default float32)"
    )
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda"), help="device (default cpu)")
    p.add_argument("--force", action="store_true", help="re-tune shapes already in the cache file")
    p.set_defaults(func=_cmd_autotune)
