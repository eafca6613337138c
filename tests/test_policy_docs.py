"""The experimental policy: its worked example runs, and every file states it the same way.

The normative text is ``flashinfer/experimental/README.md``. Its numbered rules ("## The
rules") are quoted verbatim by ``CONTRIBUTING.md``, ``CLAUDE.md`` and
``flashinfer/experimental/CLAUDE.md``. The upstream proposal this project follows was
reviewed with these files disagreeing about shipping experimental code in prebuilt (AOT)
packages; these tests make that impossible to merge again.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import flashinfer
import flashinfer.backend_families
import flashinfer.experimental

REPO = Path(__file__).resolve().parents[1]
POLICY = REPO / "flashinfer" / "experimental" / "README.md"
QUOTING = [
    REPO / "CONTRIBUTING.md",
    REPO / "CLAUDE.md",
    REPO / "flashinfer" / "experimental" / "CLAUDE.md",
]
POLICY_FILES = [POLICY, *QUOTING]
DESIGN_DOCS = sorted((REPO / "docs" / "design_docs").glob("*.md"))
USER_DOCS = [REPO / "docs" / "experimental.rst", REPO / "docs" / "installation.rst"]

# The canonical sentences. Changing one of these is a policy change: it must be made here and
# in every file at once, in one reviewed commit.
AOT_RULE = (
    "Experimental kernels are JIT-only: they are never compiled ahead of time into, or "
    "registered in, a prebuilt (AOT) package, and there is no exception process."
)
GATE_RULE = (
    '`backend="auto"` and the autotuner use an experimental backend only when '
    "`FLASHINFER_ALLOW_EXPERIMENTAL_AUTO_BACKENDS=1`; naming the backend or calling an "
    "experimental API is an explicit opt-in that always runs and warns once."
)
MARKER_RULE = (
    "Experimental APIs are marked `@flashinfer_experimental_api`; the support checkers of "
    "experimental backends are marked `@experimental_backend` and live in "
    "`flashinfer/experimental/<feature>/support.py`."
)
CANONICAL = {"aot": AOT_RULE, "gate": GATE_RULE, "markers": MARKER_RULE}


def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def _normalise(text: str) -> str:
    """Whitespace-insensitive (Markdown re-wraps lines), and list markers dropped."""
    return re.sub(r"\s+", " ", text).strip()


def _section(text: str, heading: str) -> str:
    start = text.index(f"## {heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def policy_rules() -> list[str]:
    """The numbered rules of the policy, in order."""
    section = _section(_text(POLICY), "The rules")
    return [m.group(1) for m in re.finditer(r"^\d+\. (.+)$", section, re.M)]


# --------------------------------------------------------------------------------------
# The worked example is executed
# --------------------------------------------------------------------------------------


def worked_example() -> str:
    section = _section(_text(POLICY), "Worked example")
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    return "\n".join(blocks)


def test_worked_example_is_substantial() -> None:
    code = worked_example()
    assert code.count("```") == 0
    assert code.count("assert ") >= 15, "the worked example should state the policy as asserts"
    for needed in ("@experimental_backend", "@flashinfer_experimental_api", "lifecycle_problems"):
        assert needed in code


def test_worked_example_runs() -> None:
    env = {
        k: v for k, v in os.environ.items() if k != "FLASHINFER_ALLOW_EXPERIMENTAL_AUTO_BACKENDS"
    }
    result = subprocess.run(
        [sys.executable, "-W", "error::RuntimeWarning", "-c", worked_example()],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_worked_example_failure_is_detected() -> None:
    """The harness really fails on a broken example (an assert that does not hold)."""
    broken = worked_example().replace(
        'assert list(scale.suitable_auto_backends) == ["torch"]',
        'assert list(scale.suitable_auto_backends) == ["fast"]',
    )
    assert broken != worked_example()
    result = subprocess.run(
        [sys.executable, "-c", broken], capture_output=True, text=True, cwd=REPO, timeout=300
    )
    assert result.returncode != 0
    assert "AssertionError" in result.stderr


# --------------------------------------------------------------------------------------
# One policy everywhere
# --------------------------------------------------------------------------------------


def test_policy_lists_the_canonical_sentences() -> None:
    rules = [_normalise(r) for r in policy_rules()]
    assert len(rules) >= 7
    for name, sentence in CANONICAL.items():
        assert _normalise(sentence) in rules, f"the policy's rules lack the {name} rule"


@pytest.mark.parametrize("path", QUOTING, ids=lambda p: str(p.relative_to(REPO)))
def test_every_rule_is_quoted_verbatim(path: Path) -> None:
    text = _normalise(_text(path))
    missing = [rule for rule in policy_rules() if _normalise(rule) not in text]
    assert not missing, f"{path.relative_to(REPO)} does not quote these rules verbatim: {missing}"


@pytest.mark.parametrize(
    "path", [*POLICY_FILES, *DESIGN_DOCS], ids=lambda p: str(p.relative_to(REPO))
)
def test_aot_rule_stated_canonically(path: Path) -> None:
    assert _normalise(AOT_RULE) in _normalise(_text(path))


# Words that would turn the AOT rule into "sometimes": the upstream disagreement was exactly a
# second statement allowing an approved exception.
_PERMISSIVE = re.compile(
    r"\b(exception|exceptions|approv\w*|unless|allowed|permitted|may be (?:shipped|included|"
    r"registered|compiled)|can be (?:shipped|included|registered|compiled)|opt[- ]in)\b",
    re.I,
)
_AOT_WORDS = re.compile(r"\bAOT\b|prebuilt|pre-built|ahead[- ]of[- ]time", re.I)


def conflicting_aot_statements(text: str) -> list[str]:
    """Paragraphs, other than the canonical sentence, that mention prebuilt/AOT permissively."""
    text = _normalise(text).replace(_normalise(AOT_RULE), " ")
    found = []
    for sentence in re.split(r"(?<=[.!?])\s+|\s-\s|\s\d+\.\s", text):
        if _AOT_WORDS.search(sentence) and _PERMISSIVE.search(sentence):
            found.append(sentence.strip())
    return found


@pytest.mark.parametrize("path", POLICY_FILES, ids=lambda p: str(p.relative_to(REPO)))
def test_no_second_statement_on_prebuilt_packages(path: Path) -> None:
    assert conflicting_aot_statements(_text(path)) == []


@pytest.mark.parametrize(
    "text",
    [
        # the shapes of the upstream disagreement
        "Experimental kernels may be included in AOT packages with maintainer approval.",
        "Do not register experimental kernels in prebuilt packages unless a maintainer agrees.",
        "Exceptions for ahead-of-time compilation need the owner's sign-off.",
    ],
)
def test_conflict_detector_catches_a_permissive_statement(text: str) -> None:
    assert conflicting_aot_statements(AOT_RULE + "\n\n" + text)


def test_conflict_detector_passes_the_canonical_sentence_alone() -> None:
    assert conflicting_aot_statements(f"Intro.\n\n6. {AOT_RULE}\n\nMore text.") == []


# --------------------------------------------------------------------------------------
# Names used in the documents exist in the code
# --------------------------------------------------------------------------------------

_DOCS = [*POLICY_FILES, *DESIGN_DOCS, *USER_DOCS]
_MARKER_MODULES = (flashinfer, flashinfer.experimental, flashinfer.backend_families)


@pytest.mark.parametrize("path", _DOCS, ids=lambda p: str(p.relative_to(REPO)))
def test_marker_names_exist(path: Path) -> None:
    """Every ``@name`` written as code names a real decorator of flashinfer (exported by
    ``flashinfer``, ``flashinfer.experimental`` or ``flashinfer.backend_families``).  A
    GitHub handle such as the bot's (``@flashinfer-bot``) is not a decorator: a name
    followed by ``-`` or ``/`` is left out."""
    names = set(re.findall(r"`@([A-Za-z_]\w*)(?![\w/-])", _text(path)))
    names |= set(re.findall(r"^\s*(?:>>>|\.\.\.)?\s*@([A-Za-z_]\w*)(?![\w/-])", _text(path), re.M))
    local: set[str] = set()  # decorators defined inside the documents themselves
    unknown = sorted(
        n for n in names if not any(hasattr(m, n) for m in _MARKER_MODULES) and n not in local
    )
    assert not unknown, f"{path.relative_to(REPO)} names markers that do not exist: {unknown}"


def _known_env_vars() -> set[str]:
    known = set()
    for source in (REPO / "flashinfer").rglob("*.py"):
        known |= set(re.findall(r"FLASHINFER_[A-Z0-9_]+", source.read_text(encoding="utf-8")))
    return known


@pytest.mark.parametrize("path", _DOCS, ids=lambda p: str(p.relative_to(REPO)))
def test_environment_variables_exist(path: Path) -> None:
    used = set(re.findall(r"FLASHINFER_[A-Z0-9_]+", _text(path)))
    unknown = sorted(used - _known_env_vars())
    assert not unknown, f"{path.relative_to(REPO)} names unknown variables: {unknown}"


def test_gate_variable_is_the_one_the_code_reads() -> None:
    from flashinfer.api_logging import ALLOW_EXPERIMENTAL_AUTO_BACKENDS_ENV

    assert f"`{ALLOW_EXPERIMENTAL_AUTO_BACKENDS_ENV}=1`" in GATE_RULE


# --------------------------------------------------------------------------------------
# Design records
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", DESIGN_DOCS, ids=lambda p: p.name)
def test_design_doc_has_scope_line_under_title(path: Path) -> None:
    lines = [line for line in _text(path).splitlines() if line.strip()]
    assert lines[0].startswith("# "), "the first line is the H1 title"
    assert lines[1].startswith("**Scope**:"), "the line right under the title is **Scope**:"
    assert len(lines[1]) > len("**Scope**:") + 20


def test_design_record_considers_alternatives() -> None:
    text = _text(REPO / "docs" / "design_docs" / "experimental_apis_and_backends.md")
    section = _section(text, "Alternatives considered")
    assert section.count("\n### ") >= 4
