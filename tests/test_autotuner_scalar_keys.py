"""The tuning key holds what changes the choice: bool, int, str and enum arguments are part
of it by default (upstream FlashInfer issue #3363: two calls that differed in a layout flag
shared one entry, and one of them got a tactic invalid for it), floats are not unless a
runner declares them, and a runner's ``key_inputs`` declaration (positions and bucket
functions) is honoured.  Every test runs on both call paths: the body calling
``AutoTuner.run`` and the dispatcher routing auto calls to the generated router."""

from __future__ import annotations

import enum
import itertools
import json
from typing import Any

import pytest
import torch
from autotuner_fakes import clean_tuner

from flashinfer.autotuner import (
    AutoTuner,
    EnumValue,
    autotune,
    load_tuning_file,
    make_key,
    save_tuning_file,
)
from flashinfer.backend_dispatch import backend_requirement, supported_compute_capability

_ids = itertools.count()


class Layout(enum.Enum):
    ROW = "row"
    COL = "col"


@pytest.fixture(autouse=True)
def fast_tuner():
    with clean_tuner(warmup=0, repeat=1) as tuner:
        yield tuner


@pytest.fixture(params=[False, True], ids=["via-run", "routed"])
def direct(request):
    return request.param


class FlagRunner:
    """Like upstream's gemm runner with ``use_8x4_sf_layout``: each value of ``inputs[1]``
    has its own tactics, and a tactic of the other value raises.  Counts its timings."""

    def __init__(self, key_inputs: Any = None) -> None:
        if key_inputs is not None:
            self.key_inputs = key_inputs
        self.tactics_calls = 0
        self.calls: list[Any] = []

    def tactic_space(self):
        return ["T", "F", "row", "col", "any"]

    def tactics(self, inputs):
        self.tactics_calls += 1
        flag = inputs[1]
        if isinstance(flag, bool):
            return ["T" if flag else "F"]
        if isinstance(flag, Layout):
            return [flag.value]
        return ["any"]

    def __call__(self, inputs, tactic=None):
        valid = self.tactics(inputs)
        self.tactics_calls -= 1  # the check above is not a tuning
        if tactic is not None and tactic not in valid:
            raise RuntimeError(f"tactic {tactic!r} is invalid for {inputs[1]!r}")
        self.calls.append((inputs[1], tactic))
        return tactic or valid[0]


def flag_op(direct: bool, runner: FlagRunner | None = None):
    """``op(x, flag, backend="auto")`` with one backend, ``"a"``."""
    runners = {"a": runner or FlagRunner()}

    def api(x, flag, backend="auto"):
        if backend == "auto":
            return AutoTuner.get().run(op, runners, (x, flag))
        return runners[backend]((x, flag))

    api.__name__ = api.__qualname__ = f"scalar_key_op_{next(_ids)}"

    @supported_compute_capability([80, 90], cpu=True)
    def check_a(x, flag, backend="auto"):
        return True

    op = backend_requirement({"a": check_a})(api)
    AutoTuner.register(op, runners, direct=direct)
    return op, runners["a"]


def key_of(op, flag, n=4):
    return make_key(op.api_key, (torch.zeros(n), flag))


# --------------------------------------------------------------------------------------
# The default rule
# --------------------------------------------------------------------------------------


def test_two_calls_that_differ_only_in_a_bool_flag_get_separate_entries(direct, tmp_path):
    op, runner = flag_op(direct)
    x = torch.zeros(4)
    with autotune():
        assert op(x, False) == "F"
        assert op(x, True) == "T"  # tuned anew: the entry of False would raise here
    assert runner.tactics_calls == 2
    assert AutoTuner.get().choice(key_of(op, False)).tactic == "F"
    assert AutoTuner.get().choice(key_of(op, True)).tactic == "T"
    for _ in range(3):  # served from the tuned keys, outside tuning
        assert (op(x, False), op(x, True)) == ("F", "T")
    # The file tells them apart, and reads back into the same two keys.
    save_tuning_file(tmp_path / "c.json")
    inputs = sorted(
        json.dumps(e["inputs"]) for e in json.loads((tmp_path / "c.json").read_text())["entries"]
    )
    assert inputs == [
        json.dumps([{"shape": [4], "dtype": "float32"}, {"value": False}]),
        json.dumps([{"shape": [4], "dtype": "float32"}, {"value": True}]),
    ]
    AutoTuner.get().clear()
    assert load_tuning_file(tmp_path / "c.json").loaded == 2
    assert (op(x, False), op(x, True)) == ("F", "T")


@pytest.mark.parametrize("values", [(1, 2), ("row", "col")], ids=["int", "str"])
def test_ints_and_strs_are_part_of_the_key(direct, values):
    op, runner = flag_op(direct)
    with autotune():
        for value in values:
            op(torch.zeros(4), value)
    assert runner.tactics_calls == 2
    assert key_of(op, values[0]) != key_of(op, values[1])


