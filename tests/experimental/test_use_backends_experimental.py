"""``use_backends`` and the real experimental backend of ``mm`` (split-K).

Listing split-K is naming it: with the gate off, ``"auto"`` inside the block may pick it,
and it warns once, as an explicit selection does; unlisted, it stays out even with the gate
on.  ``explain`` and the log line say so.
"""

from __future__ import annotations

import logging
import re
import warnings

import pytest
import torch

from flashinfer import ExperimentalWarning, mm, use_backends
from flashinfer.dispatch.choice_log import forget_logged_choices
from flashinfer.gating.messages import listed_in_restriction

pytestmark = [pytest.mark.experimental]

GATE = "FLASHINFER_ALLOW_EXPERIMENTAL_AUTO_BACKENDS"


def _small_m_large_k():
    """A shape split-K supports (M <= 64, K >= 1024), as every other mm backend does."""
    gen = torch.Generator().manual_seed(0)
    return torch.randn(4, 1024, generator=gen), torch.randn(1024, 16, generator=gen)


def test_listing_split_k_opts_in_with_the_gate_off(monkeypatch, caplog):
    monkeypatch.delenv(GATE, raising=False)
    forget_logged_choices()
    a, b = _small_m_large_k()
    caplog.set_level(logging.INFO, logger="flashinfer.dispatch")
    with use_backends(mm=["splitk", "torch"]):
        explained = mm.explain(a, b)
        assert (explained.chosen, explained.source) == ("splitk", "restricted")
        listed = re.escape(listed_in_restriction(mm.api_key, "splitk", "use_backends"))
        with pytest.warns(ExperimentalWarning, match=listed) as caught:
            out = mm(a, b)
        assert len([w for w in caught if issubclass(w.category, ExperimentalWarning)]) == 1
        assert list(mm.suitable_auto_backends) == ["splitk", "torch"]
        assert list(mm.dropped_experimental_backends) == []
        with warnings.catch_warnings():
            warnings.simplefilter("error", ExperimentalWarning)
            mm(a, b)  # once per (API, backend)
    ref = a.double() @ b.double()
    assert ((out.double() - ref).norm() / ref.norm()).item() < 1e-5
    assert [r.getMessage() for r in caplog.records if r.name == "flashinfer.dispatch"] == [
        "flashinfer.mm: using backend 'splitk' (restricted by use_backends; candidates "
        "['splitk', 'torch'])"
    ]


@pytest.mark.parametrize("gate", [None, "1"])
def test_unlisted_split_k_stays_out(monkeypatch, gate):
    if gate is None:
        monkeypatch.delenv(GATE, raising=False)
    else:
        monkeypatch.setenv(GATE, gate)
    a, b = _small_m_large_k()
    with use_backends(mm=["triton", "torch"]):
        mm(a, b)
        assert list(mm.suitable_auto_backends) == ["triton", "torch"]
        assert mm.explain(a, b).verdict("splitk").stage == "restriction"
