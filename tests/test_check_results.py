"""What a support checker, the common check and a heuristic may return: one rule on the
generated and the reference path (issue 21, items 13 and 14).

A checker (or the common check) returns ``True`` or ``False`` (a numpy bool is taken as the
bool it is) or raises ``ValueError``; anything else is a ``TypeError`` naming the op, the
check by its qualified name, and what it returned, raised by the first call that gets it.
A heuristic returns a list or tuple of backend names (``str``); anything else is a
``TypeError`` naming the heuristic.  Generated values, each through both paths (and the
cached path on repeats, and with a table large enough for the generated code to go through
per-backend functions): the same choice, or the same error type and message.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import flashinfer
import flashinfer.dispatch.emitter as emitter
from flashinfer.backend_dispatch import (
    BackendSupportedError,
    UnsupportedInputsError,
    backend_requirement,
    use_backends,
)

# Results a check might return.  Only True, False and numpy bools are verdicts.
VERDICTS: list[Any] = [True, False, np.bool_(True), np.bool_(False)]
NOT_VERDICTS: list[Any] = [
    None,
    "False",
    "True",
    "",
    0,
    1,
    2.0,
    [],
    [True],
    (False,),
    torch.tensor(True),
    torch.tensor(False),
    np.array([True]),
    object(),
    "x" * 500,  # a long value: the message cuts it
]
results = st.sampled_from(VERDICTS + NOT_VERDICTS)


def _outcome(fn: Callable[[], Any]) -> tuple:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", flashinfer.ExperimentalWarning)
        try:
            return ("ok", fn())
        except Exception as exc:  # noqa: BLE001 - the error itself is compared
            return ("error", type(exc), str(exc))


def _fresh_outcomes(op: Any, *args: Any, **kwargs: Any) -> Iterator[tuple]:
    """The call through the generated path (three times: uncached, stored, cached) and
    through the reference path."""
    op.verdict_cache.clear()
    for _ in range(3):
        yield _outcome(lambda: op(*args, **kwargs))
    yield _outcome(lambda: op.call_reference(*args, **kwargs))


def _is_verdict(value: Any) -> bool:
    return any(value is v for v in VERDICTS)


def _checkers(answers: dict[str, Any]) -> dict[str, Callable[..., Any]]:
    def make(name: str) -> Callable[..., Any]:
        def check(x: torch.Tensor, backend: str = "auto") -> Any:
            return answers[name]

        check.__qualname__ = f"checker_of_{name}"
        return check

    return {name: make(name) for name in answers}


def _op(answers: dict[str, Any], common: Any = True, heuristic: Any = None) -> Any:
    def common_check(x: torch.Tensor, backend: str = "auto") -> Any:
        return common

    def api(x: torch.Tensor, backend: str = "auto") -> Any:
        return (backend, list(op.suitable_auto_backends))

    api.__name__ = api.__qualname__ = "checked_api"
    op = backend_requirement(_checkers(answers), common_check, heuristic)(api)
    return op


X = torch.zeros(2)


@settings(max_examples=150, deadline=None)
@given(
    a=results,
    b=results,
    common=results,
    call=st.sampled_from(["auto", "a", "b", "listed"]),
    large=st.booleans(),
)
def test_check_results_one_rule_on_both_paths(a, b, common, call, large):
    with pytest.MonkeyPatch.context() as mp:
        if large:  # the form of a table past MAX_BRANCHES: per-backend functions
            mp.setattr(emitter, "MAX_BRANCHES", 0)
        op = _op({"a": a, "b": b}, common)
    if call == "listed":
        with use_backends({op: ["b", "a"]}):
            outcomes = list(_fresh_outcomes(op, X))
    else:
        outcomes = list(_fresh_outcomes(op, X, backend=call))
    assert all(o == outcomes[0] for o in outcomes), outcomes
    kind, *rest = outcomes[0]
    # The checks a call consults, in order: the common check, then the backends asked.
    asked = {"auto": [("a", a), ("b", b)], "a": [("a", a)], "b": [("b", b)]}
    asked["listed"] = asked["auto"][::-1]
    consulted = [("common", common)]
    if _is_verdict(common) and bool(common):
        consulted += asked[call]
    first_bad = next(((n, v) for n, v in consulted if not _is_verdict(v)), None)
    if first_bad is not None:
        assert kind == "error" and rest[0] is TypeError, outcomes[0]
        message = rest[1]
        who = "the common check" if first_bad[0] == "common" else f"backend {first_bad[0]!r}"
        assert message.startswith(
            f"checked_api: {'' if first_bad[0] == 'common' else 'the support checker of '}"
        )
        assert who in message
        qualname = "common_check" if first_bad[0] == "common" else f"checker_of_{first_bad[0]}"
        assert f"({__name__}." in message and f"{qualname})" in message
        assert first_bad[1] is None or type(first_bad[1]).__name__ in message
        assert "returns True or False" in message
        assert len(message) < 600  # a long value is cut
        return
    # Only verdicts: the outcome follows their truth, as bools.
    fits = [n for n, v in asked[call] if bool(v)]  # (listed: in the listed order)
    if not bool(common) or not fits:
        assert kind == "error" and issubclass(rest[0], BackendSupportedError), outcomes[0]
        if call in ("a", "b"):
            assert rest[0] is UnsupportedInputsError
        assert "returned False" in rest[1]
    else:
        expected_backend = call if call in ("a", "b") else "auto"
        assert kind == "ok", outcomes[0]
        assert rest[0][0] == expected_backend
        if call not in ("a", "b"):
            assert rest[0][1] == fits


def test_a_checker_falling_through_is_named_with_a_hint():
    def falls_through(x, backend="auto"):
        if x.dim() > 5:
            return True

    op = backend_requirement({"a": falls_through})(lambda x, backend="auto": x)
    for fn in (op, op.call_reference):
        with pytest.raises(TypeError, match=r"falls_through\) returned None \(None: does a path"):
            fn(X)
        with pytest.raises(TypeError, match="backend 'a'"):
            fn(X, backend="a")


def test_the_string_false_never_counts_as_support():
    op = backend_requirement({"a": lambda x, backend="auto": "False"})(lambda x, backend="auto": x)
    for fn in (op, op.call_reference):
        with pytest.raises(TypeError, match=r"returned str 'False' \(a non-empty str"):
            fn(X)


def test_explain_reports_what_a_call_would_raise():
    """``explain`` reports a crashing checker rather than raising: the rule's TypeError."""
    op = backend_requirement({"a": lambda x, backend="auto": None})(lambda x, backend="auto": x)
    report = str(op.explain(X))
    assert "support check raised TypeError" in report and "returned None" in report


