"""The author's page (``docs/author.md``) runs as written, stays one page, and what the docs
tell a user and a kernel author is what the code does (issues 43 item 23, 44 item 5).

The page's steps are its fenced blocks, run in order in a copy of the repository
(``tests/repo_copy.py``): a ``python`` block whose first line names a file is that file, a
``diff`` block is applied with ``git apply --recount``, a ``bash`` block runs.  Only the
marker's example date is moved to a day the lifecycle check accepts today.  Each other fact
is read from the code, not restated here: the tunable ops from the autotuner's registrations,
where graduated code goes from the lifecycle command's constant, that the test set-up turns
Triton's interpreter on from ``tests/conftest.py``.  A doc that drifts from the code fails
here.
"""

from __future__ import annotations

import datetime
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from repo_copy import copy_repository

from flashinfer.cli.autotune_report import tunable_ops

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text(encoding="utf-8")
CONTRIBUTING = (REPO / "CONTRIBUTING.md").read_text(encoding="utf-8")
AUTHOR_STEPS = (REPO / "docs" / "author.md").read_text(encoding="utf-8")
POLICY = (REPO / "flashinfer" / "experimental" / "README.md").read_text(encoding="utf-8")
EXPERIMENTAL_RST = (REPO / "docs" / "experimental.rst").read_text(encoding="utf-8")


def _section(text: str, heading: str, underline: str | None = None) -> str:
    """The text under ``heading`` up to the next heading of its level."""
    start = text.index(heading)
    if underline is None:  # Markdown: "## Title" up to the next "## "
        level = heading.split(" ", 1)[0] + " "
        end = text.find("\n" + level, start + len(heading))
    else:  # reStructuredText: a title underlined with ``underline``
        end = text.find("\n" + underline * 4, start + len(heading) + len(underline) + 2)
        end = text.rfind("\n", 0, end - 1) if end != -1 else -1
    return text[start:] if end == -1 else text[start:end]


def test_both_behaviour_tables_say_that_listing_a_backend_names_it() -> None:
    """Listing an experimental backend in ``use_backends`` (or ``FLASHINFER_BACKENDS``) is
    an opt-in that skips the gate: said in both tables, not only in backend_control.rst."""
    tables = [
        _section(README, "## The behaviour table, in short"),
        _section(EXPERIMENTAL_RST, "The behaviour table\n", "-"),
    ]
    for table in tables:
        rows = [line for line in table.splitlines() if "use_backends" in line]
        assert rows and "FLASHINFER_BACKENDS" in rows[0], table


def test_the_author_steps_name_the_tunable_ops() -> None:
    match = re.search(r"Tunable ops \([^)]*\): ([^.]+)\.", AUTHOR_STEPS)
    assert match, "flashinfer/experimental/CLAUDE.md: no 'Tunable ops (...): `op`.' sentence"
    assert set(re.findall(r"`(\w+)`", match[1])) == set(tunable_ops())


def test_the_author_steps_say_what_differentiable_means() -> None:
    steps = " ".join(AUTHOR_STEPS.split())
    assert "`differentiable=True`" in steps
    assert "torch.autograd.Function" in steps and 'left out of `"auto"`' in steps


def test_graduated_code_goes_where_the_lifecycle_command_puts_it() -> None:
    sources = (REPO / "flashinfer" / "cli").glob("lifecycle*.py")
    (features,) = {
        m[1]
        for path in sources
        for m in re.finditer(r'^FEATURES = "([^"]+)"', path.read_text("utf-8"), re.M)
    }
    checklist = _section(POLICY, "## Graduation checklist")
    assert f"{features}/<feature>/" in checklist
    assert "flashinfer/kernels/" not in checklist  # the old, wrong destination
    assert f"``{features}/<feature>/``" in (REPO / "docs" / "lifecycle.rst").read_text("utf-8")


def test_the_docs_say_that_the_tests_turn_the_triton_interpreter_on() -> None:
    conftest = (REPO / "tests" / "conftest.py").read_text(encoding="utf-8")
    assert 'os.environ.setdefault("TRITON_INTERPRET", "1")' in conftest
    for doc in (CONTRIBUTING, AUTHOR_STEPS):
        assert re.search(r"`tests/conftest.py` sets\s+`TRITON_INTERPRET=1`", doc)


