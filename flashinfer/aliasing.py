"""Overlap rules of an op's outputs (import path: ``flashinfer.aliasing``): re-exports only.

An op states which arguments it writes and which it reads meanwhile as an
:class:`OverlapRule`; the rule lives in :mod:`flashinfer.dispatch.overlap`.  Kept out of
``flashinfer.backend_dispatch`` so that ``import flashinfer`` does not load it: only an op
module needs it, when it is first used.
"""

from __future__ import annotations

from flashinfer.dispatch.overlap import MAX_RUNS, OverlapRule, overlaps_itself, tensors_overlap

__all__ = ["MAX_RUNS", "OverlapRule", "overlaps_itself", "tensors_overlap"]
