"""Stable choices under noise: the switch margin, and medians reported with their spread.

The default (first candidate, default tactic) is kept unless another pair is faster by more
than ``AutoTuner.get().switch_margin``; a near-tie goes to the earlier pair.  Timings are
scripted (``timing.measure`` replaced), so the cases are exact.
"""

from __future__ import annotations

import statistics

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

from flashinfer.autotuner.timing import (
    DEFAULT_SWITCH_MARGIN,
    CpuClock,
    interquartile_range,
    measure,
    pick,
)
from flashinfer.cli import main


@pytest.fixture(autouse=True)
def tuner():
    with clean_tuner(warmup=0, repeat=1) as tuner:
        yield tuner


def test_the_default_margin_is_the_documented_constant(tuner):
    assert tuner.switch_margin == DEFAULT_SWITCH_MARGIN == 0.03


def test_a_near_tie_keeps_the_default(monkeypatch, tuner):
    script_timings(monkeypatch, {("a", None): 1.00, ("b", None): 0.99}, spread=0.001)
    runners = {"a": FakeRunner("a"), "b": FakeRunner("b")}
    assert tuned_choice(runners)[0] == ("a", None)
    tuner.switch_margin = 0.0  # without the margin (and with a small spread) 1 % faster wins
    assert tuned_choice({"a": FakeRunner("a"), "b": FakeRunner("b")})[0] == ("b", None)


def test_a_clear_win_switches(monkeypatch):
    script_timings(monkeypatch, {("a", None): 1.0, ("b", None): 0.5})
    assert tuned_choice({"a": FakeRunner("a"), "b": FakeRunner("b")})[0] == ("b", None)


def test_a_near_tie_among_the_others_goes_to_the_earlier(monkeypatch):
    script_timings(monkeypatch, {("a", 1): 1.0, ("a", 2): 0.50, ("b", None): 0.495})
    runners = {"a": FakeRunner("a", [1, 2]), "b": FakeRunner("b")}
    assert tuned_choice(runners)[0] == ("a", 2)


def test_a_failed_default_leaves_the_choice_to_the_others(monkeypatch):
    script_timings(monkeypatch, {("a", 2): 0.50, ("b", None): 0.40})
    runners = {"a": FakeRunner("a", [1, 2], fail=[1]), "b": FakeRunner("b")}
    assert tuned_choice(runners)[0] == ("b", None)


@given(
    medians=st.lists(st.floats(1e-6, 1.0, allow_nan=False), min_size=1, max_size=8),
    margin=st.floats(0.0, 0.5),
)
def test_the_pick_is_the_earliest_pair_within_the_margin_of_the_fastest(medians, margin):
    indexed = list(enumerate(medians))
    picked, fastest = pick(indexed, margin)
    assert medians[fastest] == min(medians) and fastest == medians.index(min(medians))
    assert medians[picked] <= min(medians) * (1 + margin)
    assert all(m > min(medians) * (1 + margin) for m in medians[:picked])
    assert pick(indexed, 0.0)[0] == fastest


# ---- the spread -------------------------------------------------------------------------


def test_interquartile_range():
    assert interquartile_range([]) == interquartile_range([3.0]) == 0.0
    assert interquartile_range([5.0, 1.0, 3.0, 2.0, 4.0]) == 2.0  # quartiles 2 and 4
    assert interquartile_range([1.0, 1.0, 1.0, 100.0]) == pytest.approx(24.75)


def test_measure_returns_the_median_with_the_spread_of_its_calls():
    class Clock(CpuClock):
        """Timed calls take 1, 0.5, 2.5, 4 and 10 s; warm-up calls 1 s (settled at once)."""

        def __init__(self):
            self.t, self.timed = 0.0, iter([1.0, 0.5, 2.5, 4.0, 10.0])
            self.warming = True

        def now(self):
            return self.t

        def first(self, fn):
            fn()

        def run(self, fn, n):
            out = []
            for _ in range(n):
                fn()
                took = 1.0 if self.warming else next(self.timed)
                self.t += took
                out.append(took)
            return out

    clock = Clock()
    calls = []

    def fn():
        calls.append(1)
        if len(calls) == 3:  # the first call, one warm-up round, then the timed calls
            clock.warming = False

    # The warm-up round takes 1 s, past timing.WARMUP_MAX_S: warm-up stops there; the five
    # timed calls (repeat=5, 18 s) fit the 20 s budget.
    result = measure(fn, (), warmup=0, repeat=5, budget_s=20.0, clock=clock)
    durations = [1.0, 0.5, 2.5, 4.0, 10.0]
    assert isinstance(result, float) and float(result) == statistics.median(durations)
    assert result.iqr_s == interquartile_range(durations) == 3.0  # quartiles 1 and 4
    assert result.calls == 5


def test_the_log_gives_each_median_and_the_pick_with_their_spread(monkeypatch, capsys):
    monkeypatch.setenv("FLASHINFER_AUTOTUNER_LOG", "1")
    script_timings(monkeypatch, {("a", None): 2.0, ("b", None): 1.0})
    _, record = tuned_choice({"a": FakeRunner("a"), "b": FakeRunner("b")})
    err = capsys.readouterr().err
    assert "a null: median 2.0000 ms (IQR 0.2000 ms)" in err
    assert "b null: median 1.0000 ms (IQR 0.1000 ms)" in err
    assert "(1.0000 ms, IQR 0.1000 ms)" in err  # the pick
    assert record.iqr_s == pytest.approx(1e-4)


def test_the_log_says_when_the_margin_kept_an_earlier_pair(monkeypatch, capsys):
    monkeypatch.setenv("FLASHINFER_AUTOTUNER_LOG", "1")
    script_timings(monkeypatch, {("a", None): 1.00, ("b", None): 0.99})
    tuned_choice({"a": FakeRunner("a"), "b": FakeRunner("b")})
    assert "b null (0.9900 ms) is within the 3% switch margin" in capsys.readouterr().err


def test_the_cli_table_gives_the_median_with_its_spread(monkeypatch, capsys, tmp_path):
    script_timings(monkeypatch, {("a", 1): 2.0, ("a", 2): 1.0})
    op = tune_from_cli(monkeypatch, {"a": FakeRunner("a", [1, 2])})
    argv = ["autotune", "--op", op.api_name, "--shapes", "4", "--tuning-file", str(tmp_path / "c")]
    assert main(argv) == 0
    header, row = capsys.readouterr().out.splitlines()[:2]
    assert "MEDIAN+-IQR MS" in header and row.split()[3] == "1.0000+-0.1000"
    assert main(argv) == 0  # the key is in the file now: reused, nothing timed, no spread
    assert capsys.readouterr().out.splitlines()[1].split()[3] == "1.0000"
