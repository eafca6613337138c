"""``flashinfer autotune``: tune an op for some shapes and write the results to a file.

Every argument is checked before anything is timed (a bad ``--tuning-file`` is a usage error,
exit 2, worded as the API words it; a lock that can never be taken, exit 1).  What the
command promises is in docs/cli.rst and its ``--help``; what it prints, in autotune_report.
"""

from __future__ import annotations

import argparse
import os
import re
import warnings
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TextIO, TypeVar

from flashinfer.cli.autotune_report import PROGRESS_WIDTH as PROGRESS_WIDTH
from flashinfer.cli.autotune_report import REASON_WIDTH as REASON_WIDTH
from flashinfer.cli.autotune_report import (
    ShapeResult,
    TuningProgress,
    print_block_report,
    print_stats,
    print_summary,
    tunable_ops,
)
from flashinfer.cli.common import (
    DTYPES,
    PROG,
    TuningFileAction,
    UsageError,
    add_op_arguments,
    check_shape_exists,
    op_from_args,
)

if TYPE_CHECKING:
    from flashinfer.testing.examples import ExampleInputs

_T = TypeVar("_T")

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
  2    usage error (bad op, shape, dtype or --tuning-file), nothing timed
  130  interrupted (Ctrl-C): the shapes tuned so far are saved"""


def _resolve_op(name: str) -> tuple[Any, ExampleInputs]:
    from flashinfer.autotuner import AutoTuner

    tunable = tunable_ops()
    for key, (op, _) in AutoTuner.get().registered().items():
        if name == key and getattr(op, "api_name", None) in tunable:
            return tunable[op.api_name]
    if name in tunable:
        return tunable[name]
    available = ", ".join(sorted(tunable)) or "none"
    from flashinfer.testing import example_inputs_for

    if example_inputs_for(name) is not None:
        raise UsageError(
            f"op {name!r} is not autotunable (it registers no runners with the "
            f"autotuner); autotunable ops: {available}"
        )
    raise UsageError(f"unknown op {name!r}; autotunable ops: {available}")


def _known_ops() -> str:
    return "autotunable ops: " + (", ".join(sorted(tunable_ops())) or "none")


_DIGITS = re.compile(r"[0-9]+")


def parse_shapes(text: str, target: ExampleInputs) -> list[tuple[int, ...]]:
    """Read ``--shapes`` (docs/cli.rst): positive ASCII integers joined by ``x`` or ``X`` (kept:
    scripts spell it so), as many as ``target`` takes; else a :class:`UsageError`."""
    shapes = []
    for item in text.split(","):
        item = item.strip()
        if not item:
            raise UsageError(f"--shapes: empty shape in {text!r}")
        parts = item.lower().split("x")
        if not all(_DIGITS.fullmatch(d) for d in parts):  # int() would take "+3", "1_0", " 4"
            raise UsageError(
                f"--shapes: malformed shape {item!r}; expected {target.shape_help}, "
                "e.g. 128x4096x4096, positive integers in ASCII digits joined by 'x' (or 'X')"
            )
        dims = tuple(int(d) for d in parts)
        if any(d <= 0 for d in dims):
            raise UsageError(f"--shapes: every dimension of {item!r} must be a positive integer")
        if len(dims) not in target.ndims:
            raise UsageError(
                f"--shapes: {item!r} has {len(dims)} dimensions; {target.op_name} takes "
                f"{target.shape_help}"
            )
        shapes.append(dims)
    return shapes


def _check_tuning_file(path: str) -> str:
    """``--tuning-file`` names a file the command can write and merge into: found out before
    anything is timed, with the API's own message for a path it refuses."""
    from flashinfer.autotuner import TuningFileError, check_mergeable
    from flashinfer.autotuner.disk import checked_path, lock_path, lock_problem, resolved

    if not path:
        raise UsageError(
            "--tuning-file: the path is empty; name a file, e.g. --tuning-file tuned.json"
        )
    try:
        checked_path(path)
    except TuningFileError as exc:
        raise UsageError(f"--tuning-file: {exc}") from None
    directory = os.path.dirname(resolved(path))
    if not os.access(directory, os.W_OK | os.X_OK):
        raise UsageError(
            f"--tuning-file {path}: directory {directory} is not writable (the file is "
            "replaced atomically through a temporary file next to it)"
        )
    # os.access passes where creating still fails (root on /proc): try it, so that a lock
    # that can never be taken is refused here, not after the tuning (issue 34, item 0).
    lock = lock_path(resolved(path))
    problem = lock_problem(lock)
    if problem is not None:  # a runtime failure, exit 1 (issue 34 item 0 names it)
        raise OSError(
            f"--tuning-file {path}: its lock file {lock} {problem.reason}, so it can never be "
            "locked for saving; name a file in a directory this process can write"
        )
    try:
        check_mergeable(path)
    except TuningFileError as exc:
        raise UsageError(
            f"--tuning-file {path}: {exc.reason}; use another file, or move this one away"
        ) from None
    return path


