"""The generated router of directly registered ops (``AutoTuner.register(..., direct=True)``).

Every checked ``backend="auto"`` call of such an op goes from the dispatcher to
``router(candidates, inputs)``; explicit backends and ``skip_check=True`` still call the body.
These tests pin what the router must do: run the tuned (backend, tactic) without the body,
read the arguments of every parameter (keyword-only and defaulted ones included), keep one
memo entry per exact signature (never shared between input types), drop stale entries when
the tuned results change, fall back to the first candidate, respect the experimental gate,
agree with the reference path, and stay correct under threads.  A repeated untuned signature
is served by the generated code as a tuned one is (the router's frame and the runner's), with
the default of each call's own candidates, the same counts and log lines.
"""

from __future__ import annotations

import itertools
import logging
import re
import sys
import threading
import warnings
from collections import Counter
from typing import Any

import pytest
import torch
from autotuner_fakes import FakeRunner, clean_tuner, make_op

import flashinfer
from flashinfer.api_logging import ExperimentalWarning
from flashinfer.autotuner import AutoTuner, Choice, autotune, make_key
from flashinfer.autotuner import tuner as router_module
from flashinfer.backend_dispatch import (
    backend_requirement,
    experimental_backend,
    reads_tensor_data,
    use_backends,
)
from flashinfer.dispatch.choice_log import forget_logged_choices
from flashinfer.gating.messages import automatic_selection

GATE = "FLASHINFER_ALLOW_EXPERIMENTAL_AUTO_BACKENDS"

_ids = itertools.count()


@pytest.fixture(autouse=True)
def fast_tuner():
    """Short timings and no tuned results left over from other tests."""
    with clean_tuner(warmup=1, repeat=3) as tuner:
        yield tuner


# --------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------


class RecordingRunner(FakeRunner):
    """A FakeRunner that also keeps the exact ``inputs`` tuple of every call."""

    def __init__(self, name: str, space=(None,)) -> None:
        super().__init__(name, space)
        self.inputs: list[tuple] = []

    def __call__(self, inputs: tuple, tactic: Any = None) -> Any:
        self.inputs.append(inputs)
        return super().__call__(inputs, tactic)


def build_op(
    api,
    runners: dict[str, FakeRunner],
    *,
    supports=None,
    heuristic=None,
    experimental=(),
    direct: bool | None = True,
):
    """An op with ``api``'s signature and body (the body should return ``("body", backend)``),
    one checker per runner (``supports(name, arguments) -> bool``, all by name), a unique
    qualified name, registered with the tuner (``direct=None``: not registered)."""
    api.__name__ = api.__qualname__ = f"router_op_{next(_ids)}"

    def checker(name: str):
        def check(**kwargs):  # every argument by name
            return supports is None or supports(name, kwargs)

        return check

    checks = {}
    for name in runners:
        check = checker(name)
        if name in experimental:
            check = experimental_backend(owner="@tests", tracking_issue=1)(check)
        checks[name] = check
    op = backend_requirement(checks, heuristic_func=heuristic)(api)
    if direct is not None:
        AutoTuner.register(op, runners, direct=direct)
    return op


def choose(op, inputs: tuple, backend: str, tactic: Any = None) -> None:
    """Record a tuned result for the key of ``inputs`` (no timing)."""
    AutoTuner.get().set_choice(make_key(op.api_key, inputs), Choice(backend, tactic, 1e-3))


def abc(space=(None, 1, 2, 3)) -> dict[str, FakeRunner]:
    return {n: FakeRunner(n, space) for n in ("a", "b", "c")}


def same_items(got: tuple, want: tuple) -> bool:
    """Same length; each tensor the very same object, anything else of the same type and
    equal."""
    return len(got) == len(want) and all(
        g is w if isinstance(w, torch.Tensor) else (type(g) is type(w) and g == w)
        for g, w in zip(got, want, strict=True)
    )


# --------------------------------------------------------------------------------------
# 1. Routed auto calls run the tuned runner, never the body
# --------------------------------------------------------------------------------------


