"""Backends that cannot differentiate (issue 19, item 4): declared, skipped by ``"auto"`` when
grad is required, refused by name.

A backend is differentiable when ``Backend(..., differentiable=True)`` says so, or, without
the keyword, when its checker's family is (torch: yes; Triton: no; no family: yes, not
gated).  When grad is required (grad mode on and an argument requiring grad), ``"auto"``
leaves a non-differentiable backend out and ``explain`` says why, and naming one raises an
error naming the backend and both fixes.  The generated path (with its verdict cache) and
the reference path (``call_reference``) agree over any sequence of calls with and without
grad.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import flashinfer
from flashinfer.backend_dispatch import (
    Backend,
    BackendSupportedError,
    backend_requirement,
)
from flashinfer.dispatch.emitter import MAX_BRANCHES
from flashinfer.dispatch.families import TORCH, TRITON, backend_family, family_of
from flashinfer.utils import UnsupportedInputsError

_ids = itertools.count()


@backend_family(TORCH)
def check_torch(x: torch.Tensor, w: torch.Tensor) -> bool:
    return True


@backend_family(TRITON)
def check_kernel(x: torch.Tensor) -> bool:  # a subset of the API's parameters
    if x.dim() != 1:
        raise ValueError("x must be 1-D")
    return True


def run_torch(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return x * w


def run_kernel(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    # What a kernel launch gives autograd: a result detached from the graph.
    with torch.no_grad():
        return x * w


def make_op(*backends: Backend) -> Any:
    """An author's op ``api(x, w, backend="auto")`` over ``backends`` (by default: torch,
    then a Triton-family "kernel" with no ``differentiable=``); its body runs the chosen
    backend's implementation."""
    table = list(backends) or [
        Backend("torch", check=check_torch, run=run_torch),
        Backend("kernel", check=check_kernel, run=run_kernel),
    ]

    def api(x: torch.Tensor, w: torch.Tensor, backend: str = "auto") -> torch.Tensor:
        b = backend if backend != "auto" else fn.suitable_auto_backends[0]
        return fn.implementations[b](x, w)

    api.__qualname__ = api.__name__ = f"grad_api_{next(_ids)}"
    fn = backend_requirement(table)(api)
    return fn


def grad_inputs() -> tuple[torch.Tensor, torch.Tensor]:
    return torch.randn(8, requires_grad=True), torch.randn(8)


# --------------------------------------------------------------------------------------
# Declaring it
# --------------------------------------------------------------------------------------


def test_the_family_decides_when_the_declaration_does_not():
    op = make_op()
    assert op.dispatcher.non_differentiable_backends == {"kernel"}
    assert TORCH.differentiable and not TRITON.differentiable
    # The public mapping keeps the author's checker, marks and all (the gate is internal).
    assert op.backend_checks["kernel"] is check_kernel
    assert family_of(op.backend_checks["kernel"]) is TRITON
    assert op.backends["kernel"].differentiable is None


def test_a_declaration_saying_differentiable_is_not_gated():
    op = make_op(
        Backend("torch", check=check_torch, run=run_torch),
        Backend("kernel", check=check_kernel, run=run_torch, differentiable=True),
    )
    assert op.dispatcher.non_differentiable_backends == frozenset()
    x, w = grad_inputs()
    assert op(x, w, backend="kernel").requires_grad
    for _ in range(3):  # learns the types, stores the verdict, serves it
        op(x, w)
        assert op.suitable_auto_backends == ["torch", "kernel"]
    assert "_grad_on" not in op.__generated_source__  # its cache key reads no grad mode
    assert op.explain(x, w).verdict("kernel").candidate


def test_differentiable_false_gates_even_a_torch_family_backend():
    op = make_op(
        Backend("torch", check=check_torch, run=run_torch, differentiable=False),
        Backend("eager", check=lambda x, w: True, run=run_torch),  # no family: not gated
    )
    assert op.dispatcher.non_differentiable_backends == {"torch"}
    x, w = grad_inputs()
    op(x, w)
    assert op.suitable_auto_backends == ["eager"]


@pytest.mark.parametrize("value", [1, 0, "yes", 1.0, torch.tensor(True)], ids=repr)
def test_differentiable_of_a_wrong_type_is_refused_at_declaration(value: Any):
    with pytest.raises(TypeError, match=r"Backend 'kernel': differentiable must be True, False"):
        Backend("kernel", check=check_kernel, run=run_kernel, differentiable=value)


