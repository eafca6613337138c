"""The one list of ops (which modules define the package's public APIs), and the one way to
import them.

The API inventory, the listing of experimental work, ``flashinfer backends``, the autotuner's
file loader and ``use_backends`` all need every API module imported (an op registers when its
module runs).  They call :func:`load_api_modules`; none keeps a list of its own.  This module
imports nothing of the package, so any module may use it without closing an import cycle.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable

__all__ = ["API_MODULES", "OPS", "load_all_apis", "load_api_modules"]

OPS: dict[str, str] = {
    "rmsnorm": "flashinfer.norm",
    "mm": "flashinfer.gemm",
    "fused_add_rmsnorm": "flashinfer.fused_norm",
}
"""The one list of ops: each public API's name -> the module that defines it.  Adding an op is
its module plus one line here: ``flashinfer``'s lazy names and :data:`API_MODULES` come from
it, and ``tests/test_layout.py`` fails, naming this list, when a module that defines an API is
left out, or when ``flashinfer/__init__.py``'s ``TYPE_CHECKING`` imports disagree with it."""

API_MODULES: tuple[str, ...] = tuple(dict.fromkeys(OPS.values()))
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
