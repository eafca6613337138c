"""What each backend family (torch, Triton) supports (import path: ``flashinfer.backend_families``):
re-exports only; the table lives in :mod:`flashinfer.dispatch.families`."""

from __future__ import annotations

from flashinfer.dispatch.families import (
    FAMILIES,
    FLOAT_DTYPES,
    TORCH,
    TRITON,
    BackendFamily,
    backend_family,
    dtype_name,
    family_of,
)

__all__ = [
    "FAMILIES",
    "FLOAT_DTYPES",
    "TORCH",
    "TRITON",
    "BackendFamily",
    "backend_family",
    "dtype_name",
    "family_of",
]
