"""Upstream FlashInfer's contract for ``backend_requirement`` and its markers, on CPU.

Upstream's own tests of the decorators (``tests/utils/test_decorators.py`` in
flashinfer-ai/flashinfer) expect the behaviours below; they failed here before.  Each is
restated in this project's words, together with the property behind it, and with the real
operators where they are concerned.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable
from typing import Any

import pytest
import torch

import flashinfer
from flashinfer.api_logging import ExperimentalWarning
from flashinfer.gating.messages import auto_refused_by_common_check
from flashinfer.utils import (
    BackendSupportedError,
    UnsupportedInputsError,
    backend_requirement,
    experimental_backend,
    supported_compute_capability,
)

GATE = "FLASHINFER_ALLOW_EXPERIMENTAL_AUTO_BACKENDS"


# ---- supported_compute_capability's argument checks ----------------------------------


@pytest.mark.parametrize("bad", [42, 8.0, None, "90", b"90", object()])
def test_capabilities_must_be_an_iterable(bad):
    with pytest.raises(TypeError, match="must be an iterable") as info:
        supported_compute_capability(bad)
    assert type(bad).__name__ in str(info.value)


@pytest.mark.parametrize(
    ("bad", "index", "kind"),
    [(["80", "86"], 0, "str"), ([80, 86.0], 1, "float"), ([90, None], 1, "NoneType")],
)
def test_each_capability_must_be_an_integer(bad, index, kind):
    with pytest.raises(TypeError, match="must be an integer") as info:
        supported_compute_capability(bad)
    assert f"supported_ccs[{index}]" in str(info.value)
    assert f"got {kind}" in str(info.value)


def test_bool_is_not_a_capability():
    with pytest.raises(TypeError, match="got bool"):
        supported_compute_capability([True, False])
    with pytest.raises(TypeError, match="got bool"):
        supported_compute_capability([90, False])


def test_any_iterable_of_integers_is_accepted():
    for ccs in ([80, 90], (80, 90), {80, 90}, range(80, 91, 10), (c for c in (80, 90))):
        checker = supported_compute_capability(ccs)(lambda x: True)
        assert checker._supported_ccs == {80, 90}


# ---- an API without backend choices ---------------------------------------------------


def _api_without_backends(common: Callable[..., Any] | None) -> Any:
    @backend_requirement({}, common_check=common)
    def unsupported_kernel(x):
        return x * 2

    return unsupported_kernel


@pytest.mark.parametrize("backend", ["random_backend", None])
@pytest.mark.parametrize("cc", [42, 75, None])
def test_is_backend_supported_without_backend_choices_raises(backend, cc):
    op = _api_without_backends(supported_compute_capability([42])(lambda x: True))
    with pytest.raises(ValueError) as info:
        op.is_backend_supported(backend, cc)
    assert str(info.value) == (
        "Invalid is_backend_supported call: no backend choices for unsupported_kernel"
    )
    assert op.is_compute_capability_supported(42)
    assert not op.is_compute_capability_supported(75)
    assert op.has_backend("random_backend") is False


def test_capability_query_needs_a_marked_common_check():
    def _bad_common_check(x):
        return True

    op = _api_without_backends(_bad_common_check)
    with pytest.raises(ValueError) as info:
        op.is_compute_capability_supported(42)
    assert str(info.value) == (
        "Invalid is_compute_capability_supported call: _bad_common_check does not have "
        "is_compute_capability_supported decorator"
    )


def test_no_backends_and_no_common_check_is_a_usage_error_on_call():
    """Decorating is allowed (upstream asks ``has_backend_choices()`` of such an API);
    a checked call is not, in both paths; ``skip_check=True`` bypasses, as upstream."""
    op = _api_without_backends(None)
    assert op.has_backend_choices() is False
    message = (
        "Invalid @backend_requirement decorator usage: no backend choices and no common_check "
        "for unsupported_kernel"
    )
    for fn in (op, op.call_reference):
        with pytest.raises(ValueError) as info:
            fn(torch.ones(2))
        assert str(info.value) == message
        assert torch.equal(fn(torch.ones(2), skip_check=True), torch.full((2,), 2.0))


def test_common_check_false_without_backends_is_a_value_error():
    op = _api_without_backends(supported_compute_capability([90], cpu=True)(lambda x: False))
    with pytest.raises(ValueError, match="Problem size is not supported for unsupported_kernel"):
        op(torch.ones(2))


# ---- a common check that returns False -------------------------------------------------


def _two_d_only(dropped_ok: bool = True) -> Any:
    """Upstream's example: a common check requiring 2-D inputs; plus an experimental
    backend, so that a call can leave a dropped record behind."""

    def common(x, backend="auto"):
        return x.dim() == 2

    @experimental_backend
    def exp(x, backend="auto"):
        return dropped_ok

    @backend_requirement({"cudnn": lambda x, backend="auto": True, "exp": exp}, common)
    def my_kernel(x, backend="auto"):
        return x * 2

    return my_kernel


@pytest.mark.parametrize("gate_value", [None, "1"])
def test_auto_with_common_check_false_is_an_automatic_selection_failure(monkeypatch, gate_value):
    op = _two_d_only()
    if gate_value:
        monkeypatch.setenv(GATE, gate_value)
    for fn in (op, op.call_reference):
        op(torch.ones(2, 2))  # with the gate off, this call drops "exp"
        with pytest.raises(BackendSupportedError) as info:
            fn(torch.ones(2, 2, 2))
        assert not isinstance(info.value, ValueError)
        # the automatic-selection failure's words, then the common check's refusal
        assert str(info.value).startswith(auto_refused_by_common_check("my_kernel", ""))
        assert GATE not in str(info.value)
        assert op.dropped_experimental_backends == ()


def test_named_backend_with_common_check_false_stays_a_value_error():
    op = _two_d_only()
    for fn in (op, op.call_reference):
        with pytest.raises(ValueError, match="Problem size is not supported for my_kernel"):
            fn(torch.ones(2, 2, 2), backend="cudnn")
        # skip_check=True runs it unchecked (upstream)
        assert fn(torch.ones(2, 2, 2), backend="cudnn", skip_check=True).shape == (2, 2, 2)


# ---- a named backend that cannot run the inputs: op, backend and reason ---------------


def _refusals() -> list[tuple[Any, str, tuple[Any, ...]]]:
    """(op, backend, inputs) of the real operators where the backend's checker refuses."""
    column = torch.randn(8, 4).t()  # last dimension not contiguous
    return [
        (flashinfer.rmsnorm, "triton", (column, torch.ones(8))),
        (flashinfer.mm, "triton", (torch.randn(0, 8), torch.randn(8, 4))),
    ]


