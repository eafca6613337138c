"""Every regular expression that reads untrusted text runs in linear time.

The checks in ``scripts/pr_checks/`` read PR bodies, comments and commit statuses; the package
reads tuning files, environment variables and command lines.  A backtracking regex there is a
denial of service: the PR-body validator's old fence regex took a minute on a 3 kB body.

Three layers, none timing small differences (a generous bound on a large adversarial input):

- the inventory: every regex in ``scripts/pr_checks/`` and ``flashinfer/`` must be listed in
  :data:`REVIEWED`, so a new one fails here until someone has looked at its worst case;
- each reviewed regex, under every way it can be called, on 100 kB inputs built from the
  prefixes that reach its loops followed by long runs of every structural character;
- each parser entry point on hand-written 100 kB attacks (the reported one among them),
  plus properties that the string-based fence parsing agrees with the regexes it replaced.
"""

from __future__ import annotations

import ast
import contextlib
import importlib
import re
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from . import REPO, load_script, run_script

ets = load_script("experimental_test_scope")
bot = load_script("bot_command")
inventory = load_script("api_inventory")
# The scripts' parts in scope/, which loading the scripts imported.
scope_block = importlib.import_module("scope.block")
scope_comment = importlib.import_module("scope.comment")
scope_targets = importlib.import_module("scope.targets")

#: Size of every adversarial input; a quadratic parser needs minutes on it, a cubic one years.
SIZE = 100_000
#: Generous: a linear parser needs milliseconds for SIZE characters.
BOUND_S = 2.0

#: Folders whose regular expressions may read untrusted text.
INVENTORIED = ("scripts/pr_checks", "flashinfer")


# --------------------------------------------------------------------------------------------
# A bound that interrupts: a super-linear regex on SIZE characters would otherwise run for
# hours.  CPython's regex engine checks for signals while it matches, so SIGALRM stops it.


class _Overran(BaseException):
    """Raised by the alarm; a BaseException so that ``except Exception`` cannot swallow it."""


def _can_alarm() -> bool:
    return hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()


@contextlib.contextmanager
def finishes_within(seconds: float, what: str) -> Iterator[None]:
    """Fail the test when the block is still running after ``seconds``."""
    message = (
        f"{what}: still running after {seconds} s; some parsing in it is super-linear "
        "(a backtracking regular expression?)"
    )
    if not _can_alarm():
        start = time.perf_counter()
        yield
        assert time.perf_counter() - start < seconds, message
        return

    def on_alarm(signum: int, frame: object) -> None:
        raise _Overran

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    except _Overran:
        pytest.fail(message, pytrace=False)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def test_the_bound_interrupts_a_backtracking_regex() -> None:
    """The harness catches what it is for: the old fence regex on the reported line shape."""
    old_fence = re.compile(r"^( {0,3})(`{3,}|~{3,})[ \t]*([^`]*?)[ \t]*$")
    with pytest.raises(pytest.fail.Exception, match="super-linear"):
        with finishes_within(0.3, "the old fence regex"):
            old_fence.match("```" + " " * SIZE + "`")


# --------------------------------------------------------------------------------------------
# The inventory


_RE_FUNCTIONS = {
    "compile": 1,
    "match": 2,
    "search": 2,
    "fullmatch": 2,
    "findall": 2,
    "finditer": 2,
    "split": 3,
    "sub": 4,
    "subn": 4,
}  # function -> position of its ``flags`` argument


@dataclass(frozen=True)
class RegexUse:
    where: str  # "path:line"
    pattern: str
    flags: int


def _flags_value(node: ast.expr) -> int:
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return node.value
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        if node.value.id == "re" and isinstance(getattr(re, node.attr, None), int):
            return int(getattr(re, node.attr))
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _flags_value(node.left) | _flags_value(node.right)
    raise ValueError(ast.unparse(node))


