"""A ``Case`` whose result is bool or an integer dtype compares exactly by default (issue 34,
item 19): both comparators, every such dtype torch has, no rounding through float64; a dtype
with no tolerance at all is refused with a ``TypeError`` that says what to pass."""

from __future__ import annotations

import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st

from flashinfer import testing
from flashinfer.backend_dispatch import backend_requirement, supported_compute_capability
from flashinfer.testing import Case, allclose, conformance_items, rel_frobenius

pytestmark = pytest.mark.usefixtures("isolated_op_registry")

# Bool and every integer dtype this torch has, listed by hand (not by the rule under test).
EXACT_DTYPES = [
    d
    for d in (
        [torch.bool]
        + [getattr(torch, f"{sign}int{bits}", None) for sign in ("", "u") for bits in range(1, 8)]
        + [
            getattr(torch, f"{sign}int{bits}", None)
            for sign in ("", "u")
            for bits in (8, 16, 32, 64)
        ]
    )
    if d is not None
]
COMPARATORS = {"allclose": allclose(), "rel_frobenius": rel_frobenius()}
COMPARATORS["rel_frobenius(1e-3)"] = rel_frobenius(1e-3)  # a float bound: floats only


def _sub_byte(dtype: torch.dtype) -> bool:
    return dtype.itemsize == 1 and str(dtype)[-1] in "1234567"


def _tensor(dtype: torch.dtype, raw: list[int], shape: tuple[int, ...]) -> torch.Tensor:
    """A tensor of ``dtype`` built from bytes: any bytes are a value of a whole-byte integer;
    bool and sub-byte values keep to their bits."""
    data = torch.tensor(raw, dtype=torch.uint8)
    if dtype == torch.bool:
        data &= 1
    elif _sub_byte(dtype):
        data &= (1 << int(str(dtype)[-1])) - 1
    return data.view(dtype).reshape(shape)


@settings(max_examples=80, deadline=None)
@given(
    dtype=st.sampled_from(EXACT_DTYPES),
    comparator=st.sampled_from(sorted(COMPARATORS)),
    shape=st.lists(st.integers(1, 3), min_size=0, max_size=3).map(tuple),
    data=st.data(),
)
@example(dtype=torch.int32, comparator="allclose", shape=(2, 3), data=None)  # was KeyError
@example(dtype=torch.bool, comparator="rel_frobenius", shape=(), data=None)
def test_equal_results_pass_and_any_changed_element_fails_naming_it(dtype, comparator, shape, data):
    numel = 1
    for n in shape:
        numel *= n
    width = dtype.itemsize
    if data is None:  # the pinned examples: counting bytes, the last element changed
        raw, k = [i % 256 for i in range(numel * width)], numel - 1
    else:
        raw = data.draw(
            st.lists(st.integers(0, 255), min_size=numel * width, max_size=numel * width)
        )
        k = data.draw(st.integers(0, numel - 1))
    compare = COMPARATORS[comparator]
    expected = _tensor(dtype, raw, shape)
    compare(_tensor(dtype, raw, shape), expected)  # a copy (sub-byte dtypes have no clone)

    changed = list(raw)
    changed[k * width] ^= 1  # the lowest bit of element k (little-endian): off by one
    actual = _tensor(dtype, changed, shape)
    with pytest.raises(AssertionError) as raised:
        compare(actual, expected)
    message = str(raised.value)
    index = tuple(int(i) for i in torch.unravel_index(torch.tensor(k), shape))
    assert f"1 of {numel} elements differ ({dtype} compares exactly)" in message, message
    assert f"first at {index}:" in message, message


@pytest.mark.parametrize("dtype", [torch.int64, torch.uint64], ids=str)
@pytest.mark.parametrize("comparator", sorted(COMPARATORS))
def test_large_integers_are_not_rounded_through_float64(dtype, comparator):
    big = torch.tensor([2**60, 2**60 + 1], dtype=dtype)
    off = torch.tensor([2**60 + 1, 2**60 + 1], dtype=dtype)  # equal as float64
    COMPARATORS[comparator](big.clone(), big)
    with pytest.raises(AssertionError, match=rf"first at \(0,\): {2**60 + 1} vs expected {2**60}"):
        COMPARATORS[comparator](off, big)


def test_an_integer_case_runs_through_conformance(monkeypatch):
    monkeypatch.setattr(testing, "_declared", {})
    monkeypatch.setattr("flashinfer.load_all_apis", lambda: None)
    checks = {
        name: supported_compute_capability([90], cpu=True)(lambda x: True)
        for name in ("ref", "broken")
    }

    @backend_requirement(checks)
    def toy_count(x, *, backend="auto"):
        return (x > 0).sum(dim=-1, dtype=torch.int32) + (backend == "broken")

    case = Case(
        "i32_4x8",
        inputs=lambda gen: {"x": torch.randn(4, 8, generator=gen)},
        reference=lambda x: (x > 0).sum(dim=-1, dtype=torch.int32),
        compare=allclose(),
    )
    testing.declare_cases(toy_count, [case])
    items = {i.backend: i for i in conformance_items()}
    assert items["ref"].run() is None
    with pytest.raises(AssertionError, match=r"4 of 4 elements differ \(torch.int32 compares"):
        items["broken"].run()


def test_float_results_keep_their_tolerances():
    x = torch.ones(4, 4)
    allclose()(x + 1e-6, x)
    rel_frobenius()(x + 1e-7, x)
    with pytest.raises(AssertionError, match="differ beyond"):
        allclose()(x + 1e-3, x)
    with pytest.raises(AssertionError, match="relative Frobenius error"):
        rel_frobenius()(x * 1.01, x)
    rel_frobenius(1e-3)(x.double() + 1e-5, x.double())  # a float bound covers float64 too


@pytest.mark.parametrize(
    ("comparator", "dtype"),
    [
        ("allclose", torch.float64),
        ("allclose", torch.complex64),
        ("allclose", torch.float8_e4m3fn),
        ("allclose", torch.bits8),
        ("rel_frobenius", torch.float64),
        ("rel_frobenius", torch.complex64),
        ("rel_frobenius(1e-3)", torch.complex64),
    ],
    ids=str,
)
def test_a_dtype_with_no_tolerance_is_refused_saying_what_to_pass(comparator, dtype):
    x = (
        torch.zeros(3, dtype=torch.uint8).view(dtype)
        if dtype.itemsize == 1
        else torch.zeros(3, dtype=dtype)
    )
    name = comparator.split("(")[0]
    with pytest.raises(
        TypeError, match=rf"{name} has no default tolerance for {dtype} results"
    ) as raised:
        COMPARATORS[comparator](x.clone(), x)
    assert f"pass one, e.g. {name}({{{dtype}: " in str(raised.value)


def test_a_tolerance_given_for_an_integer_dtype_is_used():
    x = torch.tensor([10, 20], dtype=torch.int32)
    allclose({torch.int32: (0.0, 1.0)})(x + 1, x)
    rel_frobenius({torch.int32: 0.1})(x + 1, x)
    with pytest.raises(AssertionError, match="differ beyond"):
        allclose({torch.int32: (0.0, 1.0)})(x + 2, x)
