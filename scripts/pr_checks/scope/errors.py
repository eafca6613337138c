"""Invalid input, and the exit codes the scope tools report it with.

The scope tools read untrusted text (a PR description, a comment, commit statuses).  A problem
with it is a :class:`ScopeError`: exit 2, one ``error:`` line per problem.  Anything else is a
bug in the script: exit 1, with its traceback.  :func:`guarded_main` maps a run so, and
:func:`read_input` makes an unreadable input file invalid input.
"""

from __future__ import annotations

import sys
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path

EXIT_OK = 0
EXIT_INTERNAL = 1
EXIT_INVALID = 2


class ScopeError(ValueError):
    """Invalid input. ``errors`` holds one message per problem found."""

    def __init__(self, errors: Sequence[str]) -> None:
        self.errors = list(errors)
        super().__init__("\n".join(self.errors))


def read_input(path: str, what: str) -> str:
    """The text of the file ``path``, given as the option ``what``; unreadable is invalid."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ScopeError([f"cannot read {what} {path!r}: {exc}"]) from exc


def guarded_main(
    run: Callable[[Sequence[str] | None], int], argv: Sequence[str] | None, script: str
) -> int:
    """``run(argv)``'s exit code, with failures mapped to exit codes.

    A ScopeError is invalid input (its errors on stderr, exit 2); so is an argparse usage
    error.  Anything else is a bug in ``script``: traceback, exit 1.
    """
    try:
        return run(argv)
    except ScopeError as exc:
        for error in exc.errors:
            print(f"error: {error}", file=sys.stderr)
        return EXIT_INVALID
    except SystemExit as exc:  # argparse: usage errors are invalid input (exit 2)
        return exc.code if isinstance(exc.code, int) else EXIT_INVALID
    except Exception:  # noqa: BLE001 - anything else is a bug in the script
        traceback.print_exc()
        print(f"error: internal error in {script}", file=sys.stderr)
        return EXIT_INTERNAL