def regex_uses(source: str, path: str) -> tuple[list[RegexUse], list[str]]:
    """The regexes ``source`` builds with ``re.<function>(literal, ...)``, and problems: any
    regex this scan cannot see (another import form, another engine, a pattern that is not a
    literal), each of which would escape review."""
    uses: list[RegexUse] = []
    problems: list[str] = []
    for node in ast.walk(ast.parse(source, path)):
        where = f"{path}:{getattr(node, 'lineno', '?')}"
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "re" and alias.asname:
                    problems.append(f"{where}: 'import re as {alias.asname}'; write 'import re'")
                elif alias.name in ("regex", "sre_compile", "sre_parse", "fnmatch"):
                    problems.append(f"{where}: imports {alias.name} (its patterns escape review)")
        elif isinstance(node, ast.ImportFrom) and node.module in ("re", "regex", "fnmatch"):
            problems.append(f"{where}: 'from {node.module} import ...'; write 'import re'")
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "re"
            and node.func.attr in _RE_FUNCTIONS
        ):
            first = node.args[0] if node.args else None
            if not (isinstance(first, ast.Constant) and isinstance(first.value, str)):
                problems.append(
                    f"{where}: re.{node.func.attr} with a pattern that is not a string literal "
                    "(it cannot be reviewed; build it from literals at module level)"
                )
                continue
            flag_nodes = [kw.value for kw in node.keywords if kw.arg == "flags"]
            position = _RE_FUNCTIONS[node.func.attr]
            flag_nodes += node.args[position : position + 1]
            try:
                flags = _flags_value(flag_nodes[0]) if flag_nodes else 0
            except ValueError as exc:
                problems.append(f"{where}: flags {exc} are not re.* constants")
                continue
            uses.append(RegexUse(where, first.value, flags))
    return uses, problems


def repository_regexes() -> tuple[list[RegexUse], list[str]]:
    uses: list[RegexUse] = []
    problems: list[str] = []
    for folder in INVENTORIED:
        for path in sorted((REPO / folder).rglob("*.py")):
            found, wrong = regex_uses(path.read_text(encoding="utf-8"), str(path.relative_to(REPO)))
            uses += found
            problems += wrong
    return uses, problems


@dataclass(frozen=True)
class Reviewed:
    """A regex someone checked for linear time, and the prefixes that lead into its loops
    (the battery appends long runs of every structural character to each)."""

    flags: int
    prefixes: tuple[str, ...]
    why: str


#: Every regex in the INVENTORIED folders, by (pattern, flags).  Adding one: convince yourself
#: that no two of its quantifiers can split the same run of characters between them (that is
#: what backtracks), or parse without a regex; then list it here with the prefixes that reach
#: its quantifiers.  Possessive quantifiers and atomic groups need Python 3.11; we support 3.10.
REVIEWED: dict[tuple[str, int], Reviewed] = {
    (r"[A-Za-z_][A-Za-z0-9_]*", 0): Reviewed(
        0, ("", "a", "_"), "one class loop, nothing after it to backtrack into"
    ),
    (r"[A-Za-z][A-Za-z0-9_-]*", 0): Reviewed(
        0, ("", "a", "a-"), "one class loop after one class, nothing after it to backtrack into"
    ),
    (r"[ \t\r\n\f\v]+", 0): Reviewed(0, ("", " "), "one class loop, nothing after it"),
    (r"`+", 0): Reviewed(0, ("", "`"), "one class loop, nothing after it"),
    (r"^ {0,3}(?i:@flashinfer-bot)[ \t]+run(?![A-Za-z0-9_-])(?P<rest>.*)$", re.DOTALL): Reviewed(
        re.DOTALL,
        ("   ", "@flashinfer-bot", "@FlashInfer-Bot \t", "@flashinfer-bot run"),
        "anchored at the start; [ \\t]+ is followed by the literal 'run', and .* (DOTALL) "
        "always reaches the end",
    ),
    (r"^ {0,3}>", 0): Reviewed(0, ("", "   "), "anchored, bounded"),
    (r"ci/test-scope-([1-9][0-9]{0,3})", 0): Reviewed(
        0, ("ci/test-scope-", "ci/test-scope-1"), "literal prefix, at most four digits"
    ),
    (
        r"^\s*\.\.\s+(auto(?:function|class|data|method|attribute|exception|decorator|module))"
        r"::\s*(\S+)\s*$",
        0,
    ): Reviewed(
        0,
        ("", ".. ", ".. autofunction::", ".. autofunction:: x", "  ..  automodule:: "),
        "anchored; every loop alternates \\s and \\S, so no two loops share a character",
    ),
    (
        r"^\s*(?:```|:::)\{(auto(?:function|class|data|method|attribute|exception|decorator"
        r"|module))\}\s*(\S+)\s*$",
        0,
    ): Reviewed(
        0,
        ("", "```{", "```{autofunction}", ":::{autoclass} x", "  ```{automodule}  "),
        "anchored; every loop alternates \\s and \\S, so no two loops share a character",
    ),
    (r"^\s*\.\.\s+flashinfer-operators::\s*$", 0): Reviewed(
        0,
        ("", "  ", ".. ", ".. flashinfer-operators::"),
        "anchored; the two \\s loops are separated by literals, the last by the end",
    ),
    (r"    from (flashinfer(?:\.\w+)+) import (\w+) as \2\n", 0): Reviewed(
        0,
        ("    from flashinfer", "    from flashinfer.a", "    from flashinfer.a import b as "),
        "each repetition of (?:\\.\\w+) starts at a literal '.', which \\w never matches, so "
        "no two loops share a character; the backreference compares a fixed string",
    ),
    (r"[0-9]+", 0): Reviewed(0, ("",), "one class loop, nothing after it to backtrack into"),
    (r"^    from ([\w.]+) import (\([^)]*\)|[^\n]*)", re.MULTILINE): Reviewed(
        re.MULTILINE,
        ("    from ", "    from a", "    from a import (", "    from a import b"),
        r"anchored at a line start; [\w.]+ stops at the literal ' import ', [^)]* at ')' and "
        "[^\n]* at the line's end: no two loops share a character",
    ),
    (r"\b(\w+) as (\w+)\b", 0): Reviewed(
        0, ("", "a", "a as ", "a as b"), "\\w+ runs end at ' as ', which \\w never matches"
    ),
    (r"[0-9]{4}-[0-9]{2}-[0-9]{2}", 0): Reviewed(0, ("", "2027-"), "no loop: bounded counts"),
    (r"\S{81,}", 0): Reviewed(
        0,
        ("", "x" * 80),
        "one class loop; a run shorter than 81 is rescanned from each of its starts, at most "
        "80 steps each: linear, with a constant of 80",
    ),
}


