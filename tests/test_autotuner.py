"""The autotuner: candidates come from the dispatcher only, best per key, the context
manager's state, threads, logging, keys.  Fake ops (tests/autotuner_fakes.py) go through
the real dispatcher; the last tests tune the real ``flashinfer.mm``."""

from __future__ import annotations

import re
import subprocess
import sys
import threading
import warnings

import autotuner_fakes
import pytest
import torch
from autotuner_fakes import FakeRunner, clean_tuner, make_op

import flashinfer
from flashinfer.api_logging import ExperimentalWarning
from flashinfer.autotuner import AutoTuner, autotune, bucket_dim, is_tuning, make_key
from flashinfer.gating.messages import automatic_selection

GATE = "FLASHINFER_ALLOW_EXPERIMENTAL_AUTO_BACKENDS"


@pytest.fixture(autouse=True, params=[False, True], ids=["via-body", "direct"])
def registration(request, monkeypatch):
    """Every test twice: ops whose body calls ``AutoTuner.run``, and ops registered
    ``direct=True``, whose auto calls the dispatcher routes to the tuner.  Both must
    behave the same."""
    monkeypatch.setattr(autotuner_fakes, "DIRECT", request.param)
    return request.param


@pytest.fixture(autouse=True)
def fast_tuner():
    """Short timings and no tuned results left over from other tests."""
    with clean_tuner(warmup=1, repeat=3) as tuner:
        yield tuner


def three_backends():
    """'slow' and 'mid' stable, 'exp' experimental and the fastest of all."""
    return {
        "slow": FakeRunner("slow", [None], delays={None: 0.004}),
        "mid": FakeRunner("mid", [1, 2], delays={1: 0.003, 2: 0.001}),
        "exp": FakeRunner("exp", [None]),
    }


# --------------------------------------------------------------------------------------
# The tuner sees exactly the dispatcher's candidates
# --------------------------------------------------------------------------------------


def test_gate_off_experimental_backend_is_never_timed_nor_picked():
    runners = three_backends()
    op = make_op(runners, experimental={"exp"})
    x = torch.zeros(4, 4)
    with autotune():
        assert op(x) == ("mid", 2)
    assert runners["exp"].calls == []
    assert list(op.dropped_experimental_backends) == ["exp"]
    assert runners["slow"].calls and runners["mid"].calls  # both stable ones were timed
    key = make_key(op.api_key, (x,))
    assert AutoTuner.get().choice(key).backend == "mid"


def test_gate_on_experimental_backend_is_timed_picked_and_warns(monkeypatch, registration):
    monkeypatch.setenv(GATE, "1")
    runners = three_backends()
    op = make_op(runners, experimental={"exp"})
    x = torch.zeros(4, 4)
    picked = re.escape(automatic_selection(op.api_key, "exp"))
    with pytest.warns(ExperimentalWarning, match=picked) as record:
        with autotune():
            assert op(x) == ("exp", None)
    # The first frame outside flashinfer: the fake op's body when it calls the tuner; this
    # line when the dispatcher routes the call (no body frame in between).
    where = "test_autotuner.py" if registration else "autotuner_fakes.py"
    assert record[0].filename.endswith(where)
    assert runners["exp"].calls
    # Outside the block the tuned experimental choice is used, silently (warned once).
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert op(x) == ("exp", None)


def test_tuned_experimental_choice_is_not_used_once_the_gate_closes(monkeypatch):
    monkeypatch.setenv(GATE, "1")
    runners = three_backends()
    op = make_op(runners, experimental={"exp"})
    x = torch.zeros(4, 4)
    with pytest.warns(ExperimentalWarning):
        with autotune():
            op(x)
    monkeypatch.setenv(GATE, "0")
    before = len(runners["exp"].calls)
    assert op(x) == ("slow", None)  # first stable candidate, default tactic
    assert len(runners["exp"].calls) == before


def test_backend_rejected_by_its_checker_is_never_timed():
    runners = three_backends()
    op = make_op(runners, supports=lambda name, x: name != "mid" or x.shape[0] < 100)
    with autotune():
        assert op(torch.zeros(200, 2)) == ("exp", None)
    assert runners["mid"].calls == []


def test_tuner_candidates_are_the_dispatchers_list(monkeypatch):
    """run() reads op.suitable_auto_backends and nothing else."""
    seen = []
    runners = three_backends()
    op = make_op(runners, experimental={"exp"})
    original = AutoTuner._tune

    def spy(self, op_, runners_, inputs, key, candidates):
        seen.append(list(candidates))
        return original(self, op_, runners_, inputs, key, candidates)

    monkeypatch.setattr(AutoTuner, "_tune", spy)
    with autotune():
        op(torch.zeros(2))
    monkeypatch.setenv(GATE, "1")
    with pytest.warns(ExperimentalWarning), autotune():
        op(torch.zeros(3000))
    assert seen == [["slow", "mid"], ["slow", "mid", "exp"]]


# --------------------------------------------------------------------------------------
# Best per key, used outside the block without timing
# --------------------------------------------------------------------------------------


