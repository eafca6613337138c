"""The codemod's source edits (``flashinfer.cli.lifecycle_edits``): each keeps the rest of
the file as it was, and the history it writes reads back as the records it was given."""

from __future__ import annotations

import ast
import keyword
import textwrap

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from flashinfer.cli.lifecycle_edits import (
    add_changelog_entry,
    add_history_record,
    drop_decorator,
    drop_elements,
    drop_import_name,
    drop_imports,
    drop_keyword,
    move_package,
    record_source,
    rename_declaration,
    swap_decorator,
)
from flashinfer.gating import history
from flashinfer.gating.history import Graduated, Removed, Renamed

EMPTY = (
    "x = 1\n# lifecycle-history: begin\nHISTORY: tuple[LifecycleRecord, ...] = ()\n"
    "# lifecycle-history: end\ny = 2\n"
)

names = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=60)
versions = st.from_regex(r"\A[0-9]{1,2}\.[0-9]{1,2}\.[0-9]\Z")
records = st.one_of(
    st.builds(Graduated, names, versions, st.one_of(st.none(), names)),
    st.builds(Renamed, names, names, names, versions, versions, st.booleans()),
    st.builds(Removed, names, names, versions, names, versions, st.booleans()),
)


def _read_back(text: str) -> tuple:
    namespace = {
        "LifecycleRecord": object,
        **{n: getattr(history, n) for n in ("Graduated", "Renamed", "Removed")},
    }
    start = text.index("# lifecycle-history: begin")
    end = text.index("# lifecycle-history: end")
    exec(text[start:end], namespace)
    return namespace["HISTORY"]


@given(st.lists(records, max_size=5))
def test_the_history_written_reads_back_as_the_records_given(given_records):
    text = EMPTY
    for record in given_records:
        text = add_history_record(text, record)
    assert _read_back(text) == tuple(given_records)
    assert text.startswith("x = 1\n") and text.endswith("y = 2\n")
    for record in given_records:
        assert all(len(line) <= 100 or '"' in line for line in record_source(record).splitlines())


SUPPORT = textwrap.dedent(
    """\
    from flashinfer.backend_dispatch import Backend, experimental_backend, find_compute_capability


    @experimental_backend(
        owner="@alice", tracking_issue=3, graduate_by="2027-05-28"
    )
    @backend_family(TRITON)
    def check_fast(a, backend="auto"):
        return True


    FAST = Backend(
        "fast", check=check_fast, run=run, prefer=prefer_fast, differentiable=True
    )
    """
)


def test_graduating_a_declaration_drops_its_marker_its_preference_and_the_unused_import():
    text = drop_decorator(SUPPORT, "check_fast", "experimental_backend")
    text = drop_keyword(text, "Backend", "fast", "prefer")
    text = drop_import_name(text, "flashinfer.backend_dispatch", "experimental_backend")
    assert "experimental_backend" not in text and "prefer" not in text
    assert "@backend_family(TRITON)\ndef check_fast" in text
    assert "check=check_fast, run=run, differentiable=True" in text
    ast.parse(text)


def test_an_import_still_used_is_kept():
    text = SUPPORT + "\nprint(experimental_backend)\n"
    assert drop_import_name(text, "flashinfer.backend_dispatch", "experimental_backend") == text


def test_renaming_a_declaration_and_promoting_an_api():
    assert 'Backend(\n    "quick", check' in rename_declaration(SUPPORT, "Backend", "fast", "quick")
    api = '@flashinfer_experimental_api(\n    feature="f", owner="@a"\n)\ndef f(x):\n    return x\n'
    assert swap_decorator(api, "f", "flashinfer_experimental_api", "flashinfer_api") == (
        "@flashinfer_api\ndef f(x):\n    return x\n"
    )


def test_a_changelog_entry_goes_first_under_unreleased():
    text = "# Changelog\n\n## Unreleased\n\n- older\n\n## 0.1.0\n"
    assert (
        add_changelog_entry(text, "new")
        == "# Changelog\n\n## Unreleased\n\n- new\n- older\n\n## 0.1.0\n"
    )
    assert "## Unreleased\n\n- new\n" in add_changelog_entry("# Changelog\n\n## 0.1.0\n", "new")


# -- issue 43: the edits find the code meant, by its syntax tree, whatever the names ---------

identifiers = st.from_regex(r"\A[a-z][a-z0-9_]{0,12}\Z").filter(lambda n: not keyword.iskeyword(n))