def test_tuned_auto_call_runs_tuned_runner_and_tactic_without_body():
    runners = abc()

    def api(x, backend="auto"):
        return ("body", backend)

    op = build_op(api, runners)
    assert op.dispatcher.auto_route is not None
    x = torch.zeros(4, 4)
    choose(op, (x,), "b", 2)
    for _ in range(3):  # first call learns the pattern, then the memo serves it
        assert op(x) == ("b", 2)
    assert runners["b"].calls == [2, 2, 2]
    assert runners["a"].calls == runners["c"].calls == []
    assert op.suitable_auto_backends == ["a", "b", "c"]
    # Explicit backends and skip_check still call the body.
    assert op(x, backend="c") == ("body", "c")
    assert op(x, skip_check=True) == ("body", "auto")
    assert op(x, backend="a", skip_check=True) == ("body", "a")
    assert runners["b"].calls == [2, 2, 2] and runners["c"].calls == []


def test_untuned_auto_call_runs_first_candidate_default_tactic_without_body():
    runners = abc()

    def api(x, backend="auto"):
        return ("body", backend)

    op = build_op(api, runners, supports=lambda name, a: name != "a")
    x = torch.zeros(3)
    assert op(x) == ("b", None)
    assert op(x) == ("b", None)
    assert op.suitable_auto_backends == ["b", "c"]


def test_suitable_auto_backends_are_this_calls_candidates_per_thread():
    runners = abc()

    def api(x, backend="auto"):
        return ("body", backend)

    # 'a' only for even first dimensions; 'c' never for more than 8 rows.
    op = build_op(
        api,
        runners,
        supports=lambda name, a: (
            (name != "a" or a["x"].shape[0] % 2 == 0) and (name != "c" or a["x"].shape[0] <= 8)
        ),
    )
    choose(op, (torch.zeros(4),), "c", 1)
    assert op(torch.zeros(4)) == ("c", 1)
    assert op.suitable_auto_backends == ["a", "b", "c"]
    seen: dict[str, Any] = {}

    def other():
        seen["result"] = op(torch.zeros(3))
        seen["suitable"] = list(op.suitable_auto_backends)

    t = threading.Thread(target=other)
    t.start()
    t.join()
    assert seen == {"result": ("c", 1), "suitable": ["b", "c"]}
    assert op.suitable_auto_backends == ["a", "b", "c"]  # this thread's list is unchanged
    assert op(torch.zeros(16)) == ("a", None)  # untuned key
    assert op.suitable_auto_backends == ["a", "b"]


# --------------------------------------------------------------------------------------
# 2. The inputs tuple: positional, keyword, default and keyword-only arguments
# --------------------------------------------------------------------------------------


def test_router_inputs_are_every_parameter_but_backend_in_declaration_order():
    runners = {"a": RecordingRunner("a"), "b": RecordingRunner("b")}

    def api(x, w=None, *, scale=1.0, flag=False, backend="auto"):
        return ("body", backend)

    op = build_op(api, runners)
    assert op.dispatcher.routed_inputs() == ["x", "w", "scale", "flag"]
    x, w = torch.zeros(2, 3), torch.ones(3)
    calls = [
        ((x,), {}, (x, None, 1.0, False)),
        ((x, w), {}, (x, w, 1.0, False)),
        ((x,), {"w": w, "scale": 2.5}, (x, w, 2.5, False)),
        ((), {"flag": True, "x": x, "backend": "auto"}, (x, None, 1.0, True)),
        ((x, None), {"scale": 3, "flag": True}, (x, None, 3, True)),
    ]
    for tuned in (False, True):  # the readable path first, then the generated memo path
        if tuned:
            for _, _, want in calls:
                choose(op, want, "b", 7)
        for args, kwargs, want in calls:
            for _ in range(2):
                runners["a"].inputs.clear()
                runners["b"].inputs.clear()
                result = op(*args, **kwargs)
                got = (runners["b"] if tuned else runners["a"]).inputs
                assert result == (("b", 7) if tuned else ("a", None))
                assert len(got) == 1 and same_items(got[0], want), (args, kwargs, got)


def test_router_inputs_skip_a_backend_parameter_declared_in_the_middle():
    runners = {"a": RecordingRunner("a"), "b": RecordingRunner("b")}

    def api(x, backend="auto", *, eps=1e-6):
        return ("body", backend)

    op = build_op(api, runners)
    x = torch.zeros(5)
    choose(op, (x, 1e-6), "b", None)
    for _ in range(2):
        assert op(x) == ("b", None)
        assert op(x, "auto", eps=0.5) == ("b", None)
    assert all(len(i) == 2 and i[0] is x for i in runners["b"].inputs)
    assert [i[1] for i in runners["b"].inputs] == [1e-6, 0.5, 1e-6, 0.5]
    assert op(x, "a") == ("body", "a")


