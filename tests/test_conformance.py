"""One conformance test: every declared case of every op against every registered backend.

Cases are values declared by the ops (``flashinfer.testing.declare_cases``); backends are
read from each op's ``backend_checks`` at collection time, so a backend added later is
covered with no new test code.  A backend that does not support a case is skipped with its
own checker's reason.  Experimental backends and APIs run in their own lane, through the
same machinery: tests/experimental/test_conformance_experimental.py.
"""

from __future__ import annotations

import pytest
import torch

from flashinfer import testing
from flashinfer.backend_dispatch import backend_requirement, supported_compute_capability
from flashinfer.testing import (
    Case,
    ConformanceItem,
    allclose,
    conformance_devices,
    conformance_items,
    rel_frobenius,
    run_or_skip,
)

pytestmark = pytest.mark.usefixtures("isolated_op_registry")


@pytest.mark.parametrize("device", conformance_devices())
@pytest.mark.parametrize("item", conformance_items(experimental=False), ids=str)
def test_conformance(item: ConformanceItem, device: str) -> None:
    run_or_skip(item, device)


# ---- the machinery itself ----------------------------------------------------------------


def test_every_stable_backend_of_every_declared_op_is_covered():
    items = conformance_items(experimental=False)
    seen = {(str(i).split("-")[0], i.backend) for i in items}
    assert {("rmsnorm", "torch"), ("rmsnorm", "triton"), ("mm", "torch"), ("mm", "triton")} <= seen
    assert not any(i.experimental for i in items)
    assert all(i.experimental for i in conformance_items(experimental=True))
    assert len({str(i) for i in items}) == len(items)  # ids are unique


def _toy_op(backends):
    checks = {}
    for name in backends:
        checks[name] = supported_compute_capability([90], cpu=True)(lambda x: True)

    @backend_requirement(checks)
    def toy_double(x, *, backend="auto"):
        if backend == "auto":
            backend = toy_double.suitable_auto_backends[0]
        return x * 2 if backend != "broken" else x * 3

    return toy_double


def _toy_case():
    return Case(
        "f32_8",
        inputs=lambda gen: {"x": torch.randn(8, generator=gen)},
        reference=lambda x: x * 2,
        compare=allclose(),
    )


def test_a_backend_added_later_is_covered_and_checked(monkeypatch):
    monkeypatch.setattr(testing, "_declared", {})
    monkeypatch.setattr("flashinfer.load_all_apis", lambda: None)
    op = _toy_op(["ref", "fast", "broken"])
    testing.declare_cases(op, [_toy_case()])
    items = {i.backend: i for i in conformance_items()}
    assert set(items) == {"ref", "fast", "broken"}  # read from backend_checks
    assert items["ref"].run() is None and items["fast"].run() is None
    with pytest.raises(AssertionError, match="differ beyond"):
        items["broken"].run()


def test_an_unsupported_backend_reports_its_checkers_reason():
    from flashinfer import rmsnorm

    x = torch.ones(6, 4).t()  # last-dim stride 6
    reason = testing.support_reason(rmsnorm, "triton", {"input": x, "weight": torch.ones(6)})
    assert reason.startswith("triton: ") and "contiguous last dimension" in reason
    assert testing.support_reason(rmsnorm, "torch", {"input": x, "weight": torch.ones(6)}) is None


def test_case_inputs_are_seeded_and_fresh():
    case = testing.cases_for(__import__("flashinfer").mm)[0]
    first, second = case.make_inputs(), case.make_inputs()
    assert torch.equal(first["a"], second["a"]) and first["a"] is not second["a"]


def test_comparators():
    x = torch.ones(4, 4)
    rel_frobenius()(x + 1e-7, x)
    with pytest.raises(AssertionError, match="relative Frobenius error"):
        rel_frobenius()(x * 1.01, x)
    with pytest.raises(AssertionError, match="non-finite"):
        rel_frobenius()(x * float("nan"), x)
    allclose()(x.half() + 1e-3, x.half())
    with pytest.raises(AssertionError, match="dtype"):
        allclose()(x.half(), x)
    with pytest.raises(AssertionError, match="shape"):
        allclose()(x[:2], x)
    with pytest.raises(AssertionError, match=r"result\[1\]"):
        allclose()((x, x + 1), (x, x))


def test_duplicate_case_names_are_refused(monkeypatch):
    monkeypatch.setattr(testing, "_declared", {})
    with pytest.raises(ValueError, match="duplicate case names"):
        testing.declare_cases(_toy_op(["ref"]), [_toy_case(), _toy_case()])
