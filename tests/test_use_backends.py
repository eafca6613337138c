"""``flashinfer.use_backends``: automatic selection restricted to listed backends, in order.

Each rule of the block has a test here: the listed order is the priority, intersected with
what can run; explicit backends are unaffected; context-local (threads and asyncio tasks
interleaved); restored on exit and on exceptions; nested blocks replace per op; unknown
names fail on the ``with`` line; listing an experimental backend opts in to it; nothing
runnable is an error naming the restriction and each reason; the autotuner obeys it too.
The generated path and the reference path agree under restrictions:
``tests/test_use_backends_parity.py``.  ``FLASHINFER_BACKENDS``: ``tests/test_backends_env.py``.
"""

from __future__ import annotations

import asyncio
import gc
import itertools
import re
import threading
import warnings

import pytest
import torch
from autotuner_fakes import FakeRunner, clean_tuner
from autotuner_fakes import make_op as make_tunable

import flashinfer
from flashinfer.backend_dispatch import (
    BackendSupportedError,
    backend_requirement,
    experimental_backend,
    supported_compute_capability,
    use_backends,
)
from flashinfer.dispatch.restrictions import RESTRICTIONS
from flashinfer.gating.messages import listed_in_restriction, restriction_cannot_run

GATE = "FLASHINFER_ALLOW_EXPERIMENTAL_AUTO_BACKENDS"
_ids = itertools.count()


def make_op(*, fits: dict[str, bool] | None = None, experimental: tuple[str, ...] = ()):
    """``op(x, backend="auto")`` with backends a, b, c (and ``experimental`` ones marked);
    ``fits[name]`` False makes that backend's checker refuse; the heuristic orders
    candidates c, b, a; the body returns the backend it was called with and the
    candidates it saw."""
    fits = fits or {}
    holder = []

    def checker(name: str):
        def check(x, backend="auto"):
            if not fits.get(name, True):
                raise ValueError(f"{name} refuses these inputs")
            return True

        check = supported_compute_capability([80, 90], cpu=True)(check)
        if name in experimental:
            check = experimental_backend(owner="@tests", tracking_issue=14)(check)
        return check

    def heuristic(candidates, x, backend="auto"):
        return sorted(candidates, reverse=True)

    def api(x, backend="auto"):
        return backend, list(holder[0].suitable_auto_backends)

    # Restrictions, like warnings, key an op by its qualified name: one per op here.
    api.__qualname__ = f"api_{next(_ids)}"
    op = backend_requirement(
        {n: checker(n) for n in ("a", "b", "c", *experimental)}, heuristic_func=heuristic
    )(api)
    holder.append(op)
    return op


X = torch.zeros(2)


def test_auto_considers_only_the_listed_backends_in_the_listed_order():
    op = make_op()
    assert op(X) == ("auto", ["c", "b", "a"])  # the heuristic's order
    with use_backends({op: ["a", "c"]}):
        assert op(X) == ("auto", ["a", "c"])  # the list's order, not the heuristic's
        assert list(op.suitable_auto_backends) == ["a", "c"]
    assert op(X) == ("auto", ["c", "b", "a"])


def test_listed_backends_that_cannot_run_are_left_out():
    op = make_op(fits={"a": False})
    with use_backends({op: ["a", "b"]}):
        assert op(X) == ("auto", ["b"])


def test_explicit_backends_are_not_affected():
    op = make_op()
    with use_backends({op: ["a"]}):
        assert op(X, backend="c")[0] == "c"
        op(X)
        assert list(op.suitable_auto_backends) == ["a"]


def test_nothing_listed_can_run_names_the_restriction_and_each_reason():
    op = make_op(fits={"a": False, "b": False})
    with use_backends({op: ["b", "a"]}):
        with pytest.raises(BackendSupportedError) as info:
            op(X)
    message = str(info.value)
    why = {n: f"support check rejected the inputs: {n} refuses these inputs" for n in "ba"}
    assert message == restriction_cannot_run(op.api_name, ["b", "a"], why, variable=None)
    assert "- c" not in message  # unlisted backends are not looked at
    with pytest.raises(BackendSupportedError, match="use_backends"):
        with use_backends({op: ["a"]}):
            op.call_reference(X)