# --------------------------------------------------------------------------------------
# The author's page: one page, five ideas, steps that run
# --------------------------------------------------------------------------------------

WORD_LIMIT = 2500
FENCE = re.compile(r"^(`{3,})(\w*)\n(.*?)^\1\n", re.M | re.S)
EXAMPLE_DATE = re.compile(r'graduate_by="\d{4}-\d{2}-\d{2}"')


def author_steps(text: str = AUTHOR_STEPS) -> list[tuple[str, str]]:
    """The page's fenced blocks, in order: ``(language, body)``."""
    return [(m[2], m[3]) for m in FENCE.finditer(text)]


def test_the_author_page_is_one_page_of_at_most_2500_words() -> None:
    words = len(AUTHOR_STEPS.split())
    assert words <= WORD_LIMIT, f"docs/author.md has {words} words (at most {WORD_LIMIT})"


def test_the_author_page_has_five_ideas_and_the_steps_of_a_landed_backend() -> None:
    ideas = re.findall(r"^\d\. .*?\*\*(.+?)\*\*", _section(AUTHOR_STEPS, "## Five ideas"), re.M)
    assert len(ideas) == 5
    kinds = [kind for kind, _ in author_steps()]
    assert {"python", "diff", "bash"} <= set(kinds)
    bodies = "".join(body for _, body in author_steps())
    for step in (
        "support.py",
        "tests/experimental/",
        "run_lane.sh experimental",
        "```experimental-tests",
    ):
        assert step in bodies, step


def test_the_other_author_docs_point_to_the_page() -> None:
    """They link to the page rather than repeat its steps."""
    for path in ("CONTRIBUTING.md", "CLAUDE.md", "flashinfer/experimental/CLAUDE.md"):
        assert "`docs/author.md`" in (REPO / path).read_text(encoding="utf-8"), path
    assert ":doc:`author`" in EXPERIMENTAL_RST


def _run_step(root: Path, kind: str, body: str) -> None:
    if kind == "python":
        path, _, content = body.partition("\n")
        assert path.startswith("# "), f"a python step names its file first: {path!r}"
        target = root / path[2:].strip()
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content, encoding="utf-8")
        return
    if kind == "diff":
        argv = ["git", "apply", "--recount", "-"]
    else:
        assert kind == "bash", f"docs/author.md: a {kind!r} block is not a step"
        argv = ["bash", "-euo", "pipefail", "-s"]
    environ = {k: v for k, v in os.environ.items() if not k.startswith("FLASHINFER_")}
    bin_dir = str(Path(sys.executable).parent)
    environ.update(PYTHONPATH=str(root), PATH=bin_dir + os.pathsep + environ.get("PATH", ""))
    proc = subprocess.run(argv, input=body, cwd=root, env=environ, capture_output=True, text=True)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"docs/author.md, this step failed:\n{body}\n{output[-6000:]}"


def test_the_author_page_runs_as_written(tmp_path: Path) -> None:
    """Zero to a landed experimental backend: the files, the table line, the lane on the new
    test and on the backend's conformance cases, the checks, the PR body's scope, the
    graduation plan."""
    root = copy_repository(tmp_path / "repo")
    in_time = (datetime.date.today() + datetime.timedelta(days=90)).isoformat()
    steps = author_steps(EXAMPLE_DATE.sub(f'graduate_by="{in_time}"', AUTHOR_STEPS))
    for kind, body in steps:
        _run_step(root, kind, body)
    assert (root / "pr_body.md").is_file()
    assert "ROWWISE" in (root / "flashinfer" / "norm.py").read_text(encoding="utf-8")


@pytest.mark.parametrize("broken", ["diff", "bash"])
def test_a_step_that_fails_fails_the_walk(tmp_path: Path, broken: str) -> None:
    body = (
        "--- a/nothing.py\n+++ b/nothing.py\n@@ -1 +1 @@\n-x\n+y\n"
        if broken == "diff"
        else "false\n"
    )
    with pytest.raises(AssertionError, match="this step failed"):
        _run_step(tmp_path, broken, body)
