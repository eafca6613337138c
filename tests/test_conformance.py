"""One conformance test: every declared case of every op against every registered backend.

Cases are values declared by the ops (``flashinfer.testing.declare_cases``); backends are
read from each op's ``backend_checks`` at collection time, so a backend added later is
covered with no new test code.  A backend that does not support a case is skipped with its
own checker's reason.  Experimental backends and APIs run in their own lane, through the
same machinery: tests/experimental/test_conformance_experimental.py.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable

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


# ---- what the declared cases cover ---------------------------------------------------------


def _dtype_and_rows(case: Case) -> tuple[torch.dtype, int]:
    """A case's dtype and row count: its first tensor's dtype and the product of every
    dimension but the last (a 1-D tensor is one row; mm's ``a`` is ``(M, K)``: M rows)."""
    first = next(v for v in case.make_inputs().values() if isinstance(v, torch.Tensor))
    return first.dtype, math.prod(first.shape[:-1])


@pytest.mark.parametrize("op", testing.declared_ops(), ids=lambda op: op.__name__)
def test_every_declared_dtype_has_an_odd_row_count_and_one_row(op) -> None:
    """Issue 43 item 21: a kernel that loses the last row when the count is odd, or runs
    nothing for one row, must fail some case of every dtype an op declares cases in."""
    rows: dict[torch.dtype, set[int]] = defaultdict(set)
    for case in testing.cases_for(op):
        dtype, count = _dtype_and_rows(case)
        rows[dtype].add(count)
    missing = {
        str(dtype): [
            what
            for what, present in (
                ("an odd row count above 1", any(n > 1 and n % 2 for n in counts)),
                ("one row", 1 in counts),
            )
            if not present
        ]
        for dtype, counts in rows.items()
    }
    assert rows and not any(missing.values()), missing


FAULTS: dict[str, Callable[[int], bool]] = {
    "last-row-of-odd-count": lambda rows: rows % 2 == 1,
    "nothing-for-one-row": lambda rows: rows == 1,
    "last-row-of-odd-count-above-1": lambda rows: rows > 1 and rows % 2 == 1,
}


@pytest.mark.parametrize("fault", sorted(FAULTS))
@pytest.mark.parametrize("name", ["rmsnorm", "mm"])
def test_a_backend_that_loses_a_row_fails_conformance_in_every_dtype(
    monkeypatch: pytest.MonkeyPatch, name: str, fault: str
) -> None:
    """The faulty kernel of issue 43 item 21, as a backend: the reference's result with the
    last row lost (zeroed) for the row counts ``fault`` names.  Conformance catches it in
    every dtype the op declares cases in (117 cases passed it when the float16 cases all
    had an even row count)."""
    import flashinfer

    op = getattr(flashinfer, name)
    real, loses = op.implementations["torch"], FAULTS[fault]

    def faulty(*args, **kwargs):
        result = real(*args, **kwargs)
        rows = result.view(-1, result.shape[-1])
        if loses(rows.shape[0]):
            rows[-1] = 0
        return result

    monkeypatch.setitem(op.implementations, "torch", faulty)
    caught: dict[str, bool] = {}
    for item in conformance_items(experimental=False):
        if item.op is not op or item.backend != "torch":
            continue
        dtype = str(_dtype_and_rows(item.case)[0])
        try:
            assert item.run() is None
        except AssertionError:
            caught[dtype] = True
        else:
            caught.setdefault(dtype, False)
    assert len(caught) == 3 and all(caught.values()), caught


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
