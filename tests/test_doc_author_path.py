"""What the docs tell a user and a kernel author is what the code does (issue 43 item 23).

Each fact is read from the code, not restated here: the tunable ops from the autotuner's
registrations, where graduated code goes from the lifecycle command's constant, that the
test set-up turns Triton's interpreter on from ``tests/conftest.py``.  A doc that drifts from
the code fails here.
"""

from __future__ import annotations

import re
from pathlib import Path

from flashinfer.cli.autotune_run import tunable_ops

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text(encoding="utf-8")
CONTRIBUTING = (REPO / "CONTRIBUTING.md").read_text(encoding="utf-8")
AUTHOR_STEPS = (REPO / "flashinfer" / "experimental" / "CLAUDE.md").read_text(encoding="utf-8")
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
    steps = " ".join(AUTHOR_STEPS.split("## When adding an experimental backend", 1)[1].split())
    assert "`differentiable=`" in steps
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
