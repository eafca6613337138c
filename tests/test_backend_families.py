"""flashinfer.backend_families: what each backend family supports is written once, as data,
and every backend of the package declares its family from that one table.

Also the small facts written once with it: how a dtype is named, the next power of two
(tile sizes and the autotuner's buckets), and the autotuner's memo cap.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import flashinfer
import flashinfer.gemm as gemm
import flashinfer.norm as norm
from flashinfer import experimental_backend
from flashinfer.autotuner import AutoTuner, bucket_dim
from flashinfer.autotuner import keys as autotuner_keys
from flashinfer.backend_families import (
    FAMILIES,
    FLOAT_DTYPES,
    TORCH,
    TRITON,
    BackendFamily,
    backend_family,
    dtype_name,
    family_of,
)
from flashinfer.kernels import next_positive_power_of_2

PACKAGE_OPS = (flashinfer.mm, flashinfer.rmsnorm)

# --------------------------------------------------------------------------------------
# The table
# --------------------------------------------------------------------------------------


def test_the_table_is_frozen_data():
    assert FAMILIES == (TORCH, TRITON)
    assert [f.name for f in FAMILIES] == ["torch", "triton"]
    assert TRITON.needs_triton and not TORCH.needs_triton
    for family in FAMILIES:
        assert list(family.compute_capabilities) == sorted(set(family.compute_capabilities))
        with pytest.raises(dataclasses.FrozenInstanceError):
            family.compute_capabilities = (90,)  # type: ignore[misc]
    # Triton 3.x targets Turing and newer: a subset of what torch ships kernels for.
    assert set(TRITON.compute_capabilities) <= set(TORCH.compute_capabilities)
    assert min(TRITON.compute_capabilities) == 75


def test_one_dtype_tuple_is_shared_by_the_families_and_the_apis():
    assert FLOAT_DTYPES == (torch.float32, torch.float16, torch.bfloat16)
    assert gemm.SUPPORTED_DTYPES is FLOAT_DTYPES
    assert norm.SUPPORTED_DTYPES is FLOAT_DTYPES
    assert TORCH.dtypes is FLOAT_DTYPES and TRITON.dtypes is FLOAT_DTYPES


@pytest.mark.parametrize("op", PACKAGE_OPS, ids=lambda op: op.api_name)
def test_every_backend_of_the_package_declares_its_family_from_the_table(op):
    module = gemm if op is flashinfer.mm else norm
    for backend, checker in op.backend_checks.items():
        family = family_of(checker)
        assert family is not None, f"{op.api_name}: backend {backend!r} declares no family"
        assert any(family is f for f in FAMILIES), (backend, family)
        # The declared capabilities come from the family (a backend may keep fewer).
        assert checker._supported_ccs <= set(family.compute_capabilities), backend
        assert checker._supports_cpu is family.cpu
        # What the API's shared validation admits, every backend's family computes in.
        assert set(module.SUPPORTED_DTYPES) <= set(family.dtypes), backend


def test_the_apis_backends_declare_the_families_they_run():
    for op in PACKAGE_OPS:
        assert family_of(op.backend_checks["torch"]) is TORCH
        assert family_of(op.backend_checks["triton"]) is TRITON
        assert op.backend_checks["torch"]._supported_ccs == set(TORCH.compute_capabilities)
        assert op.backend_checks["triton"]._supported_ccs == set(TRITON.compute_capabilities)


# --------------------------------------------------------------------------------------
# The mark
# --------------------------------------------------------------------------------------


def test_backend_family_marks_the_checker_itself():
    def check(x):
        return True

    assert backend_family(TRITON, min_compute_capability=90)(check) is check
    assert family_of(check) is TRITON
    assert check._supported_ccs == {cc for cc in TRITON.compute_capabilities if cc >= 90}
    assert check.is_compute_capability_supported(90)
    assert not check.is_compute_capability_supported(80)


@pytest.mark.parametrize("order", ["family_outside", "family_inside"])
def test_backend_family_composes_with_experimental_backend_in_either_order(order):
    def check(x):
        return True

    family = backend_family(TORCH)
    experimental = experimental_backend(owner="@a", tracking_issue=1, graduate_by="2099-01-01")
    marked = (
        family(experimental(check)) if order == "family_outside" else experimental(family(check))
    )
    assert marked is check
    assert family_of(check) is TORCH and check.is_experimental_backend
    assert check._supported_ccs == set(TORCH.compute_capabilities)


def test_an_undeclared_checker_has_no_family():
    def check(x):
        return True

    assert family_of(check) is None
    check.backend_family = "triton"  # not a BackendFamily: not a declaration
    assert family_of(check) is None


@pytest.mark.parametrize("bad", ["triton", None, TRITON.name, {"name": "triton"}])
def test_backend_family_refuses_what_is_not_a_family(bad):
    with pytest.raises(TypeError, match="family must be a BackendFamily such as TORCH or TRITON"):
        backend_family(bad)


@pytest.mark.parametrize("bad", [True, 80.0, "80"])
def test_backend_family_refuses_a_minimum_that_is_not_an_int(bad):
    with pytest.raises(TypeError, match="min_compute_capability must be an integer like 80"):
        backend_family(TRITON, min_compute_capability=bad)


def test_backend_family_refuses_a_minimum_no_capability_reaches():
    with pytest.raises(ValueError, match="no compute capability of the triton family is >= 200"):
        backend_family(TRITON, min_compute_capability=200)


def test_a_family_of_ones_own_declares_its_capabilities():
    mine = BackendFamily("mine", (90, 100), FLOAT_DTYPES, cpu=False, needs_triton=False)

    @backend_family(mine)
    def check(x):
        return True

    assert family_of(check) is mine
    assert check._supported_ccs == {90, 100} and check._supports_cpu is False


# --------------------------------------------------------------------------------------
# The facts written once beside it (each compared with the definitions it replaced)
# --------------------------------------------------------------------------------------


def _old_np2(n: int) -> int:  # flashinfer/_mm_runners.py and a backend's support.py, before
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


def _old_bucket_dim(d: int) -> int:  # flashinfer/autotuner/keys.py, before
    return 1 << (d - 1).bit_length() if d > 0 else 0


@given(st.integers(min_value=-(2**70), max_value=2**70))
def test_next_positive_power_of_2_is_the_old_np2(n):
    assert next_positive_power_of_2(n) == _old_np2(n)


@given(st.integers(min_value=-(2**70), max_value=2**70))
def test_bucket_dim_keeps_its_own_zero(d):
    assert bucket_dim(d) == _old_bucket_dim(d)


def test_the_two_roundings_differ_only_below_one_and_agree_exhaustively_above():
    assert (next_positive_power_of_2(0), bucket_dim(0)) == (1, 0)
    for n in range(0, 5000):
        assert next_positive_power_of_2(n) == _old_np2(n)
        assert bucket_dim(n) == _old_bucket_dim(n)
        if n >= 1:
            p = next_positive_power_of_2(n)
            assert p == bucket_dim(n) and p >= n and p < 2 * n + 1 and p & (p - 1) == 0


def test_one_dtype_name_everywhere():
    assert autotuner_keys.dtype_name is dtype_name
    assert gemm.dtype_name is dtype_name and norm.dtype_name is dtype_name
    every = [v for v in vars(torch).values() if isinstance(v, torch.dtype)]
    assert len(every) > 10
    for dtype in every:
        old = str(dtype).replace("torch.", "")  # gemm.py and norm.py, before
        assert dtype_name(dtype) == old == str(dtype).removeprefix("torch.")
        assert autotuner_keys.dtype_from_name(dtype_name(dtype)) == dtype


def test_one_memo_cap_bounds_every_memo(monkeypatch):
    assert AutoTuner.memo_cap == autotuner_keys.MEMO_CAP == 1 << 14
    monkeypatch.setattr(autotuner_keys, "MEMO_CAP", 4)
    monkeypatch.setattr(autotuner_keys, "_SHAPE_BUCKETS", {})
    for n in range(10):
        assert autotuner_keys.bucket_shape((n + 1000, 3)) == (bucket_dim(n + 1000), 4)
    assert len(autotuner_keys._SHAPE_BUCKETS) == 4
