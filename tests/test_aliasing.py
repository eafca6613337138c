"""flashinfer.dispatch.overlap: the overlap rule, checked against a brute-force oracle.

The ops' use of the rule (every op, every written argument, every backend) is tested by
tests/test_overlap_conformance.py and its experimental twin.
"""

from __future__ import annotations

import itertools

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import flashinfer.dispatch.overlap as aliasing
from flashinfer.dispatch.overlap import OverlapRule, overlaps_itself, tensors_overlap

DTYPES = [torch.uint8, torch.float16, torch.float32, torch.float64]


def _view(storage: torch.UntypedStorage, dtype, offset, shape, strides) -> torch.Tensor:
    return torch.empty(0, dtype=dtype).set_(storage, offset, shape, strides)


def _bytes(t: torch.Tensor, base: int) -> set[int]:
    """Every byte address of ``t`` relative to ``base``, by enumerating its elements."""
    es = t.element_size()
    start = t.data_ptr() - base
    found = set()
    for index in itertools.product(*(range(n) for n in t.shape)):
        element = start + es * sum(i * s for i, s in zip(index, t.stride(), strict=True))
        found.update(range(element, element + es))
    return found


def _elements(t: torch.Tensor) -> list[int]:
    return [
        sum(i * s for i, s in zip(index, t.stride(), strict=True))
        for index in itertools.product(*(range(n) for n in t.shape))
    ]


@st.composite
def strided_views(draw, storage):
    """A view of ``storage`` with any dtype, shape (up to 3-D), strides and offset."""
    dtype = draw(st.sampled_from(DTYPES))
    rank = draw(st.integers(0, 3))
    shape = draw(st.lists(st.integers(0, 4), min_size=rank, max_size=rank))
    strides = draw(st.lists(st.integers(0, 7), min_size=rank, max_size=rank))
    offset = draw(st.integers(0, 9))
    return _view(storage, dtype, offset, shape, strides)


def _storage() -> torch.UntypedStorage:
    # Large enough for every view the strategy draws: (9 + 3 * 3 * 7) elements of 8 bytes.
    return torch.zeros(1024, dtype=torch.uint8).untyped_storage()


STORAGE = _storage()


@settings(max_examples=400, deadline=None)
@given(strided_views(STORAGE))
def test_overlaps_itself_agrees_with_enumeration(t):
    elements = _elements(t)
    assert overlaps_itself(t) == (len(set(elements)) < len(elements))


@settings(max_examples=400, deadline=None)
@given(strided_views(STORAGE), strided_views(STORAGE))
def test_tensors_overlap_agrees_with_enumeration(a, b):
    base = STORAGE.data_ptr()
    expected = bool(_bytes(a, base) & _bytes(b, base))
    assert tensors_overlap(a, b) == expected
    assert tensors_overlap(b, a) == expected


def test_separate_allocations_are_decided_by_address_ranges(monkeypatch):
    """The common case (no shared buffer) never lists runs: two comparisons decide it."""

    def listing(*args):
        raise AssertionError("runs were listed for tensors in separate allocations")

    monkeypatch.setattr(aliasing, "_runs", listing)
    rule = OverlapRule("op", ("out",), ("x", "w"), frozenset({("out", "x")}))
    x, w = torch.ones(64, 32)[:, ::2], torch.ones(16)
    rule.check(torch.empty(64, 16), x, w)
    rule.check(torch.empty(32, 64).t()[:, :16], x, w)
    assert not tensors_overlap(x, torch.empty(3, 5)[:, ::2])


def test_too_many_runs_to_list_count_as_self_overlap(monkeypatch):
    """Beyond MAX_RUNS the rule refuses rather than guess."""
    storage = _storage()
    interleaved = _view(storage, torch.float32, 0, (3, 2), (2, 3))  # 0 3 | 2 5 | 4 7: distinct
    assert not overlaps_itself(interleaved)  # strides not nested: decided by listing runs
    monkeypatch.setattr(aliasing, "MAX_RUNS", 1)
    assert overlaps_itself(interleaved)


def test_too_many_runs_to_list_count_as_overlap(monkeypatch):
    storage = _storage()
    even = _view(storage, torch.float32, 0, (8, 8), (16, 2))
    odd = _view(storage, torch.float32, 1, (8, 8), (16, 2))
    assert not tensors_overlap(even, odd)  # interleaved columns: 64 runs each, listed
    monkeypatch.setattr(aliasing, "MAX_RUNS", 63)
    assert tensors_overlap(even, odd)


def test_meta_and_empty_tensors_hold_no_memory():
    m = torch.empty(4, 4, device="meta")
    assert not tensors_overlap(m, torch.empty(4, 4, device="meta"))
    buf = torch.zeros(8)
    assert not tensors_overlap(buf[2:2], buf)
    assert not overlaps_itself(torch.zeros(1, 0).expand(5, 0))


# ---- OverlapRule ----------------------------------------------------------------------

RULE = OverlapRule("op", ("out",), ("x", "w"), frozenset({("out", "x")}))
TWO_WRITTEN = OverlapRule("fused", ("x", "r"), ("w",))


def test_identical_view_is_allowed_only_for_in_place_pairs():
    x, w = torch.ones(3, 4), torch.ones(4)
    RULE.check(x, x, w)  # out=x, declared in place
    RULE.check(x.view(3, 4), x, w)  # another view object with the same layout
    RULE.check(None, x, w)  # no out: nothing to check
    with pytest.raises(ValueError, match=r"op: out overlaps w and op cannot run in place on w"):
        RULE.check(w, x, w)
    with pytest.raises(ValueError, match=r"x and r overlap, and both are written.*r\.clone"):
        TWO_WRITTEN.check(x, x, w)


def test_messages_name_the_arguments_and_the_fix():
    buf = torch.zeros(5, 4)
    with pytest.raises(ValueError, match=r"out overlaps x but is not the same view.*x\.clone"):
        RULE.check(buf[1:], buf[:4], torch.ones(4))
    with pytest.raises(ValueError, match=r"out overlaps itself.*strides \(0, 1\).*out=None"):
        RULE.check(torch.zeros(1, 4).expand(3, 4), torch.ones(3, 4), torch.ones(4))
    with pytest.raises(ValueError, match=r"r overlaps itself.*r\.contiguous\(\)"):
        TWO_WRITTEN.check(torch.ones(3, 4), torch.zeros(1, 4).expand(3, 4), torch.ones(4))


def test_read_only_arguments_may_alias_each_other():
    x = torch.ones(4, 4)
    RULE.check(torch.empty(4, 4), x, x[1])  # w is a row of x: both only read
    RULE.check(torch.empty(4, 4), torch.zeros(1, 4).expand(4, 4), torch.ones(4))


def test_disjoint_views_of_one_buffer_are_allowed():
    buf = torch.zeros(4, 12)
    RULE.check(buf[:, 4:8], buf[:, :4], buf[0, 8:])  # column blocks of a fused buffer
    TWO_WRITTEN.check(buf[::2, :4], buf[1::2, :4], buf[0, 4:8])  # interleaved rows


def test_wrong_number_of_tensors_is_a_programming_error():
    with pytest.raises(TypeError, match=r"takes \('out', 'x', 'w'\), got 2"):
        RULE.check(torch.ones(1), torch.ones(1))
