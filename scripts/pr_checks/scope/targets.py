"""What a safe pytest target is, and validating a list of them.

One definition for both roots: a PR description's block (``tests/experimental/``) and a
reviewer's ``@flashinfer-bot run <paths>`` (``tests/``).  A target is checked as text (no
option, shell or glob syntax can pass), then, with :func:`check_exists`, against a checkout
(a missing path collects nothing and would pass).

A target is a path, or a scope: ``conformance:API`` or ``conformance:API:BACKEND`` (``api``
for an API without backends), the conformance and overlap cases of one API or backend that
can run on the runner (:func:`pytest_arguments` turns it into ``--conformance-scope`` and
the tests it narrows, :data:`CONFORMANCE_TESTS`; ``tests/conformance_scope.py`` leaves out
the cuda cases without a device and the cases the backend's checker rejects, so they do
not count as requested tests that did not run).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path

from .errors import ScopeError

TARGETS_ROOT = "tests/"

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


SCOPE_PREFIX = "conformance:"
#: The tests a ``conformance:`` scope narrows: each lane's conformance and overlap cases.
CONFORMANCE_TESTS = (
    "tests/test_conformance.py::test_conformance",
    "tests/test_overlap_conformance.py::test_overlap",
    "tests/experimental/test_conformance_experimental.py::test_conformance_experimental",
    "tests/experimental/test_overlap_conformance_experimental.py::test_overlap_experimental",
)


def _scope_problems(target: str) -> list[str]:
    names = target[len(SCOPE_PREFIX) :].split(":")
    if len(names) <= 2 and all(_TEST_NAME_RE.fullmatch(n) for n in names):
        return []
    return [
        "a scope is conformance:API or conformance:API:BACKEND, each name ASCII letters, "
        "digits and '_' (e.g. conformance:rmsnorm:triton)"
    ]


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
    if target.startswith(SCOPE_PREFIX):
        return _scope_problems(target)
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


def check_exists(targets: Iterable[str], root_dir: str | os.PathLike[str], root: str) -> None:
    """Raise ScopeError for each target whose path does not exist under ``root_dir``.

    The path must also resolve (following symlinks) inside ``root_dir/root``.
    """
    base = Path(root_dir)
    scope_dir = (base / root).resolve()
    errors = []
    for target in targets:
        if target.startswith(SCOPE_PREFIX):  # a scope names tests, not a path
            continue
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


def pytest_arguments(targets: Iterable[str]) -> list[str]:
    """The pytest arguments that run ``targets`` (validated): each path as it is; each
    scope as ``--conformance-scope=API[:BACKEND]``, with :data:`CONFORMANCE_TESTS` once."""
    paths: list[str] = []
    scopes: list[str] = []
    for target in targets:
        if target.startswith(SCOPE_PREFIX):
            scopes.append(f"--conformance-scope={target[len(SCOPE_PREFIX) :]}")
        else:
            paths.append(target)
    if scopes:
        paths += [t for t in CONFORMANCE_TESTS if t not in paths]
    return [*scopes, *paths]
