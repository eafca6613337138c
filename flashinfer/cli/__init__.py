"""The ``flashinfer`` command (console script ``flashinfer``, or ``python -m flashinfer``).

Sub-commands::

    flashinfer backends [--json]        environment report: every API's backends, what runs
                                        here and why not; then versions, settings, OS, CUDA,
                                        install (``--json``: a versioned schema)
    flashinfer autotune --op mm --shapes 128x4096x4096,64x256x512 --tuning-file tuned.json \\
        [--dtype float32|float16|bfloat16] [--device cpu|cuda] [--force]
    flashinfer experimental [--json]    experimental APIs and backends with lifecycle data
                                        (``python -m flashinfer.experimental`` is an alias)
    flashinfer explain mm --shapes 16x32x2048 [--dtype ...] [--device ...] [--tuning-file F]
        [--json]                        what backend='auto' would pick for each shape, and why
    flashinfer lifecycle graduate|remove OP:BACKEND|API [--apply]
    flashinfer lifecycle rename OP:OLD|API --to NEW [--apply]
                                        take experimental work out of the experimental state:
                                        prints the plan, --apply edits the checkout

Exit codes: ``0`` success, ``1`` a runtime failure (a kernel or the tuning file failed),
``2`` a usage error (unknown command, op or dtype, malformed shape, a shape no tensor can
have, CUDA asked for on a machine without it, an unusable ``--tuning-file``), ``130`` interrupted
(``autotune`` saves the shapes already tuned first), ``141`` the output was closed early
(``flashinfer backends --json | head``): as for a Unix tool killed by ``SIGPIPE``, nothing is
written to stderr.  Errors are one line on stderr, starting ``flashinfer: error:`` (or
``flashinfer <command>: error:``); ``FLASHINFER_CLI_TRACEBACK=1`` adds the traceback of a
runtime failure.

``autotune`` loads the tuning file first (keys already in it are not timed again, unless their
saved timing was noisy; ``--force`` re-times them all), tunes each shape inside
:func:`flashinfer.autotuner.autotune` with a plain-text progress bar on stderr, then saves
(merging with the file, atomically) and prints one row per shape: the picked backend, tactic
and median time, whether it was timed now, and how many (backend, tactic) pairs failed, each
listed below the table with its reason; then the block's summary (the backends left out and
why, noisy picks).  A run that only reused keys already in the file writes nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from typing import Any, TextIO, cast

from flashinfer.cli.common import PROG, UsageError

__all__ = ["EXIT_CLOSED_PIPE", "UsageError", "build_parser", "main"]


class _Parser(argparse.ArgumentParser):
    """argparse that raises :class:`UsageError` instead of exiting, so ``main`` returns."""

    def error(self, message: str) -> Any:  # type: ignore[override]
        raise UsageError(message, self)


# --------------------------------------------------------------------------------------
# flashinfer experimental
# --------------------------------------------------------------------------------------


def _cmd_experimental(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """The gate's state, then every experimental API and backend with its lifecycle data.

    ``--json`` prints ``{"gate": ..., "features": [ExperimentalFeature.as_dict(), ...]}``.
    ``python -m flashinfer.experimental`` runs this command (same output, same JSON).
    """
    from flashinfer.api_modules import load_api_modules
    from flashinfer.cli.common import gate_line, gate_state
    from flashinfer.gating.lifecycle import experimental_features, format_listing

    missing = load_api_modules()
    features = experimental_features(load=False)
    gate = gate_state()
    if args.json:
        doc = {"gate": gate, "features": [f.as_dict() for f in features]}
        print(json.dumps(doc, indent=2), file=out)
    else:
        print(gate_line(gate), file=out)
        print(file=out)
        print(format_listing(features), file=out)
    for module in missing:
        print(f"note: API module {module} is missing from this build; not listed", file=err)
    return 0


# --------------------------------------------------------------------------------------
# The parser and main
# --------------------------------------------------------------------------------------


def _cmd_backends(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """``flashinfer backends``: its module (which imports torch) loads when the command runs.
    Under ``FLASHINFER_STRICT_SETTINGS=1`` it does not raise for a malformed variable: its
    report is where the bad values are shown."""
    import warnings

    from flashinfer.settings import reporting_only

    with reporting_only(), warnings.catch_warnings():
        # A malformed value's warning would repeat, above the report, what its settings say.
        warnings.filterwarnings("ignore", ".*is not a recognised value", RuntimeWarning)
        from flashinfer.cli.backends import cmd_backends as run

        return run(args, out, err)


def build_parser() -> argparse.ArgumentParser:
    """The ``flashinfer`` argument parser.

    Building it imports no sub-command's machinery (nor torch): ``flashinfer --version`` and
    ``--help`` answer at once, and a sub-command's modules load when it runs.
    """
    from flashinfer._version import __version__
    from flashinfer.cli.autotune import add_autotune_parser
    from flashinfer.cli.explain import add_explain_parser
    from flashinfer.cli.lifecycle import add_lifecycle_parser

    parser = _Parser(
        prog=PROG,
        description="flashinfer: inspect backends, tune kernels, list experimental features, "
        "explain backend choices.",
        epilog="exit status: 0 success, 1 runtime failure, 2 usage error, 130 interrupted, "
        "141 output closed early (e.g. by `| head`; the command finishes its work first)",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser(
        "backends",
        help="every API, its backends, whether each runs here, and the experimental gate",
        description="List every API (stable and experimental), its backends, which are "
        "experimental, whether each can run on this machine and why not, and the state of "
        "FLASHINFER_ALLOW_EXPERIMENTAL_AUTO_BACKENDS; then the details a bug report needs: "
        "versions, every FLASHINFER and TRITON variable set (with what it does, and unknown "
        "names as likely typos), the OS and CPU, the CUDA runtime and driver, and how "
        "flashinfer was installed.  `--json` follows a versioned schema (schema_version).",
    )
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=_cmd_backends)

    add_autotune_parser(sub)

    p = sub.add_parser(
        "experimental",
        help="experimental APIs and backends with owner, tracking issue and graduation date",
        description="List every experimental API and backend with its lifecycle metadata, "
        "after the state of FLASHINFER_ALLOW_EXPERIMENTAL_AUTO_BACKENDS. "
        "`python -m flashinfer.experimental` is an alias of this command.",
    )
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=_cmd_experimental)

    add_explain_parser(sub)
    add_lifecycle_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``flashinfer`` command with ``argv`` (default ``sys.argv[1:]``); return the
    exit code: 0 success, 1 runtime failure, 2 usage error, 130 interrupted, 141 the output
    was closed early (:data:`EXIT_CLOSED_PIPE`)."""
    out, err = _Output(sys.stdout), _Output(sys.stderr)
    code = _run(argv, cast(TextIO, out), cast(TextIO, err))
    # Output to a pipe is buffered: a reader that left early may show only now.
    out.flush()
    err.flush()
    # Asked of the pipe itself too: a write argparse swallowed (--help), or one made while
    # the stream was unbuffered (PYTHONUNBUFFERED), leaves nothing for the flush to fail on.
    left = out.reader_left or err.reader_left or _closed_pipe(sys.stdout, unknown=False)
    if code == 0 and left:
        return EXIT_CLOSED_PIPE
    return code