# --------------------------------------------------------------------------------------
# 4. A scalar and a tensor in one position never share a memo entry
# --------------------------------------------------------------------------------------


def test_scalar_and_tensor_in_the_same_position_have_separate_entries():
    runners = abc()

    def api(a, b, backend="auto"):
        return ("body", backend)

    op = build_op(api, runners)
    t, u = torch.zeros(4), torch.zeros(2, 2)
    choose(op, (t, u), "a", 1)
    choose(op, (t, 0.5), "b", 2)
    choose(op, (0.5, t), "c", 3)
    cases = [
        ((t, u), ("a", 1)),
        ((t, 0.5), ("b", 2)),
        ((t, (3,)), ("b", 2)),  # another type of value left out of the key: same key
        ((0.5, t), ("c", 3)),
        (([2], t), ("c", 3)),
        ((0.5, 0.5), ("a", None)),  # untuned: no tensor at all
    ]
    for _ in range(3):
        for args, expected in cases:
            assert op(*args) == expected, args
        for args, expected in reversed(cases):
            assert op(*args) == expected, args


# --------------------------------------------------------------------------------------
# 5. Invalidation: no stale memo entry
# --------------------------------------------------------------------------------------


def test_set_choice_replaces_a_memoised_choice():
    runners = abc()
    op = make_op(runners, direct=True)
    x = torch.zeros(6, 2)
    choose(op, (x,), "a", 1)
    assert op(x) == op(x) == ("a", 1)
    choose(op, (x,), "b", 2)
    assert op(x) == op(x) == ("b", 2)
    choose(op, (x,), "b", 3)  # same backend, new tactic
    assert op(x) == op(x) == ("b", 3)
    choose(op, (torch.zeros(9, 9),), "c", 1)  # another key: this one is untouched
    assert op(x) == ("b", 3)


def test_clear_forgets_a_memoised_choice():
    runners = abc()
    op = make_op(runners, direct=True)
    x = torch.zeros(6, 2)
    choose(op, (x,), "c", 2)
    assert op(x) == op(x) == ("c", 2)
    AutoTuner.get().clear()
    assert op(x) == op(x) == ("a", None)
    choose(op, (x,), "b", 1)
    assert op(x) == ("b", 1)


def test_tuning_replaces_a_memoised_untuned_entry():
    runners = {
        "a": FakeRunner("a", [None], delays={None: 0.002}),
        "b": FakeRunner("b", [None, 1], delays={None: 0.002}),
    }
    op = make_op(runners, direct=True)
    x = torch.zeros(4)
    assert op(x) == op(x) == ("a", None)  # untuned: memoised as such
    with autotune():
        assert op(x) == ("b", 1)
    assert op(x) == op(x) == ("b", 1)


def test_tuning_replaces_a_memoised_tuned_entry():
    allow_a = [True]
    runners = {
        "a": FakeRunner("a", [None]),
        "b": FakeRunner("b", [None], delays={None: 0.002}),
        "c": FakeRunner("c", [None, 5], delays={None: 0.002}),
    }
    op = make_op(runners, direct=True, supports=lambda name, x: name != "a" or allow_a[0])
    x = torch.zeros(4)
    choose(op, (x,), "a", None)
    assert op(x) == op(x) == ("a", None)  # the memo holds 'a' for this signature
    allow_a[0] = False  # 'a' is no candidate now: autotune() times b and c
    with autotune():
        assert op(x) == ("c", 5)
    allow_a[0] = True
    assert AutoTuner.get().choice(make_key(op.api_key, (x,))).backend == "c"
    assert op(x) == op(x) == ("c", 5)  # not the memoised 'a'


# --------------------------------------------------------------------------------------
# 6. A tuned choice that is no candidate of this call
# --------------------------------------------------------------------------------------


def test_choice_rejected_by_its_checker_in_the_same_bucket_falls_back():
    runners = abc()
    # 'b' rejects 3 rows; 3 and 4 rows share a bucket (4), so one tuned key.
    op = make_op(runners, direct=True, supports=lambda name, x: name != "b" or x.shape[0] != 3)
    x3, x4 = torch.zeros(3, 2), torch.zeros(4, 2)
    assert make_key(op.api_key, (x3,)) == make_key(op.api_key, (x4,))
    choose(op, (x4,), "b", 2)
    for _ in range(3):
        assert op(x3) == ("a", None)
        assert op.suitable_auto_backends == ["a", "c"]
        assert op(x4) == ("b", 2)
        assert op.suitable_auto_backends == ["a", "b", "c"]