def test_restored_on_exit_and_on_exceptions():
    op = make_op()
    with pytest.raises(RuntimeError, match="boom"):
        with use_backends({op: ["a"]}):
            assert op(X)[1] == ["a"]
            raise RuntimeError("boom")
    assert op(X)[1] == ["c", "b", "a"]


def test_nested_blocks_replace_the_list_of_the_ops_they_name_only():
    op, other = make_op(), make_op()
    with use_backends({op: ["a"], other: ["b"]}):
        with use_backends({op: ["c", "b"]}):
            assert op(X)[1] == ["c", "b"]
            assert other(X)[1] == ["b"]  # left as the outer block set it
        assert op(X)[1] == ["a"]
    assert op(X)[1] == ["c", "b", "a"]


def test_one_block_object_may_be_entered_again_while_entered():
    op = make_op()
    block = use_backends({op: ["b"]})
    with block:
        with use_backends({op: ["a"]}):
            with block:
                assert op(X)[1] == ["b"]
            assert op(X)[1] == ["a"]
        assert op(X)[1] == ["b"]
    assert op(X)[1] == ["c", "b", "a"]


def test_threads_interleaved_keep_their_own_restrictions():
    op = make_op()
    barrier = threading.Barrier(3)
    seen: dict[str, list] = {}

    def worker(name: str, listed: list[str] | None) -> None:
        results = []
        if listed is None:
            for _ in range(3):
                barrier.wait()
                results.append(op(X)[1])
        else:
            with use_backends({op: listed}):
                for _ in range(3):
                    barrier.wait()  # every thread is inside its block (or none) here
                    results.append(op(X)[1])
        seen[name] = results

    threads = [
        threading.Thread(target=worker, args=("ab", ["a", "b"])),
        threading.Thread(target=worker, args=("c", ["c"])),
        threading.Thread(target=worker, args=("free", None)),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen == {"ab": [["a", "b"]] * 3, "c": [["c"]] * 3, "free": [["c", "b", "a"]] * 3}


def test_asyncio_tasks_interleaved_keep_their_own_restrictions():
    op = make_op()

    async def task(listed: list[str] | None, results: list) -> None:
        if listed is None:
            for _ in range(3):
                results.append(op(X)[1])
                await asyncio.sleep(0)
            return
        with use_backends({op: listed}):
            for _ in range(3):
                results.append(op(X)[1])
                await asyncio.sleep(0)  # the other tasks run here, inside or outside

    async def main() -> tuple[list, list, list]:
        ab: list = []
        b: list = []
        free: list = []
        await asyncio.gather(task(["a", "b"], ab), task(["b"], b), task(None, free))
        return ab, b, free

    ab, b, free = asyncio.run(main())
    assert ab == [["a", "b"]] * 3 and b == [["b"]] * 3 and free == [["c", "b", "a"]] * 3


def test_a_task_started_inside_a_block_keeps_it_after_the_block_ends():
    """The task copied the context: its restriction outlives the block that set it, and the
    process-wide switch stays on while it does."""
    op = make_op()

    async def main() -> list:
        started = asyncio.Event()
        release = asyncio.Event()

        async def later() -> list:
            started.set()
            await release.wait()
            return op(X)[1]

        with use_backends({op: ["b"]}):
            job = asyncio.create_task(later())
            await started.wait()
        assert op(X)[1] == ["c", "b", "a"]  # the block is over here
        release.set()
        return await job

    assert asyncio.run(main()) == ["b"]


def test_the_switch_turns_off_once_no_restriction_is_alive():
    """While a block's restriction exists the fast path asks; afterwards it pays one
    attribute test again."""
    op = make_op()
    op(X)  # FLASHINFER_BACKENDS has been read (unset in the test run)
    gc.collect()
    assert RESTRICTIONS.on is False
    with use_backends({op: ["a"]}):
        assert RESTRICTIONS.on is True
    gc.collect()
    assert RESTRICTIONS.on is False


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"nope": ["torch"]}, r"unknown API 'nope'; APIs with backends: 'mm', 'rmsnorm'"),
        ({"mm": ["trtion"]}, r"mm has no backend 'trtion'; its backends: 'torch', 'triton'"),
        ({"mm": ["auto"]}, r"mm has no backend 'auto'"),
        ({"mm": []}, r"empty list of backends for mm"),
        ({"rmsnorm": ["torch", "torch"]}, r"backend 'torch' is listed twice for rmsnorm"),
    ],
)
def test_unknown_names_fail_on_the_with_line(kwargs, message):
    with pytest.raises(ValueError, match=message):
        with use_backends(**kwargs):
            raise AssertionError("the block must not run")