def _run(argv: Sequence[str] | None, out: TextIO, err: TextIO) -> int:
    parser = build_parser()
    # argparse prints --help and --version to sys.stdout itself (and, depending on the
    # Python build, swallows or raises a closed pipe's error): let it print through ours.
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = out, err
    try:
        args = parser.parse_args(argv)
    except UsageError as exc:
        (exc.parser or parser).print_usage(err)
        print(f"{PROG}: error: {exc}", file=err)
        return 2
    except SystemExit as exc:  # --help, --version
        return exc.code if isinstance(exc.code, int) else 0
    finally:
        sys.stdout, sys.stderr = saved
    if args.command is None:
        parser.print_help(err)
        return 2
    try:
        return int(args.func(args, out, err))
    except UsageError as exc:
        print(f"{PROG} {args.command}: error: {exc}", file=err)
        return 2
    except KeyboardInterrupt:
        print(f"{PROG} {args.command}: interrupted", file=err)
        return 130
    except Exception as exc:  # a runtime failure: one line, no traceback
        print(f"{PROG} {args.command}: error: {type(exc).__name__}: {exc}", file=err)
        if traceback_asked(err):
            import traceback

            traceback.print_exc(file=err)
        return 1


def traceback_asked(err: TextIO) -> bool:
    """``FLASHINFER_CLI_TRACEBACK=1``; another value (not '0' or empty) is said on stderr, as
    a warning, or as an error under ``FLASHINFER_STRICT_SETTINGS=1`` (the exit status stays
    the failure's)."""
    raw = os.environ.get(TRACEBACK_ENV)
    if raw in (None, "", "0", "1"):
        return raw == "1"
    from flashinfer.settings import SettingsError, refuse_if_strict

    accepted = "'1', '0' or unset"
    try:
        refuse_if_strict(TRACEBACK_ENV, raw, accepted)
    except SettingsError as exc:
        print(f"{PROG}: error: {exc}", file=err)
        return False
    print(
        f"{PROG}: warning: {TRACEBACK_ENV}={raw!r} is not a recognised value; treating it as "
        f"off. Accepted values: {accepted}.",
        file=err,
    )
    return False


