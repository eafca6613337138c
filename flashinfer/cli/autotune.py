"""``flashinfer autotune``: tune an op for some shapes and write the results to a file.

This module is the command's front: which ops it can tune and how it builds their inputs,
its arguments (parsed and checked before anything is timed: a bad ``--tuning-file`` is a
usage error, exit 2, worded as the API words it; a lock that can never be taken, exit 1) and
its help text.  The run is in ``autotune_run.py``; what it prints, in
``autotune_report.py``.  What the command promises is in docs/cli.rst and its ``--help``.
"""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TextIO

from flashinfer.cli.autotune_report import PROGRESS_WIDTH as PROGRESS_WIDTH
from flashinfer.cli.autotune_report import REASON_WIDTH as REASON_WIDTH
from flashinfer.cli.autotune_run import run_tuning, tunable_ops
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


# --------------------------------------------------------------------------------------
# The arguments: checked before anything is timed
# --------------------------------------------------------------------------------------


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
    """Read ``--shapes``: comma-separated shapes, each of positive integers in ASCII digits
    joined by ``x`` or ``X`` (``128x4096x4096``, ``128X4096X4096``), with as many dimensions
    as ``target`` takes.  Whitespace around a shape is ignored; anything else (signs, ``_``,
    inner spaces, non-ASCII digits) is a :class:`UsageError`.  ``X`` has always been read as
    ``x`` (the text is lowercased first); it stays, so no script that spells it so breaks."""
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
    """``--tuning-file`` must name a file the command can write, and whose results it can merge:
    found out before anything is timed, not after.  A path the API refuses (it names a
    directory, a FIFO, a socket or a device, or lies in a missing directory) is refused
    with the API's own message."""
    from flashinfer.autotuner import TuningFileError, check_mergeable
    from flashinfer.autotuner.disk import checked_path, lock_path, lock_problem, resolved

    if not path:
        raise UsageError(
            "--tuning-file: the path is empty; name a file, e.g. --tuning-file tuned.json"
        )
    if "\0" in path:
        raise UsageError("--tuning-file: the path contains a NUL character")
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


# --------------------------------------------------------------------------------------
# The parser
# --------------------------------------------------------------------------------------


def _epilog() -> str:
    """The tunable ops of this build, an example, the exit codes and the environment.
    Computed when ``--help`` is asked for, from the ops' declarations (read from source in a
    process that has not imported torch: :mod:`flashinfer.cli.declarations`)."""
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
