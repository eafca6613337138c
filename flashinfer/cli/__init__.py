"""The ``flashinfer`` command (``python -m flashinfer``; docs/cli.rst is rendered from
:func:`build_parser`), e.g. ``flashinfer backends``, or
``flashinfer explain mm --shapes 16x32x2048 [--json]``.  A sub-command's module loads when it
runs, so ``--help`` and ``--version`` import no torch.  Errors are one line on stderr;
``FLASHINFER_CLI_TRACEBACK=1`` adds a runtime failure's traceback.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from collections.abc import Sequence
from typing import Any, TextIO, cast

from flashinfer.cli.common import PROG, UsageError

__all__ = ["EXIT_CLOSED_PIPE", "UsageError", "build_parser", "main"]

EXIT_CLOSED_PIPE = 128 + 13
"""A success whose reader closed the output early: 141, as a shell reports ``SIGPIPE``
(``yes | head``), so ``set -o pipefail`` scripts see what any Unix tool gives."""

TRACEBACK_ENV = "FLASHINFER_CLI_TRACEBACK"


class _Parser(argparse.ArgumentParser):
    """Raises :class:`UsageError` instead of exiting, so ``main`` returns."""

    def error(self, message: str) -> Any:  # type: ignore[override]
        raise UsageError(message, self)


def _listing_parser(sub: Any, name: str, func: str, help: str, description: str) -> None:
    """A listing command: its one option is ``--json``; ``func`` is "module:function",
    imported when it runs."""
    p = sub.add_parser(name, help=help, description=description)
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=func)


def build_parser() -> argparse.ArgumentParser:
    from flashinfer._version import __version__
    from flashinfer.cli.autotune import add_autotune_parser
    from flashinfer.cli.explain import add_explain_parser

    parser = _Parser(
        prog=PROG,
        description="flashinfer: inspect backends, tune kernels, list experimental features, "
        "explain backend choices.",
        epilog="exit status: 0 success, 1 runtime failure, 2 usage error, 130 interrupted, "
        "141 output closed early (e.g. by `| head`; the command finishes its work first)",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    # A sub-command's func is "module:function", imported when it runs.
    _listing_parser(
        sub,
        "backends",
        "flashinfer.cli:_cmd_backends",
        help="every API, its backends, whether each runs here, and the experimental gate",
        description="List every API (stable and experimental), its backends, which are "
        "experimental, whether each can run on this machine and why not, and the state of "
        "FLASHINFER_ALLOW_EXPERIMENTAL_AUTO_BACKENDS; then the details a bug report needs: "
        "versions, every FLASHINFER and TRITON variable set (with what it does, and unknown "
        "names as likely typos), the OS and CPU, the CUDA runtime and driver, and how "
        "flashinfer was installed.  `--json` follows a versioned schema (schema_version).",
    )
    add_autotune_parser(sub)
    _listing_parser(
        sub,
        "experimental",
        "flashinfer.cli:_cmd_experimental",
        help="experimental APIs and backends with owner, tracking issue and graduation date",
        description="List every experimental API and backend with its lifecycle metadata, "
        "after the state of FLASHINFER_ALLOW_EXPERIMENTAL_AUTO_BACKENDS. `python -m "
        "flashinfer.experimental` is an alias of this command.",
    )
    add_explain_parser(sub)
    p = sub.add_parser(
        "lifecycle",
        help="graduate, rename or remove experimental work (prints the plan; --apply edits)",
        description="Take experimental work out of the experimental state in a checkout: "
        "`graduate` a backend (OP:BACKEND) or an API, `rename` either (--to NEW; the old name "
        "stays an alias), or `remove` either (leaving a tombstone).  Prints the planned "
        "change; --apply makes it.  See docs/lifecycle.rst.",
    )
    p.add_argument("action", choices=("graduate", "rename", "remove"), help="the exit")
    p.add_argument(
        "target", help="OP:BACKEND for a backend (mm:splitk), or an API's name (fused_add_rmsnorm)"
    )
    p.add_argument("--to", dest="new_name", metavar="NEW", help="rename: the new name")
    p.add_argument(
        "--instead",
        help="remove: what to use instead (a backend, or an API's qualified name); default for "
        "a backend: the op's first stable backend",
    )
    p.add_argument("--apply", action="store_true", help="make the change in the checkout")
    p.add_argument("--root", help="the checkout to edit (default: this flashinfer's)")
    p.add_argument("--version", help="the release it happens in (default: the checkout's)")
    p.set_defaults(func="flashinfer.cli.lifecycle:cmd_lifecycle")
    return parser


def _cmd_backends(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Never strict about a malformed variable: the report is where bad values are shown."""
    import warnings

    from flashinfer.settings import reporting_only

    with reporting_only(), warnings.catch_warnings():
        # A malformed value's warning would repeat, above the report, what its settings say.
        warnings.filterwarnings("ignore", ".*is not a recognised value", RuntimeWarning)
        from flashinfer.cli.backends import cmd_backends

        return cmd_backends(args, out, err)