def test_choice_dropped_by_the_heuristic_falls_back():
    runners = abc()
    drop: list[str] = []

    def api(x, backend="auto"):
        return ("body", backend)

    @reads_tensor_data  # it reads `drop`, which the test changes: never cached
    def heuristic(candidates, x, backend="auto"):
        return [b for b in reversed(candidates) if b not in drop]

    op = build_op(api, runners, heuristic=heuristic)
    x = torch.zeros(8)
    choose(op, (x,), "b", 3)
    assert op(x) == op(x) == ("b", 3)  # memoised for this exact signature
    drop.append("b")
    assert op(x) == op(x) == ("c", None)  # first candidate in the heuristic's order
    assert op.suitable_auto_backends == ["c", "a"]
    drop.clear()
    assert op(x) == ("b", 3)


# --------------------------------------------------------------------------------------
# 7. Experimental backends
# --------------------------------------------------------------------------------------


def test_tuned_experimental_choice_is_not_run_with_the_gate_unset(monkeypatch):
    monkeypatch.delenv(GATE, raising=False)
    flashinfer.reset_experimental_warnings()
    runners = {"a": FakeRunner("a", [None]), "exp": FakeRunner("exp", [None, 4])}
    op = make_op(runners, experimental={"exp"}, direct=True)
    x = torch.zeros(4)
    choose(op, (x,), "exp", 4)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(3):
            assert op(x) == ("a", None)
            assert op.call_reference(x) == ("a", None)
    assert runners["exp"].calls == []
    assert list(op.dropped_experimental_backends) == ["exp"]


def test_tuned_experimental_choice_runs_and_warns_once_with_the_gate_on(monkeypatch):
    monkeypatch.setenv(GATE, "1")
    flashinfer.reset_experimental_warnings()
    runners = {"a": FakeRunner("a", [None]), "exp": FakeRunner("exp", [None, 4])}
    op = make_op(runners, experimental={"exp"}, direct=True)
    x = torch.zeros(4)
    choose(op, (x,), "exp", 4)
    # The router learns the pattern from another (untuned) signature first, so that the
    # tuned experimental one reaches the generated code's memo path on its first call.
    assert op(torch.zeros(64)) == ("a", None)
    picked = re.escape(automatic_selection(op.api_key, "exp"))
    with pytest.warns(ExperimentalWarning, match=picked) as record:
        line = sys._getframe().f_lineno + 1
        results = [op(x), op(x), op(x)]
    assert results == [("exp", 4)] * 3
    found = [w for w in record if issubclass(w.category, ExperimentalWarning)]
    assert len(found) == 1
    assert (found[0].filename, found[0].lineno) == (__file__, line)  # this test's line
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert op(x) == ("exp", 4)  # warned once per process
    # The gate closes again: the tuned experimental choice is not run any more.
    monkeypatch.delenv(GATE)
    before = len(runners["exp"].calls)
    assert op(x) == op(x) == ("a", None)
    assert len(runners["exp"].calls) == before


# --------------------------------------------------------------------------------------
# 8. Registration errors and restoring the body path
# --------------------------------------------------------------------------------------


def test_register_direct_rejects_var_args_and_var_kwargs():
    def with_args(x, *rest, backend="auto"):
        return ("body", backend)

    def with_kwargs(x, backend="auto", **options):
        return ("body", backend)

    for api in (with_args, with_kwargs):
        runners = abc()
        op = build_op(api, runners, direct=None)
        assert op.dispatcher.routed_inputs() is None
        with pytest.raises(TypeError, match="routed"):
            AutoTuner.register(op, runners, direct=True)
        assert op.dispatcher.auto_route is None
        assert op(torch.zeros(2)) == ("body", "auto")  # still the body
        assert all(r.calls == [] for r in runners.values())
        AutoTuner.register(op, runners)  # the body path is fine
        assert op(torch.zeros(2)) == ("body", "auto")


def test_route_auto_none_and_plain_register_restore_the_body():
    runners = abc()

    def api(x, backend="auto"):
        return ("body", backend)

    op = build_op(api, runners)
    x = torch.zeros(2)
    choose(op, (x,), "b", 1)
    assert op(x) == ("b", 1)
    op.dispatcher.route_auto(None)
    assert op.dispatcher.auto_route is None
    assert op(x) == op(x) == ("body", "auto")
    assert op.call_reference(x) == ("body", "auto")
    AutoTuner.register(op, runners, direct=True)
    assert op(x) == op(x) == ("b", 1)
    AutoTuner.register(op, runners)  # direct=False
    assert op.dispatcher.auto_route is None
    assert op(x) == op(x) == ("body", "auto")
    assert op.call_reference(x) == ("body", "auto")
    assert runners["b"].calls == [1, 1, 1]