def test_enum_members_are_part_of_the_key_and_read_back_without_importing(direct, tmp_path):
    op, runner = flag_op(direct)
    with autotune():
        assert op(torch.zeros(4), Layout.ROW) == "row"
        assert op(torch.zeros(4), Layout.COL) == "col"
    key = key_of(op, Layout.COL)
    assert key[1][1] == EnumValue(f"{__name__}.Layout", "COL")
    save_tuning_file(tmp_path / "c.json")
    text = (tmp_path / "c.json").read_text()
    assert f'{{"enum": "{__name__}.Layout", "name": "COL"}}' in text
    AutoTuner.get().clear()
    load_tuning_file(tmp_path / "c.json")
    assert AutoTuner.get().choice(key).tactic == "col"
    assert op(torch.zeros(4), Layout.COL) == "col"


# --------------------------------------------------------------------------------------
# A runner's declaration
# --------------------------------------------------------------------------------------


def test_floats_stay_out_of_the_key_unless_declared(direct):
    op, runner = flag_op(direct)
    with autotune():
        for eps in (1e-6, 1e-5, 0.5):
            op(torch.zeros(4), eps)
    assert runner.tactics_calls == 1  # one key for every eps
    assert key_of(op, 1e-6) == key_of(op, 0.5) and key_of(op, 0.5)[1][1] is ...
    declared, declared_runner = flag_op(direct, FlagRunner(key_inputs={1: None}))
    with autotune():
        for eps in (1e-6, 1e-5, 0.5):
            declared(torch.zeros(4), eps)
    assert declared_runner.tactics_calls == 3
    assert key_of(declared, 0.5)[1][1] == 0.5


def test_a_declared_float_is_part_of_the_key_through_its_bucket(direct, tmp_path):
    op, runner = flag_op(direct, FlagRunner(key_inputs={1: lambda v: round(v, 1)}))
    with autotune():
        op(torch.zeros(4), 0.51)
        op(torch.zeros(4), 0.52)  # same bucket (0.5)
        op(torch.zeros(4), 0.7)
    assert runner.tactics_calls == 2
    assert key_of(op, 0.51)[1][1] == 0.5 and key_of(op, 0.7)[1][1] == 0.7
    save_tuning_file(tmp_path / "c.json")
    AutoTuner.get().clear()
    assert load_tuning_file(tmp_path / "c.json").loaded == 2
    assert AutoTuner.get().choice(key_of(op, 0.49)) is not None  # 0.5's bucket


def test_a_declaration_replaces_the_default_rule_for_the_ops_scalars(direct):
    op, runner = flag_op(direct, FlagRunner(key_inputs={}))  # no scalar matters
    with autotune():
        op(torch.zeros(4), "row")
        op(torch.zeros(4), "col")  # same key: the str is not declared
    assert runner.tactics_calls == 1
    assert key_of(op, "row") == key_of(op, "col")
    assert key_of(op, "row")[1][1] is ...
    undeclared, undeclared_runner = flag_op(direct)  # the default rule: two keys
    with autotune():
        undeclared(torch.zeros(4), "row")
        undeclared(torch.zeros(4), "col")
    assert undeclared_runner.tactics_calls == 2


def test_the_runners_declarations_are_merged_and_checked_at_registration():
    def op_with(runners):
        def api(x, flag, backend="auto"):
            return None

        api.__name__ = api.__qualname__ = f"scalar_key_op_{next(_ids)}"
        checks = {}
        for name in runners:

            @supported_compute_capability([80, 90], cpu=True)
            def check(x, flag, backend="auto"):
                return True

            checks[name] = check
        op = backend_requirement(checks)(api)
        AutoTuner.register(op, runners)
        return op

    bucket = abs
    op = op_with({"a": FlagRunner({1: bucket}), "b": FlagRunner({1: bucket}), "c": FlagRunner()})
    assert make_key(op.api_key, (torch.zeros(1), -2.0))[1][1] == 2.0
    with pytest.raises(ValueError, match=r"runner 'b' key_inputs\[1\] differs from runner 'a'"):
        op_with({"a": FlagRunner({1: abs}), "b": FlagRunner({1: round})})
    with pytest.raises(TypeError, match="'x' is not an input position"):
        op_with({"a": FlagRunner({"x": None})})
    with pytest.raises(TypeError, match=r"key_inputs\[1\] must be a function or None"):
        op_with({"a": FlagRunner({1: "round"})})
    with pytest.raises(TypeError, match="must map input positions"):
        op_with({"a": FlagRunner([1])})


def test_a_bucket_that_returns_what_a_key_cannot_hold_is_a_type_error(direct):
    op, _ = flag_op(direct, FlagRunner(key_inputs={1: lambda v: [v]}))
    with pytest.raises(TypeError, match="bucket function returned"):
        op(torch.zeros(4), 1)
