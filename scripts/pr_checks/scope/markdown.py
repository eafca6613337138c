"""The Markdown structure the scope tools read a PR description or comment through.

Lines (whatever their newlines), fence lines and HTML comments: what decides whether a line is
live text or inside something that renders it inert.  String operations, not regular
expressions: linear in the text's length whatever it holds (a fence regex that backtracked
took a minute on a 3 kB line).  Each reader applies its own rules to what follows a fence's
marker (``block`` for the ``experimental-tests`` block, ``comment`` for the bot's command).
"""

from __future__ import annotations


def split_lines(text: str) -> list[str]:
    """``text``'s lines without their newlines, whichever kind (CRLF from some clients, CR)."""
    return text.replace("\r\n", "\n").replace("\r", "\n").split("\n")


def fence_run(line: str) -> tuple[str, str] | None:
    """Split a Markdown fence line (one line, no newline) into its marker and what follows.

    ``(marker, rest)`` when ``line`` is at most three spaces, then a run of three or more
    backticks or tildes (``marker`` is the whole run); None when it is not a fence line.
    """
    text = line.lstrip(" ")
    if len(line) - len(text) > 3 or text[:1] not in ("`", "~"):
        return None
    run = len(text) - len(text.lstrip(text[0]))
    if run < 3:
        return None
    return text[:run], text[run:]


def closes_fence(marker: str, fence: str) -> bool:
    """Whether a fence line's ``marker`` can close the block ``fence`` opened: the same
    character, at least as many of it (the reader checks what follows the marker)."""
    return marker[0] == fence[0] and len(marker) >= len(fence)


def opens_comment(line: str) -> bool | None:
    """None when ``line`` does not begin an HTML comment; else whether the comment is still
    open after it (True) or ends on the same line (False)."""
    stripped = line.lstrip(" ")
    if not stripped.startswith("<!--"):
        return None
    return "-->" not in stripped[4:]


def closes_comment(line: str) -> bool:
    """Whether ``line``, inside an HTML comment, ends it."""
    return "-->" in line