# ---- heuristics -------------------------------------------------------------------------

NAMES = ("a", "b", "c")
names = st.sampled_from([*NAMES, "zz"])
HEURISTIC_ANSWERS = st.one_of(
    st.lists(names, max_size=5),
    st.lists(names, max_size=5).map(tuple),
    st.lists(names, min_size=1, max_size=3).map(np.array),
    st.lists(names, max_size=3).map(set),
    st.lists(names, max_size=3).map(lambda v: (n for n in v)),
    st.lists(names, max_size=3).map(lambda v: dict.fromkeys(v)),
    st.lists(st.one_of(names, st.integers(0, 3), st.none()), min_size=1, max_size=4),
    st.sampled_from([None, "a", "abc", 0, b"a", torch.tensor([1])]),
)


def _valid_answer(answer: Any) -> bool:
    return isinstance(answer, (list, tuple)) and all(isinstance(n, str) for n in answer)


@settings(max_examples=150, deadline=None)
@given(
    answer=HEURISTIC_ANSWERS,
    fits=st.sets(st.sampled_from(NAMES), min_size=1),
    large=st.booleans(),
)
def test_heuristic_answers_one_rule_on_both_paths(answer, fits, large):
    """Every answer through both paths: the same choice, or the same TypeError naming the
    heuristic.  A list or tuple of str is ordered and filtered (unfit backends and repeats
    dropped, a name that is no backend kept, as upstream keeps it); anything else is
    refused."""

    if isinstance(answer, type(n for n in ())):  # single-use: a fresh one per call
        items = list(answer)
        answers: Callable[[], Any] = lambda: (n for n in items)  # noqa: E731
    else:
        answers = lambda: answer  # noqa: E731
    with pytest.MonkeyPatch.context() as mp:
        if large:
            mp.setattr(emitter, "MAX_BRANCHES", 0)
        op = backend_requirement(
            {n: (lambda x, backend="auto", _n=n: _n in fits) for n in NAMES},
            heuristic_func=lambda candidates, x, backend="auto": answers(),
        )(lambda x, backend="auto": list(op.suitable_auto_backends))
    outcomes = list(_fresh_outcomes(op, X))
    assert all(o == outcomes[0] for o in outcomes), outcomes
    if _valid_answer(answer):
        expected = list(dict.fromkeys(n for n in answer if n in fits or n not in NAMES))
        if expected:
            assert outcomes[0] == ("ok", expected)
        else:
            assert outcomes[0][:2] == ("error", BackendSupportedError)
            assert "left out by the heuristic" in outcomes[0][2]
    else:
        kind, error, message = outcomes[0]
        assert (kind, error) == ("error", TypeError), outcomes[0]
        assert message.startswith("<lambda>: the heuristic (")
        assert "returned " in message and "list (or tuple) of backend names" in message


def test_a_heuristic_returning_none_is_named():
    def order_backends(candidates, x, backend="auto"):
        if x.dim() > 5:
            return candidates

    op = backend_requirement({"a": lambda x, backend="auto": True}, heuristic_func=order_backends)(
        lambda x, backend="auto": x
    )
    for fn in (op, op.call_reference):
        with pytest.raises(
            TypeError,
            match=r"the heuristic \(.*order_backends\) returned None \(None: does a path",
        ):
            fn(X)


def test_a_heuristic_returning_a_numpy_array_is_refused_on_both_paths():
    op = backend_requirement(
        {"a": lambda x, backend="auto": True, "b": lambda x, backend="auto": True},
        heuristic_func=lambda candidates, x, backend="auto": np.array(candidates[::-1]),
    )(lambda x, backend="auto": x)
    for fn in (op, op.call_reference):
        with pytest.raises(TypeError, match=r"a numpy array: return array.tolist\(\)"):
            fn(X)


@pytest.mark.parametrize("broken", ["common check", "heuristic"])
def test_explain_applies_the_same_rule_as_the_call(broken):
    """``op.explain`` says what the call would do: a common check that returns None, or a
    heuristic that returns None, is the call's TypeError naming it, not "returned False" or a
    bare 'NoneType is not iterable'."""

    def common(x, backend="auto"):
        return None if broken == "common check" else True

    def heuristic(suitable, x, backend="auto"):
        return None if broken == "heuristic" else suitable

    op = backend_requirement(
        {"a": lambda x, backend="auto": True, "b": lambda x, backend="auto": True},
        common_check=common,
        heuristic_func=heuristic,
    )(lambda x, backend="auto": x)
    with pytest.raises(TypeError) as by_call:
        op(X)
    with pytest.raises(TypeError) as by_explain:
        op.explain(X)
    assert str(by_explain.value) == str(by_call.value)
    assert ("common" if broken == "common check" else "heuristic") in str(by_call.value)
