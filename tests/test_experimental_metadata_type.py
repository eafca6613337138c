"""Experimental metadata is declared once, as :class:`ExperimentalInfo`: both markers take
its fields as keywords (checked against it, an unknown one refused by name), the record is
built from it, and the listing and the lifecycle check read their columns and required
fields from it, so a new field is one declaration."""

from __future__ import annotations

import dataclasses
import datetime as dt
import inspect

import pytest

import flashinfer.gating.records as records
from flashinfer.api_logging import ExperimentalInfo, flashinfer_experimental_api
from flashinfer.backend_dispatch import experimental_backend
from flashinfer.gating import experimental_marker, lifecycle
from flashinfer.gating.records import make_experimental_info, metadata_names

OK = {"owner": "@alice", "tracking_issue": 12, "graduate_by": "2027-05-31"}


def test_the_markers_keywords_are_the_types_fields():
    names = [f.name for f in dataclasses.fields(ExperimentalInfo) if f.name != "problems"]
    assert list(metadata_names()) == names == ["feature", "owner", "tracking_issue", "graduate_by"]
    for marker in (flashinfer_experimental_api, experimental_backend):
        # Not repeated in the signature: the keywords are the type's, whatever it declares.
        params = inspect.signature(marker).parameters
        assert [p.kind for p in params.values()][-1] is inspect.Parameter.VAR_KEYWORD
        assert not set(params) & set(names)


def test_the_old_spellings_still_work():
    @experimental_backend(feature="feat", **OK)
    def check(x):
        return True

    @flashinfer_experimental_api(feature="feat", **OK)
    def api(x):
        return x

    expected = ExperimentalInfo("feat", "@alice", "12", dt.date(2027, 5, 31))
    assert check.experimental_info == api.experimental_info == expected
    assert experimental_backend is experimental_marker.experimental_backend
    # The record's own builder, by position as before and by keyword.
    assert make_experimental_info("feat", "@alice", 12, "2027-05-31") == expected
    assert make_experimental_info(feature="feat", **OK) == expected


@pytest.mark.parametrize("marker", [flashinfer_experimental_api, experimental_backend])
def test_an_unknown_keyword_is_refused_by_name(marker):
    with pytest.raises(TypeError) as caught:
        marker(ownr="@alice", tracking_issue=1)
    message = str(caught.value)
    assert message.startswith(f"{marker.__name__}() got an unexpected keyword argument 'ownr'")
    assert "(did you mean owner=?)" in message
    assert "feature, owner, tracking_issue, graduate_by" in message


def test_make_experimental_info_refuses_what_is_no_field():
    with pytest.raises(TypeError, match="at most 4 values"):
        make_experimental_info("f", "@a", 1, "2027-01-01", "extra")
    with pytest.raises(TypeError, match="'owner' twice"):
        make_experimental_info("f", "@a", owner="@b")
    with pytest.raises(TypeError, match="unexpected keyword argument 'design_doc'"):
        make_experimental_info("f", design_doc="x")


def test_missing_metadata_is_the_lifecycle_checks_to_name(recwarn):
    @experimental_backend
    def check(x):
        return True

    feature = lifecycle.ExperimentalFeature(
        "backend", "m.op[backend=b]", "m", "m.op", "b", check.experimental_info
    )
    problems = [
        p.split(": ", 1)[1] for p in lifecycle.lifecycle_problems([feature], dt.date(2027, 1, 1))
    ]
    assert problems == [
        "no owner; pass owner='@handle' (the person who answers for it)",
        "no tracking issue; pass tracking_issue=<issue number or URL>",
        "no graduate_by date; pass graduate_by='YYYY-MM-DD', at most "
        f"{lifecycle.GRADUATION_HORIZON_MONTHS} months ahead",
    ]


def test_a_new_field_is_one_declaration(monkeypatch):
    """Declare ``design_doc`` on the type (as a subclass stands in for an edit of it): the
    markers take it, the record keeps it, the listing and the JSON show it, and the check
    requires it once its declaration says so, with no other edit."""

    @dataclasses.dataclass(frozen=True)
    class WithDesignDoc(ExperimentalInfo):
        design_doc: str | None = dataclasses.field(
            default=None, metadata=records.field_rule(missing="no design_doc; link the design")
        )

    monkeypatch.setattr(records, "ExperimentalInfo", WithDesignDoc)
    assert metadata_names()[-1] == "design_doc"

    @experimental_backend(feature="feat", design_doc="https://example.org/d", **OK)
    def check(x):
        return True

    @flashinfer_experimental_api(feature="feat", **OK)
    def api(x):
        return x

    assert check.experimental_info.design_doc == "https://example.org/d"
    entries = [
        lifecycle.ExperimentalFeature(
            "backend", "m.op[backend=b]", "m", "m.op", "b", check.experimental_info
        ),
        lifecycle.ExperimentalFeature("api", "m.api", "m", "m.api", None, api.experimental_info),
    ]
    header, backend_row, api_row = lifecycle.format_listing(entries).splitlines()
    assert header.split("  ")[-1].strip() == "DESIGN DOC"
    assert backend_row.endswith("https://example.org/d") and api_row.endswith("-")
    assert entries[0].as_dict()["design_doc"] == "https://example.org/d"
    problems = lifecycle.lifecycle_problems(entries, dt.date(2027, 1, 1))
    assert [p.split(": ", 1)[1] for p in problems] == ["no design_doc; link the design"]


def test_a_field_declared_plainly_is_an_optional_text_keyword(monkeypatch):
    """``design_doc: str | None = None`` and nothing else: taken, kept as text, listed, and
    never required."""

    @dataclasses.dataclass(frozen=True)
    class WithDesignDoc(ExperimentalInfo):
        design_doc: str | None = None

    monkeypatch.setattr(records, "ExperimentalInfo", WithDesignDoc)

    @flashinfer_experimental_api(feature="feat", design_doc="docs/design.md", **OK)
    def api(x):
        return x

    assert api.experimental_info.design_doc == "docs/design.md"
    entry = lifecycle.ExperimentalFeature("api", "m.api", "m", "m.api", None, api.experimental_info)
    assert entry.as_dict()["design_doc"] == "docs/design.md"
    assert lifecycle.lifecycle_problems([entry], dt.date(2027, 1, 1)) == []
    with pytest.raises(TypeError, match="did you mean design_doc="):
        experimental_backend(design_dok="x")
