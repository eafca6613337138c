"""Which modules define the package's public APIs, and the one way to import them.

The API inventory, the listing of experimental work, ``flashinfer backends``, the autotuner's
file loader and ``use_backends`` all need every API module imported (an op registers when its
module runs).  They call :func:`load_api_modules`; none keeps a list of its own.  This module
imports nothing of the package, so any module may use it without closing an import cycle.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable

__all__ = ["API_MODULES", "load_all_apis", "load_api_modules"]

API_MODULES: tuple[str, ...] = ("flashinfer.norm", "flashinfer.gemm", "flashinfer.fused_norm")
"""Modules that define public APIs (an operator's module is imported on first use)."""


def load_api_modules(modules: Iterable[str] | None = None) -> list[str]:
    """Import the modules that define APIs; return those that do not exist (yet).

    ``modules=None`` imports :data:`API_MODULES`.  A module whose *file* is missing is
    reported instead of raised, so a listing works on a tree where an operator has not
    landed; any other import error propagates.  :func:`load_all_apis` raises instead.
    """
    missing = []
    for module in API_MODULES if modules is None else modules:
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name != module:
                raise
            missing.append(module)
    return missing


def load_all_apis() -> None:
    """Import every module that defines public APIs, so the inventory lists them all.

    Raises ``ModuleNotFoundError`` for one missing from this build (after importing the
    others); :func:`load_api_modules` lists the missing ones instead.
    """
    missing = load_api_modules()
    if missing:
        raise ModuleNotFoundError(f"No module named {missing[0]!r}", name=missing[0])
