"""Lifecycle of experimental work (import path: ``flashinfer.lifecycle``): re-exports only.

The listing behind ``flashinfer experimental`` and the lifecycle rules live in
:mod:`flashinfer.gating.lifecycle`; the policy and the docs cite
``flashinfer.lifecycle.GRADUATION_HORIZON_MONTHS`` by this path.
"""

from __future__ import annotations

# What modules left behind by an exit use (``flashinfer lifecycle ... --apply`` writes them):
# a moved module's deprecated aliases, and a removed API's tombstone.
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
