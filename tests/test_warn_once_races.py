"""Warn-once under threads (issue 21, item 8): whatever the interleaving, a use of
experimental code either warns (and so raises under an ``error`` filter) or comes after a
use that did warn.

Many threads use one experimental API, class or backend at once, with the interpreter
switching threads as often as it can.  Every use is logged in one shared sequence (list
appends are atomic): when its body runs, when a warning is shown on its thread, when it is
refused.  The invariant is then checked for each use: a use that ran without warning ran
after a warning had been shown.  Thread counts, filters and the ways of opting in are
generated.
"""

from __future__ import annotations

import sys
import threading
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flashinfer import (
    ExperimentalWarning,
    flashinfer_experimental_api,
    reset_experimental_warnings,
    use_backends,
)
from flashinfer.utils import backend_requirement, experimental_backend
from flashinfer.utils import supported_compute_capability as capability

GATE = "FLASHINFER_ALLOW_EXPERIMENTAL_AUTO_BACKENDS"
FILTERS = ["error", "always", "default", "ignore"]
# How a thread opts in: calling an experimental API, making an experimental class, naming
# an experimental backend, "auto" with the gate on, listing the backend in use_backends.
KINDS = ["api", "class", "explicit", "auto", "listed"]
USES_PER_THREAD = 4

# The shared log: ("ran" | "shown" | "refused", use id).  A thread's current use id.
_log: list[tuple[str, int]] = []
_current = threading.local()


def _ran() -> None:
    _log.append(("ran", _current.use))


@flashinfer_experimental_api
def preview_api(x: Any) -> None:
    _ran()


@flashinfer_experimental_api
class PreviewWidget:
    def __init__(self, x: Any) -> None:
        _ran()


@pytest.fixture(scope="module")
def risky_op() -> Iterator[Any]:
    """An op whose first backend is experimental (so "auto" with the gate on picks it)."""

    @experimental_backend
    @capability([80], cpu=True)
    def risky_ok(x, backend="auto"):
        return True

    @capability([80], cpu=True)
    def stable_ok(x, backend="auto"):
        return True

    @backend_requirement({"risky": risky_ok, "stable": stable_ok})
    def race_op(x, backend="auto"):
        if backend == "stable":
            raise AssertionError("the experimental backend was expected to run")
        _ran()

    yield race_op


@pytest.fixture
def fast_switching() -> Iterator[None]:
    """Threads switch as often as the interpreter allows, to widen every race window."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(before)


def _use(kind: str, op: Any) -> Callable[[], None]:
    x = torch.ones(2)
    if kind == "api":
        return lambda: preview_api(x)
    if kind == "class":
        return lambda: PreviewWidget(x)
    if kind == "explicit":
        return lambda: op(x, backend="risky")
    if kind == "auto":
        return lambda: op(x)

    def listed() -> None:
        with use_backends({op: ["risky"]}):
            op(x)

    return listed


def _run_threads(threads: int, use: Callable[[], None]) -> list[BaseException]:
    barrier = threading.Barrier(threads)
    unexpected: list[BaseException] = []

    def worker(index: int) -> None:
        barrier.wait()
        for n in range(USES_PER_THREAD):
            _current.use = index * USES_PER_THREAD + n
            try:
                use()
            except ExperimentalWarning:
                _log.append(("refused", _current.use))
            except BaseException as exc:  # reported by the test, not lost in a thread
                unexpected.append(exc)

    workers = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
    for t in workers:
        t.start()
    for t in workers:
        t.join()
    return unexpected


def _show(message, category, filename, lineno, file=None, line=None) -> None:
    if issubclass(category, ExperimentalWarning):
        _log.append(("shown", _current.use))


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    threads=st.integers(min_value=2, max_value=16),
    action=st.sampled_from(FILTERS),
    kind=st.sampled_from(KINDS),
)
def test_every_use_warns_or_comes_after_one_that_did(
    isolated_op_registry, risky_op, fast_switching, monkeypatch, threads, action, kind
):
    monkeypatch.setenv(GATE, "1" if kind == "auto" else "0")
    reset_experimental_warnings()
    _log.clear()
    use = _use(kind, risky_op)
    with warnings.catch_warnings():
        warnings.simplefilter(action, ExperimentalWarning)
        warnings.showwarning = _show
        unexpected = _run_threads(threads, use)
    assert unexpected == []
    log = list(_log)
    uses = threads * USES_PER_THREAD
    ran = {use_id: i for i, (event, use_id) in enumerate(log) if event == "ran"}
    shown = [i for i, (event, _) in enumerate(log) if event == "shown"]
    refused = {use_id for event, use_id in log if event == "refused"}
    assert len(ran) + len(refused) == uses, log  # each use ran or was refused, once
    if action == "error":
        # Escalated, the warning refuses every use: none runs silently behind another.
        assert refused == set(range(uses)) and not ran, log
        return
    assert not refused
    if action == "ignore":
        return  # issued and dropped by the filter: nothing to observe but that all ran
    # Shown once in the process, and every use (the one that warned included) ran after it.
    assert len(shown) == 1, log
    late = sorted(use_id for use_id, i in ran.items() if i < shown[0])
    assert late == [], f"uses {late} ran before any warning was shown: {log}"


def test_a_use_from_the_warning_display_on_the_warning_thread_does_not_warn_again():
    """The lock held across the warning is re-entrant: a display hook that uses the same
    experimental API again on that thread neither deadlocks nor warns twice."""
    shown: list[str] = []

    @flashinfer_experimental_api
    def api() -> int:
        return 1

    def show(message, category, filename, lineno, file=None, line=None) -> None:
        shown.append(str(message))
        assert api() == 1

    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = show
        assert api() == 1
        assert api() == 1
    assert len(shown) == 1
