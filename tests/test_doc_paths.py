"""Files the contributor and policy documents name exist, and their examples stack the
experimental marker the one way the code does.

A path is a word of the text (code spans, code blocks and prose alike) that starts with a
top-level entry of the repository and a ``/`` (``scripts/check.sh``,
``flashinfer/experimental/README.md``, ``tests/experimental/test_x.py::test_y``); a
placeholder in angle brackets (``flashinfer/experimental/<feature>/support.py``) stands for
any name, and at least one file must fit it.  A capitalised root document (``CHANGELOG.md``)
must exist beside the document or at the root, and a document that speaks of "the
changelog" needs ``CHANGELOG.md``.  String operations only: no pattern to keep linear.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCUMENTS = sorted(
    {
        REPO / "CONTRIBUTING.md",
        REPO / "CLAUDE.md",
        REPO / "README.md",
        REPO / "CHANGELOG.md",
        *REPO.glob("flashinfer/**/CLAUDE.md"),
        *REPO.glob("flashinfer/**/README.md"),
        *(p for p in REPO.glob("docs/**/*.rst") if "_build" not in p.parts),
        *(p for p in REPO.glob("docs/**/*.md") if "_build" not in p.parts),
    }
)
# Punctuation around a word that is not part of the path it holds.
_AROUND = "`'\"()[]{},;:.!?*"
_ROOT_DOC_SUFFIX = ".md"


def top_level_names(root: Path) -> frozenset[str]:
    return frozenset(p.name for p in root.iterdir() if p.name != ".git")


def _without_placeholders(path: str) -> str:
    """``a/<feature>/b`` -> ``a/*/b`` (a glob)."""
    out, rest = [], path
    while "<" in rest and ">" in rest.partition("<")[2]:
        before, _, after = rest.partition("<")
        out.append(before + "*")
        rest = after.partition(">")[2]
    return "".join(out) + rest


def mentioned_paths(text: str, top: frozenset[str]) -> Iterator[str]:
    """The repository paths ``text`` names (see the module docstring)."""
    for word in text.split():
        token = word.strip(_AROUND).partition("::")[0].rstrip("/")
        if "/" not in token or "=" in token or "$" in token or "://" in token:
            continue
        if token.split("/", 1)[0] in top:
            yield token


def missing_paths(text: str, root: Path) -> list[str]:
    top = top_level_names(root)
    return sorted(
        {p for p in mentioned_paths(text, top) if not any(root.glob(_without_placeholders(p)))}
    )


def root_documents(text: str) -> Iterator[str]:
    """Words like ``CHANGELOG.md``: an upper-case Markdown name, no folder."""
    for word in text.split():
        token = word.strip(_AROUND)
        stem = token[: -len(_ROOT_DOC_SUFFIX)]
        if token.endswith(_ROOT_DOC_SUFFIX) and "/" not in token and stem.isupper():
            yield token


CREATED = {
    "docs/author.md": {
        "flashinfer/experimental/rowwise_norm/__init__.py",
        "flashinfer/experimental/rowwise_norm/kernel.py",
        "flashinfer/experimental/rowwise_norm/support.py",
        "tests/experimental/test_rowwise_norm.py",
    }
}
"""Files a document's steps create (tests/test_doc_author_path.py runs the author's page)."""

GRADUATED = {"flashinfer/features", "flashinfer/features/<feature>"}
"""What ``flashinfer lifecycle graduate`` creates, absent until a feature graduates."""


@pytest.mark.parametrize("doc", DOCUMENTS, ids=lambda p: str(p.relative_to(REPO)))
def test_every_path_a_document_names_exists(doc: Path) -> None:
    created = CREATED.get(str(doc.relative_to(REPO)), set()) | GRADUATED
    missing = sorted(set(missing_paths(doc.read_text(encoding="utf-8"), REPO)) - created)
    assert not missing, f"{doc.relative_to(REPO)} names files that do not exist: {missing}"


@pytest.mark.parametrize("doc", DOCUMENTS, ids=lambda p: str(p.relative_to(REPO)))
def test_every_root_document_named_exists(doc: Path) -> None:
    text = doc.read_text(encoding="utf-8")
    missing = sorted(
        {n for n in root_documents(text) if not ((doc.parent / n).exists() or (REPO / n).exists())}
    )
    assert not missing, f"{doc.relative_to(REPO)} names documents that do not exist: {missing}"
    if "changelog" in text.lower():
        assert (REPO / "CHANGELOG.md").is_file(), f"{doc.relative_to(REPO)} cites a changelog"


def test_the_documents_are_found() -> None:
    names = {str(p.relative_to(REPO)) for p in DOCUMENTS}
    assert {"CONTRIBUTING.md", "CLAUDE.md", "flashinfer/experimental/README.md"} <= names
    assert {"flashinfer/experimental/CLAUDE.md", "docs/experimental.rst"} <= names


def test_the_finder_reports_a_missing_path_and_accepts_placeholders(tmp_path: Path) -> None:
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "check.sh").write_text("")
    (tmp_path / "pkg" / "feat").mkdir(parents=True)
    (tmp_path / "pkg" / "feat" / "support.py").write_text("")
    text = (
        "Run `bash scripts/check.sh` (or ``scripts/check.sh --all``), then scripts/gone.sh;\n"
        "checkers live in `pkg/<feature>/support.py`, kernels in pkg/<feature>/kernel.py.\n"
        "Not paths: a/b, https://x.org/scripts/a, $HOME/scripts, key=scripts/x, usr/bin.\n"
        "A test id: scripts/check.sh::test_x.  A folder: `pkg/feat/`."
    )
    assert missing_paths(text, tmp_path) == ["pkg/<feature>/kernel.py", "scripts/gone.sh"]


def test_root_documents_are_upper_case_markdown_names() -> None:
    text = "See `CHANGELOG.md`, CONTRIBUTING.md. Not: readme.md, docs/API.md, `support.py`."
    assert list(root_documents(text)) == ["CHANGELOG.md", "CONTRIBUTING.md"]


_MARKS_BELOW = ("@backend_family", "@supported_compute_capability")


def _decorator_stacks(text: str) -> Iterator[list[str]]:
    """Runs of consecutive decorator lines (doctest prompts and indentation stripped)."""
    stack: list[str] = []
    for line in text.splitlines():
        code = line.strip()
        for prompt in (">>>", "..."):
            code = code.removeprefix(prompt).strip()
        if code.startswith("@"):
            stack.append(code)
            continue
        if stack:
            yield stack
        stack = []
    if stack:
        yield stack


def marker_order_problems(text: str) -> list[str]:
    """Stacks where a family or capability mark sits above ``@experimental_backend``."""
    found = []
    for stack in _decorator_stacks(text):
        names = [line.partition("(")[0] for line in stack]
        if "@experimental_backend" in names:
            above = names[: names.index("@experimental_backend")]
            if any(name in _MARKS_BELOW for name in above):
                found.append(" / ".join(stack))
    return found


@pytest.mark.parametrize("doc", DOCUMENTS, ids=lambda p: str(p.relative_to(REPO)))
def test_examples_put_the_experimental_marker_first(doc: Path) -> None:
    """One order everywhere: ``@experimental_backend(...)`` outermost, then the family or
    capability marks (scripts/pr_checks/experimental_placement.py holds support.py to it)."""
    assert marker_order_problems(doc.read_text(encoding="utf-8")) == []


def test_the_order_check_finds_a_reversed_stack() -> None:
    text = (
        "   >>> @backend_family(TRITON)\n   ... @experimental_backend(owner='@a')\n"
        "   ... def ok(x): ...\n\n@experimental_backend\n@supported_compute_capability([90])\n"
        "def fine(x): ...\n"
    )
    assert marker_order_problems(text) == [
        "@backend_family(TRITON) / @experimental_backend(owner='@a')"
    ]
