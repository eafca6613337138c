"""The overlap rule on experimental code: the split-K backend of ``mm`` and the experimental
API ``fused_add_rmsnorm``, through the same attacks as tests/test_overlap_conformance.py
(``flashinfer.testing.overlap_items(experimental=True)``)."""

from __future__ import annotations

import pytest

from flashinfer.testing import OverlapItem, overlap_items, run_overlap_items_on

pytestmark = pytest.mark.experimental


@pytest.mark.parametrize("item", overlap_items(experimental=True), ids=str)
def test_overlap_experimental(item: OverlapItem) -> None:
    reason = item.run("cpu")
    if reason is not None:  # the backend does not support this case: its own reason
        pytest.skip(reason)


@pytest.mark.gpu
def test_overlap_experimental_on_cuda() -> None:
    """Every attack again on CUDA tensors, in one test (so a CPU-only run skips one test,
    not one per attack)."""
    failures = run_overlap_items_on(overlap_items(experimental=True), "cuda")
    assert not failures, "\n".join(failures)


def test_the_experimental_lane_attacks_split_k_and_fused_add_rmsnorm():
    items = overlap_items(experimental=True)
    names = {str(i).split("-")[0] + "-" + (i.backend or "api") for i in items}
    assert names == {"mm-splitk", "fused_add_rmsnorm-api"}
    fused = {str(i.attack) for i in items if i.backend is None}
    assert {
        "input-self",
        "residual-self",
        "residual-shifted-into-input",
        "input-shifted-into-residual",
        "input-same-residual",
        "weight-shifted-into-input",
        "input-shifted-into-weight",
        "weight-shifted-into-residual",
    } <= fused