TRACEBACK_ENV = "FLASHINFER_CLI_TRACEBACK"


# --------------------------------------------------------------------------------------
# Output closed early (``flashinfer backends --json | head``)
# --------------------------------------------------------------------------------------

EXIT_CLOSED_PIPE = 128 + 13
"""Exit status of a command that succeeded but whose reader closed its output early: 141,
what a shell reports for a program killed by ``SIGPIPE`` (``yes | head``), so that ``set -o
pipefail`` scripts see what they see of any Unix tool.  Nothing is written to stderr."""


def _closed_pipe(stream: Any, unknown: bool = True) -> bool:
    """Whether ``stream`` writes to a pipe whose reader has gone (``poll`` reports an error
    or a hang-up on it); ``unknown`` where that cannot be asked (no ``poll``), ``False`` for
    a stream without a file descriptor."""
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):
        return False
    try:
        import select

        poller = select.poll()
        poller.register(fd, 0)  # errors and hang-ups are reported whatever the mask
        return any(ev & (select.POLLERR | select.POLLHUP) for _, ev in poller.poll(0))
    except (AttributeError, OSError, ValueError):
        return unknown


class _Output:
    """The command's stdout or stderr: once the reader of the pipe behind it has gone, what
    is written is dropped instead of raising ``BrokenPipeError``, so the command finishes
    its work (``autotune`` still saves what it tuned) and ends quietly; ``main`` then
    returns :data:`EXIT_CLOSED_PIPE`.  A ``BrokenPipeError`` of any other pipe is raised."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self.reader_left = False

    def write(self, text: str) -> int:
        if not self.reader_left:
            try:
                return self._stream.write(text)
            except BrokenPipeError as exc:
                self._reader_gone(exc)
        return len(text)

    def flush(self) -> None:
        if not self.reader_left:
            try:
                self._stream.flush()
            except BrokenPipeError as exc:
                self._reader_gone(exc)

    def _reader_gone(self, exc: BrokenPipeError) -> None:
        if not _closed_pipe(self._stream):
            raise exc  # not a reader that left: a failure of its own
        self.reader_left = True
        # What the stream still buffers goes to the null device at exit, quietly (instead
        # of Python's "Exception ignored ... BrokenPipeError").
        null = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(null, self._stream.fileno())
        finally:
            os.close(null)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
