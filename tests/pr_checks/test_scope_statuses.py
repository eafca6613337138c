"""Publishing the scope as `ci/test-scope-N` commit statuses and reading it back.

A fake status store behaves like GitHub's: statuses cannot be deleted, a new status for a
context supersedes the old one, and the list API returns history newest first.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from . import load_script

ets = load_script("experimental_test_scope")
bot = load_script("bot_command")


class FakeCommit:
    """The statuses of one commit, as GitHub keeps them."""

    def __init__(self) -> None:
        self.history: list[dict[str, Any]] = []

    def post(self, status: dict[str, str], creator: str = "flashinfer-bot") -> None:
        self.history.append(
            {
                "id": len(self.history) + 1,
                "context": status["context"],
                "state": status["state"],
                "description": status["description"] or None,  # GitHub stores "" as null
                "target_url": status.get("target_url"),
                "creator": {"login": creator},
            }
        )

    def api_list(self) -> list[dict[str, Any]]:
        return list(reversed(self.history))  # newest first, history included

    def publish(self, comment: str, url: str, *, stop_after: int | None = None) -> None:
        """What ci-bot-commands.yml does for one comment."""
        decision = bot.decide(comment)
        assert decision.action in ("run-default", "run-scoped")
        plan = bot.publish_plan(decision.chunks, bot.max_scope_index(self.api_list()), url)
        for i, status in enumerate(plan):
            if stop_after is not None and i >= stop_after:
                return  # the job died here
            self.post(status)

    def read(self, creator: str | None = None) -> Any:
        return bot.read_scope(self.api_list(), creator)


def long_targets(n: int, width: int = 60) -> list[str]:
    return [f"tests/experimental/f{i:02d}/" + "t" * (width - 25) + f"_{i:02d}.py" for i in range(n)]


# --------------------------------------------------------------------------------------------
# The plan


def test_plan_chunks_then_blanks() -> None:
    plan = bot.publish_plan(["a b", "c"], prev_max=4, generation="https://c/1")
    assert [(s["context"], s["description"]) for s in plan] == [
        ("ci/test-scope-1", "a b"),
        ("ci/test-scope-2", "c"),
        ("ci/test-scope-3", ""),
        ("ci/test-scope-4", ""),
    ]
    assert {s["state"] for s in plan} == {"success"}
    assert {s["target_url"] for s in plan} == {"https://c/1"}


def test_plan_clear_and_nothing_to_clear() -> None:
    assert [s["description"] for s in bot.publish_plan([], prev_max=3)] == ["", "", ""]
    assert bot.publish_plan([], prev_max=0) == []
    assert "target_url" not in bot.publish_plan(["x"], prev_max=0)[0]
    with pytest.raises(ValueError):
        bot.publish_plan([], prev_max=-1)


# --------------------------------------------------------------------------------------------
# Reading back


def test_numeric_sort_ten_after_nine() -> None:
    targets = [f"tests/t{i}.py" for i in range(1, 12)]
    statuses = [
        {"id": i, "context": f"ci/test-scope-{i}", "description": targets[i - 1]}
        for i in range(1, 12)
    ]
    statuses.sort(key=lambda s: s["context"])  # lexical: 1, 10, 11, 2, ...
    found = bot.read_scope(statuses)
    assert list(found.targets) == targets
    assert found.max_index == 11


def test_read_empty_and_unrelated_contexts() -> None:
    assert bot.read_scope([]).scoped is False
    statuses = [
        {"context": "ci/test-scope", "description": "tests/x.py"},
        {"context": "ci/test-scope-01", "description": "tests/x.py"},
        {"context": "ci/test-scope-0", "description": "tests/x.py"},
        {"context": "ci/test-scope-1a", "description": "tests/x.py"},
        {"context": "other/test-scope-1", "description": "tests/x.py"},
        {"context": "build", "description": "ok"},
    ]
    found = bot.read_scope(statuses)
    assert (found.scoped, found.max_index) == (False, 0)


def test_latest_status_per_context_wins() -> None:
    commit = FakeCommit()
    commit.post({"context": "ci/test-scope-1", "state": "success", "description": "tests/a.py"})
    commit.post({"context": "ci/test-scope-1", "state": "success", "description": "tests/b.py"})
    assert commit.read().targets == ("tests/b.py",)
    # Same answer without ids, relying on newest-first order.
    no_ids = [{k: v for k, v in s.items() if k != "id"} for s in commit.api_list()]
    assert bot.read_scope(no_ids).targets == ("tests/b.py",)


def test_read_revalidates_targets() -> None:
    bad = [{"context": "ci/test-scope-1", "description": "tests/a.py; curl evil | sh"}]
    with pytest.raises(ets.ScopeError, match="shell metacharacter"):
        bot.read_scope(bad)
    outside = [{"context": "ci/test-scope-1", "description": "/etc/passwd"}]
    with pytest.raises(ets.ScopeError, match="absolute path"):
        bot.read_scope(outside)


def test_read_detects_gap_and_blank_before_set() -> None:
    gap = [
        {"context": "ci/test-scope-1", "description": "tests/a.py"},
        {"context": "ci/test-scope-3", "description": "tests/c.py"},
    ]
    with pytest.raises(ets.ScopeError, match="ci/test-scope-2 is missing"):
        bot.read_scope(gap)
    blank_first = [
        {"context": "ci/test-scope-1", "description": ""},
        {"context": "ci/test-scope-2", "description": "tests/c.py"},
    ]
    with pytest.raises(ets.ScopeError, match="half published"):
        bot.read_scope(blank_first)


def test_creator_filter_ignores_statuses_from_others() -> None:
    commit = FakeCommit()
    commit.publish(f"@flashinfer-bot run {' '.join(long_targets(1))}", "https://c/1")
    commit.post(
        {"context": "ci/test-scope-1", "state": "success", "description": "tests/evil.py"},
        creator="someone-else",
    )
    assert commit.read().targets == ("tests/evil.py",)  # unfiltered: latest wins
    assert commit.read("flashinfer-bot").targets == tuple(long_targets(1))
    assert bot.max_scope_index(commit.api_list(), "nobody") == 0


# --------------------------------------------------------------------------------------------
# Whole sequences, as in the source PR's sandbox run


def test_sequence_publish_grow_shrink_clear() -> None:
    commit = FakeCommit()
    two = "tests/experimental/test_a.py tests/experimental/test_b.py"
    commit.publish(f"@flashinfer-bot run {two}", "https://c/A")
    assert commit.read().test_path == two

    many = long_targets(7)
    commit.publish("@flashinfer-bot run " + " ".join(many), "https://c/B")
    found = commit.read()
    assert list(found.targets) == many and len(found.chunks) >= 3
    grown = found.max_index

    commit.publish("@flashinfer-bot run tests/experimental/test_c.py", "https://c/C")
    found = commit.read()
    assert found.targets == ("tests/experimental/test_c.py",)
    assert found.max_index == grown  # stale trailing chunks are blank, not gone

    # A rejected command publishes nothing: the scope stays as it was.
    assert bot.decide("@flashinfer-bot run please go").action == "reject"
    assert commit.read().targets == ("tests/experimental/test_c.py",)

    commit.publish("@flashinfer-bot run", "https://c/E")
    found = commit.read()
    assert found.scoped is False and found.targets == ()


def test_half_published_scope_fails_loudly() -> None:
    commit = FakeCommit()
    commit.publish("@flashinfer-bot run " + " ".join(long_targets(7)), "https://c/A")
    assert len(commit.read().chunks) >= 3
    # A new, shorter scope: the job dies after writing chunk 1, before blanking the rest.
    commit.publish("@flashinfer-bot run tests/experimental/test_c.py", "https://c/B", stop_after=1)
    with pytest.raises(ets.ScopeError, match="different command"):
        commit.read()
    # A bare run that dies after blanking chunk 1.
    commit.publish("@flashinfer-bot run", "https://c/C", stop_after=1)
    with pytest.raises(ets.ScopeError, match="half published"):
        commit.read()
    # Finishing any command repairs it.
    commit.publish("@flashinfer-bot run", "https://c/D")
    assert commit.read().scoped is False


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.lists(
            st.integers(min_value=10, max_value=130).map(
                lambda w: "tests/" + "x" * (w - 9) + ".py"
            ),
            max_size=12,
        ),
        min_size=1,
        max_size=6,
    )
)
def test_property_last_command_wins(scopes: list[list[str]]) -> None:
    commit = FakeCommit()
    for i, targets in enumerate(scopes):
        commit.publish(" ".join(["@flashinfer-bot run", *targets]), f"https://c/{i}")
    expected = list(dict.fromkeys(scopes[-1]))
    assert list(commit.read().targets) == expected


# --------------------------------------------------------------------------------------------
# API output formats


def test_load_statuses_formats() -> None:
    s1 = {"id": 2, "context": "ci/test-scope-1", "description": "tests/b.py"}
    s2 = {"id": 1, "context": "ci/test-scope-1", "description": "tests/a.py"}
    as_list = json.dumps([s1, s2])
    paginated = json.dumps([s1]) + "\n" + json.dumps([s2])  # gh api --paginate
    slurped = json.dumps([[s1], [s2]])  # gh api --paginate --slurp
    combined = json.dumps({"state": "success", "statuses": [s1]})
    for text in (as_list, paginated, slurped, combined):
        assert bot.read_scope(bot.load_statuses(text)).targets == ("tests/b.py",)
    assert bot.load_statuses("") == [] and bot.load_statuses("[]") == []
    with pytest.raises(ets.ScopeError):
        bot.load_statuses("[1, 2]")
    with pytest.raises(json.JSONDecodeError):
        bot.load_statuses("{nope")


# --------------------------------------------------------------------------------------------
# CLI


def test_cli_plan_and_read_round_trip(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    comment = tmp_path / "comment.md"
    decision = tmp_path / "decision.json"
    statuses = tmp_path / "statuses.json"
    comment.write_text("@flashinfer-bot run " + " ".join(long_targets(5)))
    assert (
        bot.main(["decide", "--comment-file", str(comment), "--decision-out", str(decision)]) == 0
    )
    old = [{"id": i, "context": f"ci/test-scope-{i}", "description": "tests/old.py"} for i in (1,)]
    old += [{"id": i, "context": f"ci/test-scope-{i}", "description": ""} for i in range(2, 6)]
    statuses.write_text(json.dumps(old))
    capsys.readouterr()
    args = ["plan", "--decision-file", str(decision), "--statuses-file", str(statuses)]
    assert bot.main([*args, "--format", "tsv", "--generation", "https://c/9"]) == 0
    rows = [line.split("\t") for line in capsys.readouterr().out.splitlines()]
    assert [r[0] for r in rows] == [f"ci/test-scope-{i}" for i in range(1, 6)]
    assert all(len(r) == 2 for r in rows)
    written = [
        {"id": 100 + i, "context": c, "description": d, "target_url": "https://c/9"}
        for i, (c, d) in enumerate(rows)
    ]
    statuses.write_text(json.dumps(written + old))
    out = tmp_path / "github_output"
    assert bot.main(["read", "--statuses-file", str(statuses), "--github-output", str(out)]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["targets"] == long_targets(5) and printed["scoped"] is True
    assert out.read_text() == f"scoped=true\ntest_path={' '.join(long_targets(5))}\n"


def test_cli_plan_prev_max_and_chunks_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    chunks = tmp_path / "chunks.txt"
    chunks.write_text("")
    assert bot.main(["plan", "--chunks-file", str(chunks), "--prev-max", "2"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert [s["description"] for s in plan] == ["", ""]
    chunks.write_text("tests/a.py\ntests/b.py\n")
    assert bot.main(["plan", "--chunks-file", str(chunks), "--prev-max", "0"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["description"] == "tests/a.py tests/b.py"
    assert bot.main(["plan", "--chunks-file", str(chunks), "--prev-max", "-1"]) == 2
    chunks.write_text("tests/a.py; id\n")
    assert bot.main(["plan", "--chunks-file", str(chunks), "--prev-max", "0"]) == 2
    capsys.readouterr()


def test_cli_plan_refuses_a_rejected_or_tampered_decision(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    decision = tmp_path / "decision.json"
    decision.write_text(json.dumps({"action": "reject", "chunks": []}))
    assert bot.main(["plan", "--decision-file", str(decision), "--prev-max", "0"]) == 2
    decision.write_text(json.dumps({"action": "run-scoped", "chunks": ["tests/a.py $(id)"]}))
    assert bot.main(["plan", "--decision-file", str(decision), "--prev-max", "0"]) == 2
    assert "command substitution" in capsys.readouterr().err


def test_cli_read_inconsistent_is_invalid(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    statuses = tmp_path / "s.json"
    statuses.write_text(json.dumps([{"context": "ci/test-scope-2", "description": "tests/a.py"}]))
    out = tmp_path / "out"
    assert bot.main(["read", "--statuses-file", str(statuses), "--github-output", str(out)]) == 2
    assert not out.exists()
    assert "ci/test-scope-1 is missing" in capsys.readouterr().err


# --------------------------------------------------------------------------------------------
# The verdict


def needs(scoped: bool, **results: str) -> dict[str, Any]:
    data = {"scope": {"result": "success", "outputs": {"scoped": "true" if scoped else "false"}}}
    for job, result in results.items():
        data[job] = {"result": result, "outputs": {}}
    return data


@pytest.mark.parametrize(
    "data, problem",
    [
        (needs(False, stable="success", experimental="success", targeted="skipped"), None),
        (needs(True, stable="success", experimental="success", targeted="success"), None),
        (needs(True, stable="success", experimental="success", targeted="skipped"), "published"),
        (needs(True, stable="success", experimental="success", targeted="failure"), "published"),
        (needs(True, stable="success", experimental="success", targeted="cancelled"), "published"),
        (needs(True, stable="success", experimental="success"), "no targeted lane"),
        (
            needs(False, stable="success", experimental="skipped", targeted="skipped"),
            "experimental",
        ),
        (needs(False, stable="failure", experimental="success", targeted="skipped"), "stable"),
        ({"stable": {"result": "success"}}, "missing"),
        ({**needs(False), "scope": {"result": "failure", "outputs": {}}}, "'scope'"),
    ],
)
def test_check_results(data: dict[str, Any], problem: str | None) -> None:
    problems = bot.check_results(data)
    if problem is None:
        assert problems == []
    else:
        assert problems and any(problem in p for p in problems), problems


def test_an_optional_job_may_be_skipped_never_fail(capsys: pytest.CaptureFixture[str]) -> None:
    """The GPU job is skipped where no GPU runner exists: only then may it be."""
    lanes = dict(stable="success", experimental="success", targeted="skipped")
    skipped = json.dumps(needs(False, gpu="skipped", **lanes))
    assert bot.main(["results", "--needs", skipped]) == 2
    assert bot.main(["results", "--needs", skipped, "--optional", "gpu"]) == 0
    failed = json.dumps(needs(False, gpu="failure", **lanes))
    assert bot.main(["results", "--needs", failed, "--optional", "gpu"]) == 2
    assert "job 'gpu' result is 'failure'" in capsys.readouterr().err


def test_cli_results(capsys: pytest.CaptureFixture[str]) -> None:
    ok = needs(False, stable="success", experimental="success", targeted="skipped")
    assert bot.main(["results", "--needs", json.dumps(ok)]) == 0
    bad = needs(True, stable="success", experimental="success", targeted="skipped")
    assert bot.main(["results", "--needs", json.dumps(bad)]) == 2
    assert bot.main(["results", "--needs", "{nope"]) == 2
    capsys.readouterr()
