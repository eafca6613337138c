"""One ``autotune()`` block object entered by several threads, tasks or generators at once.

Issue 21, item 7 (the ``autotune`` half): entering one block object from two threads raised
``ValueError: <Token ...> was created in a different Context`` in both, and both stayed in
tuning mode.  The property, over generated interleavings: each thread (task) is tuning
exactly when its innermost open block is enabled, and never once its blocks are left;
generators suspended inside blocks and closed in any order leave no thread tuning either.
A block left from a thread that did not enter it is a clear ``RuntimeError``, and the
thread that entered it is restored at its next block.
"""

from __future__ import annotations

import contextvars
import os

import pytest
import torch
from autotuner_fakes import FakeRunner, clean_tuner, make_op
from block_interleavings import (
    CROSSED,
    body,
    close_in_thread,
    expected_states,
    run_generator_program,
    run_in_tasks,
    run_in_threads,
    schedules,
)
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from flashinfer.autotuner import autotune, is_tuning
from flashinfer.autotuner import block as tuner_module

ENABLED = [True, False, True]


def tuning_inside(stack: list[int]) -> bool:
    """Tuning inside the blocks ``stack`` (indexes into ENABLED, outermost first)."""
    return ENABLED[stack[-1]] if stack else False


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(schedule=schedules(workers=3, blocks=len(ENABLED)))
@example(schedule=CROSSED)
def test_one_block_object_entered_by_several_threads_at_once(schedule):
    blocks = [autotune(enabled) for enabled in ENABLED]
    seen = run_in_threads(blocks, schedule, 3, is_tuning)
    assert seen == expected_states(schedule, 3, tuning_inside)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(schedule=schedules(workers=3, blocks=len(ENABLED)))
@example(schedule=CROSSED)
def test_one_block_object_entered_by_several_tasks_at_once(schedule):
    blocks = [autotune(enabled) for enabled in ENABLED]
    seen = run_in_tasks(blocks, schedule, 3, is_tuning)
    assert seen == expected_states(schedule, 3, tuning_inside)


def run_program(actions, block_for) -> None:
    """Generators suspended inside blocks, resumed out of them or closed, in any order, and
    blocks this frame enters by hand; after each step this thread tunes exactly when the
    newest open entry is enabled."""

    def check(stack: list[int], step) -> None:
        assert is_tuning() == tuning_inside(stack), step

    run_generator_program(actions, block_for, len(ENABLED), check)
    assert is_tuning() is False
    assert tuner_module._entries.get() == ()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    actions=st.lists(
        st.tuples(st.sampled_from(["gen", "resume", "close", "enter", "exit"]), st.integers(0, 7)),
        max_size=24,
    ),
    shared=st.booleans(),
)
@example(actions=[("gen", 0), ("gen", 1), ("close", 0), ("close", 0)], shared=True)
# One block object open twice in this context, by a generator's frame and by this frame:
# closing the generator ends the generator's entry (the exit's frame), not the newest one.
@example(actions=[("gen", 0), ("enter", 1), ("enter", 0), ("close", 0)], shared=True)
def test_generators_closed_in_any_order_leave_no_thread_tuning(actions, shared):
    blocks = [autotune(enabled) for enabled in ENABLED]
    block_for = blocks.__getitem__ if shared else (lambda k: autotune(ENABLED[k]))
    contextvars.Context().run(run_program, actions, block_for)


def test_a_block_left_from_another_thread_is_an_error_and_its_thread_is_restored_later():
    def run() -> None:
        block = autotune()
        suspended = body(block)
        next(suspended)
        failure = close_in_thread(suspended)
        assert isinstance(failure, RuntimeError)
        assert "left in a thread or task that did not enter it" in str(failure)
        assert is_tuning() is True  # this thread's state is not another thread's to reset
        with autotune(False):
            assert is_tuning() is False
        assert is_tuning() is False  # ... and is restored at its next block
        assert tuner_module._entries.get() == ()

    contextvars.Context().run(run)


def test_leaving_a_block_more_often_than_entering_it_is_an_error():
    block = autotune()
    with block:
        pass
    with pytest.raises(RuntimeError, match="left more times than it was entered"):
        block.__exit__(None, None, None)
    assert is_tuning() is False


def test_a_block_left_out_of_order_saves_its_cache_once_the_newer_blocks_are_left(tmp_path):
    """Generator ``outer`` tunes a key inside ``autotune(tuning_file=...)``; generator ``inner``
    enters a block after it; ``outer`` is closed first: its file is written when ``inner``
    is closed too, and the thread is not tuning after either."""
    path = str(tmp_path / "tuned.json")
    op = make_op({"a": FakeRunner("a", [1, 2]), "b": FakeRunner("b")})

    def tunes():
        with autotune(tuning_file=path):
            op(torch.zeros(4))
            yield

    def run() -> None:
        with clean_tuner(warmup=0, repeat=1):
            outer, inner = tunes(), body(autotune(False))
            next(outer), next(inner)
            outer.close()
            assert is_tuning() is False  # inner's block is the newest open one
            assert not os.path.exists(path)  # outer's state waits for inner's
            inner.close()
            assert is_tuning() is False
            assert os.path.exists(path)
            assert tuner_module._entries.get() == ()

    contextvars.Context().run(run)
