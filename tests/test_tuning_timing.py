"""Timing as Triton's ``do_bench`` does (issue 23, "Tuning figures you can trust"), and no
tuning while a CUDA graph is captured (issue 19, item 5).

The steps of ``flashinfer.autotuner.timing.measure`` are checked on a scripted clock (each
call "takes" what the script says, and the clock advances by it), so every case is exact and
no test reads the wall clock: the first call is never timed, warm-up goes on until the
timings settle and for at least ``WARMUP_S``, repeats are taken by time, the budget limits
both, and on CUDA the cache is flushed before each timed call, outside the events.  The
capture probe is monkeypatched (no GPU here).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import torch
from autotuner_fakes import FakeRunner, clean_tuner, make_op

from flashinfer.autotuner import AutoTuner, autotune
from flashinfer.autotuner import timing as timing_module
from flashinfer.autotuner.keys import make_key
from flashinfer.autotuner.timing import (
    REPEAT_S,
    SETTLE_TOLERANCE,
    WARMUP_MAX_S,
    WARMUP_S,
    CpuClock,
    CudaClock,
    TuningDuringCaptureError,
    build_plan,
    measure,
    refuse_during_capture,
    stream_capturing,
    time_candidates,
)


@pytest.fixture(autouse=True)
def tuner():
    with clean_tuner(warmup=0, repeat=1) as tuner:
        yield tuner


class ScriptedClock(CpuClock):
    """Call ``i`` (0 = the first call) takes ``cost(i)`` seconds of a clock that only moves
    when a call is made.  Records which calls were timed."""

    def __init__(self, cost: Callable[[int], float]) -> None:
        self.cost = cost
        self.t = 0.0
        self.calls = 0
        self.first_calls = 0
        self.timed: list[tuple[int, float]] = []  # (call index, seconds) of each timed call

    def now(self) -> float:
        return self.t

    def _call(self, fn: Callable[[], Any]) -> float:
        fn()
        took = self.cost(self.calls)
        self.calls += 1
        self.t += took
        return took

    def first(self, fn: Callable[[], Any]) -> None:
        self.first_calls += 1
        self._call(fn)

    def run(self, fn: Callable[[], Any], n: int) -> list[float]:
        out = []
        for _ in range(n):
            index = self.calls
            took = self._call(fn)
            self.timed.append((index, took))
            out.append(took)
        return out


def timed_calls(clock: ScriptedClock, result) -> list[tuple[int, float]]:
    """The (index, seconds) of the calls whose times the result is the median of: the
    last ``result.calls`` calls the clock timed."""
    return clock.timed[-result.calls :]


# ---- the first call ---------------------------------------------------------------------


@pytest.mark.parametrize("warmup", [0, 1, 3])
def test_the_first_call_is_made_once_and_never_timed(warmup):
    """Imports, JIT and lazy set-up are paid by the first call: 10 s here, 1 ms after."""
    clock = ScriptedClock(lambda i: 10.0 if i == 0 else 1e-3)
    result = measure(lambda: None, (), warmup=warmup, repeat=1, budget_s=1.0, clock=clock)
    assert clock.first_calls == 1
    assert all(index > 0 for index, _ in clock.timed)
    assert float(result) == 1e-3 and result.iqr_s == 0.0


def test_a_first_call_slower_than_the_budget_does_not_shrink_the_timing():
    """The budget counts from the end of the first call: a 10 s first call still leaves
    the timed calls their time (the old timer shrank ``repeat`` by the warm-up's cost)."""
    clock = ScriptedClock(lambda i: 10.0 if i == 0 else 1e-3)
    result = measure(lambda: None, (), warmup=1, repeat=5, budget_s=1.0, clock=clock)
    assert result.calls >= REPEAT_S / 1e-3 * 0.9


# ---- warm-up ----------------------------------------------------------------------------


def test_warm_up_goes_on_until_the_timings_settle():
    """Calls after the first get faster, each 30 % closer to 1 ms than the one before (a
    cache filling, a clock ramping up, a lazily built plan): consecutive rounds differ by
    more than the tolerance for about a dozen calls.  None of those is timed, and the
    median is the settled time."""

    def cost(i: int) -> float:
        return 1e-3 * (1.0 + 10 * 0.7**i)

    clock = ScriptedClock(cost)
    result = measure(lambda: None, (), warmup=0, repeat=5, budget_s=None, clock=clock)
    first_timed = timed_calls(clock, result)[0][0]
    unsettled = [i for i in range(1, 60) if cost(i - 1) - cost(i) > SETTLE_TOLERANCE * cost(i)]
    assert first_timed > max(unsettled)
    assert float(result) == pytest.approx(1e-3, rel=0.01)


def test_warm_up_lasts_at_least_its_minimum_time_even_when_settled_at_once():
    clock = ScriptedClock(lambda i: 1e-4)
    result = measure(lambda: None, (), warmup=0, repeat=1, budget_s=None, clock=clock)
    first_timed = timed_calls(clock, result)[0][0]
    warm_up_s = (first_timed - 1) * 1e-4  # the calls between the first and the timed ones
    assert warm_up_s >= WARMUP_S


def test_warm_up_that_never_settles_stops_and_the_timing_goes_on():
    """A machine too noisy to settle: alternating 1 ms and 3 ms rounds never agree; warm-up
    gives up after WARMUP_MAX_S and the spread says how noisy it was."""
    clock = ScriptedClock(lambda i: 1e-3 if (i // 5) % 2 else 3e-3)
    result = measure(lambda: None, (), warmup=0, repeat=5, budget_s=None, clock=clock)
    first_timed = timed_calls(clock, result)[0][0]
    assert sum(clock.cost(i) for i in range(1, first_timed)) <= WARMUP_MAX_S + 0.05
    assert result.iqr_s > 0


@pytest.mark.parametrize("warmup", [5, 40])
def test_warmup_is_the_least_number_of_warm_up_calls(warmup):
    """A slow call (0.4 s) with a 0.5 s budget: the warm-up calls asked for are made anyway
    (as before), and one timed call at least."""
    clock = ScriptedClock(lambda i: 0.4)
    result = measure(lambda: None, (), warmup=warmup, repeat=5, budget_s=0.5, clock=clock)
    first_timed = timed_calls(clock, result)[0][0]
    assert first_timed - 1 >= warmup and result.calls >= 1


# ---- repeats by time, and the budget ----------------------------------------------------


@pytest.mark.parametrize("cost_s", [2e-5, 3e-5, 6e-5, 1e-3])
def test_repeats_are_taken_by_time(cost_s):
    clock = ScriptedClock(lambda i: cost_s)
    result = measure(lambda: None, (), warmup=1, repeat=5, budget_s=1.0, clock=clock)
    assert result.calls * cost_s >= REPEAT_S
    assert result.calls * cost_s <= 2 * REPEAT_S  # no run-away batches either
    assert float(result) == cost_s


def test_repeat_is_the_least_number_of_timed_calls():
    clock = ScriptedClock(lambda i: 0.05)  # 2 calls would fill REPEAT_S
    result = measure(lambda: None, (), warmup=0, repeat=7, budget_s=None, clock=clock)
    assert result.calls >= 7


@pytest.mark.parametrize("budget_s", [1e-3, 0.05, 0.3])
def test_the_budget_limits_warm_up_and_repeats_but_one_call_is_always_timed(budget_s):
    clock = ScriptedClock(lambda i: 0.01)
    result = measure(lambda: None, (), warmup=0, repeat=50, budget_s=budget_s, clock=clock)
    spent = clock.t - 0.01  # after the first call
    assert result.calls >= 1
    assert spent <= budget_s + 2 * 0.01  # at most one call past the budget in each phase


def test_the_median_and_spread_are_of_the_timed_calls_only():
    """Timed calls alternate 1 and 2 ms after a 5 ms warm-up plateau."""
    clock = ScriptedClock(lambda i: 5e-3 if i < 40 else (1e-3 if i % 2 else 2e-3))
    result = measure(lambda: None, (), warmup=0, repeat=3, budget_s=None, clock=clock)
    times = [t for _, t in timed_calls(clock, result)]
    assert float(result) == statistics.median(times)
    assert result.iqr_s == timing_module.interquartile_range(times)


# ---- CUDA: events and the cache flush (driven through fakes: no GPU here) ---------------


class FakeEvent:
    log: list[str]

    def __init__(self, enable_timing: bool = False) -> None:
        assert enable_timing
        self.at = 0.0

    def record(self) -> None:
        FakeEvent.log.append("record")
        self.at = len(FakeEvent.log)

    def elapsed_time(self, end: FakeEvent) -> float:
        return end.at - self.at  # "ms"


class FakeBuffer:
    def zero_(self) -> None:
        FakeEvent.log.append("flush")


@pytest.fixture
def fake_cuda(monkeypatch) -> Iterator[list[str]]:
    FakeEvent.log = []
    monkeypatch.setattr(torch.cuda, "Event", FakeEvent)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: FakeEvent.log.append("sync"))
    monkeypatch.setattr(timing_module.torch, "empty", lambda *a, **k: FakeBuffer())
    yield FakeEvent.log


def test_cuda_first_call_is_synchronised_and_each_timed_call_follows_a_flush(fake_cuda):
    clock = CudaClock(torch.device("cuda", 0))
    clock.first(lambda: fake_cuda.append("call"))
    assert fake_cuda == ["call", "sync"]
    fake_cuda.clear()
    times = clock.run(lambda: fake_cuda.append("call"), 3)
    assert fake_cuda == ["flush", "record", "call", "record"] * 3 + ["sync"]
    # the events enclose the call only, never the flush: 2 log entries apart, in seconds
    assert times == [2 / 1000.0] * 3


def test_cuda_timing_goes_on_without_the_flush_on_a_full_device(fake_cuda, monkeypatch):
    def full(*args, **kwargs):
        raise torch.OutOfMemoryError("CUDA out of memory")

    monkeypatch.setattr(timing_module.torch, "empty", full)
    clock = CudaClock(torch.device("cuda", 0))
    clock.first(lambda: None)
    fake_cuda.clear()
    clock.run(lambda: fake_cuda.append("call"), 2)
    assert fake_cuda == ["record", "call", "record"] * 2 + ["sync"]


def test_measure_picks_the_cuda_clock_for_cuda_inputs(monkeypatch):
    made = []

    class Recorder(ScriptedClock):
        def __init__(self, device):
            made.append(device)
            super().__init__(lambda i: 1e-3)

    monkeypatch.setattr(timing_module, "CudaClock", Recorder)
    cuda_like = torch.empty(0, device="meta")
    monkeypatch.setattr(timing_module, "_uses_cuda", lambda inputs: torch.device("cuda", 1))
    measure(lambda: None, (cuda_like,), warmup=0, repeat=1, budget_s=0.01)
    assert made == [torch.device("cuda", 1)]


# ---- no tuning while a CUDA graph is captured (issue 19, item 5) ------------------------


def test_the_probe_never_touches_cuda_when_it_is_not_initialised(monkeypatch):
    def boom():
        raise AssertionError("asked the stream without CUDA initialised")

    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", boom)
    assert stream_capturing() is False
    refuse_during_capture()  # no error


def test_the_probe_asks_the_current_stream(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: True)
    assert stream_capturing() is True
    with pytest.raises(TuningDuringCaptureError, match="capturing a CUDA graph"):
        refuse_during_capture()


@pytest.fixture
def capturing(monkeypatch):
    monkeypatch.setattr(timing_module, "stream_capturing", lambda: True)


def test_measure_refuses_before_any_call_while_capturing(capturing):
    calls = []
    with pytest.raises(TuningDuringCaptureError) as raised:
        measure(lambda: calls.append(1), ())
    assert calls == []
    message = str(raised.value)
    assert "Tune before capturing" in message and "load a tuning file" in message
    assert isinstance(raised.value, RuntimeError)


def test_tuning_an_untuned_key_during_capture_is_refused_with_what_to_do(capturing):
    runners = {"a": FakeRunner("a", [1, 2]), "b": FakeRunner("b")}
    op = make_op(runners)
    with pytest.raises(TuningDuringCaptureError) as raised, autotune():
        op(torch.zeros(4))
    message = str(raised.value)
    assert op.api_key in message
    assert "Tune before capturing" in message and "autotune(tuning_file=path)" in message
    assert all(r.calls == [] and r.tactics_calls == 0 for r in runners.values())
    assert AutoTuner.get().choices() == {}


def test_a_tuned_key_is_served_during_capture_inside_autotune(monkeypatch, tuner):
    """Capture replays what was tuned before it: a key with a choice needs no timing."""
    runners = {"a": FakeRunner("a"), "b": FakeRunner("b", delays={None: 0.002})}
    op = make_op(runners)
    with autotune():
        op(torch.zeros(4))  # tuned before capture
    monkeypatch.setattr(timing_module, "stream_capturing", lambda: True)
    with autotune():
        assert op(torch.zeros(4)) == ("a", None)
    assert tuner.last_tuning().timed is False


def test_the_refusal_is_not_taken_for_a_failed_tactic(monkeypatch, tuner):
    """Timing that finds the stream capturing stops the whole tuning: no pair is recorded
    as failed, no choice is made."""
    runners = {"a": FakeRunner("a", [1, 2])}
    op = make_op(runners)
    x = torch.zeros(4)
    monkeypatch.setattr(timing_module, "stream_capturing", lambda: True)
    with pytest.raises(TuningDuringCaptureError):
        time_candidates(op.api_key, runners, (x,), make_key(op.api_key, (x,)), ["a"], tuner)
    assert len(build_plan(runners, (x,), ["a"])) == 2
    assert tuner.stats().get(op.api_key) is None  # nothing failed, nothing tuned


# ---- on a real GPU (the gpu lane; skipped without a CUDA device) ------------------------


@pytest.mark.gpu
def test_a_real_kernel_is_timed_with_events_and_the_flush():
    a = torch.randn(256, 256, device="cuda")
    result = measure(lambda: a @ a, (a,), warmup=1, repeat=5, budget_s=0.5)
    assert result.calls >= 5 and float(result) > 0 and result.iqr_s >= 0


@pytest.mark.gpu
def test_tuning_inside_a_real_capture_is_refused():
    import flashinfer

    a = torch.randn(64, 64, device="cuda")
    b = torch.randn(64, 64, device="cuda")
    flashinfer.mm(a, b)  # lazy set-up and the dispatcher's checks, outside the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with pytest.raises(TuningDuringCaptureError, match="Tune before capturing"):
        with autotune(), torch.cuda.graph(graph):
            flashinfer.mm(a, b)  # an untuned key inside autotune(): would time
    torch.cuda.synchronize()
