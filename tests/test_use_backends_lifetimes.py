"""``use_backends`` blocks left in any order, from any thread, and the kinds of their lists.

Issue 21, items 6, 7 and 12.  The property: the restriction in force in a context is the
one of the blocks open in it, the newest entry naming an op deciding that op, whatever order
blocks are entered and left in: generators suspended inside blocks and closed in any order,
from this thread or another, one block object entered by several generators, threads or
asyncio tasks at once, or nested in one.  A suspended generator's block is in force in the
code that drives it, as :func:`decimal.localcontext` is (generators share their caller's
context); unlike decimal's, a block never outlives its exit.  And each op's backends are an
ordered list of names: anything else is a ``TypeError`` naming the op and what was given.
"""

from __future__ import annotations

import contextvars
import decimal
import itertools

import pytest
import torch
from block_interleavings import (
    CROSSED,
    GENERATOR_ACTIONS,
    expected_states,
    run_generator_program,
    run_in_tasks,
    run_in_threads,
    schedules,
)
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import flashinfer
from flashinfer.backend_dispatch import (
    backend_requirement,
    supported_compute_capability,
    use_backends,
)
from flashinfer.dispatch import restrictions

_ids = itertools.count()
X = torch.zeros(2)
DEFAULT = ["c", "b", "a"]  # the heuristic's order, with no restriction


def make_op():
    """``op(x, backend="auto")`` with backends a, b, c that all run; returns the candidates
    a call saw, in order."""
    holder = []

    @supported_compute_capability([80, 90], cpu=True)
    def check(x, backend="auto"):
        return True

    def api(x, backend="auto"):
        return list(holder[0].suitable_auto_backends)

    api.__qualname__ = f"lifetimes_api_{next(_ids)}"  # restrictions key an op by this name
    op = backend_requirement(
        {n: check for n in "abc"}, heuristic_func=lambda c, x, backend="auto": sorted(c)[::-1]
    )(api)
    holder.append(op)
    return op


OP1, OP2 = make_op(), make_op()
SPECS = [
    {OP1: ["a"]},
    {OP1: ["b", "a"], OP2: ["c"]},
    {OP2: ["a", "b"]},
    {OP1: "c"},
]


def state_of(stack: list[int]) -> tuple[list[str], list[str]]:
    """What OP1 and OP2 see inside the blocks ``stack`` (indexes into SPECS, oldest first):
    per op, the newest block naming it decides."""
    seen = []
    for op in (OP1, OP2):
        lists = [SPECS[k][op] for k in stack if op in SPECS[k]]
        listed = lists[-1] if lists else DEFAULT
        seen.append([listed] if isinstance(listed, str) else list(listed))
    return seen[0], seen[1]


def observe() -> tuple[list[str], list[str]]:
    return OP1(X), OP2(X)


# ---- item 6: generators suspended inside blocks, left in any order -------------------------


_action = st.tuples(st.sampled_from(GENERATOR_ACTIONS), st.integers(0, 7))


def run_program(actions, block_for) -> None:
    """Run ``actions`` in the current context, checking after each that the restriction in
    force is the one of the open entries, in the order they were entered."""

    def check(stack: list[int], step) -> None:
        assert observe() == state_of(stack), step

    run_generator_program(actions, block_for, len(SPECS), check)
    assert observe() == (DEFAULT, DEFAULT)
    left = restrictions._scope.get()  # nothing left behind in this context
    assert left is None or (left.entries == () and left.names == dict(restrictions._env))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(actions=st.lists(_action, max_size=24), shared=st.booleans())
# One block object open twice in this context, by a generator's frame and by this frame:
# closing the generator ends the generator's entry (the exit's frame), not the newest one.
@example(actions=[("gen", 0), ("enter", 1), ("enter", 0), ("close", 0)], shared=True)
def test_blocks_left_in_any_order_leave_exactly_the_open_blocks_restriction(actions, shared):
    """Generated interleavings of entering, suspending inside, resuming out of and closing
    (here or from another thread) generators' blocks and this frame's own.  ``shared``:
    every entry of a spec uses one block object (entered several times at once)."""
    blocks = [use_backends(spec) for spec in SPECS]
    block_for = blocks.__getitem__ if shared else (lambda k: use_backends(SPECS[k]))
    contextvars.Context().run(run_program, actions, block_for)