def test_best_per_key_is_stored_and_used_outside_without_timing():
    runners = three_backends()
    op = make_op(runners)
    x = torch.zeros(5, 3)
    with autotune():
        op(x)
    counts = {name: len(r.calls) for name, r in runners.items()}
    tactics_calls = runners["mid"].tactics_calls
    for _ in range(10):
        assert op(torch.zeros(7, 4)) == ("exp", None)  # same bucket (8, 4)
    assert len(runners["exp"].calls) == counts["exp"] + 10  # exactly one call each
    assert len(runners["slow"].calls) == counts["slow"]
    assert len(runners["mid"].calls) == counts["mid"]
    assert runners["mid"].tactics_calls == tactics_calls  # no tactic enumeration either


def test_untuned_key_uses_first_candidate_default_tactic_without_timing():
    runners = three_backends()
    op = make_op(runners)
    assert op(torch.zeros(3)) == ("slow", None)
    assert runners["slow"].calls == [None]
    assert runners["mid"].calls == [] and runners["mid"].tactics_calls == 0


def test_keys_are_separate_per_bucket_and_dtype():
    runners = {
        "a": FakeRunner("a", [None], delays={None: 0.002}),
        "b": FakeRunner("b", [None]),
    }
    op = make_op(runners, supports=lambda name, x: name == "a" or x.shape[0] <= 8)
    with autotune():
        assert op(torch.zeros(8)) == ("b", None)
        assert op(torch.zeros(9)) == ("a", None)  # bucket 16: only "a" fits
        op(torch.zeros(8, dtype=torch.float16))
    keys = {k for k in AutoTuner.get().choices() if k[0] == op.api_key}
    assert len(keys) == 3


def test_inside_autotune_a_tuned_key_is_not_timed_again():
    runners = three_backends()
    op = make_op(runners)
    with autotune():
        op(torch.zeros(4))
        counts = [len(r.calls) for r in runners.values()]
        op(torch.zeros(3))  # same bucket
    assert [len(r.calls) for r in runners.values()] == [
        counts[0],
        counts[1],
        counts[2] + 1,
    ]
    assert AutoTuner.get().last_tuning() is not None


def test_failing_tactic_is_skipped_and_all_failing_falls_back_to_default():
    runners = {"a": FakeRunner("a", [1, 2], delays={2: 0.002}, fail=[1])}
    op = make_op(runners)
    with autotune():
        assert op(torch.zeros(2)) == ("a", 2)
    broken = {"a": FakeRunner("a", [1], fail=[1])}
    op2 = make_op(broken)
    with autotune():
        assert op2(torch.zeros(2)) == ("a", None)  # nothing timed: the default runs
    assert AutoTuner.get().last_tuning().choice is None


class MultiLineError(RuntimeError):
    pass


def test_last_tuning_lists_each_failed_pair_with_a_one_line_reason():
    runners = {
        "a": FakeRunner("a", [1, 2, 3], fail=[1, 3]),
        "b": FakeRunner("b", [None]),
    }
    op = make_op(runners)
    with autotune():
        op(torch.zeros(2))
    record = AutoTuner.get().last_tuning()
    assert record.timed and record.tried == 4 and record.choice.backend in ("a", "b")
    assert record.failures == (
        ("a", 1, "RuntimeError: a tactic 1 failed"),
        ("a", 3, "RuntimeError: a tactic 3 failed"),
    )
    with autotune():
        op(torch.zeros(2))  # tuned: nothing tried, nothing failed
    assert AutoTuner.get().last_tuning()[2:5] == (False, 0, ())


def test_reason_of_a_failure_is_the_first_line_of_its_message():
    from flashinfer.autotuner.timing import one_line_reason as _one_line

    assert (
        _one_line(MultiLineError("\n  first line\nsecond line\n")) == "MultiLineError: first line"
    )
    assert _one_line(KeyError()) == "KeyError"


def test_register_rejects_runner_for_unknown_backend():
    op = make_op({"a": FakeRunner("a")}, register=False)
    with pytest.raises(ValueError, match="name no backend"):
        AutoTuner.register(op, {"a": FakeRunner("a"), "typo": FakeRunner("typo")})


def test_get_is_a_process_singleton():
    assert AutoTuner.get() is AutoTuner.get()
    assert flashinfer.AutoTuner is AutoTuner
    assert flashinfer.autotune is autotune


# --------------------------------------------------------------------------------------
# The context manager's state
# --------------------------------------------------------------------------------------


def test_nested_blocks_restore_the_previous_state():
    assert not is_tuning()
    with autotune():
        assert is_tuning()
        with autotune(False):
            assert not is_tuning()
            with autotune(True):
                assert is_tuning()
            assert not is_tuning()
        assert is_tuning()
    assert not is_tuning()


def test_state_is_restored_when_the_block_raises():
    with pytest.raises(KeyError):
        with autotune():
            with autotune(False):
                raise KeyError("boom")
    assert not is_tuning()
    with autotune():
        with pytest.raises(RuntimeError):
            with autotune(False):
                raise RuntimeError
        assert is_tuning()


