"""backend_requirement: the behaviour table of DESIGN.md section 1, row by row, on CPU."""

from __future__ import annotations

import re
import threading
import types
import warnings

import pytest
import torch

import flashinfer.dispatch.capability as dispatch
from flashinfer.api_logging import ExperimentalWarning
from flashinfer.gating.messages import (
    automatic_selection,
    every_candidate_rejected,
    explicit_selection,
    only_experimental_fit,
)
from flashinfer.utils import (
    BackendSupportedError,
    backend_requirement,
    experimental_backend,
    supported_compute_capability,
)

GATE = "FLASHINFER_ALLOW_EXPERIMENTAL_AUTO_BACKENDS"


def make_op(exp_fits=lambda x: True, stable_fits=lambda x: True, heuristic=None, calls=None):
    """An op with a stable CPU backend, a GPU-only backend and an experimental backend."""
    calls = calls if calls is not None else []

    def common(x, backend="auto"):
        calls.append("common")
        if x.dim() == 0:
            raise ValueError("x must have at least one dimension")
        return True

    @supported_compute_capability([80, 90], cpu=True)
    def check_stable(x, backend="auto"):
        calls.append("stable")
        return stable_fits(x)

    @supported_compute_capability([90])
    def check_gpu(x, backend="auto"):
        calls.append("gpu")
        return True

    @experimental_backend
    @supported_compute_capability([90], cpu=True)
    def check_exp(x, backend="auto"):
        calls.append("exp")
        return exp_fits(x)

    @backend_requirement(
        {"stable": check_stable, "gpu": check_gpu, "exp": check_exp},
        common_check=common,
        heuristic_func=heuristic,
    )
    def op(x, backend="auto"):
        """The op."""
        chosen = backend if backend != "auto" else op.suitable_auto_backends[0]
        return chosen, list(op.suitable_auto_backends) if backend == "auto" else None

    return op


def _exp_warnings(record):
    return [str(w.message) for w in record if issubclass(w.category, ExperimentalWarning)]


X = torch.zeros(4, 4)


# ---- row: op(x) / backend="auto" ------------------------------------------------------


def test_auto_with_gate_off_uses_stable_and_lists_dropped():
    op = make_op()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no experimental warning in this row
        assert op(X) == ("stable", ["stable"])
    assert op.dropped_experimental_backends == ("exp",)
    assert op.experimental_backends == frozenset({"exp"})


@pytest.mark.parametrize("value", ["", "0"])
def test_auto_with_gate_explicitly_off(monkeypatch, value):
    monkeypatch.setenv(GATE, value)
    op = make_op()
    assert op(X) == ("stable", ["stable"])
    assert list(op.dropped_experimental_backends) == ["exp"]


def test_auto_with_gate_on_offers_experimental_and_warns_when_picked(monkeypatch):
    monkeypatch.setenv(GATE, "1")
    op = make_op(heuristic=lambda cands, x, backend="auto": sorted(cands))
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        assert op(X) == ("exp", ["exp", "stable"])
        op(X)
    assert _exp_warnings(record) == [automatic_selection(op.api_key, "exp")]
    assert record[0].filename == __file__
    assert op.dropped_experimental_backends == ()


def test_auto_with_gate_on_does_not_warn_when_stable_is_picked(monkeypatch):
    monkeypatch.setenv(GATE, "1")
    op = make_op()  # declaration order: stable first
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert op(X) == ("stable", ["stable", "exp"])


# ---- row: explicit experimental backend -----------------------------------------------


@pytest.mark.parametrize("gate", [None, "1"])
def test_explicit_experimental_runs_and_warns_once(monkeypatch, gate):
    if gate:
        monkeypatch.setenv(GATE, gate)
    op = make_op()
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        assert op(X, backend="exp")[0] == "exp"
        assert op(X, backend="exp")[0] == "exp"
        line = __import__("inspect").currentframe().f_lineno - 2
    assert _exp_warnings(record) == [explicit_selection(op.api_key, "exp")]
    assert (record[0].filename, record[0].lineno) == (__file__, line)


def test_explicit_stable_backend_does_not_warn():
    op = make_op()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert op(X, backend="stable")[0] == "stable"


# ---- row: only experimental backends fit ----------------------------------------------


def test_only_experimental_fits_gate_off_names_variable_and_backend():
    op = make_op(stable_fits=lambda x: False)
    with pytest.raises(BackendSupportedError) as info:
        op(X)
    message = str(info.value)
    assert message.startswith(only_experimental_fit("op", ["exp"], {}))  # then each reason
    assert GATE in message and "backend='exp'" in message
    assert op.dropped_experimental_backends == ("exp",)


def test_only_experimental_fits_gate_on_runs_it(monkeypatch):
    monkeypatch.setenv(GATE, "1")
    op = make_op(stable_fits=lambda x: False)
    with pytest.warns(ExperimentalWarning, match=re.escape(automatic_selection(op.api_key, "exp"))):
        assert op(X) == ("exp", ["exp"])


