"""Experimental split-K GEMM: a backend of :func:`flashinfer.mm` (``backend="splitk"``).

Importing this package is light (no Triton): :mod:`.support` holds the checker and the
tactic space; :func:`splitk_mm` imports the Triton kernel on its first call.
"""

from __future__ import annotations

from typing import Any

import torch

from .support import MAX_M, MIN_K, TACTIC_SPACE, check_splitk, valid_tactics

__all__ = ["MAX_M", "MIN_K", "TACTIC_SPACE", "check_splitk", "splitk_mm", "valid_tactics"]


def splitk_mm(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, tactic: dict[str, Any]) -> None:
    """Write ``a @ b`` into ``c`` with the split-K kernel (inputs validated by the caller)."""
    from .kernel import splitk_matmul  # first use imports Triton

    splitk_matmul(a, b, c, tactic)