def test_upstreams_mapping_form_follows_the_family_rule():
    def api(x: torch.Tensor, w: torch.Tensor, backend: str = "auto") -> str:
        return backend if backend != "auto" else fn.suitable_auto_backends[0]

    api.__qualname__ = api.__name__ = f"grad_mapping_{next(_ids)}"
    unmarked = lambda x, w: True  # noqa: E731 - no family: nothing known, not gated
    fn = backend_requirement({"torch": check_torch, "kernel": check_kernel, "other": unmarked})(api)
    assert fn.dispatcher.non_differentiable_backends == {"kernel"}
    x, w = grad_inputs()
    assert fn(x, w) == "torch"
    assert fn.suitable_auto_backends == ["torch", "other"]


def test_the_shipped_ops_are_not_grad_gated():
    # Their non-torch backends declare differentiable=True (their runs carry a backward).
    for op in (flashinfer.rmsnorm, flashinfer.mm):
        assert op.dispatcher.non_differentiable_backends == frozenset(), op.api_name


# --------------------------------------------------------------------------------------
# "auto" with grad required
# --------------------------------------------------------------------------------------


def test_auto_picks_the_differentiable_backend_and_gradients_flow():
    op = make_op()
    x, w = grad_inputs()
    for _ in range(3):  # learns the types, stores the verdict, serves it
        y = op(x, w)
        assert op.suitable_auto_backends == ["torch"]
        assert y.requires_grad
        (g,) = torch.autograd.grad(y.sum(), x)
        torch.testing.assert_close(g, w)


def test_explain_says_why_the_other_backend_was_left_out():
    op = make_op()
    x, w = grad_inputs()
    explained = op.explain(x, w)
    kernel = explained.verdict("kernel")
    assert not kernel.candidate and not kernel.can_run
    assert kernel.stage == "autograd"
    assert kernel.reason is not None
    assert kernel.reason.startswith("cannot differentiate: the argument 'x' requires grad")
    assert "torch.no_grad()" in kernel.reason and "backend='torch'" in kernel.reason
    assert explained.candidates == ("torch",)
    assert "left out (autograd)" in str(explained)
    with torch.no_grad():
        assert op.explain(x, w).candidates == ("torch", "kernel")


def test_when_no_backend_can_differentiate_the_error_lists_the_reason():
    op = make_op(Backend("kernel", check=check_kernel, run=run_kernel))
    x, w = grad_inputs()
    for call in (op, op.call_reference):
        with pytest.raises(BackendSupportedError) as caught:
            call(x, w)
        text = str(caught.value)
        assert "- kernel: cannot differentiate: the argument 'x' requires grad" in text
        assert "no backend of" in text and "differentiable=True" in text
    with torch.no_grad():
        assert not op(x, w).requires_grad


def test_every_argument_requiring_grad_is_named():
    op = make_op()
    x = torch.randn(8, requires_grad=True)
    w = torch.nn.Parameter(torch.randn(8))  # a Parameter requires grad by default
    with pytest.raises(UnsupportedInputsError, match="the arguments 'x', 'w' require grad"):
        op(x, w, backend="kernel")
    op(torch.randn(8), w)
    assert op.suitable_auto_backends == ["torch"]


# --------------------------------------------------------------------------------------
# Naming it
# --------------------------------------------------------------------------------------


def test_naming_it_with_grad_required_raises_naming_the_backend_and_both_fixes():
    op = make_op()
    x, w = grad_inputs()
    for call in (op, op.call_reference):
        with pytest.raises(UnsupportedInputsError) as caught:
            call(x, w, backend="kernel")
        text = str(caught.value)
        assert "with backend 'kernel'" in text
        assert "cannot differentiate" in text
        assert "torch.no_grad()" in text
        assert "pass backend='torch'" in text


def test_the_capability_and_checker_still_come_first_and_after():
    op = make_op()
    x, w = torch.randn(2, 2, requires_grad=True), torch.randn(2, 2)
    # Grad required: the grad gate refuses before the checker runs.
    with pytest.raises(UnsupportedInputsError, match="cannot differentiate"):
        op(x, w, backend="kernel")
    # Grad off: the author's checker decides, as without the gate.
    with torch.no_grad(), pytest.raises(UnsupportedInputsError, match="x must be 1-D"):
        op(x, w, backend="kernel")


# --------------------------------------------------------------------------------------
# Without grad it is a backend like any other
# --------------------------------------------------------------------------------------


def test_without_grad_it_is_a_candidate_again_alternating_calls():
    op = make_op()
    x, w = grad_inputs()
    plain = x.detach()
    for _ in range(4):  # each state is served from its own cached verdict
        op(x, w)
        assert op.suitable_auto_backends == ["torch"]
        with torch.no_grad():
            op(x, w)
        assert op.suitable_auto_backends == ["torch", "kernel"]
        with torch.inference_mode():
            op(x, w)
        assert op.suitable_auto_backends == ["torch", "kernel"]
        op(plain, w)
        assert op.suitable_auto_backends == ["torch", "kernel"]
        assert not op(plain, w, backend="kernel").requires_grad
    # Grad required, and not: two verdicts for the one signature (the key says which).
    tails = {key[-2] for key in op.verdict_cache.memo}
    assert tails == {True, False}
    assert "_grad_on" in op.__generated_source__


