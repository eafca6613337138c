"""Upstream FlashInfer's declaration shapes decorate and behave as upstream's decorator does.

Each test rebuilds one kind of declaration found in upstream's tree as a declaration of its
own (issue 42, item 1): D1 backend names such as ``"cute-dsl"``; D2 an API with no
defaulted ``backend``; K1 a named backend at a capability it lacks, with inputs the common
check refuses; K2 ``skip_check=True`` with ``"auto"``; K3 checkers and heuristics that take
the API's parameters by name (``**_kwargs``, underscore names, another order); K4 a
heuristic naming runners that are not backends; and ``flashinfer_api(trace=...)``.
Every behaviour is checked on both the generated path and the reference path.
"""

from __future__ import annotations

import os
import warnings
from typing import Any

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import flashinfer.dispatch.capability as capability
from flashinfer.api_logging import flashinfer_api
from flashinfer.backend_dispatch import Backend, use_backends
from flashinfer.backend_families import TORCH, backend_family
from flashinfer.utils import (
    BackendSupportedError,
    backend_requirement,
    experimental_backend,
    supported_compute_capability,
)

X = torch.ones(4)
PATHS = ["fast", "reference"]


def _call(op: Any, path: str) -> Any:
    return op if path == "fast" else op.call_reference


# ---- D1: backend names as upstream spells them -----------------------------------------


def _hyphenated_op(first: str, second: str) -> Any:
    @backend_family(TORCH)
    def check(a, backend="auto"):
        return True

    @backend_requirement(
        [
            Backend(first, check=check, run=lambda a: a + 1),
            Backend(second, check=check, run=lambda a: a + 2),
        ],
        heuristic_func=lambda candidates, a, backend="auto": list(reversed(candidates)),
    )
    def op(a: torch.Tensor, backend: str = "auto") -> torch.Tensor:
        if backend == "auto":
            backend = op.suitable_auto_backends[0]
        return op.implementations[backend](a)

    return op


NAMES = st.from_regex(r"[A-Za-z][A-Za-z0-9_-]{0,10}", fullmatch=True).filter(lambda n: n != "auto")


@settings(max_examples=15, deadline=None)
@given(names=st.lists(NAMES, min_size=2, max_size=2, unique=True))
def test_d1_backend_names_with_hyphens_decorate_and_run_on_every_route(names):
    """Upstream's names ("cute-dsl") are names: each backend runs by name, by "auto", under
    use_backends and through the torch operator; nothing generated needs an identifier."""
    first, second = names
    op = _hyphenated_op(first, second)
    for path in PATHS:
        assert torch.equal(_call(op, path)(X, backend=first), X + 1)
        assert torch.equal(_call(op, path)(X), X + 2)  # the heuristic puts `second` first
    with use_backends({op: [first]}):
        assert torch.equal(op(X), X + 1)
    operator = op.dispatcher.torch_op
    assert operator is not None
    assert torch.equal(operator.default(X, backend=first), X + 1)
    assert torch.equal(operator.default(X, backend=second), X + 2)


def test_d1_cute_dsl_compiles_by_name():
    op = _hyphenated_op("cute-dsl", "trtllm-gen")
    compiled = torch.compile(lambda a: op(a, backend="cute-dsl") * 2, backend="eager")
    assert torch.equal(compiled(X), (X + 1) * 2)


@pytest.mark.parametrize("name", ["a|b", "a,b", "-k", "_k", "k k", ""])
def test_d1_names_the_token_grammar_needs_stay_refused(name):
    with pytest.raises(ValueError, match="is not a backend name"):
        Backend(name, check=lambda a: True, run=lambda a: a)


# ---- D2: no defaulted backend ------------------------------------------------------------


def _no_backend_api() -> Any:
    def check(x, out):
        return x.shape == out.shape

    @backend_requirement({}, common_check=check)
    def op(x: torch.Tensor, out: torch.Tensor) -> None:
        out.copy_(x * 3)

    return op


def _kwonly_backend_api() -> Any:
    def check(x, backend):
        return True

    @backend_requirement(
        {"plain": check, "wide": check},
        heuristic_func=lambda candidates, x, backend: candidates,
    )
    def op(x: torch.Tensor, *, backend: str) -> torch.Tensor:
        return x * (2 if backend == "plain" else 5)

    return op


