"""An op's body that calls the same op first still reads its own call's candidates (issue 21,
item 5).

An API body (or the router of its ``"auto"`` calls) may call the op again with
``backend="auto"``, on a chunk, before it reads ``op.suitable_auto_backends`` to run its
own choice.  Whatever the nested calls did (chose differently, through another path, or
raised), each level must read the candidates of its own call, and so run a backend whose
checker accepted its own input; once the outermost call returns, the record says what it
found.  The nestings are generated: depth, each level's input (so that levels get different
candidate lists), and the path of each nested call: checked ``"auto"`` (through the verdict
cache on repeated runs), ``skip_check=True``, a ``use_backends`` restriction, the
reference path, a named backend; and whether the op routes its ``"auto"`` calls.
"""

from __future__ import annotations

import contextlib
import threading
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import flashinfer
from flashinfer.backend_dispatch import (
    BackendSupportedError,
    backend_requirement,
    experimental_backend,
)

NAMES = ("b0", "b1", "b2", "b3")
PATHS = ("auto", "skip_check", "restricted", "reference", "explicit")


def _accepts(name: str, x: int) -> bool:
    """Backend ``b<k>`` accepts input ``x`` when bit ``k`` of it is set."""
    return bool(x >> int(name[1]) & 1)


def _checker(name: str) -> Callable[..., bool]:
    def check(x: int) -> bool:
        return _accepts(name, x)

    check.__qualname__ = f"check_{name}"
    return check


class Nesting:
    """An op whose body, at each level of a drawn plan, first calls the op for the next
    level, then reads its own candidates and runs the first one (it records both)."""

    def __init__(self, experimental_last: bool, routed: bool) -> None:
        self.plan: list[tuple[int, str, tuple[str, ...]]] = []  # (input, path, listed)
        self.seen: list[tuple[int, list[str], str]] = []  # (level, candidates read, ran)
        self.routed_candidates: list[tuple[int, list[str]]] = []
        checks = {n: _checker(n) for n in NAMES}
        self.experimental = NAMES[-1] if experimental_last else None
        if self.experimental:
            checks[self.experimental] = experimental_backend(checks[self.experimental])

        def api(x: int, level: int, backend: str = "auto") -> str:
            return self.level(x, level, backend)

        api.__qualname__ = f"nesting_api_{int(experimental_last)}{int(routed)}"
        self.op = backend_requirement(checks)(api)
        if routed:

            def router(candidates: list[str], inputs: tuple) -> str:
                self.routed_candidates.append((inputs[1], list(candidates)))
                return self.level(*inputs, "auto")

            self.op.dispatcher.route_auto(router)

    def expected(self, level: int) -> list[str]:
        """The candidates of the plan's call at ``level``: under the innermost restriction
        its level or an enclosing one entered (a level's block is open while the levels
        below it run), else every backend that accepts it but a gated experimental one."""
        x = self.plan[level][0]
        for _, path, listed in reversed(self.plan[: level + 1]):
            if path == "restricted":
                return [b for b in listed if _accepts(b, x)]
        return [b for b in NAMES if _accepts(b, x) and b != self.experimental]

    def call(self, level: int) -> Any:
        """The plan's call at ``level``, through its path."""
        x, path, listed = self.plan[level]
        op = self.op
        if path == "skip_check":
            return op(x, level, skip_check=True)
        if path == "reference":
            return op.call_reference(x, level)
        if path == "explicit":  # never touches the record of "auto" calls
            return op(x, level, backend=listed[0])
        block = flashinfer.use_backends({op: list(listed)}) if path == "restricted" else None
        with block or contextlib.nullcontext():
            return op(x, level)

    def level(self, x: int, level: int, backend: str) -> str:
        if level + 1 < len(self.plan):
            with contextlib.suppress(BackendSupportedError):  # the chunk may fit nothing
                self.call(level + 1)
        if backend != "auto":
            return backend
        candidates = list(self.op.suitable_auto_backends)
        ran = candidates[0]
        self.seen.append((level, candidates, ran))
        return ran


