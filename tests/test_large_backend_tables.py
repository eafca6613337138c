"""Backend tables of any size (issue 21, item 15).

A table of 3,000 backends raised ``RecursionError`` at decoration: the generated code had an
``elif`` branch per backend, which nests, and the compiler refuses nesting a few thousand
deep.  Past ``emitter.MAX_BRANCHES`` backends the generated code goes through small shared
functions found by name instead (flat source), so a table of any size decorates and
dispatches.  Both forms must agree with the reference path: at the boundary (a table of
``MAX_BRANCHES`` and of one more), for 3,000 backends, and for the random ops and calls of
``test_dispatch_fast_path`` built with every table in the large form.
"""

from __future__ import annotations

import warnings
from typing import Any

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_dispatch_fast_path import SIGNATURES, assert_agree, calls, draw_op, fake_cuda, gate

import flashinfer
import flashinfer.dispatch.emitter as emitter
from flashinfer.backend_dispatch import (
    BackendSupportedError,
    backend_requirement,
    experimental_backend,
    supported_compute_capability,
    use_backends,
)


def _table(n: int, fits: frozenset[int], experimental: frozenset[int] = frozenset()) -> dict:
    """``n`` backends ``b0``...: ``b<i>`` accepts the call when ``i`` is in ``fits``; every
    third declares capabilities (CPU included); those in ``experimental`` are marked."""

    def make(i: int) -> Any:
        def check(x: torch.Tensor, backend: str = "auto") -> bool:
            return i in fits

        check.__qualname__ = f"check_b{i}"
        if i % 3 == 0:
            check = supported_compute_capability([80, 90], cpu=True)(check)
        if i in experimental:
            check = experimental_backend(check)
        return check

    return {f"b{i}": make(i) for i in range(n)}


def _op(n: int, fits: frozenset[int], experimental: frozenset[int] = frozenset()) -> Any:
    def big_api(x: torch.Tensor, backend: str = "auto") -> Any:
        return (backend, list(op.suitable_auto_backends))

    op = backend_requirement(_table(n, fits, experimental))(big_api)
    return op


def _outcome(fn: Any, *args: Any, **kwargs: Any) -> tuple:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", flashinfer.ExperimentalWarning)
        try:
            return ("ok", fn(*args, **kwargs))
        except Exception as exc:  # noqa: BLE001 - the error itself is compared
            return ("error", type(exc), str(exc))


def _agree(op: Any, *args: Any, **kwargs: Any) -> tuple:
    """The call's outcome, the same through the generated path (uncached, stored, cached)
    and the reference path."""
    outcomes = [_outcome(op, *args, **kwargs) for _ in range(3)]
    outcomes.append(_outcome(op.call_reference, *args, **kwargs))
    assert all(o == outcomes[0] for o in outcomes), outcomes
    return outcomes[0]


X = torch.zeros(2)


def test_three_thousand_backends_decorate_and_dispatch():
    n = 3000
    fits = frozenset({7, 1500, n - 1})
    op = _op(n, fits, experimental=frozenset({1500}))
    source = op.__generated_source__
    assert source.count("\n") < 200  # flat: nothing grows with the table
    assert _agree(op, X) == ("ok", ("auto", ["b7", f"b{n - 1}"]))  # b1500: gated off
    assert _agree(op, X, backend=f"b{n - 1}") == ("ok", (f"b{n - 1}", ["b7", f"b{n - 1}"]))
    assert _agree(op, X, backend="b1500")[0] == "ok"  # named: an explicit opt-in
    kind, error, message = _agree(op, X, backend="b8")
    assert (kind, error) == ("error", flashinfer.UnsupportedInputsError)
    assert "'b8'" in message
    kind, error, message = _agree(op, X, backend="nope")
    assert (kind, error) == ("error", BackendSupportedError) and "'nope'" in message
    with use_backends({op: [f"b{n - 1}", "b1500", "b8"]}):
        assert _agree(op, X) == ("ok", ("auto", [f"b{n - 1}", "b1500"]))


@pytest.mark.parametrize("extra", [0, 1], ids=["MAX_BRANCHES", "MAX_BRANCHES+1"])
def test_the_boundary_switches_form_and_both_agree(extra):
    n = emitter.MAX_BRANCHES + extra
    op = _op(n, frozenset(range(0, n, 5)), experimental=frozenset({n - 1}))
    source = op.__generated_source__
    assert (f"backend == 'b{n - 1}'" in source) == (not extra)
    for backend in ("auto", "b0", "b1", f"b{n - 1}", "zz", 3):
        _agree(op, X, backend=backend)
    with use_backends({op: [f"b{n - 1}", "b5", "b1"]}):
        assert _agree(op, X) == ("ok", ("auto", ["b5"] if (n - 1) % 5 else [f"b{n - 1}", "b5"]))


@settings(max_examples=50, deadline=None)
@given(
    n=st.integers(1, 80),
    fits=st.sets(st.integers(0, 79), max_size=6),
    experimental=st.sets(st.integers(0, 79), max_size=3),
    listed=st.lists(st.integers(0, 79), max_size=4, unique=True),
    backend=st.one_of(st.just("auto"), st.integers(0, 85).map(lambda i: f"b{i}")),
    cc=st.sampled_from([None, 80, 75]),
)
def test_tables_of_any_size_agree_with_the_reference(n, fits, experimental, listed, backend, cc):
    op = _op(n, frozenset(fits), frozenset(i for i in experimental if i < n))
    x = torch.zeros(2)
    if cc is not None:
        x.fake_cc = cc
    names = [f"b{i}" for i in listed if i < n]
    with fake_cuda():
        if names:
            with use_backends({op: names}):
                _agree(op, x, backend=backend)
        else:
            _agree(op, x, backend=backend)


@settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(data=st.data(), signature_key=st.sampled_from(sorted(SIGNATURES)))
def test_the_large_form_agrees_with_the_reference_for_every_signature(data, signature_key):
    """test_dispatch_fast_path's random ops and calls, every table in the large form."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(emitter, "MAX_BRANCHES", 0)
        op, rec, backends = draw_op(data, signature_key)
    assert "backend == " not in op.__generated_source__  # named calls: checked by _named
    args, kwargs, gate_value = data.draw(calls(signature_key, [b[0] for b in backends]), "call")
    with gate(gate_value), fake_cuda():
        assert_agree(op, rec, *args, **kwargs)