def test_a_restriction_lists_the_refusal_like_any_other():
    op = make_op()
    x, w = grad_inputs()
    with flashinfer.use_backends({op: ["kernel", "torch"]}):
        op(x, w)
        assert op.suitable_auto_backends == ["torch"]
        with torch.no_grad():
            op(x, w)
        assert op.suitable_auto_backends == ["kernel", "torch"]
    with flashinfer.use_backends({op: ["kernel"]}), pytest.raises(BackendSupportedError) as caught:
        op(x, w)
    assert "- kernel: cannot differentiate" in str(caught.value)


def test_a_list_argument_holding_a_tensor_that_requires_grad_counts():
    def api(xs: list[torch.Tensor], backend: str = "auto") -> str:
        return backend if backend != "auto" else fn.suitable_auto_backends[0]

    @backend_family(TRITON)
    def check_list(xs: list[torch.Tensor]) -> bool:
        return True

    api.__qualname__ = api.__name__ = f"grad_list_{next(_ids)}"
    fn = backend_requirement([Backend("kernel", check=check_list, run=run_kernel)])(api)
    needs = [torch.ones(2), torch.ones(2, requires_grad=True)]
    with pytest.raises(UnsupportedInputsError, match="the argument 'xs' requires grad"):
        fn(needs, backend="kernel")
    assert fn([torch.ones(2)], backend="kernel") == "kernel"


def test_a_large_table_gates_the_same_way():
    # More than MAX_BRANCHES backends: the generated code finds each backend's function in
    # a table (see emitter) instead of spelling the checks out; the gate is the same.
    n = MAX_BRANCHES + 4
    table = [
        Backend(f"k{i}", check=check_kernel if i % 2 else check_torch, run=run_torch)
        for i in range(n)
    ]
    op = make_op(*table)
    x, w = grad_inputs()
    op(x, w)
    assert op.suitable_auto_backends == [f"k{i}" for i in range(0, n, 2)]
    with torch.no_grad():
        op(x, w)
    assert op.suitable_auto_backends == [f"k{i}" for i in range(n)]
    with pytest.raises(UnsupportedInputsError, match="with backend 'k1': cannot differentiate"):
        op(x, w, backend="k1")


# --------------------------------------------------------------------------------------
# The generated path and the reference path agree
# --------------------------------------------------------------------------------------

# The kernel first: "auto" runs it whenever it may, so leaving it out shows.
AGREE_OP = make_op(
    Backend("kernel", check=check_kernel, run=run_kernel),
    Backend("torch", check=check_torch, run=run_torch),
)


def _outcome(call: Any, grad: bool, x: torch.Tensor, w: torch.Tensor, backend: str) -> tuple:
    AGREE_OP.dispatcher._state.r.suitable = ["stale"]
    with torch.set_grad_enabled(grad):
        try:
            y = call(x, w, backend=backend)
            result: tuple = ("ok", y.requires_grad, list(AGREE_OP.suitable_auto_backends))
        except Exception as exc:  # noqa: BLE001 - the error itself is compared
            result = ("error", type(exc), str(exc))
    return result


CALLS = st.tuples(
    st.booleans(),  # grad mode
    st.booleans(),  # x requires grad
    st.booleans(),  # w requires grad
    st.sampled_from([1, 2]),  # x's dimensions (the kernel's checker wants 1)
    st.sampled_from(["auto", "auto", "torch", "kernel"]),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(calls=st.lists(CALLS, min_size=1, max_size=12))
def test_generated_and_reference_paths_agree_over_calls_with_and_without_grad(
    calls: list[tuple[bool, bool, bool, int, str]],
) -> None:
    AGREE_OP.verdict_cache.clear()
    for grad, x_grad, w_grad, dims, backend in calls:
        shape = (4,) if dims == 1 else (2, 2)
        x = torch.ones(shape, requires_grad=x_grad)
        w = torch.ones(shape, requires_grad=w_grad)
        reference = _outcome(AGREE_OP.call_reference, grad, x, w, backend)
        for _ in range(3):  # learns the types, stores the verdict, hits it
            assert _outcome(AGREE_OP, grad, x, w, backend) == reference, (grad, x, w, backend)
        if reference[0] == "ok":  # never a gradient lost
            assert reference[1] == (grad and (x_grad or w_grad))
