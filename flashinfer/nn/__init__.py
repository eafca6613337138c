"""flashinfer in a model (``docs/model.rst``): drop-in :class:`RMSNorm` and :class:`Linear`,
and :func:`apply_flashinfer`, a reversible swap of a model's modules.  Loaded on first access
of ``flashinfer.nn``, not by ``import flashinfer``."""

from __future__ import annotations

from flashinfer.nn.modules import CASTING_MODES, Linear, RMSNorm
from flashinfer.nn.patching import KNOWN_RMSNORMS, PatchReport, apply_flashinfer

__all__ = [
    "CASTING_MODES",
    "KNOWN_RMSNORMS",
    "Linear",
    "PatchReport",
    "RMSNorm",
    "apply_flashinfer",
]
