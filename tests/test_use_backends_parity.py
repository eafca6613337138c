"""Under a restriction (``use_backends``) the generated fast path and the reference path agree.

The same random ops and calls as ``tests/test_dispatch_fast_path.py`` (signatures, checker
styles, capabilities, the gate, heuristics, routed or not, ``skip_check``), each made inside
a ``use_backends`` block listing a random ordered subset of the op's backends: both paths
must pick the same backend with the same candidates and records, warn the same, and raise
the same error.  Calls outside any block are covered by the original test.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_dispatch_fast_path import (
    PLAIN,
    SIGNATURES,
    W,
    X,
    assert_agree,
    calls,
    draw_op,
    fake_cuda,
    gate,
    make_op,
)

from flashinfer.backend_dispatch import use_backends
from flashinfer.gating.messages import restriction_cannot_run


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(data=st.data(), signature_key=st.sampled_from(sorted(SIGNATURES)))
def test_fast_path_agrees_with_reference_under_a_restriction(
    data: st.DataObject, signature_key: str
) -> None:
    op, rec, backends = draw_op(data, signature_key)
    names = [b[0] for b in backends]
    listed = data.draw(st.permutations(names), "order")[: data.draw(st.integers(1, len(names)))]
    args, kwargs, gate_value = data.draw(calls(signature_key, names), "call")
    with gate(gate_value), fake_cuda(), use_backends({op: listed}):
        out = assert_agree(op, rec, *args, **kwargs)
    result = out["result"]
    if result[0] == "ok" and result[1][0] == "auto" and not kwargs.get("skip_check"):
        assert result[1][1] == [b for b in listed if b in result[1][1]]  # the listed order


def _five_backends(fits: dict[str, str]) -> list[tuple[str, str, str, bool, str]]:
    return [
        (name, "same", fits.get(name, "ok"), name.startswith("e"), "cpu_80_90")
        for name in ("a", "b", "e1", "c", "e2")
    ]


@pytest.mark.parametrize("listed", [["c", "a"], ["e2", "b"], ["b", "e1", "a"], ["e1"]])
@pytest.mark.parametrize("gate_value", [None, "1"])
def test_listed_order_and_experimental_opt_in_agree(listed: list[str], gate_value: Any) -> None:
    """Readable cases: the candidates are the listed backends in their order, whatever
    the gate, and a listed experimental backend warns once in both paths."""
    op, rec = make_op(PLAIN, _five_backends({}), heuristic="reverse")
    with gate(gate_value), use_backends({op: listed}):
        out = assert_agree(op, rec, X, W)
    assert out["result"][1][:3] == ("auto", listed, [])
    assert len(out["warnings"]) == sum(b.startswith("e") for b in listed)


def test_nothing_listed_can_run_is_the_same_error_in_both_paths() -> None:
    op, rec = make_op(PLAIN, _five_backends({"a": "raise", "b": "false"}))
    with use_backends({op: ["b", "a"]}):
        out = assert_agree(op, rec, X, W)
    kind, error, message = out["result"]
    assert kind == "error" and error.__name__ == "BackendSupportedError"
    why = {
        "b": "support check returned False for these inputs",
        "a": "support check rejected the inputs: checker says these inputs are not supported",
    }
    assert message == restriction_cannot_run("api", ["b", "a"], why, variable=None)


def test_a_capability_left_out_listed_backend_agrees() -> None:
    """A listed backend whose capability rule refuses the call is skipped in both paths."""
    backends = [("a", "same", "ok", False, "gpu_90"), ("b", "same", "ok", False, "cpu_80_90")]
    op, rec = make_op(PLAIN, backends)
    x = torch.zeros(2)
    x.fake_cc = 80  # type: ignore[attr-defined]
    with fake_cuda(), use_backends({op: ["a", "b"]}):
        out = assert_agree(op, rec, x, W)
    assert out["result"][1][1] == ["b"]