def test_every_regex_in_the_inventoried_folders_is_reviewed() -> None:
    uses, problems = repository_regexes()
    missing = [u for u in uses if (u.pattern, u.flags) not in REVIEWED]
    problems += [
        f"{u.where}: regex {u.pattern!r} (flags {u.flags}) is not in REVIEWED in "
        f"{Path(__file__).relative_to(REPO)}. Regexes in {', '.join(INVENTORIED)} may read "
        "untrusted text: check that it runs in linear time (or parse without a regex), then "
        "add it to REVIEWED with the prefixes that reach its loops"
        for u in missing
    ]
    assert not problems, "\n".join(problems)


def test_reviewed_regexes_are_all_still_used() -> None:
    used = {(u.pattern, u.flags) for u in repository_regexes()[0]}
    stale = [key for key in REVIEWED if key not in used]
    assert not stale, f"REVIEWED lists regexes no longer in the code; remove them: {stale}"


def test_reviewed_flags_agree_with_keys() -> None:
    assert all(entry.flags == key[1] for key, entry in REVIEWED.items())


def test_inventory_scan_sees_every_form() -> None:
    """The scan finds literal patterns with their flags and reports what it cannot review."""
    source = (
        "import re\nimport re as rx\nfrom re import compile\nimport fnmatch\n"
        "A = re.compile(r'a+b', re.I | re.M)\n"
        "B = re.sub('x*', '', s, 0, re.DOTALL)\n"
        "C = re.findall(pattern, s)\n"
        "D = re.split(r'\\s+', s, flags=re.ASCII)\n"
    )
    uses, problems = regex_uses(source, "m.py")
    assert [(u.pattern, u.flags) for u in uses] == [
        ("a+b", re.I | re.M),
        ("x*", re.DOTALL),
        (r"\s+", re.ASCII),
    ]
    assert len(problems) == 4, problems
    assert any("import re as rx" in p for p in problems)
    assert any("from re import" in p for p in problems)
    assert any("fnmatch" in p for p in problems)
    assert any("m.py:7" in p and "not a string literal" in p for p in problems)