def _cmd_experimental(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """``--json``: ``{"gate": ..., "features": [ExperimentalFeature.as_dict(), ...]}``."""
    from flashinfer.api_modules import load_api_modules
    from flashinfer.cli.common import gate_line, gate_state
    from flashinfer.gating.lifecycle import experimental_features, format_listing

    missing = load_api_modules()
    features = experimental_features(load=False)
    if args.json:
        doc = {"gate": gate_state(), "features": [f.as_dict() for f in features]}
        print(json.dumps(doc, indent=2), file=out)
    else:
        print(f"{gate_line(gate_state())}\n\n{format_listing(features)}", file=out)
    for module in missing:
        print(f"note: API module {module} is missing from this build; not listed", file=err)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``flashinfer`` command with ``argv`` (default ``sys.argv[1:]``); return the
    exit status."""
    out, err = _Output(sys.stdout), _Output(sys.stderr)
    code = _run(argv, cast(TextIO, out), cast(TextIO, err))
    # Output to a pipe is buffered: a reader that left early may show only now.
    out.flush()
    err.flush()
    # Asked of the pipe itself too: a write argparse swallowed (--help), or one made while
    # the stream was unbuffered (PYTHONUNBUFFERED), leaves nothing for the flush to fail on.
    left = out.reader_left or err.reader_left or _closed_pipe(sys.stdout, unknown=False)
    return EXIT_CLOSED_PIPE if code == 0 and left else code


def _run(argv: Sequence[str] | None, out: TextIO, err: TextIO) -> int:
    parser = build_parser()
    # argparse prints --help and --version to sys.stdout itself: let it print through ours.
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
        func = args.func
        if isinstance(func, str):  # "module:function", imported when it runs
            module, _, name = func.partition(":")
            func = getattr(importlib.import_module(module), name)
        return int(func(args, out, err))
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
    """``FLASHINFER_CLI_TRACEBACK=1``; a bad value is a warning on stderr (an error under
    ``FLASHINFER_STRICT_SETTINGS=1``; the exit status stays the failure's)."""
    from flashinfer.settings import SettingsError, read

    try:
        return bool(read(TRACEBACK_ENV, report=lambda m: print(f"{PROG}: warning: {m}", file=err)))
    except SettingsError as exc:
        print(f"{PROG}: error: {exc}", file=err)
        return False


def _closed_pipe(stream: Any, unknown: bool = True) -> bool:
    """Whether ``stream``'s pipe reader has gone (``poll``: an error or a hang-up);
    ``unknown`` where that cannot be asked, ``False`` without a file descriptor."""
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
    """A stream that drops what is written once its pipe's reader has gone, so the command
    finishes its work (``autotune`` still saves) and ends quietly."""

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
        # What the stream still buffers goes to the null device at exit, quietly.
        null = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(null, self._stream.fileno())
        finally:
            os.close(null)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