# --------------------------------------------------------------------------------------
# 9. The reference path routes the same way
# --------------------------------------------------------------------------------------


def test_call_reference_matches_the_generated_path():
    runners = abc()

    def api(x, w=None, *, scale=1.0, backend="auto"):
        return ("body", backend)

    op = build_op(api, runners, supports=lambda name, a: name != "a" or a["w"] is not None)
    x, w = torch.zeros(4, 4), torch.zeros(4)
    calls = [((x,), {}), ((x, w), {}), ((x,), {"w": w, "scale": 2.0}), ((x, None), {"scale": 3})]
    for args, kwargs in calls:  # untuned
        assert op.call_reference(*args, **kwargs) == op(*args, **kwargs)
    assert op(x) == ("b", None) and op(x, w) == ("a", None)
    choose(op, (x, None, 1.0), "c", 2)
    choose(op, (x, w, 1.0), "b", 3)
    for _ in range(2):
        for args, kwargs in calls:  # tuned
            assert op.call_reference(*args, **kwargs) == op(*args, **kwargs)
    assert op(x) == ("c", 2) and op(x, w) == ("b", 3)
    assert op.call_reference(x, backend="a", w=w) == op(x, w, backend="a") == ("body", "a")
    assert op.call_reference(x, skip_check=True) == ("body", "auto")


# --------------------------------------------------------------------------------------
# 10. Threads
# --------------------------------------------------------------------------------------


def test_threads_see_a_flipping_choice_consistently():
    runners = abc()
    op = make_op(runners, direct=True)
    tuner = AutoTuner.get()
    key = make_key(op.api_key, (torch.zeros(8),))
    one, two = Choice("a", 1, 1e-3), Choice("c", 2, 1e-3)
    allowed = {("a", 1), ("c", 2)}
    tuner.set_choice(key, one)
    n_workers = 4
    start = threading.Barrier(n_workers + 1)
    stop = threading.Event()
    errors: list[BaseException] = []
    bad: list[Any] = []
    finals: dict[int, Any] = {}

    def worker(i: int) -> None:
        try:
            x = torch.zeros(5 + i)  # 5..8 rows: one bucket, distinct exact signatures
            start.wait(timeout=10)
            n = 0
            while not stop.is_set() or n < 20:
                result = op(x)
                if result not in allowed:
                    bad.append(result)
                n += 1
            finals[i] = op(x)
        except BaseException as exc:
            errors.append(exc)

    def flipper() -> None:
        try:
            start.wait(timeout=10)
            for k in range(400):
                tuner.set_choice(key, two if k % 2 == 0 else one)
            tuner.set_choice(key, two)
        except BaseException as exc:
            errors.append(exc)
        finally:
            stop.set()

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    try:
        threads = [threading.Thread(target=worker, args=(i,)) for i in range(n_workers)]
        threads.append(threading.Thread(target=flipper))
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=30)
    finally:
        sys.setswitchinterval(old)
    assert not any(t.is_alive() for t in threads)
    assert errors == []
    assert bad == []
    assert finals == {i: ("c", 2) for i in range(n_workers)}
    assert runners["b"].calls == []


def test_a_choice_changed_while_an_entry_is_computed_leaves_no_stale_entry(monkeypatch):
    """The race of a memo fill with set_choice, made deterministic: another thread changes
    the choice just after the router read the old one.  The stale entry must land in the
    memo dict that the change discarded, never in its replacement."""
    runners = abc()
    op = make_op(runners, direct=True)
    x = torch.zeros(4)
    assert op(torch.zeros(64)) == ("a", None)  # learn the pattern: x reaches memo_miss
    choose(op, (x,), "b", 1)
    original = router_module.Router.entry
    raced = []

    def entry_then_change(self, inputs):
        result = original(self, inputs)
        if not raced:
            raced.append(result[0])
            choose(op, (x,), "c", 2)  # "another thread", after the old choice was read
        return result

    monkeypatch.setattr(router_module.Router, "entry", entry_then_change)
    assert op(x) == ("b", 1)  # this call raced: it may still run the old choice
    assert raced == ["b"]
    assert op(x) == op(x) == ("c", 2)  # but nothing stale was memoised


