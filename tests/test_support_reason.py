"""``flashinfer.testing.support_reason`` asks the dispatcher, so it says what a call decides.

The ops here have what a hand-rolled checker call gets wrong: positional-only parameters,
``**kwargs`` on the API and on checkers, a checker that takes a subset of the parameters by
name, a capability rule that refuses CPU.  For every backend and input, ``support_reason`` is
``None`` exactly when an explicit call with that backend is accepted, its reason is the one
``backend="auto"`` lists, and ``"auto"`` keeps exactly the backends it accepts.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from flashinfer import testing
from flashinfer.backend_dispatch import (
    BackendSupportedError,
    UnsupportedInputsError,
    backend_requirement,
    supported_compute_capability,
)
from flashinfer.testing import Case, allclose, call_arguments, support_reason

REFUSED = (BackendSupportedError, UnsupportedInputsError)


@supported_compute_capability([80, 90], cpu=True)
def _check_same(x, w, /, scale=1.0, *, backend="auto", **extra):
    """The API's own parameter list (called positionally): refuses ``mode="bad"``."""
    if extra.get("mode") == "bad":
        raise ValueError("mode 'bad' is not supported")
    return x.shape[-1] == w.shape[0]


@supported_compute_capability([80, 90], cpu=True)
def _check_by_name(w, **kwargs):
    """A subset by name; the rest, ``**extra`` spread out, arrives in ``**kwargs``."""
    return kwargs.get("flag", True) and kwargs["scale"] > 0 and w.dim() == 1


@supported_compute_capability([80, 90], cpu=True)
def _check_positional_only(x, /, **kwargs):
    """``x`` can only be passed by position; ``scale`` and ``**extra`` come by name."""
    return x.dim() == 2 and kwargs.get("mode") != "slow"


@supported_compute_capability([80, 90], cpu=False)
def _check_cuda_only(x, w, /, scale=1.0, *, backend="auto", **extra):
    return True


def _body(x, w, /, scale=1.0, *, backend="auto", **extra):
    return x * scale


op = backend_requirement(
    {
        "same": _check_same,
        "by_name": _check_by_name,
        "positional_only": _check_positional_only,
        "cuda_only": _check_cuda_only,
    }
)(_body)


def _explicit_call_refusal(backend, inputs):
    """What an explicit call decides: None if it runs, else the error it raised."""
    args, kwargs = call_arguments(op, inputs)
    try:
        op(*args, **kwargs, backend=backend)
    except REFUSED as exc:
        return exc
    return None


inputs_strategy = st.fixed_dictionaries(
    {
        "x": st.sampled_from([(2, 3), (3,), (2, 4)]).map(torch.ones),
        "w": st.sampled_from([(3,), (3, 1)]).map(torch.ones),
        "scale": st.sampled_from([1.0, -1.0]),
    },
    optional={"mode": st.sampled_from(["bad", "slow", "fine"]), "flag": st.booleans()},
)


@settings(max_examples=60, deadline=None)
@given(inputs=inputs_strategy)
def test_support_reason_is_what_the_dispatcher_decides(inputs):
    reasons = {b: support_reason(op, b, inputs) for b in op.backend_checks}
    for backend, reason in reasons.items():
        refused = _explicit_call_refusal(backend, inputs)
        assert (reason is None) == (refused is None), (backend, reason, refused)
        if reason is not None:
            assert reason.startswith(f"{backend}: ")
    accepted = [b for b, r in reasons.items() if r is None]
    args, kwargs = call_arguments(op, inputs)
    if accepted:
        op(*args, **kwargs)
        assert list(op.suitable_auto_backends) == accepted
    else:
        with pytest.raises(BackendSupportedError) as raised:
            op(*args, **kwargs)
        for reason in reasons.values():
            assert f"  - {reason}" in str(raised.value)  # the same reason, word for word


def test_each_kind_of_checker_gets_its_arguments():
    """One input per checker that only that checker refuses (and the capability rule)."""
    x, w = torch.ones(2, 3), torch.ones(3)
    assert support_reason(op, "same", {"x": x, "w": w, "mode": "bad"}) == (
        "same: support check rejected the inputs: mode 'bad' is not supported"
    )
    assert support_reason(op, "by_name", {"x": x, "w": w, "flag": False}) == (
        "by_name: support check returned False for these inputs"
    )
    assert support_reason(op, "positional_only", {"x": x, "w": w, "mode": "slow"}) == (
        "positional_only: support check returned False for these inputs"
    )
    assert support_reason(op, "cuda_only", {"x": x, "w": w}) == (
        f"cuda_only: {op.backend_runnable_reason('cuda_only', None)}"  # the capability rule
    )
    for backend in ("same", "by_name", "positional_only"):
        assert support_reason(op, backend, {"x": x, "w": w}) is None


def test_an_unknown_backend_and_arguments_the_api_cannot_take():
    x, w = torch.ones(2, 3), torch.ones(3)
    assert support_reason(op, "nope", {"x": x, "w": w}).startswith("nope: unknown backend")
    with pytest.raises(TypeError):
        support_reason(op, "same", {"w": w})  # x is missing


def test_call_arguments_pass_positional_only_by_position_and_spread_star_args():
    x, w = torch.ones(2, 3), torch.ones(3)
    assert call_arguments(op, {"x": x, "w": w, "scale": 2.0, "mode": "m"}) == (
        [x, w],
        {"scale": 2.0, "mode": "m"},
    )

    def star(a, *rest, flag=False):
        return a, rest, flag

    args, kwargs = call_arguments(star, {"a": 1, "rest": (2, 3), "flag": True})
    assert star(*args, **kwargs) == (1, (2, 3), True)
    assert call_arguments(star, {"a": 1}) == ([], {"a": 1})


def test_a_declared_case_of_a_positional_only_api_runs(monkeypatch):
    """Conformance calls the op as support_reason binds it: positional-only inputs work."""
    monkeypatch.setattr(testing, "_declared", {})
    monkeypatch.setattr("flashinfer.load_all_apis", lambda: None)
    case = Case(
        "f32_2x3",
        inputs=lambda gen: {"x": torch.randn(2, 3, generator=gen), "w": torch.ones(3)},
        reference=lambda x, w: x,
        compare=allclose(),
    )
    testing.declare_cases(op, [case])
    items = {i.backend: i for i in testing.conformance_items()}
    for backend in ("same", "by_name", "positional_only"):
        assert items[backend].run() is None
    assert items["cuda_only"].run().startswith("cuda_only: ")
