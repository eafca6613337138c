#!/usr/bin/env python3
"""The ``@flashinfer-bot run`` command and the test scope it publishes. Standard library only.

Pure functions, and a small CLI so the workflows hold no logic:

- ``decide --comment-file F [--check-exists DIR] [--github-output FILE]``: parse a PR comment
  and decide. Prints the decision as JSON; writes ``action``, ``test_path`` and
  ``message_file`` outputs. Actions: ``none`` (not a command), ``run-default`` (bare
  command: default lanes, earlier scope cleared), ``run-scoped`` (valid paths: publish the
  scope), ``reject`` (anything else: say why, start nothing; never an unscoped run).
- ``plan --decision-file F (--prev-max N | --statuses-file S) [--generation URL]``: the
  commit statuses ``ci/test-scope-N`` to write, chunks first, then blanks for stale chunks.
- ``read --statuses-file S [--creator LOGIN] [--github-output FILE]``: reassemble the scope
  published on a commit (N sorted numerically), validated again.
- ``results --needs JSON``: the final verdict of pr-test.yml; a published scope whose lane
  did not succeed fails it.

Exit codes: 0 done (a rejected command is a decision, not a failure of this script),
2 invalid input, 1 internal error.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:
    sys.path.insert(0, str(_HERE))

import experimental_test_scope as scope  # noqa: E402

# The exit codes and their meaning are the scope validator's (see scope.guarded_main).
EXIT_OK, EXIT_INTERNAL, EXIT_INVALID = scope.EXIT_OK, scope.EXIT_INTERNAL, scope.EXIT_INVALID

BOT_HANDLE = "@flashinfer-bot"
ROOT = scope.TARGETS_ROOT
CONTEXT_PREFIX = "ci/test-scope-"
STATUS_STATE = "success"

# Every regular expression here reads untrusted text, so each must run in linear time however
# it is called (tests/pr_checks/test_regex_linear_time.py lists and attacks each one). Fence
# lines are split by scope.fence_run, without a regex.
# A command line: up to three spaces of indent (four would be a Markdown code block), the
# handle (GitHub logins are case-insensitive), whitespace, then the word ``run``.
_COMMAND_RE = re.compile(
    r"^ {0,3}(?i:@flashinfer-bot)[ \t]+run(?![A-Za-z0-9_-])(?P<rest>.*)$", re.DOTALL
)
_QUOTE_RE = re.compile(r"^ {0,3}>")
# N has at most MAX_SCOPE_DIGITS digits: a larger one is no status of ours (and blanking up to
# it would write that many statuses). fullmatch: no trailing newline slips through "$".
MAX_SCOPE_DIGITS = 4
_CONTEXT_RE = re.compile(r"ci/test-scope-([1-9][0-9]{0,3})")


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
    lines = body.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    commands: list[Command] = []
    fence: str | None = None
    in_comment = False
    in_quote = False
    for number, line in enumerate(lines, start=1):
        if fence is not None:
            closing = scope.fence_run(line)
            if closing and closing[0][0] == fence[0] and len(closing[0]) >= len(fence):
                if not closing[1].strip():
                    fence = None
            continue
        if in_comment:
            if "-->" in line:
                in_comment = False
            continue
        if not line.strip():
            in_quote = False
            continue
        if _QUOTE_RE.match(line):
            in_quote = True
            continue
        opening = scope.fence_run(line)
        if opening and not (opening[0][0] == "`" and "`" in opening[1]):
            fence = opening[0]
            in_quote = False
            continue
        if in_quote:  # a lazy continuation line renders inside the quote
            continue
        stripped = line.lstrip(" ")
        if stripped.startswith("<!--"):
            in_comment = "-->" not in stripped[4:]
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
        targets = scope.parse_targets(args, ROOT)
        chunks = scope.chunk_targets(targets)
        if check_exists_root is not None:
            scope.check_exists(targets, check_exists_root, ROOT)
    except scope.ScopeError as exc:
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


# --------------------------------------------------------------------------------------------
# Publishing the scope as commit statuses


def publish_plan(
    chunks: Sequence[str], prev_max: int, generation: str | None = None
) -> list[dict[str, str]]:
    """Statuses to write, in order: ``ci/test-scope-1..len(chunks)`` carrying the chunks,
    then blank descriptions for ``len(chunks)+1..prev_max`` (statuses cannot be deleted, so
    a shrinking scope would otherwise keep stale trailing chunks). ``generation`` (the
    comment's URL) goes into every ``target_url`` so a half-written scope is detectable."""
    if prev_max < 0:
        raise ValueError("prev_max must be >= 0")
    plan = []
    for n, description in enumerate(chunks, start=1):
        plan.append({"context": f"{CONTEXT_PREFIX}{n}", "description": description})
    for n in range(len(chunks) + 1, prev_max + 1):
        plan.append({"context": f"{CONTEXT_PREFIX}{n}", "description": ""})
    for status in plan:
        status["state"] = STATUS_STATE
        if generation:
            status["target_url"] = generation
    return plan


def load_statuses(text: str) -> list[dict[str, Any]]:
    """Statuses from GitHub's API output: a list, ``{"statuses": [...]}`` (combined status),
    several JSON documents back to back (``gh api --paginate``) or a list of pages."""
    decoder = json.JSONDecoder()
    values: list[Any] = []
    index = 0
    text = text.strip()
    while index < len(text):
        try:
            value, index = decoder.raw_decode(text, index)
        except RecursionError:  # nesting deeper than the interpreter's stack
            raise scope.ScopeError(["statuses: JSON nested too deeply"]) from None
        values.append(value)
        while index < len(text) and text[index].isspace():
            index += 1
    statuses: list[dict[str, Any]] = []
    # An explicit stack, not recursion: the depth of untrusted input must not matter.
    pending: list[Any] = [values]
    while pending:
        value = pending.pop()
        if isinstance(value, list):
            pending.extend(reversed(value))
        elif isinstance(value, dict) and "statuses" in value and "context" not in value:
            pending.append(value["statuses"])
        elif isinstance(value, dict):
            statuses.append(value)
        else:
            raise scope.ScopeError([f"unexpected value in statuses: {value!r}"])
    return statuses


def latest_by_context(statuses: Iterable[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    """The newest status per context: highest ``id`` when present, else the first seen
    (the API lists newest first)."""
    latest: dict[str, Mapping[str, Any]] = {}
    for status in statuses:
        context = status.get("context")
        if not isinstance(context, str):
            continue
        old = latest.get(context)
        if old is None:
            latest[context] = status
        elif isinstance(status.get("id"), int) and isinstance(old.get("id"), int):
            if status["id"] > old["id"]:
                latest[context] = status
    return latest


def scope_statuses(
    statuses: Iterable[Mapping[str, Any]], creator: str | None = None
) -> dict[int, Mapping[str, Any]]:
    """The latest ``ci/test-scope-N`` statuses by N (optionally only those ``creator`` set)."""
    if creator is not None:
        statuses = [s for s in statuses if ((s.get("creator") or {}).get("login") or "") == creator]
    result: dict[int, Mapping[str, Any]] = {}
    for context, status in latest_by_context(statuses).items():
        m = _CONTEXT_RE.fullmatch(context)
        if m:
            result[int(m.group(1))] = status
    return result


def max_scope_index(statuses: Iterable[Mapping[str, Any]], creator: str | None = None) -> int:
    """The highest N of any ``ci/test-scope-N`` on the commit (0 when none): what to blank."""
    return max(scope_statuses(statuses, creator), default=0)


@dataclass(frozen=True)
class Scope:
    targets: tuple[str, ...]
    chunks: tuple[str, ...]
    max_index: int

    @property
    def scoped(self) -> bool:
        return bool(self.targets)

    @property
    def test_path(self) -> str:
        return " ".join(self.targets)


def read_scope(statuses: Iterable[Mapping[str, Any]], creator: str | None = None) -> Scope:
    """Reassemble the published scope: chunks sorted by N numerically (10 after 9), blank
    trailing chunks dropped, targets validated again. Raises ScopeError when the statuses
    are inconsistent (a non-blank chunk after a blank one, or chunks from different
    commands), so a half-published scope fails loudly instead of running something else."""
    by_index = scope_statuses(statuses, creator)
    chunks: list[str] = []
    errors: list[str] = []
    generation: object = None
    blank_at: int | None = None
    for n in sorted(by_index):
        status = by_index[n]
        description = (status.get("description") or "").strip()
        if not description:
            if blank_at is None:
                blank_at = n
            continue
        if blank_at is not None:
            errors.append(
                f"{CONTEXT_PREFIX}{n} is set but {CONTEXT_PREFIX}{blank_at} is blank "
                "(a scope was half published); post the command again"
            )
            continue
        if n != len(chunks) + 1:
            errors.append(f"{CONTEXT_PREFIX}{len(chunks) + 1} is missing before {n}")
            continue
        url = status.get("target_url") or None
        if not chunks:
            generation = url
        elif url != generation:
            errors.append(
                f"{CONTEXT_PREFIX}{n} comes from a different command than "
                f"{CONTEXT_PREFIX}1 (a scope was half published); post the command again"
            )
            continue
        chunks.append(description)
    if errors:
        raise scope.ScopeError(errors)
    if not chunks:
        return Scope((), (), max(by_index, default=0))
    targets = scope.validate_targets(scope.split_targets(" ".join(chunks)), ROOT)
    return Scope(tuple(targets), tuple(chunks), max(by_index))


# --------------------------------------------------------------------------------------------
# The verdict of pr-test.yml


def check_results(needs: Mapping[str, Any], scope_job: str = "scope") -> list[str]:
    """Problems with the lanes' results (``toJSON(needs)``): every lane must succeed; only
    the targeted lane may be skipped, and only when no scope was published."""
    problems = []
    scope_info = needs.get(scope_job)
    if scope_info is None:
        return [f"job {scope_job!r} is missing from needs"]
    scoped = (scope_info.get("outputs") or {}).get("scoped") == "true"
    for job, info in needs.items():
        result = info.get("result")
        if job.startswith("targeted") and result == "skipped" and not scoped:
            continue
        if result != "success":
            extra = " although a test scope was published" if job.startswith("targeted") else ""
            problems.append(f"job {job!r} result is {result!r}{extra}")
    if scoped and not any(job.startswith("targeted") for job in needs):
        problems.append("a test scope was published but no targeted lane is in needs")
    return problems


# --------------------------------------------------------------------------------------------
# CLI


def _write_outputs(path: str | None, values: Mapping[str, str]) -> None:
    if path is None:
        return
    with open(path, "a", encoding="utf-8") as out:
        for key, value in values.items():
            if "\n" in value or "\r" in value:
                raise ValueError(f"output {key} contains a newline")
            out.write(f"{key}={value}\n")


def _read_text(path: str, what: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise scope.ScopeError([f"cannot read {what} {path!r}: {exc}"]) from exc


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)

    p = sub.add_parser("decide", help="parse a comment and decide")
    p.add_argument("--comment-file", required=True)
    p.add_argument("--check-exists", metavar="ROOT_DIR")
    p.add_argument("--decision-out", help="also write the decision JSON here")
    p.add_argument("--message-out", help="write the reply message here")
    p.add_argument("--github-output")

    p = sub.add_parser("plan", help="statuses to write for a decision")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--decision-file")
    src.add_argument("--chunks-file", help="one chunk per line (empty file: clear the scope)")
    prev = p.add_mutually_exclusive_group(required=True)
    prev.add_argument("--prev-max", type=int)
    prev.add_argument("--statuses-file")
    p.add_argument("--creator")
    p.add_argument("--generation", help="the comment URL, stored as each target_url")
    p.add_argument("--format", choices=("json", "tsv"), default="json")

    p = sub.add_parser("read", help="reassemble the scope published on a commit")
    p.add_argument("--statuses-file", required=True)
    p.add_argument("--creator")
    p.add_argument("--github-output")

    p = sub.add_parser("results", help="verdict over toJSON(needs)")
    p.add_argument("--needs", required=True, help="JSON")
    p.add_argument("--scope-job", default="scope")
    return parser


def run(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.cmd == "decide":
        decision = decide(_read_text(args.comment_file, "--comment-file"), args.check_exists)
        data = decision.to_json()
        print(json.dumps(data, indent=2))
        if args.decision_out:
            Path(args.decision_out).write_text(json.dumps(data), encoding="utf-8")
        if args.message_out:
            Path(args.message_out).write_text(decision.message + "\n", encoding="utf-8")
        _write_outputs(
            args.github_output, {"action": decision.action, "test_path": decision.test_path}
        )
        return EXIT_OK
    if args.cmd == "plan":
        if args.decision_file:
            data = json.loads(_read_text(args.decision_file, "--decision-file"))
            if data.get("action") not in ("run-default", "run-scoped"):
                raise scope.ScopeError([f"nothing to publish for action {data.get('action')!r}"])
            chunks = [str(c) for c in data.get("chunks", [])]
            if data["action"] == "run-scoped":
                # Validate again: the file passed through the workflow's hands.
                targets = scope.validate_targets(scope.split_targets(" ".join(chunks)), ROOT)
                chunks = scope.chunk_targets(targets)
            else:
                chunks = []
        else:
            text = _read_text(args.chunks_file, "--chunks-file")
            lines = [line for line in text.splitlines() if line.strip()]
            chunks = (
                scope.chunk_targets(
                    scope.validate_targets(scope.split_targets(" ".join(lines)), ROOT)
                )
                if lines
                else []
            )
        if args.statuses_file:
            statuses = load_statuses(_read_text(args.statuses_file, "--statuses-file"))
            prev_max = max_scope_index(statuses, args.creator)
        else:
            prev_max = args.prev_max
            if prev_max < 0:
                raise scope.ScopeError(["--prev-max must be >= 0"])
        plan = publish_plan(chunks, prev_max, args.generation)
        if args.format == "json":
            print(json.dumps(plan, indent=2))
        else:
            for status in plan:
                print(f"{status['context']}\t{status['description']}")
        return EXIT_OK
    if args.cmd == "read":
        statuses = load_statuses(_read_text(args.statuses_file, "--statuses-file"))
        found = read_scope(statuses, args.creator)
        print(
            json.dumps(
                {
                    "scoped": found.scoped,
                    "targets": list(found.targets),
                    "test_path": found.test_path,
                    "chunks": list(found.chunks),
                    "max_index": found.max_index,
                },
                indent=2,
            )
        )
        _write_outputs(
            args.github_output,
            {"scoped": "true" if found.scoped else "false", "test_path": found.test_path},
        )
        return EXIT_OK
    if args.cmd == "results":
        try:
            needs = json.loads(args.needs)
        except json.JSONDecodeError as exc:
            raise scope.ScopeError([f"--needs is not JSON: {exc}"]) from exc
        problems = check_results(needs, args.scope_job)
        for problem in problems:
            print(f"error: {problem}", file=sys.stderr)
        if problems:
            return EXIT_INVALID
        print("all lanes passed")
        return EXIT_OK
    raise AssertionError(args.cmd)


def main(argv: Sequence[str] | None = None) -> int:
    return scope.guarded_main(run, argv, "bot_command.py")


if __name__ == "__main__":
    sys.exit(main())
