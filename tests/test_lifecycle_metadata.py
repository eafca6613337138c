"""Lifecycle metadata on the experimental markers: what counts as a person's handle, a
tracking issue and a graduation date, how far ahead a date may be, and the feature name a
backend takes from its folder.  (The check that applies them is tested in
tests/pr_checks/test_experimental_lifecycle.py.)"""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given
from hypothesis import strategies as st

from flashinfer.api_logging import make_experimental_info
from flashinfer.gating.records import (
    feature_of_module,
    graduate_by_problem,
    owner_problem,
    tracking_issue_problem,
)
from flashinfer.lifecycle import (
    GRADUATION_HORIZON_MONTHS,
    ExperimentalFeature,
    ExperimentalMetadataWarning,
    graduation_limit,
    lifecycle_problems,
)


@pytest.mark.parametrize("owner", ["@alice", "@a", "@Alice-B2", " @alice ", None, "", "  "])
def test_person_handles_and_missing_owners_are_not_malformed(owner):
    assert owner_problem(owner) is None


@pytest.mark.parametrize(
    ("owner", "reason"),
    [
        ("alice", "does not start with '@'"),
        ("@org/team", "team or bot account"),
        ("@flashinfer-gemm", "team or bot account"),
        ("@FlashInfer-Bot", "team or bot account"),
        ("@", "not a GitHub handle"),
        ("@-alice", "not a GitHub handle"),
        ("@alice-", "not a GitHub handle"),
        ("@al--ice", "not a GitHub handle"),
        ("@al ice", "not a GitHub handle"),
        ("@" + "a" * 40, "not a GitHub handle"),
        (42, "is a int"),
    ],
)
def test_owner_must_be_a_person(owner, reason):
    assert reason in owner_problem(owner)


@pytest.mark.parametrize(
    "issue", [1, 12, "12", "#12", " 12 ", "https://github.com/org/repo/issues/12", None, ""]
)
def test_tracking_issue_numbers_and_urls_are_accepted(issue):
    assert tracking_issue_problem(issue) is None


@pytest.mark.parametrize(
    ("issue", "reason"),
    [
        (0, "not a positive number"),
        ("0", "not a positive number"),
        ("#0", "not a positive number"),
        (-3, "neither an issue number nor a URL"),
        ("TBD", "neither an issue number nor a URL"),
        ("https://", "neither an issue number nor a URL"),
        ("https://github.com", "neither an issue number nor a URL"),
        ("ftp://host.org/issues/1", "neither an issue number nor a URL"),
        ("https://github.com/o/r/issues/1 and more", "neither an issue number nor a URL"),
        (True, "is a bool"),
        (1.5, "is a float"),
    ],
)
def test_tracking_issue_must_be_a_positive_number_or_a_url(issue, reason):
    assert reason in tracking_issue_problem(issue)


@given(st.dates())
def test_every_iso_date_is_accepted_as_text_and_as_a_date(date):
    assert graduate_by_problem(date.isoformat()) == (date, None)
    assert graduate_by_problem(date) == (date, None)


@pytest.mark.parametrize(
    "text", ["31/05/2027", "20270531", "2027-5-31", "2027-02-30", "2027-W22-1", "soon", 20270531]
)
def test_anything_but_yyyy_mm_dd_is_malformed(text):
    date, problem = graduate_by_problem(text)
    assert date is None and "is not a date written YYYY-MM-DD" in problem


@given(st.dates(max_value=dt.date(9998, 1, 1)))
def test_the_horizon_is_that_many_calendar_months(today):
    limit = graduation_limit(today)
    months = (limit.year - today.year) * 12 + limit.month - today.month
    assert months == GRADUATION_HORIZON_MONTHS
    # The same day of the month, or the last day of a shorter month.
    assert limit.day == today.day or (limit.day < today.day and (limit + dt.timedelta(1)).day == 1)


def _feature(graduate_by):
    info = make_experimental_info("f", "@alice", 1, graduate_by)
    return ExperimentalFeature("api", "m.f", "m", "m.f", None, info)


@given(st.dates(min_value=dt.date(2000, 1, 1), max_value=dt.date(2100, 1, 1)))
def test_a_date_passes_exactly_from_today_to_the_horizon(today):
    limit = graduation_limit(today)
    assert lifecycle_problems([_feature(today)], today) == []
    assert lifecycle_problems([_feature(limit)], today) == []
    (late,) = lifecycle_problems([_feature(limit + dt.timedelta(1))], today)
    assert f"more than {GRADUATION_HORIZON_MONTHS} months ahead" in late
    (past,) = lifecycle_problems([_feature(today - dt.timedelta(1))], today)
    assert "past its graduation date" in past


def test_malformed_metadata_is_recorded_once_and_listed_by_the_check():
    with pytest.warns(ExperimentalMetadataWarning) as caught:
        info = make_experimental_info("f", "x", "TBD", "31/05/2027", marked=len)
    assert len(caught) == 1
    assert len(info.problems) == 3 and info.graduate_by is None
    feature = ExperimentalFeature("backend", "m.op[backend=b]", "m", "m.op", "b", info)
    problems = lifecycle_problems([feature], dt.date(2027, 1, 1))
    assert [p.split(": ", 1)[1] for p in problems] == list(info.problems)  # not "missing"


def test_without_a_marked_object_nothing_is_warned(recwarn):
    make_experimental_info("f", "x", None, None)
    assert not recwarn.list


@pytest.mark.parametrize(
    ("module", "feature"),
    [
        ("flashinfer.experimental.rowwise.support", "rowwise"),
        ("flashinfer.experimental.rowwise", "rowwise"),
        ("flashinfer.experimental", None),
        ("flashinfer.norm", None),
        ("mypackage.experimental.rowwise.support", None),
    ],
)
def test_a_backends_feature_is_its_folder(module, feature):
    assert feature_of_module(module) == feature


def test_experimental_backend_names_its_feature_after_the_folder():
    from flashinfer import experimental_backend

    def check(x, backend):
        return True

    check.__module__ = "flashinfer.experimental.rowwise.support"
    assert experimental_backend(check).experimental_info.feature == "rowwise"

    def named(x, backend):
        return True

    named.__module__ = "flashinfer.experimental.rowwise.support"
    marked = experimental_backend(feature="rowwise_rmsnorm")(named)
    assert marked.experimental_info.feature == "rowwise_rmsnorm"

    def elsewhere(x, backend):
        return True

    qualified = f"{__name__}.{elsewhere.__qualname__}"
    assert experimental_backend(elsewhere).experimental_info.feature == qualified


_HORIZON_DOCS = [
    "CONTRIBUTING.md",
    "CLAUDE.md",
    "CHANGELOG.md",
    "flashinfer/experimental/README.md",
    "flashinfer/experimental/CLAUDE.md",
]


@pytest.mark.parametrize("name", _HORIZON_DOCS)
def test_documents_cite_the_horizon_by_its_constant(name):
    """The number is set once (GRADUATION_HORIZON_MONTHS); a document that states it cites
    the constant, with its value, and never a number of months of its own."""
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / name).read_text(encoding="utf-8")
    cited = "GRADUATION_HORIZON_MONTHS` ("
    for part in text.split(cited)[1:]:
        assert part.startswith(f"{GRADUATION_HORIZON_MONTHS} months)"), part[:40]
    words = " ".join(text.split()).lower()
    own = words.replace(f"{cited.lower()}{GRADUATION_HORIZON_MONTHS} months)", "")
    for phrase in ("six months", "6 months", "about six"):
        assert phrase not in own, f"{name} states the horizon without the constant: {phrase!r}"