def test_a_suspended_generators_block_is_in_force_in_its_caller_as_decimal_localcontext():
    """Where ``decimal.localcontext`` restores its context, a block does too, at the same
    points; where decimal's leaks (generators closed out of order, or from another thread),
    a block does not."""

    def both(prec: int, listed: list[str]):
        with decimal.localcontext() as ctx, use_backends({OP1: listed}):
            ctx.prec = prec
            yield

    def run() -> None:
        base = decimal.getcontext().prec
        g = both(5, ["a"])
        next(g)
        assert (decimal.getcontext().prec, OP1(X)) == (5, ["a"])  # suspended: in force here
        g.close()
        assert (decimal.getcontext().prec, OP1(X)) == (base, DEFAULT)
        first, second = both(5, ["a"]), both(7, ["b"])
        next(first), next(second)
        first.close()
        second.close()
        assert decimal.getcontext().prec == 5  # decimal leaks the first block ...
        assert OP1(X) == DEFAULT  # ... use_backends does not

    contextvars.Context().run(run)


def test_leaving_a_block_more_often_than_entering_it_is_an_error():
    block = use_backends({OP1: ["a"]})
    with block:
        pass
    with pytest.raises(RuntimeError, match="left more times than it was entered"):
        block.__exit__(None, None, None)


# ---- item 7: one block object entered by several threads or tasks ---------------------------


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(schedule=schedules(workers=3, blocks=2))
@example(schedule=CROSSED)
def test_one_block_object_entered_by_several_threads_at_once(schedule):
    """Three threads enter and leave the same block objects in a generated interleaving
    (nested too): each sees exactly its own blocks' restriction at every step and none once
    its blocks are left."""
    blocks = [use_backends(spec) for spec in SPECS[:2]]
    assert run_in_threads(blocks, schedule, 3, observe) == expected_states(schedule, 3, state_of)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(schedule=schedules(workers=3, blocks=2))
@example(schedule=CROSSED)
def test_one_block_object_entered_by_several_tasks_at_once(schedule):
    blocks = [use_backends(spec) for spec in SPECS[:2]]
    assert run_in_tasks(blocks, schedule, 3, observe) == expected_states(schedule, 3, state_of)


# ---- item 12: each op's backends are an ordered list of names -------------------------------

_bad_lists = st.one_of(
    st.sets(st.sampled_from(["torch", "triton"]), min_size=1).map(
        lambda s: (s, "a set has no order")
    ),
    st.frozensets(st.sampled_from(["torch", "triton"]), min_size=1).map(
        lambda s: (s, "a set has no order")
    ),
    st.sampled_from([b"torch", bytearray(b"torch")]).map(lambda b: (b, "backend names are str")),
    st.one_of(st.integers(), st.floats(), st.none()).map(lambda v: (v, "")),
    st.dictionaries(st.sampled_from(["torch"]), st.integers(), max_size=1).map(lambda d: (d, "")),
    st.sampled_from([iter(["torch"]), range(2), (n for n in ["torch"])]).map(lambda v: (v, "")),
)


@settings(max_examples=120, deadline=None)
@given(bad=_bad_lists, by_object=st.booleans())
def test_backends_that_are_not_an_ordered_list_of_names_are_a_type_error_naming_the_op(
    bad, by_object
):
    value, why = bad
    with pytest.raises(TypeError) as exc:
        if by_object:
            use_backends({flashinfer.mm: value})
        else:
            use_backends(mm=value)
    message = str(exc.value)
    assert message.startswith("use_backends: the backends of mm must be a list or tuple")
    assert f"got {type(value).__name__} " in message and why in message


@settings(max_examples=60, deadline=None)
@given(
    positional=st.one_of(
        st.lists(st.sampled_from(["torch", "triton"]), min_size=1),
        st.sampled_from(["mm", "torch", b"mm"]),
        st.tuples(st.just("mm"), st.just(["torch"])),
        st.sets(st.just("mm"), min_size=1),
    )
)
def test_a_positional_argument_that_is_not_a_mapping_is_a_type_error(positional):
    with pytest.raises(TypeError, match=r"positional argument must be a mapping \{op: \[backend"):
        use_backends(positional)


@pytest.mark.parametrize("listed", [["torch"], ("torch", "triton"), "triton"])
def test_lists_tuples_and_one_name_are_accepted(listed):
    a, b = torch.randn(4, 8), torch.randn(8, 4)
    expected = [listed] if isinstance(listed, str) else list(listed)
    with use_backends(mm=listed):
        flashinfer.mm(a, b)
        assert list(flashinfer.mm.suitable_auto_backends) == expected
