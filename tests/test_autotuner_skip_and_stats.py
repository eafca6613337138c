"""``autotune(skip_ops=[...])`` leaves the named ops untuned (their default runs, untimed),
and ``AutoTuner.get().stats()`` counts, per op, what was tuned, loaded and served, and what
failed.  Every test runs on both call paths: the body calling ``AutoTuner.run`` and the
dispatcher routing auto calls to the tuner's generated router (``direct=True``)."""

from __future__ import annotations

import json
import threading

import pytest
import torch
from autotuner_fakes import FakeRunner, clean_tuner, declare_cli_inputs, make_op
from hypothesis import given, settings
from hypothesis import strategies as st

import flashinfer
from flashinfer.autotuner import AutoTuner, OpStats, autotune, make_key
from flashinfer.cli import main


@pytest.fixture(autouse=True)
def fast_tuner():
    with clean_tuner(warmup=0, repeat=1) as tuner:
        yield tuner


@pytest.fixture(params=[False, True], ids=["via-run", "routed"])
def direct(request):
    return request.param


def fake_op(direct, fail=()):
    runners = {
        "a": FakeRunner("a", [1, 2], delays={1: 0.003}, fail=fail),
        "b": FakeRunner("b", delays={None: 0.003}),
    }
    return make_op(runners, direct=direct), runners


def key(op, n):
    return make_key(op.api_key, (torch.zeros(n),))


# --------------------------------------------------------------------------------------
# skip_ops
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("by", ["api_name", "api_key"])
def test_a_skipped_op_runs_its_default_untimed_and_the_others_tune(direct, by):
    op, runners = fake_op(direct)
    other, other_runners = fake_op(direct)
    with autotune(skip_ops=[getattr(op, by)]):
        assert op(torch.zeros(4)) == ("a", None)
        assert other(torch.zeros(4))[0] in ("a", "b")
    assert runners["a"].calls == [None] and runners["a"].tactics_calls == 0  # untimed
    assert AutoTuner.get().choice(key(op, 4)) is None  # nothing recorded for it
    assert AutoTuner.get().choice(key(other, 4)) is not None
    assert other_runners["a"].tactics_calls == 1
    with autotune():  # outside the skipping block it tunes again
        op(torch.zeros(4))
    assert AutoTuner.get().choice(key(op, 4)) is not None


def test_a_skipped_op_runs_its_default_even_for_a_tuned_key(direct):
    op, runners = fake_op(direct)
    with autotune():
        op(torch.zeros(4))
    assert AutoTuner.get().choice(key(op, 4)).tactic == 2
    with autotune(skip_ops=[op.api_name]):
        assert op(torch.zeros(4)) == ("a", None)
    assert op(torch.zeros(4)) == ("a", 2)  # outside: the tuned choice


def test_nested_blocks_add_to_the_skipped_ops_and_restore_them(direct):
    first, _ = fake_op(direct)
    second, _ = fake_op(direct)
    with autotune(skip_ops=[first.api_name]):
        with autotune(skip_ops=[second.api_name]):
            first(torch.zeros(4))
            second(torch.zeros(4))
            assert AutoTuner.get().choices() == {}
        second(torch.zeros(8))  # the inner block's skip is gone
        first(torch.zeros(8))  # the outer one's is not
    assert set(AutoTuner.get().choices()) == {key(second, 8)}


def test_a_block_that_only_skipped_writes_no_cache_file(direct, tmp_path):
    op, _ = fake_op(direct)
    with autotune(tuning_file=tmp_path / "c.json", skip_ops=[op.api_name]):
        op(torch.zeros(4))
    assert list(tmp_path.iterdir()) == []


def test_an_unknown_op_name_is_a_value_error_naming_the_valid_ones(direct):
    op, _ = fake_op(direct)
    with pytest.raises(ValueError, match="no autotunable op is named 'nope'") as exc:
        autotune(skip_ops=[op.api_name, "nope"])
    message = str(exc.value)
    assert op.api_name in message and op.api_key in message
    assert "mm" in message and "flashinfer.gemm.mm" in message  # op modules were imported
    with pytest.raises(TypeError, match=r"skip_ops=\['mm'\]"):
        autotune(skip_ops="mm")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"skip_ops\[1\] is int 3"):
        autotune(skip_ops=[op.api_name, 3])  # type: ignore[list-item]


# --------------------------------------------------------------------------------------
# stats()
# --------------------------------------------------------------------------------------


def test_stats_count_keys_tuned_calls_served_and_failures(direct):
    op, _ = fake_op(direct, fail=[2])
    assert op.api_key not in AutoTuner.get().stats()  # nothing happened to it yet
    with autotune():
        op(torch.zeros(4))  # tuned: 'a' 2 fails; served from the tuned key
        op(torch.zeros(4))  # served from the tuned key
    for _ in range(5):
        op(torch.zeros(4))  # tuned key, outside tuning
    for _ in range(3):
        op(torch.zeros(64))  # untuned key: the default
    assert AutoTuner.get().stats()[op.api_key] == OpStats(
        keys_tuned=1,
        results_loaded=0,
        calls_tuned=7,
        calls_default=3,
        tactics_failed=1,
        last_failure="a 2: RuntimeError: a tactic 2 failed",
    )
    assert AutoTuner.get().stats()[op.api_key].calls_tuned == 7  # reading does not count


