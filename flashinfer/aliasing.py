"""Overlap rules of an op's outputs (import path: ``flashinfer.aliasing``): re-exports only."""

from __future__ import annotations

from flashinfer.dispatch.overlap import MAX_RUNS, OverlapRule, overlaps_itself, tensors_overlap

__all__ = ["MAX_RUNS", "OverlapRule", "overlaps_itself", "tensors_overlap"]
