"""``FLASHINFER_EXPERIMENTAL_WARNINGS`` follows its current value, whatever came before, and
``reset_experimental_warnings()`` removes the filters the library installed, never the
program's own (issue 21, item 9).

Generated sequences of steps (set the variable to any value, unset it, reset, leave a
library filter behind as a ``catch_warnings`` race can, use an experimental API) run
against a model: a use that warns for the first time does what the variable says when it
holds a filter action, and what the program's own filter says otherwise; the program's
filters are never touched.
"""

from __future__ import annotations

import itertools
import warnings
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flashinfer import ExperimentalWarning, flashinfer_experimental_api, reset_experimental_warnings
from flashinfer.gating.warn_once import LIBRARY_FILTER_MESSAGE, is_library_filter

VARIABLE = "FLASHINFER_EXPERIMENTAL_WARNINGS"
ACTIONS = ["error", "ignore", "default", "always", "module", "once"]
# Values that are not actions: unset in effect (a bad one also warns once, a RuntimeWarning).
NOT_ACTIONS = ["", "Error", "all"]
_names = itertools.count()


def _fresh_api() -> Any:
    """An experimental API of its own name, so its warning's text is new to ``warnings``."""

    def preview() -> None:
        pass

    preview.__qualname__ = preview.__name__ = f"preview_{next(_names)}"
    return flashinfer_experimental_api(preview)


STEPS = st.one_of(
    st.tuples(st.just("set"), st.sampled_from(ACTIONS + NOT_ACTIONS)),
    st.tuples(st.just("unset")),
    st.tuples(st.just("reset")),
    st.tuples(st.just("leftover"), st.sampled_from(ACTIONS)),
    st.tuples(st.just("use"), st.sampled_from(["same", "fresh"])),
)


def _outcome(use: Any, record: list[warnings.WarningMessage]) -> str:
    """What one use did: "refused", "shown" (an ExperimentalWarning was shown, as ``record``
    of the enclosing ``catch_warnings(record=True)`` says) or "silent"."""
    before = len(record)
    try:
        use()
    except ExperimentalWarning:
        return "refused"
    shown = any(w.category is ExperimentalWarning for w in record[before:])
    return "shown" if shown else "silent"


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(user_action=st.sampled_from(["always", "error", "ignore"]), steps=st.lists(STEPS))
def test_the_variable_follows_its_current_value_and_reset_keeps_the_programs_filters(
    monkeypatch: pytest.MonkeyPatch, user_action: str, steps: list[tuple[str, ...]]
):
    monkeypatch.delenv(VARIABLE, raising=False)
    reset_experimental_warnings()
    same = _fresh_api()
    same_warned = False
    variable: str | None = None
    leftover = False  # a library filter left in the list, until a warning or a reset
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        # The very filter the library used to install for the variable, put there by the
        # program itself: it must survive everything the library does.
        warnings.filterwarnings(user_action, category=ExperimentalWarning)
        programs = list(warnings.filters)
        for step in steps:
            kind = step[0]
            if kind == "set":
                variable = step[1]
                monkeypatch.setenv(VARIABLE, variable)
            elif kind == "unset":
                variable = None
                monkeypatch.delenv(VARIABLE, raising=False)
            elif kind == "reset":
                reset_experimental_warnings()
                same_warned = leftover = False
            elif kind == "leftover":
                warnings.filterwarnings(
                    step[1], message=LIBRARY_FILTER_MESSAGE, category=ExperimentalWarning
                )
                leftover = True
            else:
                fresh = step[1] == "fresh"
                api = _fresh_api() if fresh else same
                got = _outcome(api, record)
                if not fresh and same_warned:
                    expected = "silent"  # warned once already, whatever the variable says
                else:
                    leftover = False  # issuing a warning takes a stale one out first
                    action = variable if variable in ACTIONS else user_action
                    expected = {"error": "refused", "ignore": "silent"}.get(action, "shown")
                    if not fresh and action != "error":
                        same_warned = True
                assert got == expected, (step, variable, user_action)
            if not leftover:
                assert warnings.filters == programs, step
                assert not any(is_library_filter(f) for f in warnings.filters)


def test_error_then_unset_then_reset_the_issues_sequence(monkeypatch: pytest.MonkeyPatch):
    """The sequence the issue reported: the error filter stayed installed for good."""
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        programs = list(warnings.filters)
        monkeypatch.setenv(VARIABLE, "error")
        assert _outcome(_fresh_api(), record) == "refused"
        monkeypatch.delenv(VARIABLE)
        assert _outcome(_fresh_api(), record) == "shown"
        reset_experimental_warnings()
        assert warnings.filters == programs
        assert _outcome(_fresh_api(), record) == "shown"


def test_reset_removes_only_the_librarys_filters():
    with warnings.catch_warnings():
        warnings.filterwarnings("error", category=ExperimentalWarning)
        warnings.filterwarnings("ignore", message="Experimental", category=ExperimentalWarning)
        programs = list(warnings.filters)
        for action in ACTIONS:
            warnings.filterwarnings(
                action, message=LIBRARY_FILTER_MESSAGE, category=ExperimentalWarning
            )
        reset_experimental_warnings()
        assert warnings.filters == programs


def test_the_docs_name_the_librarys_filter_pattern():
    text = (Path(__file__).resolve().parents[1] / "docs" / "experimental.rst").read_text()
    assert LIBRARY_FILTER_MESSAGE in text