@pytest.mark.parametrize("case", range(2))
def test_named_backend_refusal_names_op_backend_and_reason(case):
    op, backend, inputs = _refusals()[case]
    for fn in (op, op.call_reference):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ExperimentalWarning)
            with pytest.raises(ValueError) as info:
                fn(*inputs, backend=backend)
        error = info.value
        assert isinstance(error, UnsupportedInputsError)
        assert isinstance(error, BackendSupportedError)
        assert str(error).startswith(
            f"{op.__name__} cannot run these inputs with backend {backend!r}: "
        )
        assert str(error.__cause__) in str(error)  # the checker's own reason


# ---- skip_check=True with backend="auto" ------------------------------------------------


def _in_a_fresh_thread(call: Callable[[], Any]) -> Any:
    result: list[Any] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            result.append(call())
        except BaseException as exc:  # noqa: BLE001 - re-raised in the test's thread
            errors.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    if errors:
        raise errors[0]
    return result[0]


@pytest.mark.parametrize("spelled", [{}, {"backend": "auto"}])
def test_skip_check_auto_runs_the_real_operators_in_a_fresh_thread(spelled):
    """Was an IndexError (rmsnorm) and "none of the backend='auto' candidates []" (mm,
    whose auto calls the autotuner takes)."""
    x, w = torch.randn(4, 8), torch.ones(8)
    a, b = torch.randn(4, 8), torch.randn(8, 3)
    y = _in_a_fresh_thread(lambda: flashinfer.rmsnorm(x, w, skip_check=True, **spelled))
    torch.testing.assert_close(y, flashinfer.rmsnorm(x, w, backend="torch"))
    c = _in_a_fresh_thread(lambda: flashinfer.mm(a, b, skip_check=True, **spelled))
    torch.testing.assert_close(c, a @ b)


def test_skip_check_auto_keeps_experimental_backends_out_with_the_gate_off():
    """An experimental backend that fits the inputs does not join the candidates of a
    ``skip_check=True`` call (split-K's own case is in tests/experimental/)."""

    @experimental_backend
    def trial(x, backend="auto"):
        return True

    @backend_requirement({"plain": lambda x, backend="auto": True, "trial": trial})
    def skip_check_gate_probe(x, backend="auto"):
        return backend

    def call() -> tuple[list[str], tuple[str, ...]]:
        with warnings.catch_warnings():
            warnings.simplefilter("error", ExperimentalWarning)
            skip_check_gate_probe(torch.ones(3), skip_check=True)
        op = skip_check_gate_probe
        return list(op.suitable_auto_backends), tuple(op.dropped_experimental_backends)

    suitable, dropped = _in_a_fresh_thread(call)
    assert suitable == ["plain"]
    assert dropped == ("trial",) == tuple(skip_check_gate_probe.experimental_backends)
