"""Conformance of experimental backends and experimental APIs: the same machinery as
tests/test_conformance.py (declared cases, backends read from ``backend_checks``), in the
experimental lane (``pytest tests/experimental``)."""

from __future__ import annotations

import pytest

from flashinfer.testing import (
    ConformanceItem,
    conformance_devices,
    conformance_items,
    run_or_skip,
)

pytestmark = pytest.mark.experimental


@pytest.mark.parametrize("device", conformance_devices())
@pytest.mark.parametrize("item", conformance_items(experimental=True), ids=str)
def test_conformance_experimental(item: ConformanceItem, device: str) -> None:
    run_or_skip(item, device)


def test_the_experimental_lane_covers_split_k_and_fused_add_rmsnorm():
    names = {str(i).rsplit("-", 1)[0] for i in conformance_items(experimental=True)}
    assert {"mm-splitk", "fused_add_rmsnorm-api"} <= names