def _positional_backend_api() -> Any:
    def check(x, backend):
        return True

    @backend_requirement({"plain": check, "other": check})
    def op(x: torch.Tensor, backend: str) -> torch.Tensor:
        return x * (2 if backend == "plain" else 5)

    return op


@pytest.mark.parametrize("shape", ["no_backend", "kwonly_backend", "positional_backend"])
@pytest.mark.parametrize("path", PATHS)
def test_d2_an_api_without_a_defaulted_backend_decorates_and_has_its_operator(shape, path):
    if shape == "no_backend":
        op = _no_backend_api()
        out = torch.zeros(4)
        _call(op, path)(X, out)
        assert torch.equal(out, X * 3)
        out2 = torch.zeros(4)
        op.dispatcher.torch_op.default(X, out2)
        assert torch.equal(out2, X * 3)
        assert "backend" not in op.dispatcher.torch_schema.default
        return
    op = _kwonly_backend_api() if shape == "kwonly_backend" else _positional_backend_api()
    second = "wide" if shape == "kwonly_backend" else "other"
    assert torch.equal(_call(op, path)(X, backend="plain"), X * 2)
    assert torch.equal(_call(op, path)(X, backend=second), X * 5)
    with pytest.raises(TypeError, match="backend"):  # required, as the API declares it
        _call(op, path)(X)
    operator = op.dispatcher.torch_op
    assert torch.equal(operator.default(X, backend=second), X * 5)
    assert "str backend," in op.dispatcher.torch_schema.default  # no default
    with pytest.raises(RuntimeError, match="backend"):
        operator.default(X)


@pytest.mark.parametrize("default", ["plain", "auto", "other"])
def test_d2_the_operator_takes_the_apis_own_backend_default(default):
    """Upstream's APIs default to a backend of their own (``backend="cudnn"``): the
    operator called without one runs what the API runs without one."""

    def check(x, backend="auto"):
        return True

    @backend_requirement(
        {"plain": check, "other": check}, heuristic_func=lambda candidates, x, backend: ["other"]
    )
    def op(x: torch.Tensor, backend: str = default) -> torch.Tensor:
        return x * (2 if backend == "plain" else 5)

    assert f"str backend='{default}'" in op.dispatcher.torch_schema.default
    assert torch.equal(op.dispatcher.torch_op.default(X), op(X))


# ---- K1: capability before the common check ---------------------------------------------


@pytest.fixture
def at_capability(monkeypatch):
    """Fakes a CUDA process whose tensors are at the given capability."""

    def set_cc(cc: int) -> None:
        monkeypatch.setattr(capability.CUDA_STATE, "absent", False)
        monkeypatch.setattr(capability.CUDA_STATE, "find", lambda *values: cc)

    return set_cc


def _capability_op(common_refusal: str) -> Any:
    def common(x, backend="auto"):
        if common_refusal == "raise":
            raise ValueError("x must be bf16")
        return common_refusal == "accept"

    @supported_compute_capability([100])
    def sm100(x, backend="auto"):
        return True

    @supported_compute_capability([80, 90, 100])
    def anywhere(x, backend="auto"):
        return True

    @backend_requirement({"sm100_only": sm100, "anywhere": anywhere}, common_check=common)
    def op(x, backend="auto"):
        return backend

    return op


@pytest.mark.parametrize("common_refusal", ["raise", "false", "accept"])
@pytest.mark.parametrize("cc", [80, 90])
@pytest.mark.parametrize("path", PATHS)
def test_k1_a_named_backend_lacking_the_capability_says_so_first(
    at_capability, common_refusal, cc, path
):
    """Whatever the common check would say, a named backend the device cannot run is a
    BackendSupportedError about the backend and the capability (upstream's order)."""
    at_capability(cc)
    op = _capability_op(common_refusal)
    with pytest.raises(BackendSupportedError, match=f"'sm100_only' with capability {cc}") as info:
        _call(op, path)(X, backend="sm100_only")
    assert not isinstance(info.value, ValueError)  # not the inputs' fault
    # At a capability the backend has, the common check decides, as before.
    if common_refusal == "accept":
        assert _call(op, path)(X, backend="anywhere") == "anywhere"
    else:
        with pytest.raises(ValueError):
            _call(op, path)(X, backend="anywhere")


# ---- K2: skip_check=True with "auto" runs the common check ---------------------------------


