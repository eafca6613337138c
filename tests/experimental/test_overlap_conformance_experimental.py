"""The overlap rule on experimental code: the split-K backend of ``mm`` and the experimental
API ``fused_add_rmsnorm``, through the same attacks as tests/test_overlap_conformance.py
(``flashinfer.testing.overlap_items(experimental=True)``)."""

from __future__ import annotations

import pytest

from flashinfer.testing import OverlapItem, conformance_devices, overlap_items

pytestmark = pytest.mark.experimental


@pytest.mark.parametrize("device", conformance_devices())
@pytest.mark.parametrize("item", overlap_items(experimental=True), ids=str)
def test_overlap_experimental(item: OverlapItem, device: str) -> None:
    reason = item.run(device)
    if reason is not None:
        pytest.skip(reason)


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
