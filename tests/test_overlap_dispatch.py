"""The dispatcher applies an API's declared overlap rule (``backend_requirement(...,
overlap=RULE)``) itself: after the common check, before any backend's checker or body, on
every path (a named backend, ``"auto"``, a cached ``"auto"`` verdict, a restriction,
``skip_check=True``, the reference path, the large-table path).  Backends never call it.

The real ops' attacks on every backend are in tests/test_overlap_conformance.py; here a
fake op records what ran, so a path that skips the rule, or checks it too late, fails."""

from __future__ import annotations

import pytest
import torch

import flashinfer
from flashinfer.aliasing import OverlapRule
from flashinfer.backend_dispatch import Backend, backend_requirement, use_backends
from flashinfer.dispatch.emitter import MAX_BRANCHES

RULE = OverlapRule("fake_overlap_op", ("out",), ("x",))


def make_op(n_backends: int = 2):
    ran: list[str] = []

    def common(x, *, out=None, backend="auto"):
        ran.append("common")
        if out is not None and not isinstance(out, torch.Tensor):
            raise ValueError("fake_overlap_op: out must be a tensor")
        return True

    def backend(name):
        def check(x, *, out=None, backend="auto"):
            ran.append(f"check {name}")
            return True

        def run(x, out):
            ran.append(f"run {name}")
            return out.copy_(x) if out is not None else x.clone()

        return Backend(name, check=check, run=run)

    @backend_requirement(
        [backend(f"b{i}") for i in range(n_backends)], common_check=common, overlap=RULE
    )
    def fake_overlap_op(x, *, out=None, backend="auto", skip_check=False):
        ran.append("body")
        name = fake_overlap_op.suitable_auto_backends[0] if backend == "auto" else backend
        return fake_overlap_op.implementations[name](x, out)

    return fake_overlap_op, ran


CALLS = {
    "named": {"backend": "b1"},
    "auto": {},
    "named, skip_check": {"backend": "b1", "skip_check": True},
    "auto, skip_check": {"skip_check": True},
}


@pytest.mark.parametrize("n_backends", [2, MAX_BRANCHES + 1], ids=["small", "large table"])
@pytest.mark.parametrize("how", CALLS)
def test_an_overlapping_out_is_refused_before_any_checker_or_body(how, n_backends):
    op, ran = make_op(n_backends)
    x = torch.zeros(8)
    for _ in range(3):  # learn the call's pattern, then cache its "auto" verdict
        op(torch.ones(4), out=torch.empty(4), **CALLS[how])
    if "backend" not in CALLS[how]:
        assert len(op.verdict_cache), "the overlapping calls below are cache hits"
    for attempt in range(2):
        ran.clear()
        with pytest.raises(ValueError, match="fake_overlap_op: out overlaps x"):
            op(x[:4], out=x[2:6], **CALLS[how])
        assert not any(r.startswith(("check", "run", "body")) for r in ran), (attempt, ran)
        ran.clear()
        with pytest.raises(ValueError, match="fake_overlap_op: out overlaps itself"):
            op(x[:4], out=torch.zeros(1).expand(4), **CALLS[how])
        assert not any(r.startswith(("check", "run", "body")) for r in ran), (attempt, ran)
    assert not x.any()
    # Disjoint: every path still runs, and writes out.
    out = torch.empty(4)
    assert op(torch.ones(4), out=out, **CALLS[how]) is out and out.eq(1).all()


@pytest.mark.parametrize("how", CALLS)
def test_the_reference_path_refuses_alike(how):
    op, ran = make_op()
    x = torch.zeros(8)
    with pytest.raises(ValueError, match="fake_overlap_op: out overlaps x"):
        op.call_reference(x[:4], out=x[2:6], **CALLS[how])
    assert not any(r.startswith(("check", "run", "body")) for r in ran), ran


def test_a_restricted_call_refuses_alike():
    op, ran = make_op()
    x = torch.zeros(8)
    with use_backends({op: ["b1"]}), pytest.raises(ValueError, match="out overlaps x"):
        op(x[:4], out=x[2:6])
    assert not any(r.startswith(("check", "run", "body")) for r in ran), ran


def test_the_common_check_speaks_first():
    """A malformed ``out`` is the common check's to report (the rule needs a tensor)."""
    op, _ = make_op()
    with pytest.raises(ValueError, match="out must be a tensor"):
        op(torch.zeros(4), out=[1, 2, 3, 4])


def test_an_overlap_rule_naming_no_parameter_is_refused_at_decoration():
    with pytest.raises(ValueError, match=r"overlap rule names \['output'\]"):

        @backend_requirement(
            [Backend("b", check=lambda x: True, run=lambda x, out: x)],
            overlap=OverlapRule("typo", ("output",), ("x",)),
        )
        def typo(x, *, out=None, backend="auto"):
            return x


@pytest.mark.parametrize("op", [flashinfer.mm, flashinfer.rmsnorm], ids=lambda op: op.api_name)
def test_no_backend_of_the_real_ops_runs_on_an_overlapping_out(op, monkeypatch):
    """The shipped ops declare their rule and never check it themselves: with every
    implementation replaced by a spy, an overlapping ``out`` still never reaches one."""
    called = []
    for name in list(op.implementations):
        monkeypatch.setitem(op.implementations, name, lambda *a, _n=name, **k: called.append(_n))
    buf = torch.zeros(5, 4)
    args = (buf[:4], torch.ones(4, 4)) if op is flashinfer.mm else (buf[:4], torch.ones(4))
    for backend in (*op.stable_backends, "auto"):
        for skip_check in (False, True):
            with pytest.raises(ValueError, match="out overlaps"):
                op(*args, out=buf[1:], backend=backend, skip_check=skip_check)
    assert called == []
    assert not buf.any()
