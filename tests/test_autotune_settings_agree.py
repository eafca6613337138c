"""The ranks of an autotune process group compare every setting that changes the choice
before any timing (issue 21, item 4), and a group that is gone is named as flashinfer's
setting (item 17).

Item 4 runs on a real gloo group of 3 ranks (``tests/autotune_dist_worker.py``, suite
``settings``; a file store in a temporary directory, a timeout on every collective call and
on every wait here).  Rank 1 alone gets another value of one setting, at each point it can
start to differ (before the block, inside it, between two keys; for ``skip_ops``, also for a
key the ranks agreed on before); every rank must raise ``AutotuneConsistencyError`` within
seconds (never the group's timeout), naming the setting and each rank's value, with nothing
timed.  The settings are read from the code's one table, ``agreement.SETTINGS``, so a setting
added there is covered here (the worker fails a setting it has no case for).

Item 17 runs in this process, on one-rank gloo groups.
"""

from __future__ import annotations

import datetime
from typing import Any

import pytest
import torch
import torch.distributed as dist
from autotune_dist_worker import TUNER_VALUES, WHEN, setting_cases
from autotuner_fakes import FakeRunner, clean_tuner, make_op
from test_autotune_distributed import FAST_S, GROUP_TIMEOUT_S, facts, run_group

from flashinfer.autotuner import (
    AutotuneConsistencyError,
    autotune,
    get_autotune_process_group,
    set_autotune_process_group,
)
from flashinfer.autotuner.distributed import SETTINGS, Manifest, differences

WORLD = 3


@pytest.fixture(scope="module")
def three(tmp_path_factory) -> dict[str, Any]:
    group = run_group(tmp_path_factory.mktemp("settings"), "settings", WORLD, GROUP_TIMEOUT_S)
    assert group["returncodes"] == [0] * WORLD, group["logs"]
    return group


def shown(name: str, value: Any) -> str:
    if name == "skip_ops":
        return repr(list(value))
    if name == "tuning_file":
        return "given" if value else "not given"
    return str(value)


CASES = [case.split(":", 1)[1] for case in setting_cases()]


def test_every_setting_in_the_table_has_cases():
    assert {case.split(":")[0] for case in CASES} == set(SETTINGS)
    assert set(WHEN) == set(SETTINGS), "add the new setting's cases to autotune_dist_worker.WHEN"
    assert set(TUNER_VALUES) <= set(SETTINGS)


@pytest.mark.parametrize("case", CASES)
def test_a_setting_that_differs_on_one_rank_fails_every_rank_before_timing(three, case):
    name, when = case.split(":")
    per_rank = facts(three, f"setting_differs:{case}")
    values = {rank: f["value"] for rank, f in enumerate(per_rank)}
    assert values[0] != values[1] and values[0] == values[2]  # the case really differs
    label = SETTINGS[name].label
    expected_line = (
        f"  {label} differs: ranks 0, 2: {shown(name, values[0])}; rank 1: {shown(name, values[1])}"
    )
    for rank, f in enumerate(per_rank):
        assert f.get("is_consistency_error"), (rank, f)
        assert f"this is rank {rank}" in f["message"]
        assert expected_line in f["message"].splitlines(), f["message"]
        per_value = {int(r): v for r, v in f["differences"][name].items()}
        as_sent = {r: tuple(v) if isinstance(v, list) else v for r, v in values.items()}
        assert {r: tuple(v) if isinstance(v, list) else v for r, v in per_value.items()} == (
            as_sent
        )
        assert f["new_calls"] == 0  # nothing was timed
        assert f["elapsed_s"] < FAST_S  # promptly: not at the group's timeout


def manifest(**settings: Any) -> Manifest:
    base = dict(
        op="op",
        key="k",
        shard=False,
        candidates=("a",),
        tactics=(("a", ("null",)),),
        tactics_error=None,
        gate=None,
        gate_on=False,
        choice=None,
    )
    values = {name: 0 for name in SETTINGS}
    values.update(settings)
    return Manifest(**base, settings=tuple(values.items()))  # type: ignore[arg-type]


@pytest.mark.parametrize("name", sorted(SETTINGS))
def test_the_verdict_compares_every_setting_of_the_table(name):
    assert differences([manifest(), manifest()]) == {}
    found = differences([manifest(), manifest(**{name: 1}), manifest()])
    assert found == {name: {0: 0, 1: 1, 2: 0}}


# ---- item 17: a group that is gone -------------------------------------------------------


def init_one_rank(tmp_path, tag: str) -> Any:
    dist.init_process_group(
        "gloo",
        store=dist.FileStore(str(tmp_path / f"store-{tag}"), 1),
        rank=0,
        world_size=1,
        timeout=datetime.timedelta(seconds=GROUP_TIMEOUT_S),
    )
    return dist.group.WORLD


@pytest.fixture
def cleanup():
    yield
    set_autotune_process_group(None)
    if dist.is_initialized():
        dist.destroy_process_group()


def destroy(how: str, world: Any, sub: Any, tmp_path) -> None:
    if how == "all":
        dist.destroy_process_group()
    elif how == "subgroup":
        dist.destroy_process_group(sub)
    else:  # "reinitialized": every group destroyed, then a new default group made
        dist.destroy_process_group()
        init_one_rank(tmp_path, "again")


@pytest.mark.parametrize("how", ["all", "subgroup", "reinitialized"])
@pytest.mark.parametrize("where", ["process", "block"])
@pytest.mark.parametrize("when", ["before the block", "inside the block"])
def test_a_destroyed_group_is_named_as_the_setting_that_holds_it(
    tmp_path, cleanup, how, where, when
):
    world = init_one_rank(tmp_path, "first")
    sub = dist.new_group([0])
    group = sub if how == "subgroup" else world
    if where == "process":
        set_autotune_process_group(group)
    with clean_tuner(warmup=0, repeat=1):
        runners = {"a": FakeRunner("a", [1, 2])}
        op = make_op(runners)
        block_group = group if where == "block" else None
        if where == "block" and when == "before the block":
            destroy(how, world, sub, tmp_path)
            with pytest.raises(ValueError) as raised:
                with autotune(process_group=block_group):
                    pass
        else:
            if when == "before the block":
                destroy(how, world, sub, tmp_path)
            with pytest.raises(ValueError) as raised:
                with autotune(process_group=block_group):
                    if when == "inside the block":
                        destroy(how, world, sub, tmp_path)
                    op(torch.zeros(4))
        assert runners["a"].calls == []  # raised before any timing
    message = str(raised.value)
    if where == "process":
        assert "the process group set by set_autotune_process_group() is gone" in message
        assert "set_autotune_process_group(None)" in message
    elif when == "inside the block":
        assert "the process group passed to autotune(process_group=...) is gone" in message
    else:  # refused at the block's own argument check
        assert "autotune(process_group=...)" in message and "destroy" in message
    assert "Default process group has not been initialized" not in message.split(" (")[0]
    assert not isinstance(raised.value, AutotuneConsistencyError)


def test_setting_none_after_the_group_is_gone_tunes_alone(tmp_path, cleanup):
    set_autotune_process_group(init_one_rank(tmp_path, "x"))
    dist.destroy_process_group()
    set_autotune_process_group(None)  # what the error says to do
    assert get_autotune_process_group() is None
    with clean_tuner(warmup=0, repeat=1) as tuner:
        op = make_op({"a": FakeRunner("a", [1, 2])})
        with autotune():
            op(torch.zeros(4))
        assert tuner.last_tuning().timed
