"""The overlap rule through the real ops: every declared op, every written argument, every
stable backend and ``backend="auto"``, every declared case (``flashinfer.testing.overlap_items``).

Each attack (a zero-stride written argument, a written argument shifted into another one,
the same tensor passed twice, read-only arguments aliasing each other) must either raise a
``ValueError`` naming the arguments before anything is written, also with
``skip_check=True``, or, where the op allows the aliasing (``out=input``, inputs that are
only read), match the reference.  Experimental backends and APIs: the twin in
tests/experimental/test_overlap_conformance_experimental.py.
"""

from __future__ import annotations

import inspect

import pytest

import flashinfer
from flashinfer.testing import (
    OverlapItem,
    declared_ops,
    overlap_items,
    overlap_rule_for,
    run_overlap_items_on,
)


@pytest.mark.parametrize("item", overlap_items(experimental=False), ids=str)
def test_overlap(item: OverlapItem) -> None:
    reason = item.run("cpu")
    if reason is not None:  # the backend does not support this case: its own reason
        pytest.skip(reason)


@pytest.mark.gpu
def test_overlap_on_cuda() -> None:
    """Every attack again on CUDA tensors, in one test (so a CPU-only run skips one test,
    not one per attack)."""
    failures = run_overlap_items_on(overlap_items(experimental=False), "cuda")
    assert not failures, "\n".join(failures)


def test_every_declared_op_declares_what_it_writes():
    """An op cannot leave an ``out`` (or anything else) out of the attacks unnoticed."""
    for op in declared_ops():
        rule = overlap_rule_for(op)
        assert rule is not None, f"{op.__name__} declared cases but no overlap rule"
        params = inspect.signature(op).parameters
        assert set(rule.written + rule.read) <= set(params)
        assert "out" not in params or "out" in rule.written
        tensors = [n for n, p in params.items() if "Tensor" in str(p.annotation)]
        assert set(tensors) <= set(rule.written + rule.read), f"{op.__name__}: {tensors}"


def test_every_stable_op_and_backend_is_attacked():
    """The stable backends are read from each op (its experimental ones, and experimental
    APIs, are attacked by the experimental lane's twin)."""
    items = overlap_items(experimental=False)
    seen = {(str(i).split("-")[0], i.backend, str(i.attack)) for i in items}
    for op, attack in [
        (flashinfer.rmsnorm, "out-self"),
        (flashinfer.rmsnorm, "out-shifted-into-input"),
        (flashinfer.rmsnorm, "weight-shifted-into-out"),
        (flashinfer.rmsnorm, "out-same-input"),
        (flashinfer.rmsnorm, "input-read_alias-weight"),
        (flashinfer.mm, "out-self"),
        (flashinfer.mm, "b-shifted-into-out"),
        (flashinfer.mm, "a-read_alias-b"),
    ]:
        assert op.stable_backends
        for backend in (*op.stable_backends, "auto"):
            assert (op.api_name, backend, attack) in seen, (op.api_name, backend, attack)
    experimental = {b for op in declared_ops() for b in getattr(op, "experimental_backends", ())}
    assert not {i.backend for i in items} & experimental
