"""``autotune(skip_ops=[...])`` takes the ops themselves as well as their names (issue 21,
item 19): ``flashinfer.mm``, ``"mm"`` and ``"flashinfer.gemm.mm"`` name the same op, in any
mix, and anything that is neither an op nor a string is a ``TypeError`` naming the item,
raised when the block is made, before any work.
"""

from __future__ import annotations

import pytest
import torch
from autotuner_fakes import FakeRunner, clean_tuner, make_op
from hypothesis import given, settings
from hypothesis import strategies as st

import flashinfer
from flashinfer.autotuner import AutoTuner, autotune, make_key


@pytest.fixture(autouse=True)
def fast_tuner():
    with clean_tuner(warmup=0, repeat=1) as tuner:
        yield tuner


@pytest.fixture(params=[False, True], ids=["via-run", "routed"])
def direct(request):
    return request.param


def fake_op(direct):
    runners = {"a": FakeRunner("a", [1, 2]), "b": FakeRunner("b")}
    return make_op(runners, direct=direct), runners


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
