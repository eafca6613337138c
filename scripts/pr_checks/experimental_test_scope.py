#!/usr/bin/env python3
"""Validate a declared or requested pytest scope for the experimental CI lane.

Standard library only: CI runs this from the base branch before anything of the pull
request is trusted. This script is the command line; its parts live in ``scope/``, one job
per module (the block, the targets, the chunks, the self-test). One definition of a safe
target, two entry points that differ only in their root:

- ``--body-file FILE``: the fenced ``experimental-tests`` block of a PR body; root
  ``tests/experimental/``.
- ``--targets "a b c"``: the arguments of a reviewer's ``@flashinfer-bot run <paths>``;
  root ``tests/``.

A target is a path or a scope, ``conformance:API[:BACKEND]`` (the conformance and overlap
cases of one API or backend that can run on the runner; ``scope/targets.py``).

Output modes: ``--test-path`` (space-separated targets), ``--pytest-args`` (the arguments
that run them, one per line: a scope becomes ``--conformance-scope`` and the conformance
tests), ``--chunks`` (one status
description per line, at most 140 characters, split only between targets) and
``--check-exists ROOT_DIR`` (a target that does not exist collects nothing and passes, so
it is an error). ``--selftest`` runs built-in cases without pytest.

``--changed-files FILE`` (with ``--body-file``; the pull request workflow passes ``git diff
--name-only``): the block is required, and checked, only when a changed path is under
``flashinfer/experimental/`` or ``tests/experimental/``; otherwise the script says so and
exits 0.

Exit codes: 0 valid, 2 invalid input, 1 internal error.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:
    sys.path.insert(0, str(_HERE))

# The parts live in scope/, one job per module; this script is their command line and keeps
# their names importable from it as before.
from scope.block import (  # noqa: E402
    BLOCK_INFO,
    BODY_ROOT,
    EXPERIMENTAL_PATHS,
    TEMPLATE_HINT,
    experimental_changes,
    find_blocks,
    parse_body,
    strip_comments,
)
from scope.errors import (  # noqa: E402
    EXIT_INTERNAL,
    EXIT_INVALID,
    EXIT_OK,
    ScopeError,
    guarded_main,
    read_input,
)
from scope.markdown import fence_run  # noqa: E402
from scope.selftest import selftest  # noqa: E402
from scope.statuses import STATUS_DESCRIPTION_LIMIT, chunk_targets  # noqa: E402
from scope.targets import (  # noqa: E402
    CONFORMANCE_TESTS,
    SCOPE_PREFIX,
    TARGETS_ROOT,
    check_exists,
    parse_targets,
    pytest_arguments,
    split_targets,
    target_problems,
    validate_targets,
)

__all__ = [
    "BLOCK_INFO",
    "BODY_ROOT",
    "CONFORMANCE_TESTS",
    "EXIT_INTERNAL",
    "EXIT_INVALID",
    "EXIT_OK",
    "EXPERIMENTAL_PATHS",
    "SCOPE_PREFIX",
    "STATUS_DESCRIPTION_LIMIT",
    "TARGETS_ROOT",
    "TEMPLATE_HINT",
    "ScopeError",
    "build_parser",
    "check_exists",
    "chunk_targets",
    "experimental_changes",
    "fence_run",
    "find_blocks",
    "guarded_main",
    "main",
    "parse_body",
    "parse_targets",
    "pytest_arguments",
    "run",
    "selftest",
    "split_targets",
    "strip_comments",
    "target_problems",
    "validate_targets",
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--body-file", help=f"PR body; root {BODY_ROOT}")
    source.add_argument("--targets", help=f"space-separated targets; root {TARGETS_ROOT}")
    source.add_argument("--selftest", action="store_true", help="run built-in cases")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--test-path", action="store_true", help="print targets, space-separated")
    mode.add_argument("--chunks", action="store_true", help="print status description chunks")
    mode.add_argument(
        "--pytest-args",
        action="store_true",
        help="print the pytest arguments that run the targets, one per line",
    )
    parser.add_argument(
        "--check-exists",
        metavar="ROOT_DIR",
        help="fail on a target that does not exist under ROOT_DIR (the repository root)",
    )
    parser.add_argument(
        "--changed-files",
        metavar="FILE",
        help="with --body-file: the changed paths, one per line; the block is required only "
        f"when one is under {' or '.join(EXPERIMENTAL_PATHS)}",
    )
    return parser


def run(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` and act; return the exit code (ScopeError means invalid input)."""
    args = build_parser().parse_args(argv)
    if args.selftest:
        failures = selftest()
        for failure in failures:
            print(f"selftest FAILED: {failure}", file=sys.stderr)
        if failures:
            return EXIT_INTERNAL
        print("selftest: all cases pass")
        return EXIT_OK
    if args.changed_files is not None:
        if args.body_file is None:
            raise ScopeError(["--changed-files goes with --body-file (the PR description)"])
        changed = read_input(args.changed_files, "--changed-files").splitlines()
        touched = experimental_changes(changed)
        if not touched:
            print(
                f"no change under {' or '.join(EXPERIMENTAL_PATHS)}: the "
                f"```{BLOCK_INFO} block is not required"
            )
            return EXIT_OK
        shown = ", ".join(touched[:3]) + (
            f" and {len(touched) - 3} more" if len(touched) > 3 else ""
        )
        print(
            f"experimental code changed ({shown}): checking the ```{BLOCK_INFO} block",
            file=sys.stderr,
        )
    if args.body_file is not None:
        root = BODY_ROOT
        targets = parse_body(read_input(args.body_file, "--body-file"), root)
    else:
        root = TARGETS_ROOT
        targets = parse_targets(args.targets, root)
    chunks = chunk_targets(targets) if args.chunks else None
    if args.check_exists is not None:
        check_exists(targets, args.check_exists, root)
    if chunks is not None:
        print("\n".join(chunks))
    elif args.pytest_args:
        print("\n".join(pytest_arguments(targets)))
    else:
        print(" ".join(targets))
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    return guarded_main(run, argv, "experimental_test_scope.py")


if __name__ == "__main__":
    sys.exit(main())
