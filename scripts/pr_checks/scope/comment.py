"""A ``@flashinfer-bot run`` comment: the command lines in it, and the decision they ask for.

A reviewer's comment either holds no command, a bare ``run`` (the default lanes), or ``run``
followed by test paths under ``tests/`` (those targets too).  Anything else is rejected with a
reply saying why; an unscoped run is never substituted for a rejected scope.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from .errors import ScopeError
from .markdown import closes_comment, closes_fence, fence_run, opens_comment, split_lines
from .statuses import chunk_targets
from .targets import TARGETS_ROOT, check_exists, parse_targets

BOT_HANDLE = "@flashinfer-bot"
ROOT = TARGETS_ROOT

# Every regular expression here reads untrusted text, so each must run in linear time however
# it is called (tests/pr_checks/test_regex_linear_time.py lists and attacks each one). Fence
# lines are split by fence_run (markdown.py), without a regex.
# A command line: up to three spaces of indent (four would be a Markdown code block), the
# handle (GitHub logins are case-insensitive), whitespace, then the word ``run``.
_COMMAND_RE = re.compile(
    r"^ {0,3}(?i:@flashinfer-bot)[ \t]+run(?![A-Za-z0-9_-])(?P<rest>.*)$", re.DOTALL
)
_QUOTE_RE = re.compile(r"^ {0,3}>")


# --------------------------------------------------------------------------------------------
# Parsing a comment


@dataclass(frozen=True)
class Command:
    """One ``@flashinfer-bot run`` line: its 1-based line number and the text after ``run``."""

    line: int
    args: str


def find_commands(body: str) -> list[Command]:
    """Every line of ``body`` that is a ``@flashinfer-bot run`` command.

    Only a line that begins with the command counts, and not inside a fenced code block, a
    blockquote (lazy continuation lines included) or an HTML comment. Inline code spans
    never start a line with the handle, so mentioning the command in backticks is inert.
    """
    commands: list[Command] = []
    fence: str | None = None
    in_comment = False
    in_quote = False
    for number, line in enumerate(split_lines(body), start=1):
        if fence is not None:
            closing = fence_run(line)
            if closing and closes_fence(closing[0], fence) and not closing[1].strip():
                fence = None
            continue
        if in_comment:
            in_comment = not closes_comment(line)
            continue
        if not line.strip():
            in_quote = False
            continue
        if _QUOTE_RE.match(line):
            in_quote = True
            continue
        opening = fence_run(line)
        if opening and not (opening[0][0] == "`" and "`" in opening[1]):
            fence = opening[0]
            in_quote = False
            continue
        if in_quote:  # a lazy continuation line renders inside the quote
            continue
        opened = opens_comment(line)
        if opened is not None:
            in_comment = opened
            continue
        m = _COMMAND_RE.match(line)
        if m:
            commands.append(Command(number, m.group("rest").strip()))
    return commands


def looks_like_paths(args: str) -> bool:
    """Whether the text after ``run`` was meant as test paths (affects only the message)."""
    return "tests/" in args or "/" in args or ".py" in args


# --------------------------------------------------------------------------------------------
# Deciding


@dataclass(frozen=True)
class Decision:
    """What to do about one comment."""

    action: str  # "none" | "run-default" | "run-scoped" | "reject"
    targets: tuple[str, ...] = ()
    chunks: tuple[str, ...] = ()
    message: str = ""
    errors: tuple[str, ...] = field(default=())

    @property
    def test_path(self) -> str:
        return " ".join(self.targets)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["targets"] = list(self.targets)
        data["chunks"] = list(self.chunks)
        data["errors"] = list(self.errors)
        data["test_path"] = self.test_path
        return data


def _code_block(text: str) -> str:
    """``text`` in a fenced block longer than any backtick run inside it (no mentions ping,
    and a reply quoting a command never parses as one)."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}text\n{text}\n{fence}"


def _reject(errors: Sequence[str], headline: str) -> Decision:
    message = (
        f"{headline}\n\nNo CI run was started; an unscoped run is never substituted for a "
        f"rejected scope.\n\n{_code_block(chr(10).join(errors))}\n\n"
        f"Usage: a line beginning with `{BOT_HANDLE} run` alone runs the default lanes; "
        f"`{BOT_HANDLE} run tests/path/test_x.py tests/other/` runs those targets (bare "
        f"paths under `{ROOT}`, separated by spaces, no backticks or quotes)."
    )
    return Decision("reject", message=message, errors=tuple(errors))


def decide(body: str, check_exists_root: str | None = None) -> Decision:
    """Decide what a PR comment asks for. Never falls back to an unscoped run."""
    commands = find_commands(body)
    if not commands:
        return Decision("none")
    distinct = {c.args for c in commands}
    if len(distinct) > 1:
        where = ", ".join(str(c.line) for c in commands)
        return _reject(
            [f"{len(commands)} different `{BOT_HANDLE} run` lines (lines {where})"],
            f"Rejected: this comment holds more than one `{BOT_HANDLE} run` command; post "
            "exactly one.",
        )
    args = commands[0].args
    if not args:
        return Decision(
            "run-default",
            message="Running the default lanes; any earlier test scope on this commit is cleared.",
        )
    try:
        targets = parse_targets(args, ROOT)
        chunks = chunk_targets(targets)
        if check_exists_root is not None:
            check_exists(targets, check_exists_root, ROOT)
    except ScopeError as exc:
        if looks_like_paths(args):
            headline = f"Rejected `{BOT_HANDLE} run <paths>`: the scope does not validate."
        else:
            headline = (
                f"Rejected: `{BOT_HANDLE} run` takes nothing (the default lanes) or test "
                f"paths under `{ROOT}`; the text after `run` is not a path."
            )
        return _reject(exc.errors, headline)
    listing = _code_block("\n".join(targets))
    return Decision(
        "run-scoped",
        targets=tuple(targets),
        chunks=tuple(chunks),
        message=f"Running the default lanes plus a targeted lane for:\n\n{listing}",
    )