# ---- row: nothing fits for another reason ---------------------------------------------


def test_nothing_fits_lists_every_candidate_and_reason_without_the_variable():
    def stable_fits(x):
        raise ValueError("x must be contiguous")

    op = make_op(stable_fits=stable_fits, exp_fits=lambda x: False)
    with pytest.raises(BackendSupportedError) as info:
        op(X)
    message = str(info.value)
    assert message.startswith(every_candidate_rejected("op", {}))  # then each reason
    assert "stable: support check rejected the inputs: x must be contiguous" in message
    assert "gpu: needs CUDA tensors" in message
    assert "exp: support check returned False" in message
    assert GATE not in message
    assert op.dropped_experimental_backends == ()


def test_heuristic_may_drop_but_never_add_candidates():
    op = make_op(heuristic=lambda cands, x, backend="auto": ["gpu", "exp"])
    with pytest.raises(BackendSupportedError, match="left out by the heuristic"):
        op(X)


# ---- upstream's errors and contract ---------------------------------------------------


def test_unknown_backend():
    op = make_op()
    with pytest.raises(BackendSupportedError, match="op does not support backend 'nope'"):
        op(X, backend="nope")


def test_explicit_backend_capability_rule_on_cpu_tensors():
    op = make_op()
    with pytest.raises(BackendSupportedError) as info:
        op(X, backend="gpu")
    assert "does not support backend 'gpu'" in str(info.value)
    assert "no CUDA tensor" in str(info.value)


def test_problem_size_errors():
    op = make_op(stable_fits=lambda x: False)
    with pytest.raises(ValueError, match="Problem size is not supported for op"):
        op(X, backend="stable")
    with pytest.raises(ValueError, match="at least one dimension"):
        op(torch.tensor(1.0), backend="stable")


def test_dropped_is_cleared_on_every_call_even_when_common_check_fails():
    op = make_op()
    op(X)
    assert op.dropped_experimental_backends == ("exp",)
    with pytest.raises(ValueError):
        op(torch.tensor(1.0))
    assert op.dropped_experimental_backends == ()
    op(X)
    op(X, backend="stable")
    assert op.dropped_experimental_backends == ()


def test_skip_check_bypasses_every_check():
    calls = []
    op = make_op(stable_fits=lambda x: False, calls=calls)
    assert op(X, backend="stable", skip_check=True)[0] == "stable"
    assert calls == []


def test_checkers_run_on_every_checked_call():
    calls = []
    op = make_op(calls=calls)
    op(X, backend="stable")
    op(X, backend="stable")
    assert calls == ["common", "stable"] * 2
    calls.clear()
    op(X)
    assert calls == ["common", "stable", "exp"]  # gpu is ruled out by capability first


@pytest.mark.parametrize("kind", ["module", "class", "object"])
def test_only_a_function_or_method_can_be_decorated(kind):
    """A module, a class or a plain object is a TypeError saying what was given, before
    anything of it is read (CI's selection relies on it: the plan reads the decorated
    function's ``__doc__``, never a module's)."""

    class Layer:
        """A class."""

        def __init__(self, x, backend="auto"):
            self.x = x

    target = {"module": types.ModuleType("m", "A module."), "class": Layer, "object": 3}[kind]
    word = {"module": "a module", "class": "a class", "object": "an object of type int"}[kind]
    with pytest.raises(TypeError, match=f"decorates a function or method, not {word}"):
        backend_requirement({"a": lambda x, backend="auto": True})(target)


def test_query_api():
    op = make_op()
    assert op.has_backend_choices()
    assert op.has_backend("exp") and not op.has_backend("nope")
    assert op.is_backend_supported("stable") and not op.is_backend_supported("nope")
    assert op.is_backend_supported("gpu", 90) and not op.is_backend_supported("gpu", 80)
    assert op.is_compute_capability_supported(80)
    assert not op.is_compute_capability_supported(70)
    assert op.is_experimental_backend("exp") and not op.is_experimental_backend("stable")
    assert op.__name__ == "op" and op.__doc__ == "The op."


def test_no_backend_choices_uses_common_check_capability():
    @supported_compute_capability([90])
    def common(x):
        return True

    @backend_requirement({}, common_check=common)
    def gpu_only(x):
        return x

    assert not gpu_only.has_backend_choices()
    assert gpu_only.is_compute_capability_supported(90)
    with pytest.raises(BackendSupportedError, match="does not support compute capability"):
        gpu_only(X)


def test_calls_with_no_tensors_skip_the_capability_rule_for_undeclared_checkers():
    def check(n, backend="auto"):
        return n > 0

    @backend_requirement({"py": check})
    def sizes(n, backend="auto"):
        return n * 2

    assert sizes(3) == 6
    with pytest.raises(BackendSupportedError, match="py: support check returned False"):
        sizes(0)