def test_stats_count_results_loaded(direct, tmp_path):
    op, _ = fake_op(direct)
    with autotune():
        op(torch.zeros(4))
        op(torch.zeros(8))
    AutoTuner.get().save_tuning_file(tmp_path / "c.json")
    AutoTuner.get().clear()
    AutoTuner.get().load_tuning_file(tmp_path / "c.json")
    stats = AutoTuner.get().stats()[op.api_key]
    assert (stats.keys_tuned, stats.results_loaded) == (2, 2)


def test_stats_count_every_call_of_concurrent_threads(direct):
    op, _ = fake_op(direct)
    with autotune():
        op(torch.zeros(4))
    before = AutoTuner.get().stats()[op.api_key]

    def serve():
        for _ in range(300):
            op(torch.zeros(4))
            op(torch.zeros(1024))

    threads = [threading.Thread(target=serve) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    after = AutoTuner.get().stats()[op.api_key]
    assert after.calls_tuned - before.calls_tuned == 1200
    assert after.calls_default - before.calls_default == 1200


def test_stats_of_a_skipped_op_count_default_calls_only(direct):
    op, _ = fake_op(direct)
    with autotune(skip_ops=[op.api_name]):
        op(torch.zeros(4))
    assert AutoTuner.get().stats()[op.api_key] == OpStats(calls_default=1)


def test_the_autotune_command_prints_the_stats(tmp_path, capsys, monkeypatch):
    op, _ = fake_op(False, fail=[2])
    declare_cli_inputs(monkeypatch, op)
    cache = tmp_path / "c.json"
    assert (
        main(["autotune", "--op", op.api_name, "--shapes", "4,8", "--tuning-file", str(cache)]) == 0
    )
    lines = capsys.readouterr().out.splitlines()
    start = lines.index("autotuner stats (AutoTuner.get().stats()):")
    assert lines[start + 1].split()[:3] == ["OP", "KEYS", "TUNED"]
    row = next(line for line in lines[start:] if line.startswith(op.api_key))
    assert row.split()[1:6] == ["2", "0", "2", "0", "2"]
    assert row.endswith("a 2: RuntimeError: a tactic 2 failed")
    assert len(json.loads(cache.read_text())["entries"]) == 2


# --------------------------------------------------------------------------------------
# skip_ops takes the ops themselves as well as their names (issue 21, item 19): in any mix;
# anything else is a TypeError naming the item, raised when the block is made
# --------------------------------------------------------------------------------------


def ways_to_name(op):
    return {"op": op, "api_name": op.api_name, "api_key": op.api_key}


def test_the_op_itself_skips_it_like_its_names(direct):
    op, runners = fake_op(direct)
    with autotune(skip_ops=[op]):
        assert op(torch.zeros(4)) == ("a", None)  # the default, untimed
    assert runners["a"].tactics_calls == 0
    assert AutoTuner.get().choice(make_key(op.api_key, (torch.zeros(4),))) is None


def test_flashinfer_mm_is_accepted_as_itself():
    assert autotune(skip_ops=[flashinfer.mm]).skip_ops == {"flashinfer.gemm.mm"}
    assert autotune(skip_ops=(flashinfer.mm, "mm")).skip_ops == {"flashinfer.gemm.mm"}


@settings(max_examples=40, deadline=None)
@given(picks=st.lists(st.tuples(st.integers(0, 2), st.sampled_from(["op", "api_name", "api_key"]))))
def test_every_mix_of_ops_and_names_names_the_same_ops(picks):
    ops = [make_op({"a": FakeRunner("a")}) for _ in range(3)]
    items = [ways_to_name(ops[i])[how] for i, how in picks]
    expected = {ops[i].api_key for i, _ in picks}
    assert autotune(skip_ops=items).skip_ops == expected


class NotAnOp:
    api_key = 42  # an attribute of that name that is not a string does not make an op


not_ops = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),
    st.binary(max_size=6),
    st.lists(st.text(max_size=3), max_size=2),
    st.just(NotAnOp()),
    st.just(len),
    st.just(object()),
)


@settings(max_examples=80, deadline=None)
@given(before=st.lists(st.sampled_from(["mm", flashinfer.mm]), max_size=3), bad=not_ops)
def test_anything_else_is_a_type_error_naming_the_item_and_its_position(before, bad):
    with pytest.raises(TypeError) as raised:
        autotune(skip_ops=[*before, bad])
    message = str(raised.value)
    assert f"skip_ops[{len(before)}] is {type(bad).__name__} " in message
    assert repr(bad)[:40] in message
    assert "flashinfer.mm" in message and "'mm'" in message  # what to write instead


def test_a_single_op_or_string_instead_of_a_list_says_what_to_write():
    with pytest.raises(TypeError, match=r"not the op mm itself: write skip_ops=\[mm\]"):
        autotune(skip_ops=flashinfer.mm)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"write skip_ops=\['mm'\]"):
        autotune(skip_ops="mm")
    with pytest.raises(TypeError, match="skip_ops must be a list of ops, got int 3"):
        autotune(skip_ops=3)  # type: ignore[arg-type]
    assert autotune(skip_ops=None).skip_ops == frozenset()  # type: ignore[arg-type]


def test_an_op_that_is_not_autotunable_is_a_value_error_listing_the_valid_ones():
    with pytest.raises(ValueError, match="the op flashinfer.norm.rmsnorm is not autotunable") as e:
        autotune(skip_ops=[flashinfer.rmsnorm])
    assert "flashinfer.gemm.mm" in str(e.value)