def _fp32_refusing_op(how: str, calls: list[str]) -> Any:
    def common(x, backend="auto"):
        calls.append("common")
        if x.dtype == torch.float32:
            if how == "raise":
                raise ValueError("fp32 is not supported; pass bf16")
            return False
        return True

    def check(x, backend="auto"):
        return True

    @backend_requirement({"a": check, "b": check}, common_check=common)
    def op(x, backend="auto"):
        return backend, list(op.suitable_auto_backends) if backend == "auto" else None

    return op


@pytest.mark.parametrize("how", ["raise", "false"])
@pytest.mark.parametrize("spelled", [True, False])
@pytest.mark.parametrize("path", PATHS)
def test_k2_skip_check_auto_still_runs_the_common_check(how, spelled, path):
    calls: list[str] = []
    op = _fp32_refusing_op(how, calls)
    kwargs = {"backend": "auto"} if spelled else {}
    error = ValueError if how == "raise" else BackendSupportedError
    with pytest.raises(error):
        _call(op, path)(X, skip_check=True, **kwargs)
    assert set(calls) == {"common"}  # (the fast path re-runs it for the message)
    # Inputs it accepts: the same choice as a checked call.
    half = X.to(torch.bfloat16)
    assert _call(op, path)(half, skip_check=True, **kwargs) == _call(op, path)(half, **kwargs)
    # A named backend with skip_check=True still runs with no check at all, as upstream.
    calls.clear()
    assert _call(op, path)(X, backend="a", skip_check=True) == ("a", None)
    assert calls == []


# ---- K3: checkers and heuristics called by name ----------------------------------------


def _recording_op(seen: dict[str, Any]) -> Any:
    """Checkers and a heuristic declared as upstream's are: ``**_kwargs``, underscore
    names, another order than the API's, a subset."""

    def with_underscore_kwargs(a, b, **_kwargs):
        seen["kwargs"] = (a, b, dict(_kwargs))
        return True

    def with_underscore_default(b, a, _unused=None, backend="auto"):
        seen["underscore"] = (a, b, _unused, backend)
        return True

    def reordered(alpha, backend, b, a):
        seen["reordered"] = (a, b, alpha, backend)
        return True

    def heuristic(suitable, backend, alpha, **_kwargs):
        seen["heuristic"] = (list(suitable), backend, alpha, sorted(_kwargs))
        return list(suitable)

    @backend_requirement(
        {"k": with_underscore_kwargs, "u": with_underscore_default, "r": reordered},
        heuristic_func=heuristic,
    )
    def op(a, b, alpha=1.0, backend="auto"):
        return backend

    return op


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("backend", ["auto", "k", "u", "r"])
@pytest.mark.parametrize("alpha", [None, 0.5])
def test_k3_checkers_get_each_argument_by_its_name(path, backend, alpha):
    seen: dict[str, Any] = {}
    op = _recording_op(seen)
    kwargs = {} if alpha is None else {"alpha": alpha}
    want_alpha = 1.0 if alpha is None else alpha
    _call(op, path)("A", "B", backend=backend, **kwargs)
    if backend in ("auto", "k"):
        assert seen["kwargs"] == ("A", "B", {"alpha": want_alpha, "backend": backend})
    if backend in ("auto", "u"):
        assert seen["underscore"] == ("A", "B", None, backend)
    if backend in ("auto", "r"):
        assert seen["reordered"] == ("A", "B", want_alpha, backend)
    if backend == "auto":
        assert seen["heuristic"] == (["k", "u", "r"], "auto", want_alpha, ["a", "b"])


# ---- K4: a heuristic naming runners that are not backends --------------------------------

GATE = "FLASHINFER_ALLOW_EXPERIMENTAL_AUTO_BACKENDS"


def _runner_op() -> Any:
    def fits(x, backend="auto"):
        return True

    def refuses(x, backend="auto"):
        raise ValueError("not these inputs")

    @experimental_backend
    def experimental(x, backend="auto"):
        return True

    def heuristic(suitable, x, backend="auto"):
        # upstream's idiom: the body runs a runner the table does not list, and may try to
        # name backends that are not candidates (refused, or left out by the gate)
        return ["cutlass_sm10x", "refused", "exp", *suitable]

    @backend_requirement(
        {"cutlass": fits, "refused": refuses, "exp": experimental}, heuristic_func=heuristic
    )
    def op(x, backend="auto"):
        return list(op.suitable_auto_backends)

    return op


