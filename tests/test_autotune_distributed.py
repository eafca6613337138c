"""The autotuner across real process groups: one choice on every rank, never a hang.

Each group is real: gloo, 2 or 4 ranks, one ``python tests/autotune_dist_worker.py``
process per rank, rendezvous through a ``FileStore`` in a temporary directory, a timeout on
every collective (``init_process_group(timeout=...)``) and on every wait here, and any
process still running at the end killed.  To keep the file quick, a group runs a whole
suite of scenarios (each on fresh ops and keys; see the worker) and the tests below assert
on what each rank wrote down.  Timings are scripted per rank, so the outcomes do not
depend on the load of the machine; the "fails within seconds" bound is far below the
group's timeout, which is what a bug (a hang) would take.

What a single process does with a group (the pure parts: manifests, the verdict, the
combination of timings; bad arguments) is tested in-process at the end.
"""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import flashinfer.autotuner as autotuner
from flashinfer.autotuner import AutotuneConsistencyError, autotune, set_autotune_process_group
from flashinfer.autotuner.distributed import (
    Manifest,
    combine_outcomes,
    consistency_error,
    differences,
)

WORKER = Path(__file__).with_name("autotune_dist_worker.py")
GATE = "FLASHINFER_ALLOW_EXPERIMENTAL_AUTO_BACKENDS"
#: Bound of every collective call of the workers: what a hang would cost.
GROUP_TIMEOUT_S = 60
#: Bound of a whole suite (process start-up on a busy 2-core machine included).
SUITE_TIMEOUT_S = 240
#: What "fails within seconds" means: far below GROUP_TIMEOUT_S.
FAST_S = 15