@st.composite
def plans(draw: st.DrawFn) -> list[tuple[int, str, tuple[str, ...]]]:
    depth = draw(st.integers(1, 4))
    plan = []
    for level in range(depth):
        # The outermost call fits something; a nested one may fit nothing (and raise).
        x = draw(st.integers(1 if level == 0 else 0, 15))
        path = "auto" if level == 0 else draw(st.sampled_from(PATHS))
        if level == 0:
            path = draw(st.sampled_from(("auto", "skip_check", "restricted", "reference")))
        listed = tuple(draw(st.permutations(NAMES))[: draw(st.integers(1, 4))])
        plan.append((x, path, listed))
    return plan


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", flashinfer.ExperimentalWarning)
        yield


_OPS: dict[tuple[bool, bool], Nesting] = {}


def _nesting(experimental_last: bool, routed: bool) -> Nesting:
    """One op per kind, reused across examples (its verdict cache and learnt patterns too)."""
    key = (experimental_last, routed)
    if key not in _OPS:
        _OPS[key] = Nesting(experimental_last, routed)
    return _OPS[key]


@settings(max_examples=300, deadline=None)
@given(plan=plans(), experimental_last=st.booleans(), routed=st.booleans())
def test_each_level_reads_its_own_candidates(plan, experimental_last, routed):
    nest = _nesting(experimental_last, routed)
    nest.plan = plan
    with quiet():
        for _ in range(3):  # uncached (new pattern), checked and stored, then cached
            nest.seen.clear()
            nest.routed_candidates.clear()
            try:
                nest.call(0)
            except BackendSupportedError:  # a restricted outermost call may fit nothing
                assert not nest.expected(0)
                continue
            ran_levels = [level for level, _, _ in nest.seen]
            for level, candidates, ran in nest.seen:
                x = plan[level][0]
                assert candidates == nest.expected(level), (level, plan)
                assert _accepts(ran, x), (level, ran, x, plan)
            assert ran_levels[-1] == 0 and ran_levels.count(0) == 1
            # Routed: the router was handed the same list the record shows.
            for level, candidates in nest.routed_candidates:
                assert candidates == nest.expected(level)
            # After the outermost call: what it (the last call to finish) found.
            assert list(nest.op.suitable_auto_backends) == nest.expected(0)


def test_a_raising_body_leaves_no_enclosing_call_behind():
    """A body that raises (after its nested call) hands nothing on: the next call, on its
    own, records and reads its own candidates, inside and after its body."""
    nest = Nesting(experimental_last=False, routed=False)
    boom = RuntimeError("body failed")

    def failing(x: int, level: int, backend: str) -> str:
        Nesting.level(nest, x, level, backend)
        raise boom

    nest.level = failing  # type: ignore[method-assign]
    nest.plan = [(0b0011, "auto", NAMES), (0b1100, "auto", NAMES)]
    for _ in range(3):
        with pytest.raises(RuntimeError, match="body failed"):
            nest.call(0)
    nest.level = lambda x, level, backend: Nesting.level(nest, x, level, backend)  # type: ignore[method-assign]
    nest.plan = [(0b0100, "auto", NAMES)]
    nest.seen.clear()
    assert nest.call(0) == "b2"
    assert nest.seen == [(0, ["b2"], "b2")]
    assert list(nest.op.suitable_auto_backends) == ["b2"]


def test_threads_nest_on_their_own():
    """Nesting on several threads at once: each thread's levels read their own."""
    nest = Nesting(experimental_last=False, routed=False)
    plans_by_thread = [
        [(0b0001, "auto", NAMES), (0b0010, "auto", NAMES), (0b0100, "skip_check", NAMES)],
        [(0b1000, "auto", NAMES), (0b0110, "reference", NAMES)],
    ]
    errors: list[BaseException] = []
    local = threading.local()

    def level(x: int, lvl: int, backend: str) -> str:
        plan = local.plan
        if lvl + 1 < len(plan):
            nx, path, _ = plan[lvl + 1]
            if path == "skip_check":
                nest.op(nx, lvl + 1, skip_check=True)
            elif path == "reference":
                nest.op.call_reference(nx, lvl + 1)
            else:
                nest.op(nx, lvl + 1)
        mine = [b for b in NAMES if _accepts(b, x)]
        assert list(nest.op.suitable_auto_backends) == mine
        return mine[0]

    nest.level = level  # type: ignore[method-assign]

    def worker(plan: list) -> None:
        local.plan = plan
        try:
            for _ in range(200):
                nest.op(plan[0][0], 0)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(p,)) for p in plans_by_thread]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