@given(name=identifiers, new=identifiers, decoys=st.integers(1, 3), checker=identifiers)
def test_a_rename_edits_the_declaration_whose_checker_is_the_ops(name, new, decoys, checker):
    """Item 6: other ``Backend(name, ...)`` calls before (and after) the op's declaration,
    with other checkers, are left alone; the one with the op's checker is renamed."""
    decoy = f'OTHER = Backend("{name}", check=other_{checker}, run=run)\n'
    text = decoy * decoys + f'MINE = Backend(\n    "{name}", check={checker}, run=run\n)\n' + decoy
    edited = rename_declaration(text, "Backend", name, new, checker)
    calls = [n for n in ast.walk(ast.parse(edited)) if isinstance(n, ast.Call)]
    named = {(c.args[0].value, ast.unparse(c.keywords[0].value)) for c in calls}
    assert named == {(name, f"other_{checker}"), (new, checker)}
    assert edited.count(decoy) == decoys + 1


@given(name=identifiers, checker=identifiers)
def test_a_rename_that_cannot_tell_which_declaration_refuses(name, checker):
    one = f'X = Backend("{name}", check={checker}, run=run)\n'
    for text in ("", one * 2):
        with pytest.raises(LookupError):
            rename_declaration(text, "Backend", name, "other", checker)


@given(feature=identifiers, suffix=st.from_regex(r"\A[a-z0-9_]{1,6}\Z"))
def test_moving_a_feature_leaves_a_sibling_whose_name_starts_with_it(feature, suffix):
    """Item 9: the dotted module is matched, not a text prefix: ``<feature><suffix>``'s
    imports (and mentions) are untouched; the feature's own move, in every import form."""
    assume(not keyword.iskeyword(feature + suffix))
    old, new = f"flashinfer.experimental.{feature}", f"flashinfer.features.{feature}"
    sibling = f"flashinfer.experimental.{feature}{suffix}"
    text = (
        f"from {old}.support import A\n"
        f"from {old} import support\n"
        f"import {old}.kernel as k\n"
        f"from {sibling}.support import (\n    B,\n    C,\n)\n"
        f"import {sibling}\n"
        f'PATH = "flashinfer/experimental/{feature}{suffix}/x.py"  # {sibling}\n'
        f'HERE = "flashinfer/experimental/{feature}/x.py"  # {old}.support\n'
    )
    moved = move_package(
        text, old, new, f"flashinfer/experimental/{feature}", f"flashinfer/features/{feature}"
    )
    imported = set()
    for node in ast.walk(ast.parse(moved)):
        if isinstance(node, ast.ImportFrom):
            imported.add(node.module)
        elif isinstance(node, ast.Import):
            imported.update(a.name for a in node.names)
    assert imported == {f"{new}.support", new, f"{new}.kernel", f"{sibling}.support", sibling}
    assert f'"flashinfer/experimental/{feature}{suffix}/x.py"  # {sibling}\n' in moved
    assert f'"flashinfer/features/{feature}/x.py"  # {new}.support\n' in moved


LAYOUTS = {
    "one line": "from {m}.support import SPLITK\n",
    "parenthesised": "from {m}.support import (\n    SPLITK,\n    Runner as Runner,\n)\n",
    "commented": "# the light declarations\nfrom {m}.support import SPLITK\n",
    "import as": "import {m}.support as splitk_support\n",
    "under TYPE_CHECKING": "if TYPE_CHECKING:\n    from {m}.support import SPLITK\n",
}


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@given(feature=identifiers)
def test_removal_drops_every_import_layout_and_lists_those_inside_functions(layout, feature):
    """Item 10: the module still parses, imports nothing of the feature at module level, and
    keeps (and reports the line of) an import inside a function; a sibling stays."""
    m = f"flashinfer.experimental.{feature}"
    text = (
        "from flashinfer.x import y\n"
        + LAYOUTS[layout].format(m=m)
        + f"from {m}_v2 import Z\n"
        + "TABLE = [\n    A,\n    SPLITK,\n]\n\n\n"
        + f"def run():\n    x = 1\n    from {m}.kernel import go\n    return go(x)\n"
    )
    edited, kept = drop_imports(drop_elements(text, ["SPLITK"]), m)
    tree = ast.parse(edited)
    top = [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]
    modules = {n.module if isinstance(n, ast.ImportFrom) else n.names[0].name for n in top}
    assert modules == {"flashinfer.x", f"{m}_v2", f"{m}.kernel"}
    assert kept == [edited.splitlines().index(f"    from {m}.kernel import go") + 1]
    assert "TABLE = [\n    A,\n]" in edited
