"""The ``flashinfer`` command (console script ``flashinfer``, or ``python -m flashinfer``).

Sub-commands::

    flashinfer backends [--json]        environment report: versions, devices, the gate, and
                                        every API's backends, what runs here and why not
    flashinfer autotune --op mm --shapes 128x4096x4096,64x256x512 --cache tuned.json \\
        [--dtype float32|float16|bfloat16] [--device cpu|cuda] [--force]
    flashinfer experimental [--json]    experimental APIs and backends with lifecycle data
                                        (``python -m flashinfer.experimental`` is an alias)
    flashinfer explain mm --shapes 16x2048x32 [--dtype ...] [--device ...] [--cache F] [--json]
                                        what backend='auto' would pick for each shape, and why

Exit codes: ``0`` success, ``1`` a runtime failure (a kernel or the cache file failed),
``2`` a usage error (unknown command, op or dtype, malformed shape, CUDA asked for on a
machine without it, an unusable ``--cache``), ``130`` interrupted (``autotune`` saves the
shapes already tuned first).  Errors are one line on stderr, starting ``flashinfer: error:`` (or
``flashinfer <command>: error:``); ``FLASHINFER_CLI_TRACEBACK=1`` adds the traceback of a
runtime failure.

``autotune`` loads the cache file first (keys already in it are not timed again; ``--force``
re-times them), tunes each shape inside :func:`flashinfer.autotuner.autotune` with a
plain-text progress bar on stderr, then saves (merging with the file, atomically) and prints
one row per shape: the picked backend, tactic and median time, whether it was timed now, and
how many (backend, tactic) pairs failed, each listed below the table with its reason.  A run
that only reused keys already in the file writes nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from typing import Any, TextIO

from flashinfer.cli.autotune import add_autotune_parser
from flashinfer.cli.backends import _cmd_backends
from flashinfer.cli.common import PROG, UsageError, _gate_line, _gate_state
from flashinfer.cli.explain import add_explain_parser

__all__ = ["UsageError", "build_parser", "main"]


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
    from flashinfer.gating.lifecycle import experimental_features, format_listing

    missing = load_api_modules()
    features = experimental_features(load=False)
    gate = _gate_state()
    if args.json:
        doc = {"gate": gate, "features": [f.as_dict() for f in features]}
        print(json.dumps(doc, indent=2), file=out)
    else:
        print(_gate_line(gate), file=out)
        print(file=out)
        print(format_listing(features), file=out)
    for module in missing:
        print(f"note: API module {module} is missing from this build; not listed", file=err)
    return 0


# --------------------------------------------------------------------------------------
# The parser and main
# --------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    """The ``flashinfer`` argument parser."""
    from flashinfer._version import __version__

    parser = _Parser(
        prog=PROG,
        description="flashinfer: inspect backends, tune kernels, list experimental features, "
        "explain backend choices.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser(
        "backends",
        help="every API, its backends, whether each runs here, and the experimental gate",
        description="List every API (stable and experimental), its backends, which are "
        "experimental, whether each can run on this machine and why not, and the state of "
        "FLASHINFER_ALLOW_EXPERIMENTAL_AUTO_BACKENDS.",
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
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``flashinfer`` command with ``argv`` (default ``sys.argv[1:]``); return the
    exit code: 0 success, 1 runtime failure, 2 usage error."""
    out, err = sys.stdout, sys.stderr
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except UsageError as exc:
        (exc.parser or parser).print_usage(err)
        print(f"{PROG}: error: {exc}", file=err)
        return 2
    except SystemExit as exc:  # --help, --version
        return exc.code if isinstance(exc.code, int) else 0
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
        if os.environ.get("FLASHINFER_CLI_TRACEBACK") == "1":
            import traceback

            traceback.print_exc(file=err)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