def test_capability_from_first_cuda_tensor(monkeypatch):
    """Fakes a CUDA process: the capability found decides which backends are viable."""
    seen = []

    def fake_find(*values):
        seen.append(values)
        return 90

    monkeypatch.setattr(dispatch.CUDA_STATE, "absent", False)
    monkeypatch.setattr(dispatch.CUDA_STATE, "find", fake_find)
    op = make_op(heuristic=lambda cands, x, backend="auto": sorted(cands))
    assert op(X) == ("gpu", ["gpu", "stable"])
    assert op(X, backend="gpu")[0] == "gpu"
    assert seen and seen[0][0] is X

    monkeypatch.setattr(dispatch.CUDA_STATE, "find", lambda *v: 75)
    with pytest.raises(BackendSupportedError, match="needs compute capability in \\[80, 90\\]"):
        op(X, backend="stable")


def test_suitable_auto_backends_is_per_thread():
    """Two threads, different inputs, each body sees its own candidate list."""
    barrier = threading.Barrier(2)

    @supported_compute_capability([90], cpu=True)
    def small(x, backend="auto"):
        return x.shape[0] < 8

    @supported_compute_capability([90], cpu=True)
    def any_size(x, backend="auto"):
        return True

    @backend_requirement({"small": small, "any": any_size})
    def op(x, backend="auto"):
        barrier.wait()  # both threads are inside the body at once
        return list(op.suitable_auto_backends)

    results = {}

    def run(name, x):
        results[name] = [op(x) for _ in range(20)]

    threads = [
        threading.Thread(target=run, args=("small", torch.zeros(4))),
        threading.Thread(target=run, args=("large", torch.zeros(16))),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results["small"] == [["small", "any"]] * 20
    assert results["large"] == [["any"]] * 20


def test_experimental_warning_once_per_pair_under_threads():
    op = make_op()
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        threads = [
            threading.Thread(target=lambda: [op(X, backend="exp") for _ in range(30)])
            for _ in range(8)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert len(_exp_warnings(record)) == 1


# ---- decoration-time rules ------------------------------------------------------------


def _checker_in(module: str, marked: bool):
    def check(x, backend="auto"):
        return True

    check.__module__ = module
    return experimental_backend(check) if marked else check


def test_unmarked_checker_under_experimental_is_rejected_at_decoration():
    check = _checker_in("flashinfer.experimental.fancy.support", marked=False)
    with pytest.raises(ValueError) as info:

        @backend_requirement({"fancy": check})
        def my_api(x, backend="auto"):
            return x

    message = str(info.value)
    for part in ("flashinfer.experimental.fancy.support", "my_api", "fancy"):
        assert part in message
    assert "not marked @experimental_backend" in message


def test_marked_checker_under_experimental_is_accepted():
    check = _checker_in("flashinfer.experimental.fancy.support", marked=True)

    @backend_requirement({"fancy": check})
    def my_api(x, backend="auto"):
        return x

    assert my_api.experimental_backends == frozenset({"fancy"})


def test_unmarked_checker_elsewhere_is_stable():
    check = _checker_in("flashinfer.experimentally_named", marked=False)

    @backend_requirement({"b": check})
    def my_api(x, backend="auto"):
        return x

    assert my_api.experimental_backends == frozenset()


def test_experimental_backend_composes_with_capability_in_either_order():
    @experimental_backend
    @supported_compute_capability([90])
    def a(x):
        return True

    @supported_compute_capability([90])
    @experimental_backend(owner="@bob", tracking_issue=7, graduate_by="2027-01-31")
    def b(x):
        return True

    for chk in (a, b):
        assert chk.is_experimental_backend is True
        assert chk.is_compute_capability_supported(90)
        assert not chk.is_compute_capability_supported(80)
    assert b.experimental_info.owner == "@bob"


@pytest.mark.parametrize("bad", [90, "90", [80, "90"], [True], [8.0]])
def test_supported_compute_capability_type_errors(bad):
    with pytest.raises(TypeError):
        supported_compute_capability(bad)


def test_supported_compute_capability_contract():
    @supported_compute_capability([80, 86], cpu=True)
    def chk(x):
        return True

    assert chk._supported_ccs == frozenset({80, 86})
    assert chk._supports_cpu is True
    assert chk.is_compute_capability_supported(86)
    assert not chk.is_compute_capability_supported(90)


def test_api_without_backend_parameter_is_rejected():
    with pytest.raises(TypeError, match="no 'backend' parameter"):

        @backend_requirement({"a": lambda x: True})
        def no_backend(x):
            return x


def test_op_works_as_a_method():
    @supported_compute_capability([90], cpu=True)
    def chk(self, x, backend="auto"):
        return True

    class Model:
        @backend_requirement({"a": chk})
        def forward(self, x, backend="auto"):
            return (self, x, backend)

    m = Model()
    assert m.forward(1) == (m, 1, "auto")
    assert isinstance(Model.__dict__["forward"], types.FunctionType)
