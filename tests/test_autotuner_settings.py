"""The tuner's timing settings are checked at the assignment (issue 21, item 10).

``AutoTuner.switch_margin`` (a finite number >= 0), ``repeat`` (an int >= 1), ``warmup`` (an
int >= 0) and ``budget_s`` (a finite number > 0, or None): any other value raises at the
assignment, naming the setting (``TypeError`` for a value of the wrong kind, ``ValueError``
for one out of range), and the value in effect is kept.  Every value accepted tunes: no bare
``StopIteration`` while picking, no "no median for empty data".  Over generated values.
"""

from __future__ import annotations

import math
import numbers

import pytest
import torch
from autotuner_fakes import FakeRunner, clean_tuner, make_op
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flashinfer.autotuner import AutoTuner, autotune
from flashinfer.autotuner.timing import measure, pick


@pytest.fixture(autouse=True)
def tuner():
    with clean_tuner(warmup=0, repeat=1) as tuner:
        saved = (tuner.switch_margin, tuner.budget_s)
        yield tuner
        tuner.switch_margin, tuner.budget_s = saved


def is_number(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


#: Values of no numeric kind at all: refused with a TypeError by every setting.
not_numbers = st.one_of(
    st.none(),
    st.booleans(),
    st.text(max_size=8),
    st.binary(max_size=4),
    st.lists(st.integers(), max_size=2),
    st.just(object()),
    st.complex_numbers(allow_nan=False, allow_infinity=False),
)


def _not_int(value) -> bool:
    return not isinstance(value, int)


not_finite = st.sampled_from([math.nan, math.inf, -math.inf, 10**400, -(10**400)])
negative = st.one_of(
    st.floats(max_value=-1e-300, allow_nan=False, allow_infinity=False),
    st.integers(max_value=-1),
)
#: setting -> (values it refuses, values it accepts)
CASES = {
    "switch_margin": (
        st.one_of(not_numbers, not_finite, negative),
        st.one_of(
            st.floats(min_value=0.0, max_value=1e6, allow_nan=False),
            st.integers(min_value=0, max_value=10**6),
        ),
    ),
    "repeat": (
        st.one_of(not_numbers, not_finite.filter(_not_int), st.integers(max_value=0), st.floats()),
        st.integers(min_value=1, max_value=3),
    ),
    "warmup": (
        st.one_of(not_numbers, not_finite.filter(_not_int), negative, st.floats()),
        st.integers(min_value=0, max_value=3),
    ),
    "budget_s": (
        st.one_of(not_numbers.filter(lambda v: v is not None), not_finite, negative, st.just(0)),
        st.one_of(st.none(), st.floats(min_value=1e-3, max_value=1e3)),
    ),
}


#: The tuner fixture restores the settings once per test: every example sets them anew.
FIXTURE_OK = [HealthCheck.function_scoped_fixture]

#: The settings that count calls: a value that is not an int is of the wrong kind.
INT_SETTINGS = {"repeat", "warmup"}


def expected_error(value, setting: str = "switch_margin") -> type[Exception]:
    """ValueError for a value of the right kind out of range, TypeError for the wrong kind."""
    if setting in INT_SETTINGS:
        right_kind = isinstance(value, numbers.Integral) and not isinstance(value, bool)
    else:
        right_kind = is_number(value)
    return ValueError if right_kind else TypeError


@pytest.mark.parametrize("setting", sorted(CASES))
@settings(max_examples=60, deadline=None, suppress_health_check=FIXTURE_OK)
@given(data=st.data())
def test_a_bad_value_is_refused_at_the_assignment_naming_the_setting(tuner, setting, data):
    bad = data.draw(CASES[setting][0], label="bad value")
    before = getattr(tuner, setting)
    with pytest.raises((TypeError, ValueError)) as raised:
        setattr(tuner, setting, bad)
    assert raised.type is expected_error(bad, setting), (bad, raised.value)
    message = str(raised.value)
    assert f"AutoTuner.{setting} must be" in message
    assert len(message) < 400  # a long value is cut, not echoed in full
    assert getattr(tuner, setting) == before or (before != before)  # nothing changed


@pytest.mark.parametrize("setting", sorted(CASES))
@settings(max_examples=25, deadline=None, suppress_health_check=FIXTURE_OK)
@given(data=st.data())
def test_every_accepted_value_tunes(tuner, setting, data):
    """An accepted value is kept as given (as a float or int), and a tuning under it picks
    a pair: the errors of item 10 (``StopIteration``, "no median") cannot happen."""
    good = data.draw(CASES[setting][1], label="good value")
    setattr(tuner, setting, good)
    assert getattr(tuner, setting) == good
    runners = {"a": FakeRunner("a", [1, 2]), "b": FakeRunner("b")}
    op = make_op(runners)
    with autotune():
        op(torch.zeros(4))
    record = tuner.last_tuning()
    assert record.timed and record.failures == () and record.choice is not None


@settings(max_examples=100, deadline=None)
@given(
    medians=st.lists(
        st.floats(min_value=1e-9, max_value=1.0, allow_nan=False), min_size=1, max_size=6
    ),
    margin=st.one_of(st.floats(min_value=0.0, max_value=1e3), st.integers(0, 10)),
)
def test_pick_finds_a_pair_within_any_valid_margin(medians, margin):
    indexed = list(enumerate(medians))
    picked, fastest = pick(indexed, margin)
    assert medians[fastest] == min(medians)
    assert medians[picked] <= min(medians) * (1.0 + margin)
    assert all(m > min(medians) * (1.0 + margin) for m in medians[:picked])


@settings(max_examples=60, deadline=None)
@given(margin=st.one_of(not_numbers, not_finite, negative))
def test_pick_refuses_a_bad_margin_naming_the_setting(margin):
    with pytest.raises(expected_error(margin), match=r"AutoTuner\.switch_margin must be"):
        pick([(0, 1.0), (1, 0.5)], margin)


@pytest.mark.parametrize(("repeat", "warmup"), [(0, 0), (-3, 1), (1, -1)])
def test_measure_refuses_no_timed_call_before_calling(repeat, warmup):
    calls = []
    with pytest.raises(ValueError, match="repeat must be at least 1 and warmup at least 0"):
        measure(lambda: calls.append(1), (), repeat=repeat, warmup=warmup)
    assert calls == []


def test_an_infinite_budget_given_to_measure_directly_means_no_budget():
    """No budget: the minimum counts are all made (the first call, ``warmup`` warm-up
    calls, ``repeat`` timed ones) and the time targets end the timing."""
    calls = []
    median = measure(lambda: calls.append(1), (), warmup=50, repeat=300, budget_s=math.inf)
    assert median.calls >= 300 and len(calls) >= 1 + 50 + 300 and median >= 0


def test_the_defaults_are_valid_values(tuner):
    fresh = AutoTuner()
    assert (fresh.warmup, fresh.repeat, fresh.budget_s, fresh.switch_margin) == (1, 5, 1.0, 0.03)
