"""Lifecycle metadata on the experimental markers: what counts as a person's handle, a
tracking issue and a graduation date, how far ahead a date may be, and the feature name a
backend takes from its folder.  (The check that applies them is tested in
tests/pr_checks/test_experimental_lifecycle.py.)"""

from __future__ import annotations

import datetime as dt
import json
import warnings

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flashinfer.api_logging import ExperimentalInfo, make_experimental_info
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
    format_listing,
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


# ---- any metadata value: decoration never raises, the listing and the check never fail ----
# (issue 21, item 16)


class _Unprintable:
    """A value whose repr() and str() both raise."""

    def __repr__(self) -> str:
        raise RuntimeError("no repr")

    __str__ = __repr__


ANY_VALUE = st.one_of(
    st.none(),
    st.text(),
    st.text(alphabet="0123456789#", min_size=1),
    st.integers(),
    st.just("9" * 5000),  # beyond int()'s digit limit
    st.just("0" * 4999 + "7"),
    st.just(10**5000),  # beyond str()'s digit limit
    st.booleans(),
    st.floats(),
    st.binary(max_size=8),
    st.dates(),
    st.datetimes(),
    st.lists(st.integers(), max_size=3),
    st.builds(object),
    st.builds(_Unprintable),
)


def _decorate(feature, owner, issue, graduate_by):
    """The two markers with these values, as a module applies them when imported."""
    from flashinfer import experimental_backend, flashinfer_experimental_api

    def preview(x):
        return x

    def check(x, backend):
        return True

    marked_api = flashinfer_experimental_api(
        feature=feature, owner=owner, tracking_issue=issue, graduate_by=graduate_by
    )(preview)
    marked_check = experimental_backend(
        feature=feature, owner=owner, tracking_issue=issue, graduate_by=graduate_by
    )(check)
    return [
        ExperimentalFeature(
            "api", "m.preview", "m", "m.preview", None, marked_api.experimental_info
        ),
        ExperimentalFeature(
            "backend", "m.op[backend=b]", "m", "m.op", "b", marked_check.experimental_info
        ),
    ]


@settings(max_examples=300, deadline=None)
@given(feature=ANY_VALUE, owner=ANY_VALUE, issue=ANY_VALUE, graduate_by=ANY_VALUE)
def test_any_metadata_only_warns_and_fails_the_lifecycle_check(feature, owner, issue, graduate_by):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        features = _decorate(feature, owner, issue, graduate_by)
    # Only the one warning the design promises, once per marked object, and short.
    assert {w.category for w in caught} <= {ExperimentalMetadataWarning}
    assert len(caught) <= 2 and all(len(str(w.message)) < 2000 for w in caught)
    for f in features:
        info = f.info
        assert isinstance(info.feature, str)
        assert info.owner is None or isinstance(info.owner, str)
        assert info.tracking_issue is None or isinstance(info.tracking_issue, str)
        assert info.graduate_by is None or type(info.graduate_by) is dt.date
        assert bool(info.problems) == bool(caught)
    today = dt.date(2027, 1, 1)
    listing = format_listing(features)
    assert len(listing.splitlines()) == 1 + len(features)  # one line each, whatever the text
    problems = lifecycle_problems(features, today)
    json.dumps([f.as_dict() for f in features])
    for f in features:  # every recorded problem fails the check
        for problem in f.info.problems:
            assert any(p.endswith(problem) for p in problems)
    if feature is not None and not isinstance(feature, str):
        assert all(
            any("feature" in p and "name the feature" in p for p in f.info.problems)
            for f in features
        )


@pytest.mark.parametrize(
    "issue",
    ["9" * 5000, "#" + "9" * 5000, "9" * 11, 10**5000, 10**11],
    ids=["5000 digits", "#5000 digits", "11 digits", "int 5001 digits", "int 12 digits"],
)
def test_a_tracking_issue_too_long_for_a_number_is_a_problem_not_a_crash(issue):
    problem = tracking_issue_problem(issue)
    assert problem is not None and "too long for an issue number" in problem
    assert len(problem) < 300  # the value is quoted cut


@pytest.mark.parametrize(
    "issue", ["9" * 10, "0" * 5000 + "12", 2**31 - 1], ids=["10 digits", "zeros", "int32"]
)
def test_long_but_real_issue_numbers_are_accepted(issue):
    assert tracking_issue_problem(issue) is None


def test_a_non_text_feature_is_reported_and_listed():
    with pytest.warns(ExperimentalMetadataWarning, match="feature 123 is a int"):
        (api, backend) = _decorate(123, "@alice", 1, "2027-03-01")
    assert api.info.feature == "123"
    assert "123" in format_listing([api, backend])
    problems = lifecycle_problems([api, backend], dt.date(2027, 1, 1))
    assert len(problems) == 2 and all("feature 123 is a int" in p for p in problems)


@settings(max_examples=200, deadline=None)
@given(
    feature=ANY_VALUE,
    owner=ANY_VALUE,
    issue=ANY_VALUE,
    graduate_by=ANY_VALUE,
    problems=st.one_of(st.none(), ANY_VALUE, st.tuples(ANY_VALUE)),
)
def test_a_hand_built_info_never_breaks_the_listing_or_the_check(
    feature, owner, issue, graduate_by, problems
):
    """ExperimentalInfo is public: one built by hand, of any values, is listed and checked
    as the marker would have recorded it."""
    info = ExperimentalInfo(feature, owner, issue, graduate_by, problems)
    entry = ExperimentalFeature("api", "m.f", "m", "m.f", None, info)
    assert len(format_listing([entry]).splitlines()) == 2
    lifecycle_problems([entry], dt.date(2027, 1, 1))
    json.dumps(entry.as_dict())


def test_a_stable_op_with_an_experimental_backend_of_bad_metadata_still_imports(
    isolated_op_registry,
):
    from flashinfer.utils import backend_requirement, experimental_backend

    with pytest.warns(ExperimentalMetadataWarning, match="too long for an issue number"):

        @experimental_backend(feature=123, tracking_issue="9" * 5000)
        def risky_ok(x, backend="auto"):
            return True

    def stable_ok(x, backend="auto"):
        return True

    @backend_requirement({"stable": stable_ok, "risky": risky_ok})
    def op(x, backend="auto"):
        return backend

    assert list(op.stable_backends) == ["stable"]
    assert set(op.experimental_backends) == {"risky"}
