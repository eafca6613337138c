"""The codemod's source edits (``flashinfer.cli.lifecycle_edits``): each keeps the rest of
the file as it was, and the history it writes reads back as the records it was given."""

from __future__ import annotations

import ast
import textwrap

from hypothesis import given
from hypothesis import strategies as st

from flashinfer.cli.lifecycle_edits import (
    add_changelog_entry,
    add_history_record,
    drop_decorator,
    drop_import_name,
    drop_keyword,
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
    assert 'Backend(\n    "quick", check' in rename_declaration(
        SUPPORT, "Backend", "fast", "quick"
    )
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
