"""Lifecycle of experimental work (``flashinfer.lifecycle``, which the policy and docs cite):
re-exports of :mod:`flashinfer.gating.lifecycle`, and what modules an exit leaves behind use.
"""

from __future__ import annotations

from flashinfer.api_modules import load_api_modules
from flashinfer.gating.history import call_deprecated, missing_attribute, moved_module_getattr
from flashinfer.gating.lifecycle import (
    GRADUATION_HORIZON_MONTHS,
    ExperimentalFeature,
    experimental_features,
    format_listing,
    graduation_limit,
    lifecycle_problems,
)
from flashinfer.gating.lifecycle import wrapper_chain as wrapper_chain
from flashinfer.gating.records import ExperimentalMetadataWarning

__all__ = [
    "GRADUATION_HORIZON_MONTHS",
    "ExperimentalFeature",
    "ExperimentalMetadataWarning",
    "call_deprecated",
    "experimental_features",
    "format_listing",
    "graduation_limit",
    "lifecycle_problems",
    "load_api_modules",
    "missing_attribute",
    "moved_module_getattr",
]