def _tune_shape(
    target: ExampleInputs, op: Any, dims: tuple[int, ...], args: argparse.Namespace, progress: Any
) -> ShapeResult:
    import torch

    from flashinfer.autotuner import AutoTuner, autotune
    from flashinfer.autotuner.timing import one_line_reason

    tuner = AutoTuner.get()
    before = tuner.last_tuning()
    error = None
    with autotune(progress=progress):
        try:
            target.call(op, dims, getattr(torch, args.dtype), args.device)
        except Exception as exc:  # all pairs failed and so did the default, say
            error = one_line_reason(exc)
    record = tuner.last_tuning()
    return ShapeResult("x".join(map(str, dims)), None if record is before else record, error)


def run_tuning(
    op: Any,
    target: ExampleInputs,
    shapes: list[tuple[int, ...]],
    tuning_file: str,
    args: argparse.Namespace,
    out: TextIO,
    err: TextIO,
) -> int:
    """Tune ``op`` for ``shapes`` and save to ``tuning_file``; returns the exit status (130 on
    Ctrl-C, having saved the shapes tuned so far)."""
    import torch

    from flashinfer.autotuner import AutoTuner, AutotuneReportWarning, TuningFileWarning, autotune

    tuner = AutoTuner.get()

    def reporting(call: Callable[[], _T]) -> _T:  # the file's warnings as the command's own
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = call()
        for w in caught:
            if issubclass(w.category, TuningFileWarning):
                print(f"{PROG} autotune: warning: {w.message}", file=err)
            else:
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        return result

    if not args.force and os.path.exists(tuning_file):
        reporting(lambda: tuner.load_tuning_file(tuning_file))
    progress = TuningProgress(err, len(shapes))
    results: list[ShapeResult] = []
    # One block around every shape: its summary (what was timed, left out and why, noisy
    # picks) is printed below the table, not issued as a warning (the command saves itself).
    block = autotune(progress=progress)
    interrupted = False
    try:
        with torch.inference_mode(), warnings.catch_warnings():
            warnings.filterwarnings("ignore", category=AutotuneReportWarning)
            with block:
                for i, dims in enumerate(shapes):
                    progress.start_shape(i, f"{target.op_name} {'x'.join(map(str, dims))}")
                    results.append(_tune_shape(target, op, dims, args, progress))
    except KeyboardInterrupt:
        progress.end_line()
        interrupted = True
    report = block.report
    for result in results:  # a key timed again because its saved timing was noisy
        seen = (
            None if result.record is None or report is None else report.keys.get(result.record.key)
        )
        result.retimed = seen is not None and seen.outcome == "re-timed"
    if results or not interrupted:
        print_summary(results, out)
        print_block_report(report, out)
    if not interrupted:
        print_stats(tuner.stats(), out)
    written = None  # a run that only reused keys never writes nor locks the file
    if any(r.tuned_now for r in results):
        written = reporting(lambda: tuner.save_tuning_file(tuning_file))
    if interrupted:
        kept = sum(r.tuned_now for r in results)
        if written is None:
            saved = f"nothing new was tuned; {tuning_file} left unchanged"
        else:
            saved = f"saved the {kept} shape(s) tuned so far ({written} entries) to {tuning_file}"
        print(
            f"{PROG} autotune: interrupted after {len(results)} of {len(shapes)} shapes; {saved}",
            file=err,
        )
        return 130
    if written is None:
        print(f"nothing new was tuned: {tuning_file} left unchanged", file=out)
    else:
        print(f"wrote {written} entries to {tuning_file}", file=out)
    empty = [r.shape for r in results if r.choice is None]
    if empty:
        print(
            f"{PROG} autotune: error: nothing could be timed for {len(empty)} of "
            f"{len(results)} shapes ({', '.join(empty)}); see the failures listed above",
            file=err,
        )
        return 1
    return 0


