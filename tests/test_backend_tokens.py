"""One grammar for ``backend``: eager calls, the torch operator and compiled calls accept
exactly the same strings (issue 42, item 5).  ``"auto|a,b"`` is ``"auto"`` restricted to
those backends, as a ``use_backends`` block restricts it (compiled calls inside a block
pass their restriction so); a malformed token is a ``BackendSupportedError`` naming it."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import flashinfer
from flashinfer.backend_dispatch import BackendSupportedError


def _inputs(name: str) -> tuple[torch.Tensor, ...]:
    if name == "mm":
        return torch.randn(4, 32), torch.randn(32, 16)
    return torch.randn(4, 32), torch.randn(32)


def _outcome(call: Callable[[], Any]) -> Any:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return ("ran", call())
    except Exception as exc:  # a compiled call's error is Dynamo's, caused by the op's
        cause: BaseException | None = exc
        while cause is not None and not isinstance(cause, BackendSupportedError):
            cause = cause.__cause__ or cause.__context__
        if cause is None:
            raise
        return ("refused", str(cause).splitlines()[0])


def _routes(name: str, token: str, inputs: tuple[torch.Tensor, ...]) -> dict[str, Any]:
    api = getattr(flashinfer, name)
    operator = api.dispatcher.torch_op.default

    def compiled() -> Any:
        torch._dynamo.reset()
        fn = torch.compile(lambda *t: api(*t, backend=token), backend="eager", fullgraph=True)
        return fn(*inputs)

    return {
        "eager": _outcome(lambda: api(*inputs, backend=token)),
        "operator": _outcome(lambda: operator(*inputs, backend=token)),
        "compiled": _outcome(compiled),
    }


# Every backend of both ops (experimental ones read from the op), and names of none.
NAMES = sorted({*flashinfer.rmsnorm.backend_checks, *flashinfer.mm.backend_checks}) + [
    "",
    "nope",
    "auto",
    "torch ",
    "TORCH",
]


@settings(max_examples=25, deadline=None)
@given(
    name=st.sampled_from(["rmsnorm", "mm"]),
    listed=st.lists(st.sampled_from(NAMES), max_size=3),
    prefix=st.sampled_from(["auto|", "auto", "|", "auto||", "Auto|"]),
)
def test_every_route_accepts_and_refuses_the_same_tokens(
    name: str, listed: list[str], prefix: str
) -> None:
    token = prefix + ",".join(listed)
    inputs = _inputs(name)
    outcomes = _routes(name, token, inputs)
    kinds = {route: outcome[0] for route, outcome in outcomes.items()}
    assert len(set(kinds.values())) == 1, (token, outcomes)
    if kinds["eager"] == "ran":
        expected = outcomes["eager"][1]
        for route in ("operator", "compiled"):
            torch.testing.assert_close(outcomes[route][1], expected)
    api = getattr(flashinfer, name)
    known = set(api.backend_checks)
    well_formed = (
        token in known
        or token == "auto"
        or (
            token.startswith("auto|")
            and bool(listed)
            and set(listed) <= known
            and len(set(listed)) == len(listed)
        )
    )
    if not well_formed:
        assert kinds["eager"] == "refused", token
        assert repr(token) in outcomes["eager"][1]  # the message names the token


@pytest.mark.parametrize("token", ["auto|", "auto|torch,", "auto|torch,torch", "auto|nope"])
def test_a_malformed_token_is_refused_naming_it_on_every_route(token: str) -> None:
    outcomes = _routes("mm", token, _inputs("mm"))
    for route, (kind, message) in outcomes.items():
        assert kind == "refused", route
        assert "malformed" in message and repr(token) in message, (route, message)