# --------------------------------------------------------------------------------------
# Names and re-registration
# --------------------------------------------------------------------------------------


def test_parameter_named_type_is_routed():
    """The generated router names its locals after the API's parameters; one called
    ``type`` must not shadow the builtin the pattern tests use."""
    runners = abc()

    def api(x, type=None, backend="auto"):  # a legitimate API parameter name
        return ("body", backend)

    op = build_op(api, runners)
    x = torch.zeros(2)
    choose(op, (x, None), "b", 1)
    assert op(x) == ("b", 1)  # learns the pattern (readable path)
    assert op(x) == ("b", 1)  # the generated path


def test_registering_again_with_new_runners_uses_the_new_runners():
    """The memo holds bound runner calls: registering again must drop them."""
    old = {"a": FakeRunner("a-old"), "b": FakeRunner("b-old")}
    new = {"a": FakeRunner("a-new"), "b": FakeRunner("b-new")}

    def api(x, backend="auto"):
        return ("body", backend)

    op = build_op(api, old)
    x = torch.zeros(4)
    choose(op, (x,), "b")
    assert op(x) == op(x) == ("b-old", None)
    AutoTuner.register(op, new, direct=True)
    assert [op(x), op(x), op(x)] == [("b-new", None)] * 3


def test_untuned_key_with_an_experimental_first_candidate_runs_it_and_warns_once(monkeypatch):
    """The memo's untuned entry runs the first candidate directly unless it is experimental;
    then the readable path runs it (gate on), and the call warns once."""
    monkeypatch.setenv(GATE, "1")
    flashinfer.reset_experimental_warnings()
    runners = {"exp": FakeRunner("exp", [None, 4]), "a": FakeRunner("a", [None])}
    op = make_op(runners, experimental={"exp"}, direct=True)
    x = torch.zeros(4)
    picked = re.escape(automatic_selection(op.api_key, "exp"))
    with pytest.warns(ExperimentalWarning, match=picked) as record:
        results = [op(x), op(x), op(x)]
    assert results == [("exp", None)] * 3
    assert len([w for w in record if issubclass(w.category, ExperimentalWarning)]) == 1
    monkeypatch.delenv(GATE)
    assert op(x) == ("a", None)


# --------------------------------------------------------------------------------------
# 11. Untuned keys: served by the generated code from their second call
# --------------------------------------------------------------------------------------


@pytest.fixture
def memo_misses(monkeypatch) -> list[tuple]:
    """The exact signatures handed to ``Router.memo_miss``, one per call.  Installed on the
    class before any router of the test is generated (routers bind the method then)."""
    seen: list[tuple] = []
    original = router_module.Router.memo_miss

    def spy(self, candidates, inputs, exact):
        seen.append(exact)
        return original(self, candidates, inputs, exact)

    monkeypatch.setattr(router_module.Router, "memo_miss", spy)
    return seen


def python_frames(fn, *args) -> list[str]:
    """The Python functions that ``fn(*args)`` enters, in order (C functions left out)."""
    names: list[str] = []

    def profile(frame, event, arg):
        if event == "call":
            names.append(frame.f_code.co_name)

    sys.setprofile(profile)
    try:
        fn(*args)
    finally:
        sys.setprofile(None)
    return names


def test_a_repeated_untuned_signature_runs_only_the_router_and_the_runner(memo_misses):
    runners = abc()
    op = make_op(runners, direct=True)
    x = torch.zeros(4)
    assert op(x) == op(x) == ("a", None)  # fills the memo, then served from it
    assert len(memo_misses) == 1
    route = op.dispatcher.auto_route
    # Called as the dispatcher calls it with a cached verdict's slot (its entry looked up
    # once): the router's own frame and the runner's, no other.
    slot = [(None, None)]
    route(["a", "b", "c"], (x,), slot)
    frames = python_frames(route, ["a", "b", "c"], (x,), slot)
    assert frames == [route.__code__.co_name, "__call__"]
    for _ in range(3):
        assert op(x) == ("a", None)
    assert len(memo_misses) == 1
    assert runners["a"].calls == [None] * 7
    # A tuned key costs the same frames: the untuned route is the tuned one's equal.
    y = torch.zeros(9)
    choose(op, (y,), "b", 2)
    assert op(y) == ("b", 2)
    slot = [(None, None)]
    route(["a", "b", "c"], (y,), slot)
    frames = python_frames(route, ["a", "b", "c"], (y,), slot)
    assert frames == [route.__code__.co_name, "__call__"]