def test_tuning_flag_is_per_thread():
    """Overlapping blocks in two threads: each sees and restores only its own state."""
    a_in, b_in, a_out = threading.Event(), threading.Event(), threading.Event()
    seen: dict[str, list[bool]] = {"a": [], "b": [], "outsider": []}

    def a():
        with autotune():
            a_in.set()
            b_in.wait(5)
            seen["a"].append(is_tuning())
        a_out.set()
        seen["a"].append(is_tuning())

    def b():
        a_in.wait(5)
        with autotune(False):
            b_in.set()
            a_out.wait(5)  # A leaves first: B's state must not change
            seen["b"].append(is_tuning())
        seen["b"].append(is_tuning())

    def outsider():
        a_in.wait(5)
        seen["outsider"].append(is_tuning())

    threads = [threading.Thread(target=f) for f in (a, b, outsider)]
    with autotune():  # the main thread's state does not leak into the others
        for t in threads:
            t.start()
        for t in threads:
            t.join(10)
        assert is_tuning()
    assert seen == {"a": [True, False], "b": [False, False], "outsider": [False]}


def test_one_autotune_object_can_be_reentered():
    block = autotune()
    with block:
        with autotune(False):
            with block:
                assert is_tuning()
            assert not is_tuning()
        assert is_tuning()
    assert not is_tuning()


def test_importing_the_autotuner_stays_light():
    code = (
        "import sys, flashinfer.autotuner; "
        "bad = [m for m in ('triton', 'flashinfer.experimental', 'flashinfer.gemm') "
        "if m in sys.modules]; print(bad)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_threads_share_tuned_results():
    runners = three_backends()
    op = make_op(runners)
    with autotune():
        op(torch.zeros(4))
    results = []
    t = threading.Thread(target=lambda: results.append(op(torch.zeros(4))))
    t.start()
    t.join(10)
    assert results == [("exp", None)]


def test_concurrent_tuning_of_one_key_times_it_once():
    runners = {"a": FakeRunner("a", [1, 2], delays={1: 0.01})}
    op = make_op(runners)
    barrier = threading.Barrier(4)

    def work():
        barrier.wait(5)
        with autotune():
            op(torch.zeros(4))

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    # One tuning: the tactics were listed once (timing is by time, so the number of timed
    # calls is not fixed); each thread then made its real call with the choice.
    assert runners["a"].tactics_calls == 1
    assert runners["a"].calls[-4:] == [2] * 4


# --------------------------------------------------------------------------------------
# Logging and keys
# --------------------------------------------------------------------------------------


def test_autotuner_log_prints_timings_and_pick(monkeypatch, capsys):
    monkeypatch.setenv("FLASHINFER_AUTOTUNER_LOG", "1")
    op = make_op(three_backends())
    with autotune():
        op(torch.zeros(4))
    err = capsys.readouterr().err
    assert "[flashinfer.autotuner] tuning" in err
    assert "slow null: median" in err and "mid 2: median" in err
    assert "picked exp null" in err


def test_autotuner_log_is_silent_by_default(capsys):
    op = make_op(three_backends())
    with autotune():
        op(torch.zeros(4))
    assert "flashinfer.autotuner" not in capsys.readouterr().err


@pytest.mark.parametrize(
    "d, bucket", [(0, 0), (1, 1), (2, 2), (3, 4), (4, 4), (5, 8), (4096, 4096), (4097, 8192)]
)
def test_bucket_dim_is_next_power_of_two(d, bucket):
    assert bucket_dim(d) == bucket


def test_key_parts():
    a = torch.zeros(100, 3, dtype=torch.float16)
    key = make_key("op", (a, None, torch.float32, 1e-6))
    assert key == ("op", (((128, 4), torch.float16), None, torch.float32, ...), "cpu", None)
    assert make_key("op", (torch.zeros(65),)) == make_key("op", (torch.zeros(128),))
    assert make_key("op", (torch.zeros(65),)) != make_key("op", (torch.zeros(129),))
    # Scalars: ints, bools and strs are in the key, floats and other values are not.
    assert make_key("op", (1, True, "x", 2.5, [3])) == ("op", (1, True, "x", ..., ...), None, None)


# --------------------------------------------------------------------------------------
# The real mm
# --------------------------------------------------------------------------------------


def test_mm_tunes_on_cpu_and_outside_uses_the_tuned_choice(monkeypatch):
    from flashinfer.gemm import MM_RUNNERS, mm

    a, b = torch.randn(16, 32), torch.randn(32, 16)
    with autotune():
        got = mm(a, b)
    torch.testing.assert_close(got, a @ b)
    key = make_key(mm.api_key, (a, b, None, None))
    choice = AutoTuner.get().choice(key)
    assert choice is not None and choice.backend in mm.suitable_auto_backends
    assert not set(mm.experimental_backends) & set(mm.suitable_auto_backends)  # gate off
    calls = []
    runner = MM_RUNNERS[choice.backend]
    monkeypatch.setitem(
        MM_RUNNERS,
        choice.backend,
        lambda inputs, tactic=None: calls.append(tactic) or runner(inputs, tactic),
    )
    torch.testing.assert_close(mm(a, b), a @ b)
    assert calls == [choice.tactic]