# --------------------------------------------------------------------------------------------
# Each reviewed regex, however it is called


#: Characters with a meaning to Markdown, shells, paths or these patterns, plus a letter, a
#: digit and look-alikes (NBSP, the long s that case-folds to 's').
_RUN_CHARS = " \t\n`~'\"->!#:/.a0_@{}\u00a0\u017f"
_SUFFIXES = ("", "\x00", "`", "\n", "x")
_PAIRS = (" \t", " `", "`~", "a ", " a", "-a", ":a", ". ", "` ", "\t\n", "0a")


def _attacks(prefix: str) -> Iterator[tuple[str, str]]:
    """(label, text) of about SIZE characters: ``prefix`` then a long run, then a tail that
    makes a match fail late, and ``prefix`` repeated (nested or repeated openers)."""
    for char in _RUN_CHARS:
        for suffix in _SUFFIXES:
            yield f"{prefix!r}+{char!r}*N+{suffix!r}", prefix + char * SIZE + suffix
    for pair in _PAIRS:
        yield f"{prefix!r}+{pair!r}*N", prefix + pair * (SIZE // 2) + "\x00"
    if prefix:
        yield f"{prefix!r}*N", prefix * (SIZE // len(prefix)) + "\x00"


# fullmatch explores at least what match does; findall at least what search does, and
# finditer, split and sub scan the same way.
_METHODS = ("fullmatch", "findall")


@pytest.mark.parametrize(
    "pattern, flags", list(REVIEWED), ids=[f"{p[:30]}/{f}" for p, f in REVIEWED]
)
def test_reviewed_regex_is_linear_however_called(pattern: str, flags: int) -> None:
    compiled = re.compile(pattern, flags)
    for prefix in ("", *REVIEWED[(pattern, flags)].prefixes):
        for label, text in _attacks(prefix):
            for method in _METHODS:
                with finishes_within(BOUND_S, f"re.{method}({pattern!r}) on {label}"):
                    getattr(compiled, method)(text)


# --------------------------------------------------------------------------------------------
# The parsers' entry points, on hand-written attacks

RUN = "@flashinfer-bot run"
N = SIZE
_FILLERS = (" ", "\t", "`", "~", "'", '"', "-", " \t", "a ", "` ", "\u00a0")
_OPENERS = ("```", "~~~", "````", "   ```", "```experimental-tests", "~~~experimental-tests")


def _fence_attacks() -> dict[str, str]:
    attacks = {"reported: ``` + spaces + `": "```" + " " * N + "`"}
    for opener in _OPENERS:
        for filler in _FILLERS:
            for tail in ("`", "x", ""):
                text = opener + filler * (N // len(filler)) + tail
                attacks[f"{opener!r}+{filler!r}*N+{tail!r}"] = text
        attacks[f"{opener!r}, unterminated block of lines"] = opener + "\n" + "x y\n" * (N // 4)
        attacks[f"{opener!r}*N on one line"] = opener * (N // len(opener))
        attacks[f"{opener!r} lines, nested"] = (opener + "\n") * (N // (len(opener) + 1))
    attacks["fences growing by one"] = "\n".join("`" * k for k in range(3, 450))
    attacks["html comment openers"] = "<!--\n" * (N // 5)
    attacks["html comment, unterminated, long"] = "<!--" + "-" * N + ">"
    attacks["quote markers"] = "> " * (N // 2)
    attacks["indent then backticks"] = " " * N + "```"
    return attacks


FENCE_ATTACKS = _fence_attacks()


def _block(content: str) -> str:
    return f"```experimental-tests\n{content}\n```"


BODY_ATTACKS = {
    **FENCE_ATTACKS,
    "one huge target": _block("tests/experimental/" + "a" * N),
    "many duplicate targets": _block("tests/experimental/a.py\n" * (N // 24)),
    "many bad targets": _block("x;`$(\u00a0\n" * (N // 7)),
    "comment markers": _block("#" * N),
    "test name parts": _block("tests/experimental/a.py" + "::a" * (N // 3)),
    "test name, bad at the end": _block("tests/experimental/a.py::" + "a" * N + "!"),
}

COMMENT_ATTACKS = {
    **FENCE_ATTACKS,
    "handle + spaces": "@flashinfer-bot" + " " * N + "x",
    "handle + tabs + almost run": "@flashinfer-bot" + "\t" * N + "ru",
    "handle repeated": "@flashinfer-bot " * (N // 16),
    "run + spaces": RUN + " " * N,
    "run + many targets": RUN + " tests/a.py" * (N // 11),
    "run + one huge target": f"{RUN} tests/" + "a" * N,
    "run + backticks": f"{RUN} " + "`" * N,
    "many identical commands": f"{RUN} tests/a.py\n" * (N // 31),
    "many different commands": "".join(f"{RUN} tests/a{i}.py\n" for i in range(N // 30)),
    "lazy quote continuation": "> q\n" + f"{RUN}\n" * (N // 20),
}

TARGET_ATTACKS = {
    "spaces": " " * N,
    "all ascii whitespace": " \t\r\n\f\v" * (N // 6),
    "whitespace then a bad char": " " * N + "\u00a0",
    "one huge path": "tests/" + "a" * N,
    "slashes": "tests/" + "/" * N,
    "dots": "tests/" + "." * N,
    "colons": "tests/a.py" + ":" * N,
    "test name parts": "tests/a.py" + "::a" * (N // 3),
    "test name, bad at the end": "tests/a.py::" + "a" * N + "!",
    "command substitutions": "$(" * (N // 2),
    "dashes": "-" * N,
    "many targets": "tests/a.py " * (N // 11),
    "many distinct targets": " ".join(f"tests/t{i}.py" for i in range(N // 12)),
}


def _statuses(context: str, description: str = "tests/a.py") -> list[dict[str, Any]]:
    return [{"context": context, "description": description, "state": "success"}]


STATUS_ATTACKS: dict[str, list[dict[str, Any]]] = {
    "context + zeros": _statuses("ci/test-scope-" + "0" * N),
    "context + letters": _statuses("ci/test-scope-1" + "a" * N),
    "context + newlines": _statuses("ci/test-scope-1" + "\n" * N),
    "context of prefixes": _statuses("ci/test-scope-" * (N // 14)),
    "huge description": _statuses("ci/test-scope-1", "tests/" + "a " * (N // 2)),
    "many chunks": [
        {"context": f"ci/test-scope-{i}", "description": "tests/a.py", "target_url": "u"}
        for i in range(1, N // 20)
    ],
}

DOC_LINE_ATTACKS = {
    "rst: spaces before ..": " " * N + ".. autofunction:: x y",
    "rst: spaces after ..": ".. " + " " * N + "autofunction:: x y",
    "rst: spaces after ::": ".. autofunction::" + " " * N + "x y",
    "rst: word/space pairs": ".. autofunction:: " + "a " * (N // 2) + "b",
    "rst: dots": "." * N,
    "myst: spaces in braces": "```{autofunction}" + " " * N + "x" + " " * N + "y",
    "myst: colons": ":" * N,
    "myst: backticks": "`" * N + "{autofunction} x",
}


def _call(parse: Callable[[Any], object], text: Any) -> None:
    try:
        parse(text)
    except ets.ScopeError:
        pass  # invalid input is an answer too; only its cost is under test here


@pytest.mark.parametrize("label", list(BODY_ATTACKS))
def test_pr_body_validator_is_linear(label: str) -> None:
    with finishes_within(BOUND_S, f"parse_body on {label}"):
        _call(ets.parse_body, BODY_ATTACKS[label])


@pytest.mark.parametrize("label", list(COMMENT_ATTACKS))
def test_bot_command_parser_is_linear(label: str) -> None:
    with finishes_within(BOUND_S, f"decide on {label}"):
        bot.decide(COMMENT_ATTACKS[label])


@pytest.mark.parametrize("label", list(TARGET_ATTACKS))
def test_targets_parser_is_linear(label: str) -> None:
    with finishes_within(BOUND_S, f"parse_targets on {label}"):
        _call(ets.parse_targets, TARGET_ATTACKS[label])


@pytest.mark.parametrize("label", list(STATUS_ATTACKS))
def test_status_reader_is_linear(label: str) -> None:
    with finishes_within(BOUND_S, f"read_scope on {label}"):
        _call(bot.read_scope, STATUS_ATTACKS[label])


def test_docs_reference_reader_is_linear(tmp_path: Path) -> None:
    for label, line in DOC_LINE_ATTACKS.items():
        page = tmp_path / "index.rst"
        page.write_text(f"API\n===\n\n{line}\n", encoding="utf-8")
        with finishes_within(BOUND_S, f"reference_entries on {label}"):
            inventory.reference_entries(tmp_path, tmp_path)


def test_reported_body_through_the_cli(tmp_path: Path) -> None:
    """The report, as CI runs it: a 3 kB body that took 63 s; now an ordinary rejection."""
    body = tmp_path / "body.md"
    body.write_text("```" + " " * 3000 + "`\n", encoding="utf-8")
    result = run_script("experimental_test_scope", "--body-file", str(body), timeout=60)
    assert result.returncode == ets.EXIT_INVALID, result.stderr
    assert "no ```experimental-tests block" in result.stderr


# --------------------------------------------------------------------------------------------
# The string parsing agrees with the regexes it replaced, where those finish

_OLD_SCOPE_FENCE = re.compile(r"^( {0,3})(`{3,}|~{3,})[ \t]*([^`]*?)[ \t]*$")
_OLD_BOT_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")
_OLD_TEST_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def _old_scope_fence(line: str) -> tuple[str, str] | None:
    m = _OLD_SCOPE_FENCE.match(line)
    return None if m is None else (m.group(2), m.group(3))


def _old_bot_fence(line: str) -> tuple[str, str] | None:
    m = _OLD_BOT_FENCE.match(line)
    return None if m is None else (m.group(1), m.group(2))


# Lines never hold a newline (bodies are split on them first).
_fence_lines = st.text(alphabet=" \t`~ax-\u00a0\x0b", max_size=24) | st.builds(
    lambda indent, marker, rest: indent + marker + rest,
    st.sampled_from(["", " ", "   ", "    ", "\t"]),
    st.sampled_from(["``", "```", "````", "~~", "~~~", "~~~~~", "`~~", "~``"]),
    st.text(alphabet=" \t`~ax-", max_size=16),
)


@settings(max_examples=1500, deadline=None)
@given(_fence_lines)
def test_property_fence_lines_parse_as_before(line: str) -> None:
    assert scope_block._fence_and_info(line) == _old_scope_fence(line)
    assert ets.fence_run(line) == _old_bot_fence(line)


@settings(max_examples=500, deadline=None)
@given(st.text(max_size=40))
def test_property_test_names_validate_as_before(part: str) -> None:
    assert bool(scope_targets._TEST_NAME_RE.fullmatch(part)) == bool(_OLD_TEST_NAME.match(part))


_BODY_LINES = st.sampled_from(
    [
        "```",
        "````",
        "~~~",
        "  ```",
        "    ```",
        "```experimental-tests",
        "~~~experimental-tests",
        "``` experimental-tests  ",
        "```experimental-tests `x`",
        "~~~ `x`",
        "``` \t",
        "tests/experimental/test_a.py",
        "tests/experimental/test_b.py  # why",
        "tests/gemm/test_x.py",
        "# comment",
        "<!--",
        "-->",
        "<!-- x -->",
        "> quoted",
        "",
        RUN,
        f"{RUN} tests/a.py",
        f"   {RUN} tests/experimental/",
        f"{RUN} please",
    ]
) | st.text(alphabet=" \t`~a>-", max_size=12)


def _outcome(parse: Callable[[str], object], body: str) -> object:
    try:
        return parse(body)
    except ets.ScopeError as exc:
        return ("error", str(exc))


@settings(max_examples=700, deadline=None)
@given(st.lists(_BODY_LINES, max_size=12), st.sampled_from(["\n", "\r\n"]))
def test_property_bodies_and_comments_parse_as_before(lines: list[str], newline: str) -> None:
    body = newline.join(lines)
    new_blocks, new_body = ets.find_blocks(body), _outcome(ets.parse_body, body)
    new_decision = bot.decide(body)
    with mock.patch.object(scope_block, "_fence_and_info", _old_scope_fence):
        assert ets.find_blocks(body) == new_blocks
        assert _outcome(ets.parse_body, body) == new_body
    with mock.patch.object(scope_comment, "fence_run", _old_bot_fence):
        assert bot.decide(body) == new_decision
