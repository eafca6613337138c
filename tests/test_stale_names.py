"""No stale module names: what the package's comments and docstrings, and the docs' dotted
names, mention exists (tests/stale_names.py says how a mention is read and resolved).  Each
rule is also fed a stale name, and must name its file and line."""

from __future__ import annotations

from pathlib import Path

import pytest
from stale_names import REPO, Package, comments_and_docstrings, dotted_names, stale_mentions

DOCS = sorted(
    {
        REPO / "README.md",
        REPO / "CLAUDE.md",
        REPO / "CONTRIBUTING.md",
        *REPO.glob("flashinfer/**/*.md"),
        *(p for p in REPO.glob("docs/**/*.rst") if "_build" not in p.parts),
        *(p for p in REPO.glob("docs/**/*.md") if "_build" not in p.parts),
    }
)

HYPOTHETICAL = {
    # A design alternative that was not chosen: the name is what it would have been.
    ("docs/design_docs/experimental_apis_and_backends.md", "flashinfer.set_backend_policy"),
    # The example sets a checker's __module__ to a feature that does not exist, on purpose.
    ("flashinfer/experimental/README.md", "flashinfer.experimental.fast_scale.support"),
    # The author's page creates this feature (tests/test_doc_author_path.py runs its steps).
    ("docs/author.md", "flashinfer.experimental.rowwise_norm.support"),
    ("docs/author.md", "flashinfer.experimental.rowwise_norm.kernel"),
}
"""Names the docs mention that are not meant to exist, with the reason."""


@pytest.fixture(scope="module")
def package() -> Package:
    return Package()


def test_the_package_names_only_what_exists(package):
    problems = []
    for path in package.modules.values():
        text = comments_and_docstrings(path.read_text())
        problems += stale_mentions(str(path.relative_to(REPO)), text, package)
    assert not problems, "\n".join(problems)


def _doc_mentions(doc: Path) -> list[tuple[str, int, str]]:
    relative = str(doc.relative_to(REPO))
    return [
        (relative, line, name)
        for line, text in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1)
        for name in dotted_names(text)
    ]


def test_the_docs_dotted_names_exist(package):
    """Paths in the docs are tests/test_doc_paths.py's; the dotted names are checked here."""
    mentions = [m for doc in DOCS for m in _doc_mentions(doc)]
    assert len(mentions) > 100  # the docs do name the package's modules
    stale = [
        f"{file}:{line}: {name} does not exist (renamed or moved? name what is there now)"
        for file, line, name in mentions
        if (file, name) not in HYPOTHETICAL and not package.has_dotted(name)
    ]
    assert not stale, "\n".join(stale)
    # ...and each hypothetical name is still there and still not real (no stale allowance).
    for file, name in HYPOTHETICAL:
        assert any(m[0] == file and m[2] == name for m in mentions), (file, name)
        assert not package.has_dotted(name), name


STALE = [
    # Each from before the reorganisation, as the package had them.
    ("# generated code runs in ``flashinfer._generated``", "flashinfer._generated"),
    (
        '"""See :func:`~flashinfer.dispatch.markers.experimental_backend`."""',
        "flashinfer.dispatch.markers.experimental_backend",
    ),
    ("# the one compiler (dispatch/codegen.py)", "dispatch/codegen.py"),
    ("# their runners are in mm_runners.py", "mm_runners.py"),
    ("# Defined here, not in _dispatch: ...", "_dispatch"),
    ('"""Names from ``_stacklevel`` and ``_api_records``."""', "_stacklevel"),
    (
        "# :class:`flashinfer.gating.lifecycle.NoSuchThing`",
        "flashinfer.gating.lifecycle.NoSuchThing",
    ),
    (
        "# :meth:`flashinfer.gating.lifecycle.ExperimentalFeature.as_list`",
        "flashinfer.gating.lifecycle.ExperimentalFeature.as_list",
    ),
]


@pytest.mark.parametrize(("text", "name"), STALE, ids=[name for _, name in STALE])
def test_a_stale_name_is_caught_with_its_file_and_line(package, text, name):
    # Line 4: a comment after a statement, or a class's docstring.
    opener = "class C:\n    " if text.startswith('"""') else "X = 1\n"
    source = f'"""A module."""\n\n{opener}{text}\n'
    problems = stale_mentions("flashinfer/fake.py", comments_and_docstrings(source), package)
    assert problems, text
    assert problems[0].startswith(f"flashinfer/fake.py:4: {name} ")


FRESH = [
    "# :func:`flashinfer.gating.op_registry.registered_ops`",
    "# ``flashinfer.codegen.generated.<name>``",
    "# :meth:`flashinfer.gating.lifecycle.ExperimentalFeature.as_dict` (gating/lifecycle.py)",
    "# flashinfer/experimental/<feature>/support.py, scripts/check.sh",
    "# the ``flashinfer.api`` logger",
    "# the module ``tiled_mm.py`` and the helper ``_blank`` of records",
    "# torch/_library is not ours",
    "# flashinfer.lifecycle.GRADUATION_HORIZON_MONTHS; ``..._rmsnorm_dispatcher``",
]


@pytest.mark.parametrize("text", FRESH)
def test_names_that_exist_pass(package, text):
    source = f'"""A module."""\n\n{text}\n'
    assert stale_mentions("flashinfer/fake.py", comments_and_docstrings(source), package) == []