def test_wrong_kinds_of_arguments_are_refused():
    with pytest.raises(TypeError, match="is not an API decorated with backend_requirement"):
        use_backends({len: ["torch"]})
    with pytest.raises(TypeError, match="backends of mm must be a list or tuple of backend names"):
        use_backends(mm=3)
    with pytest.raises(TypeError, match="backend names of mm must be str"):
        use_backends(mm=[None])
    with pytest.raises(ValueError, match="mm is named twice"):
        use_backends({flashinfer.mm: ["torch"]}, mm=["triton"])
    no_backends = backend_requirement({}, common_check=lambda x: True)(lambda x: x)
    with pytest.raises(ValueError, match="has no backend choices to restrict"):
        use_backends({no_backends: ["a"]})


def test_names_and_op_objects_name_the_same_restriction():
    mm = flashinfer.mm
    a, b = torch.randn(4, 8), torch.randn(8, 4)
    for block in (
        use_backends(mm=["torch"]),
        use_backends(mm="torch"),  # one name
        use_backends({mm: ["torch"]}),
        use_backends({mm.dispatcher: ["torch"]}),
        use_backends({"mm": ["torch"]}),
    ):
        with block:
            mm(a, b)
            assert list(mm.suitable_auto_backends) == ["torch"], block
    assert repr(use_backends(mm=["torch"])) == "use_backends(mm=['torch'])"


def test_listing_an_experimental_backend_opts_in_to_it(monkeypatch):
    """The gate is off; listed, the experimental backend may be picked and warns once per
    (API, backend); unlisted ones stay under the gate (out of the candidates)."""
    monkeypatch.delenv(GATE, raising=False)
    op = make_op(experimental=("x", "y"))
    assert op(X)[1] == ["c", "b", "a"]
    assert list(op.dropped_experimental_backends) == ["x", "y"]
    with use_backends({op: ["x", "a"]}):
        listed = listed_in_restriction(op.api_key, "x", "use_backends")
        with pytest.warns(flashinfer.ExperimentalWarning, match=re.escape(listed)):
            assert op(X) == ("auto", ["x", "a"])
        assert list(op.dropped_experimental_backends) == []
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            op(X)  # once per (API, backend)
            op(X, backend="x")  # the same once-flag as an explicit selection
    assert op(X)[1] == ["c", "b", "a"]  # y never joined: it was not listed


def test_the_autotuner_only_sees_the_listed_backends_in_the_listed_order():
    """Tuning times only the listed backends; an untuned key runs the first listed one; a
    tuned choice outside the list is not used inside the block.  Both autotuner forms."""
    for direct in (False, True):
        runners = {n: FakeRunner(n) for n in ("a", "b", "c")}
        op = make_tunable(runners, direct=direct)
        with clean_tuner(warmup=0, repeat=1) as tuner:
            with use_backends({op: ["c", "a"]}):
                assert op(X) == ("c", None)  # untuned: the first listed
                with flashinfer.autotune():
                    op(X)
                record = tuner.last_tuning()
                assert record is not None and record.timed
                assert runners["b"].calls == []  # never timed
                assert record.choice.backend in ("c", "a")
            tuner.set_choice(record.key, record.choice._replace(backend="b"))
            assert op(X)[0] == "b"  # outside the block the tuned choice runs
            with use_backends({op: ["a"]}):
                assert op(X) == ("a", None)  # "b" is not listed: the first listed runs
