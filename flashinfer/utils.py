"""Upstream import path for the dispatcher's names: re-exports only, nothing lives here."""

from flashinfer.backend_dispatch import (
    BackendOp,
    BackendRequirementOp,
    BackendSupportedError,
    UnsupportedInputsError,
    backend_requirement,
    experimental_backend,
    find_compute_capability,
    registered_ops,
    supported_compute_capability,
)

__all__ = [
    "BackendOp",
    "BackendRequirementOp",
    "BackendSupportedError",
    "UnsupportedInputsError",
    "backend_requirement",
    "experimental_backend",
    "find_compute_capability",
    "registered_ops",
    "supported_compute_capability",
]