@pytest.fixture
def gate_off(monkeypatch):
    monkeypatch.delenv(GATE, raising=False)


@pytest.mark.parametrize("path", PATHS)
def test_k4_runner_names_a_heuristic_returns_stay_candidates(gate_off, path):
    op = _runner_op()
    assert _call(op, path)(X) == ["cutlass_sm10x", "cutlass"]
    assert _call(op, path)(X) == ["cutlass_sm10x", "cutlass"]  # again: a cached verdict
    assert os.environ.get(GATE) is None


# ---- flashinfer_api(trace=...) ---------------------------------------------------------


class _Template:
    """Stands in for upstream's trace template: what ``trace=`` is given."""

    def __init__(self, label: str, init: Any = None) -> None:
        self.label, self.init = label, init
        self.built_for: list[str] = []

    def build_fi_trace_fn(self, api: str) -> Any:
        self.built_for.append(api)

        def fi_trace(save_dir: Any = None, name: Any = None, **arguments: Any) -> dict:
            return {"template": self.label, "api": api, "arguments": sorted(arguments)}

        return fi_trace


@pytest.mark.parametrize("level", ["0", "3"])
def test_trace_template_gives_the_api_fi_trace_and_fi_init(monkeypatch, level):
    monkeypatch.setenv("FLASHINFER_LOGLEVEL", level)
    template = _Template("gemm", init=lambda **kw: "initialised")

    @flashinfer_api(trace=template)
    def traced_api(x, y=2):
        return x + y

    assert traced_api(1) == 3
    assert template.built_for == [f"{__name__}.{traced_api.__qualname__}"]
    assert traced_api.fi_trace(x=1, y=2)["arguments"] == ["x", "y"]
    assert traced_api.fi_init() == "initialised"


def test_trace_dispatch_callable_picks_a_template_per_call():
    small, large = _Template("small"), _Template("large")

    def pick(save_dir=None, name=None, **arguments):
        if arguments.get("n") is None:
            return None
        return small if arguments["n"] < 8 else large

    @flashinfer_api(trace=pick)
    def dispatched(n):
        return n

    assert dispatched(3) == 3
    assert dispatched.fi_trace(n=3)["template"] == "small"
    assert dispatched.fi_trace(n=9)["template"] == "large"
    assert dispatched.fi_trace(n=4)["template"] == "small"
    assert len(small.built_for) == 1  # built once per template
    assert dispatched.fi_trace() == {}


def test_trace_that_is_neither_template_nor_callable_is_refused():
    with pytest.raises(TypeError, match="trace= of .* must be a trace template"):
        flashinfer_api(trace=42)(lambda x: x)


def test_a_broken_template_warns_at_the_decorating_line_and_the_api_still_works():
    class Broken:
        def build_fi_trace_fn(self, api):
            raise KeyError("op_type")

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")

        @flashinfer_api(trace=Broken())
        def api(x):
            return x

    assert api(5) == 5
    assert not hasattr(api, "fi_trace")
    (warning,) = caught
    assert "cannot build fi_trace" in str(warning.message)
    assert warning.filename == __file__


@pytest.mark.parametrize("common_refusal", ["raise", "false"])
def test_k1_the_compiled_route_says_the_capability_first_too(at_capability, common_refusal):
    """Tracing runs the same checks in the same order (tracing.metadata_checks)."""
    at_capability(90)

    def common(x, backend="auto"):
        if common_refusal == "raise":
            raise ValueError("x must be bf16")
        return False

    @supported_compute_capability([100])
    def sm100(x, backend="auto"):
        return True

    @backend_requirement({"sm100_only": sm100}, common_check=common)
    def op(x: torch.Tensor, backend: str = "auto") -> torch.Tensor:
        return x * 2

    torch._dynamo.reset()
    compiled = torch.compile(lambda t: op(t, backend="sm100_only"), backend="aot_eager")
    with pytest.raises(Exception) as info:
        compiled(torch.ones(2))
    cause: BaseException | None = info.value
    while cause is not None and not isinstance(cause, BackendSupportedError):
        cause = cause.__cause__ or cause.__context__
    assert cause is not None, info.value
    # The capability refusal, not the common check's (at trace time the capability is
    # read from the fake tensors, which carry no faked CUDA device).
    assert "support backend 'sm100_only' with capability" in str(cause), cause