def test_the_untuned_default_follows_each_calls_candidates(memo_misses):
    runners = abc()
    op = make_op(runners, direct=True)
    x = torch.zeros(4)
    assert op(x) == op(x) == ("a", None)
    served = len(memo_misses)
    # Same signature, candidates reordered: the entry must not serve 'a' for them.
    with use_backends({op: ["c", "a"]}):
        assert [op(x) for _ in range(3)] == [("c", None)] * 3
    assert len(memo_misses) == served + 1  # the entry now names 'c', and serves it
    assert [op(x) for _ in range(3)] == [("a", None)] * 3
    assert len(memo_misses) <= served + 2  # a re-decision at most, not one per call
    with use_backends({op: ["b"]}):
        assert op(x) == ("b", None)
    assert runners["a"].calls == [None] * 5
    assert runners["c"].calls == [None] * 3 and runners["b"].calls == [None]


def test_the_untuned_default_is_the_first_candidate_with_a_runner():
    """A first candidate without a runner is skipped, on every call (memo_miss serves such
    calls: the generated test only knows the first candidate)."""
    runners = {"b": FakeRunner("b"), "c": FakeRunner("c")}

    def api(x, backend="auto"):
        return ("body", backend)

    op = build_op(api, {"a": FakeRunner("a"), **runners}, direct=None)
    AutoTuner.register(op, runners, direct=True)  # 'a' has no runner
    x = torch.zeros(4)
    assert [op(x) for _ in range(4)] == [("b", None)] * 4
    with use_backends({op: ["c", "a", "b"]}):
        assert [op(x) for _ in range(2)] == [("c", None)] * 2
    assert [op(x) for _ in range(2)] == [("b", None)] * 2


def test_an_experimental_untuned_default_goes_the_readable_path_and_warns_once(
    monkeypatch, memo_misses
):
    monkeypatch.delenv(GATE, raising=False)
    flashinfer.reset_experimental_warnings()
    readable = []
    original = router_module.Router.readable

    def counting(self, candidates, inputs):
        readable.append(list(candidates))
        return original(self, candidates, inputs)

    monkeypatch.setattr(router_module.Router, "readable", counting)
    runners = {"exp": FakeRunner("exp", [None, 4]), "a": FakeRunner("a", [None])}
    op = make_op(runners, experimental={"exp"}, direct=True)
    x, y = torch.zeros(4), torch.zeros(5)
    assert [op(x) for _ in range(3)] == [("a", None)] * 3  # gate off: 'a', served
    assert len(memo_misses) == 1 and readable == []  # the first call filled the memo
    monkeypatch.setenv(GATE, "1")
    picked = re.escape(automatic_selection(op.api_key, "exp"))
    with pytest.warns(ExperimentalWarning, match=picked) as record:
        results = [op(x), op(x), op(y), op(y)]
    assert results == [("exp", None)] * 4
    assert len([w for w in record if issubclass(w.category, ExperimentalWarning)]) == 1
    assert readable == [["exp", "a"]] * 4  # every experimental default: readable path
    monkeypatch.delenv(GATE)
    before = len(memo_misses)
    # x kept its stable entry; y's first stable default fills its entry, then is served.
    assert [op(x), op(x), op(y), op(y), op(y)] == [("a", None)] * 5
    assert len(memo_misses) == before + 1  # y's first stable call
    assert len(readable) == 4


def test_a_new_result_replaces_a_served_untuned_entry(memo_misses, tmp_path):
    runners = abc()
    op = make_op(runners, direct=True)
    x = torch.zeros(6, 2)
    assert [op(x) for _ in range(3)] == [("a", None)] * 3
    assert len(memo_misses) == 1
    choose(op, (x,), "b", 2)  # a result: the served untuned entry must go
    assert op(x) == op(x) == ("b", 2)
    path = tmp_path / "tuned.json"
    AutoTuner.get().save_tuning_file(path)
    AutoTuner.get().clear()
    assert [op(x) for _ in range(3)] == [("a", None)] * 3
    AutoTuner.get().load_tuning_file(path)  # loading a file is a result too
    assert op(x) == op(x) == ("b", 2)


def test_tuning_replaces_a_served_untuned_entry(memo_misses):
    runners = {
        "a": FakeRunner("a", [None], delays={None: 0.002}),
        "b": FakeRunner("b", [None, 1], delays={None: 0.002}),
    }
    op = make_op(runners, direct=True)
    x = torch.zeros(4)
    assert [op(x) for _ in range(3)] == [("a", None)] * 3
    assert len(memo_misses) == 1
    with autotune():
        assert op(x) == ("b", 1)
    assert op(x) == op(x) == ("b", 1)