def _cmd_autotune(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    import torch

    args.op = op_from_args(args, _known_ops)
    op, target = _resolve_op(args.op)
    shapes = parse_shapes(args.shapes, target)
    for dims in shapes:
        check_shape_exists(dims, target, getattr(torch, args.dtype))
    if args.device == "cuda" and not torch.cuda.is_available():
        raise UsageError("--device cuda: CUDA is not available on this machine; use --device cpu")
    tuning_file = _check_tuning_file(args.tuning_file)
    return run_tuning(op, target, shapes, tuning_file, args, out, err)


def _epilog() -> str:
    """The tunable ops of this build, an example, the exit codes and the environment, from the ops'
    declarations (read from source when torch is not imported)."""
    from flashinfer.cli.declarations import help_examples

    tunable = help_examples(tunable_only=True)
    if tunable:
        width = max(len(name) for name in tunable)
        ops = "\n".join(
            f"  {name.ljust(width)}  --shapes {shape_help}"
            for name, (shape_help, _) in tunable.items()
        )
        name = next(iter(tunable))  # the first in the one list of ops
        command = f"--shapes {tunable[name][1]} --tuning-file tuned.json"
        example = (
            "example, the op named either way (finishes in seconds on a CPU):\n"
            f"  {PROG} autotune {name} {command}\n"
            f"  {PROG} autotune --op {name} {command}"
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
        help="tune an op for some shapes and write the results to a tuning file",
        description=(
            "Tune the op's backend='auto' choice for each shape (name the op as `mm` or\n"
            "`--op mm`): time every (backend, tactic) that automatic selection offers on\n"
            "this machine, keep the fastest, write the picks to the JSON tuning file (merged\n"
            "with what it already holds; keys already in it are not timed again unless\n"
            "--force, or their saved timing was noisy) and print them, with every pair that\n"
            "failed and why, the backends left out and why, and the tuner's per-op\n"
            "counts.  Each result is stamped with this machine's environment (versions,\n"
            "GPU); entries from other machines stay in the file, unused here.  Use the\n"
            "file with flashinfer.autotune(tuning_file=PATH) or\n"
            "flashinfer.autotuner.load_tuning_file(PATH)."
        ),
    )
    p.add_argument("-h", "--help", action=_HelpAction, help="show this help message and exit")
    add_op_arguments(p, "to tune, e.g. mm (see the tunable ops below)")
    p.add_argument(
        "--shapes",
        required=True,
        help=(
            "comma-separated shapes, e.g. 64x64x64,128x64x32 for mm (MxNxK): positive "
            "integers joined by 'x' (or 'X')"
        ),
    )
    p.add_argument(
        "--tuning-file",
        "--cache",  # the old spelling (tuning_file.OLD_SPELLINGS), still accepted
        dest="tuning_file",
        action=TuningFileAction,
        required=True,
        metavar="FILE",
        help="the tuning file to write, JSON (created or merged; --cache is the old spelling "
        "of --tuning-file, not to be given with it); saving locks FILE.lock, a small file "
        "created beside it (beside a symbolic link's target) and left there for the next "
        "save: safe to delete while no tuning runs",
    )
    p.add_argument(
        "--dtype", default="float32", choices=DTYPES, help="input dtype (default float32)"
    )
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda"), help="device (default cpu)")
    p.add_argument("--force", action="store_true", help="re-tune shapes already in the tuning file")
    p.set_defaults(func=_cmd_autotune)
