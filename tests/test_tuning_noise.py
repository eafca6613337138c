"""Too noisy to choose (issue 23): when the spread of the timed calls swamps the gap between
the fastest pair and an earlier one, the earlier pair (the default, when it is one of them)
is kept, and the record, the log and the ``flashinfer autotune`` table say so.  Never is
noise presented as a win.  Timings are scripted (``timing.measure`` replaced), so
the cases are exact.
"""

from __future__ import annotations

import pytest
from autotuner_fakes import (
    FakeRunner,
    clean_tuner,
    script_timings,
    tune_from_cli,
    tuned_choice,
)
from hypothesis import given
from hypothesis import strategies as st

from flashinfer.autotuner import timing as timing_module
from flashinfer.autotuner.timing import pick
from flashinfer.cli import main


@pytest.fixture(autouse=True)
def tuner():
    with clean_tuner(warmup=0, repeat=1) as tuner:
        yield tuner


def two():
    return {"a": FakeRunner("a"), "b": FakeRunner("b")}


def test_a_win_smaller_than_the_spread_keeps_the_default(monkeypatch, capsys):
    """b looks 20 % faster, far past the 3 % margin, but the calls spread by 0.5 ms."""
    monkeypatch.setenv("FLASHINFER_AUTOTUNER_LOG", "1")
    script_timings(monkeypatch, {("a", None): (1.0, 0.5), ("b", None): (0.8, 0.5)})
    choice, record = tuned_choice(two())
    assert choice == ("a", None) and record.too_noisy
    err = capsys.readouterr().err
    assert "picked a null" in err and "too noisy to choose" in err
    assert "so the default is kept" in err


def test_a_win_larger_than_the_spread_switches(monkeypatch, capsys):
    monkeypatch.setenv("FLASHINFER_AUTOTUNER_LOG", "1")
    script_timings(monkeypatch, {("a", None): (1.0, 0.05), ("b", None): (0.8, 0.05)})
    choice, record = tuned_choice(two())
    assert choice == ("b", None) and not record.too_noisy
    assert "too noisy" not in capsys.readouterr().err


def test_noise_between_two_others_keeps_the_earlier_one_not_the_slow_default(monkeypatch):
    """The default is clearly slower; b and c are within their spread of each other: b,
    which comes first, is kept, and the record says the choice between them was noise."""
    script_timings(
        monkeypatch,
        {("a", None): (5.0, 0.1), ("b", None): (1.0, 0.3), ("c", None): (0.9, 0.3)},
    )
    runners = {"a": FakeRunner("a"), "b": FakeRunner("b"), "c": FakeRunner("c")}
    choice, record = tuned_choice(runners)
    assert choice == ("b", None) and record.too_noisy


def test_the_margin_keeping_the_default_is_not_called_noise(monkeypatch):
    """A near-tie within the switch margin is the margin's rule, already reported as such."""
    script_timings(monkeypatch, {("a", None): (1.0, 0.0), ("b", None): (0.99, 0.0)})
    choice, record = tuned_choice(two())
    assert choice == ("a", None) and not record.too_noisy


def test_unknown_spreads_leave_the_margin_alone(monkeypatch):
    """A timer that reports no spread (a plain float) is judged by the margin only."""

    def fake_measure(fn, inputs, **kwargs):
        fn()
        return {"a": 1e-3, "b": 0.8e-3}[fn.func.name]

    monkeypatch.setattr(timing_module, "measure", fake_measure)
    choice, record = tuned_choice(two())
    assert choice == ("b", None) and not record.too_noisy


def test_the_cli_table_says_too_noisy_to_choose(monkeypatch, capsys, tmp_path):
    script_timings(monkeypatch, {("a", 1): (1.0, 0.5), ("a", 2): (0.8, 0.5)})
    op = tune_from_cli(monkeypatch, {"a": FakeRunner("a", [1, 2])})
    argv = ["autotune", "--op", op.api_name, "--shapes", "4", "--tuning-file", str(tmp_path / "c")]
    assert main(argv) == 0
    header, row = capsys.readouterr().out.splitlines()[:2]
    assert row.split()[:3] == ["4", "a", "1"]
    assert "too noisy to choose" in row


@given(
    timings=st.lists(st.tuples(st.floats(1e-6, 1.0), st.floats(0.0, 0.5)), min_size=1, max_size=8),
    margin=st.floats(0.0, 0.5),
)
def test_the_pick_is_the_earliest_pair_tied_by_margin_or_spread(timings, margin):
    medians = [(i, m) for i, (m, _) in enumerate(timings)]
    spreads = {i: s for i, (_, s) in enumerate(timings)}
    picked, fastest = pick(medians, margin, spreads)
    best = min(m for _, m in medians)

    def tied(i):
        m = timings[i][0]
        return m <= best * (1 + margin) or m - best <= (spreads[i] + spreads[fastest]) / 2

    assert tied(picked) and not any(tied(i) for i in range(picked))
    # the spread only ever keeps an earlier pair: never one the margin alone would not
    assert picked <= pick(medians, margin)[0]