def run_group(tmp: Path, suite: str, world: int, group_timeout_s: float) -> dict[str, Any]:
    """Run ``suite`` on ``world`` ranks; ``{"results": [per rank {scenario: facts}],
    "returncodes": [...], "logs": [...]}``."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.pop(GATE, None)
    procs, logs = [], []
    try:
        for rank in range(world):
            log = open(tmp / f"rank{rank}.log", "w")  # noqa: SIM115 - closed below
            logs.append(log)
            argv = [str(WORKER), suite, str(rank), str(world), str(tmp / "store"), str(tmp)]
            procs.append(
                subprocess.Popen(
                    [sys.executable, *argv, str(group_timeout_s)],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=env,
                    cwd=WORKER.parent,
                )
            )
        deadline = time.monotonic() + SUITE_TIMEOUT_S
        for proc in procs:
            try:
                proc.wait(timeout=max(deadline - time.monotonic(), 1))
            except subprocess.TimeoutExpired:
                pytest.fail(
                    f"suite {suite!r} on {world} ranks still running after "
                    f"{SUITE_TIMEOUT_S} s:\n{_logs(tmp, world)}"
                )
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=30)
        for log in logs:
            log.close()
    results = []
    for rank in range(world):
        out = tmp / f"rank{rank}.json"
        results.append(json.loads(out.read_text()) if out.exists() else None)
    return {
        "results": results,
        "returncodes": [p.returncode for p in procs],
        "logs": _logs(tmp, world),
    }


def _logs(tmp: Path, world: int) -> str:
    return "\n".join(
        f"--- rank {r} ---\n{(tmp / f'rank{r}.log').read_text()[-4000:]}" for r in range(world)
    )


def facts(group: dict[str, Any], scenario: str) -> list[dict[str, Any]]:
    """What every rank recorded for ``scenario`` (fails with the logs if a rank did not)."""
    per_rank = [None if r is None else r.get(scenario) for r in group["results"]]
    assert all(f is not None for f in per_rank), group["logs"]
    return per_rank  # type: ignore[return-value]


def succeeded(per_rank: list[dict[str, Any]]) -> list[dict[str, Any]]:
    for f in per_rank:
        assert "error" not in f, f.get("traceback")
    return per_rank


@pytest.fixture(scope="module")
def two(tmp_path_factory) -> dict[str, Any]:
    group = run_group(tmp_path_factory.mktemp("two"), "main", 2, GROUP_TIMEOUT_S)
    assert group["returncodes"] == [0, 0], group["logs"]
    return group


@pytest.fixture(scope="module")
def four(tmp_path_factory) -> dict[str, Any]:
    group = run_group(tmp_path_factory.mktemp("four"), "four", 4, GROUP_TIMEOUT_S)
    assert group["returncodes"] == [0, 0, 0, 0], group["logs"]
    return group


@pytest.fixture(params=[2, 4], ids=["2-ranks", "4-ranks"])
def group(request) -> dict[str, Any]:
    return request.getfixturevalue("two" if request.param == 2 else "four")


# ---- one choice everywhere --------------------------------------------------------------


def test_ranks_whose_timings_disagree_record_the_same_choice(group):
    per_rank = succeeded(facts(group, "disagreeing_timings"))
    alone = [f["local"]["choice"] for f in per_rank]
    assert len({tuple(c) for c in alone}) > 1  # alone, the ranks would disagree
    # together: "d", whose slowest rank (4 ms) beats every other pair's slowest (10 ms)
    assert [f["shared"]["choice"] for f in per_rank] == [["d", None]] * len(per_rank)
    assert all(f["shared"]["timed"] and f["shared"]["tried"] == 4 for f in per_rank)


def test_a_process_wide_group_makes_plain_blocks_collective_until_set_to_none(two):
    per_rank = succeeded(facts(two, "process_wide_group"))
    assert [f["shared"]["choice"] for f in per_rank] == [["b", None], ["b", None]]
    assert [f["alone"]["choice"] for f in per_rank] == [["a", None], ["b", None]]


def test_a_rank_holding_its_own_choice_tunes_again_with_the_others(two):
    """Rank 0 had a choice for the key, rank 1 none: both time it, both record one choice,
    and the next call of that key makes no collective call and times nothing."""
    per_rank = succeeded(facts(two, "one_rank_had_it_tuned"))
    assert [(f["first"]["choice"], f["first"]["timed"]) for f in per_rank] == [
        (["b", None], True)
    ] * 2
    assert [(f["second"]["timed"], f["new_calls"]) for f in per_rank] == [(False, 1)] * 2


def test_sharding_splits_the_plan_and_records_the_same_choice(group):
    per_rank = succeeded(facts(group, "sharded"))
    world = len(per_rank)
    assert [f["choice"] for f in per_rank] == [["b", 2]] * world
    assert all(len(f["timed_here"]) == 8 // world for f in per_rank)  # each its share...
    timed = {tuple(pair) for f in per_rank for pair in f["timed_here"]}
    assert timed == {(b, t) for b in "ab" for t in range(4)}  # ...of the whole plan
    assert all(f["tried"] == 8 for f in per_rank)


# ---- agreement first: differences raise on every rank, quickly ----------------------------


def test_a_gate_that_differs_fails_on_every_rank_within_seconds(group):
    per_rank = facts(group, "gate_differs")
    for rank, f in enumerate(per_rank):
        assert f.get("is_consistency_error"), f
        message = f["message"]
        assert f"this is rank {rank}" in message
        assert GATE in message and "rank 0: '1' (on)" in message
        others = "rank 1" if len(per_rank) == 2 else "ranks 1, 2, 3"
        assert f"{others}: unset (off)" in message
        assert f"differ: rank 0: ['a', 'exp']; {others}: ['a']" in message  # by rank
        assert "tactics differ" not in message  # a consequence: not repeated
        assert f["elapsed_s"] < FAST_S


def test_tactics_that_raise_on_one_rank_fail_every_rank(two):
    for f in facts(two, "tactics_raise_on_one_rank"):
        assert f.get("is_consistency_error"), f
        assert (
            "tactics() raised on some ranks: rank 0: no error; rank 1: a: RuntimeError: "
            "no tactics on this rank" in f["message"]
        )
        assert f["elapsed_s"] < FAST_S


# ---- failures never hang ------------------------------------------------------------------


def test_a_tactic_that_raises_on_one_rank_only_is_left_out_everywhere(two):
    per_rank = succeeded(facts(two, "tactic_fails_on_one_rank"))
    # tactic 2 was the fastest, but failed on rank 1: tactic 3 (2 ms) is picked everywhere
    assert [f["choice"] for f in per_rank] == [["a", 3], ["a", 3]]
    for f in per_rank:
        ((backend, tactic, reason),) = f["failures"]
        assert (backend, tactic) == ("a", 2)
        assert "a tactic 2 failed" in reason and "on rank 1 only" in reason


def test_a_rank_killed_mid_tuning_makes_the_others_fail_with_a_clear_error(tmp_path):
    timeout = 30
    group = run_group(tmp_path, "kill", 2, timeout)
    assert group["returncodes"][1] == 17, group["logs"]  # died in its runner
    assert group["returncodes"][0] == 0, group["logs"]  # the survivor finished
    (survivor,) = facts({**group, "results": group["results"][:1]}, "killed_mid_tuning")
    assert survivor.get("is_consistency_error"), survivor
    assert "the autotune process group failed on rank 0 of 2" in survivor["message"]
    assert "may have died" in survivor["message"]
    assert survivor["elapsed_s"] < timeout + FAST_S  # within the group's timeout


# ---- the tuning file --------------------------------------------------------------------


def test_the_tuning_file_is_read_by_rank_0_for_all_and_written_by_rank_0_alone(two):
    """Rank 1 may not open the file at all (the worker makes that fail): it still loads
    what rank 0 read, and only rank 0 saves."""
    rank0, rank1 = succeeded(facts(two, "shared_file"))
    assert rank0["tuned"]["choice"] == rank1["tuned"]["choice"] == ["a", 2]
    assert rank0["loaded"] == rank1["loaded"] == {**rank0["tuned"], "timed": False, "tried": 0}
    assert (rank0["saves"], rank1["saves"]) == (1, 0)
    assert rank0["opened"] > 0 and rank1["opened"] == 0


def test_a_tuning_file_rank_0_cannot_read_fails_every_rank_with_its_error(two):
    for f in facts(two, "unreadable_file"):
        assert f.get("error") == "PermissionError", f
        assert "read by rank 0 of the autotune process group" in f["message"]
        assert f["elapsed_s"] < FAST_S


def test_only_rank_0_checks_the_tuning_files_directory(two):
    """Rank 0 alone reads and writes the file, so a directory that only its host has is
    enough: the other ranks neither refuse their (missing) one nor wait for a timeout."""
    rank0, rank1 = succeeded(facts(two, "directory_on_rank0_only"))
    assert rank0["tuned"]["choice"] == rank1["tuned"]["choice"] == ["a", 2]
    assert (rank0["saved"], rank1["saved"]) == (True, False)


def test_a_directory_missing_on_rank_0_is_refused_on_every_rank_at_once(two):
    for f in facts(two, "directory_missing_on_rank0"):
        assert f.get("error") == "TuningFileError", f
        assert "no_such_dir" in f["message"] and "does not exist" in f["message"]
        assert "checked by rank 0 of the autotune process group" in f["message"]
        assert f["elapsed_s"] < FAST_S


# ---- in one process: arguments, the verdict, the combination -------------------------------


def test_shard_without_a_group_is_refused():
    with pytest.raises(ValueError, match="shard=True.*needs a process group"):
        with autotune(shard=True):
            pass
    with autotune(shard=False):  # nothing to shard: nothing to refuse
        pass


def test_a_group_needs_torch_distributed_initialized():
    with pytest.raises(ValueError, match="not initialized"):
        set_autotune_process_group(object())
    with pytest.raises(ValueError, match="not initialized"):
        with autotune(process_group=object()):
            pass
    set_autotune_process_group(None)  # turning it off always works
    assert autotuner.get_autotune_process_group() is None


def manifest(**changes: Any) -> Manifest:
    base = Manifest(
        op="op",
        key="('op', ((4,), 'float32'))",
        shard=False,
        candidates=("a", "b"),
        tactics=(("a", ("1", "2")), ("b", ("null",))),
        tactics_error=None,
        gate=None,
        gate_on=False,
        choice=None,
    )
    return base._replace(**changes)


def test_equal_manifests_agree_even_when_held_choices_or_an_unused_gate_differ():
    same = [manifest(), manifest(gate="1", gate_on=True, choice=("a", "1"))]
    assert differences(same) == {}


def test_the_verdict_names_each_rank_and_what_differs():
    manifests = [manifest(), manifest(shard=True), manifest(tactics=(("a", ("1",)),))]
    found = differences(manifests)
    assert set(found) == {"shard", "tactics"}
    error = consistency_error(manifests, found, rank=2)
    text = str(error)
    assert "the 3 ranks" in text and "this is rank 2" in text
    assert "shard= differs: ranks 0, 2: False; rank 1: True" in text
    assert "tactics differ: ranks 0, 1: {a: [1, 2], b: [null]}; rank 2: {a: [1]}" in text
    assert GATE not in text  # the gate is the same everywhere: not a suspect
    assert error.differences["shard"] == {0: False, 1: True, 2: False}
    clone = pickle.loads(pickle.dumps(error))
    assert type(clone) is AutotuneConsistencyError and clone.differences == error.differences
    assert isinstance(error, RuntimeError)


def test_a_pair_failed_on_any_rank_failed_and_the_slowest_median_counts():
    gathered = [
        {0: (1.0, 0.1, None), 1: (2.0, 0.2, None), 2: (None, None, "boom")},
        {0: (3.0, 0.3, None), 1: (1.0, 0.1, None), 2: (1.0, 0.1, None)},
    ]
    combined = combine_outcomes(gathered, 3)
    assert combined[0].median_s == 3.0 and combined[0].iqr_s == 0.3  # rank 1's, the slowest
    assert combined[1].median_s == 2.0 and combined[1].iqr_s == 0.2
    assert combined[2].median_s is None and "on rank 0 only" in combined[2].reason
    # sharded: each pair timed by one rank, failures keep their plain reason
    assert (
        combine_outcomes([{0: (None, None, "boom")}, {1: (1.0, 0.0, None)}], 2)[0].reason == "boom"
    )


@pytest.fixture
def one_rank_group(tmp_path):
    """A real gloo group of this process alone (world size 1: no collective is made)."""
    import datetime

    import torch.distributed as dist

    store = dist.FileStore(str(tmp_path / "store"), 1)
    dist.init_process_group(
        "gloo", store=store, rank=0, world_size=1, timeout=datetime.timedelta(seconds=60)
    )
    try:
        yield dist.group.WORLD
    finally:
        set_autotune_process_group(None)
        dist.destroy_process_group()


def test_blocks_nest_their_group_and_shard_settings(one_rank_group):
    from flashinfer.autotuner.distributed import GroupSetting, group_in_effect

    group = one_rank_group
    assert group_in_effect() is None
    with autotune(process_group=group):
        assert group_in_effect() == GroupSetting(group, False)
        with autotune(shard=True):  # the enclosing block's group, sharded
            assert group_in_effect() == GroupSetting(group, True)
        with autotune():  # inherits it as it is
            assert group_in_effect() == GroupSetting(group, False)
    assert group_in_effect() is None
    set_autotune_process_group(group, shard=True)
    assert autotuner.get_autotune_process_group() is group
    with autotune():
        assert group_in_effect() == GroupSetting(group, True)
        with autotune(shard=False):
            assert group_in_effect() == GroupSetting(group, False)
    set_autotune_process_group(None)
    assert group_in_effect() is None


def test_a_one_rank_group_tunes_like_no_group(one_rank_group):
    import torch
    from autotuner_fakes import FakeRunner, clean_tuner, make_op

    with clean_tuner(warmup=0, repeat=1) as tuner:
        runners = {"a": FakeRunner("a", [1, 2]), "b": FakeRunner("b")}
        op = make_op(runners)
        with autotune(process_group=one_rank_group):
            op(torch.zeros(4))
            first = tuner.last_tuning()
            op(torch.zeros(4))
            second = tuner.last_tuning()
        assert first.timed and first.tried == 3 and first.choice is not None
        assert not second.timed and second.choice == first.choice
