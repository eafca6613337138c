"""The ``experimental-tests`` block of a PR description: finding it, and its targets.

A pull request that changes experimental code declares the tests CI runs for it in one fenced
block of its description, one path under ``tests/experimental/`` per line, ``#`` comments
allowed (see the pull request template).
"""

from __future__ import annotations

from collections.abc import Iterable

from .errors import ScopeError
from .markdown import closes_comment, closes_fence, fence_run, opens_comment, split_lines
from .targets import validate_targets

BODY_ROOT = "tests/experimental/"
BLOCK_INFO = "experimental-tests"
TEMPLATE_HINT = ".github/pull_request_template.md"
#: A pull request that changes a path under one of these must declare its experimental tests.
EXPERIMENTAL_PATHS = ("flashinfer/experimental/", "tests/experimental/")


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
    found: list[tuple[int, list[str] | None]] = []
    fence: str | None = None  # the open fence's marker when inside a fenced block
    current: list[str] | None = None
    start = 0
    in_comment = False
    for number, line in enumerate(split_lines(body), start=1):
        if fence is not None:
            closing = _fence_and_info(line)
            if closing is not None and closes_fence(closing[0], fence) and closing[1] == "":
                if current is not None:
                    found.append((start, current))
                fence, current = None, None
            elif current is not None:
                current.append(line)
            continue
        if in_comment:
            in_comment = not closes_comment(line)
            continue
        opened = opens_comment(line)
        if opened is not None:
            in_comment = opened
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