def test_a_choice_made_while_an_untuned_entry_is_computed_leaves_no_stale_entry(monkeypatch):
    """As for a tuned entry (section 10): a result that arrives after the router read
    "untuned" discards the dict the untuned entry is written into."""
    runners = abc()
    op = make_op(runners, direct=True)
    x = torch.zeros(4)
    assert op(torch.zeros(64)) == ("a", None)  # learn the pattern: x reaches memo_miss
    original = router_module.Router.entry
    raced = []

    def entry_then_choose(self, inputs):
        result = original(self, inputs)
        if not raced:
            raced.append(result)
            choose(op, (x,), "c", 2)  # "another thread", after "untuned" was read
        return result

    monkeypatch.setattr(router_module.Router, "entry", entry_then_choose)
    assert op(x) == ("a", None)  # this call raced: it runs the default it found
    assert raced == [router_module._UNTUNED]
    assert op(x) == op(x) == ("c", 2)


def test_untuned_and_tuned_calls_are_counted_as_before(monkeypatch, memo_misses):
    monkeypatch.setenv(GATE, "1")
    flashinfer.reset_experimental_warnings()
    runners = {"exp": FakeRunner("exp"), "a": FakeRunner("a"), "b": FakeRunner("b")}
    op = make_op(runners, experimental={"exp"}, direct=True)
    x = torch.zeros(4)

    def counts() -> tuple[int, int]:
        stats = AutoTuner.get().stats()[op.api_key]
        return stats.calls_tuned, stats.calls_default

    with use_backends({op: ["a", "b"]}):
        for _ in range(5):
            assert op(x) == ("a", None)
    assert counts() == (0, 5)
    assert len(memo_misses) == 1  # calls 3 to 5 were served by the generated code
    with pytest.warns(ExperimentalWarning):
        assert op(x) == ("exp", None)  # readable path: a default too
    assert counts() == (0, 6)
    choose(op, (x,), "b")
    for _ in range(3):
        assert op(x) == ("b", None)
    assert counts() == (3, 6)


def test_a_served_untuned_call_logs_its_line_once(caplog, memo_misses):
    caplog.set_level(logging.INFO, logger="flashinfer.dispatch")
    forget_logged_choices()
    try:
        runners = abc()
        op = make_op(runners, direct=True)
        x = torch.zeros(4)
        for _ in range(4):
            assert op(x) == ("a", None)
        with use_backends({op: ["b", "a"]}):
            for _ in range(3):
                assert op(x) == ("b", None)
        assert op(x) == op(x) == ("a", None)
    finally:
        forget_logged_choices()
    lines = [r.getMessage() for r in caplog.records if r.name == "flashinfer.dispatch"]
    assert lines == [
        f"{op.api_key}: using backend 'a' (auto; candidates ['a', 'b', 'c'])",
        f"{op.api_key}: using backend 'b' (restricted by use_backends; candidates ['b', 'a'])",
    ]
    # The first call of each default; the rest served (back to 'a', from the slot of the
    # unrestricted calls' cached verdict, though the memo's entry now says 'b').
    assert len(memo_misses) == 2


def test_the_memo_stops_growing_at_its_cap(monkeypatch, memo_misses):
    tuner = AutoTuner.get()
    monkeypatch.setattr(tuner, "memo_cap", 2)
    runners = abc()
    op = make_op(runners, direct=True)
    xs = [torch.zeros(n) for n in (64, 2, 3, 4)]  # the first one learns the pattern
    for x in xs:
        for _ in range(3):
            assert op(x) == ("a", None)
    assert len(tuner.route_memo) == 2
    # 64 and 2 rows are in the memo: served from their second call (64 rows: its first
    # call learnt the pattern); past the cap, every call of 3 and 4 rows is looked up.
    assert sorted(Counter(memo_misses).values()) == [1, 1, 3, 3]
    with use_backends({op: ["c"]}):  # an entry in the memo follows its default...
        assert op(xs[1]) == op(xs[1]) == ("c", None)
        assert op(xs[2]) == ("c", None)  # ...and one past the cap is still not added
    assert len(tuner.route_memo) == 2
    assert len(memo_misses) == 8 + 1 + 1
    assert op(xs[1]) == ("a", None)
