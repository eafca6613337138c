"""flashinfer: kernels with gated experimental APIs and backends.

Importing this package is cheap: the markers and the dispatcher load now, the operators and
their kernels on first use (``flashinfer.mm`` imports ``flashinfer.gemm``; Triton loads when a
Triton kernel first runs).  ``import flashinfer`` never imports ``flashinfer.experimental``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from flashinfer._version import __version__ as __version__
from flashinfer.api_logging import (
    ExperimentalWarning,
    api_inventory,
    experimental_api,
    experimental_auto_backends_allowed,
    flashinfer_api,
    flashinfer_experimental_api,
    require_experimental_auto_backends,
    reset_experimental_warnings,
    warn_experimental_backend_once,
)
from flashinfer.api_modules import API_MODULES as API_MODULES
from flashinfer.api_modules import OPS as _OPS
from flashinfer.api_modules import load_all_apis
from flashinfer.backend_dispatch import (
    Backend,
    BackendSupportedError,
    UnsupportedInputsError,
    backend_requirement,
    experimental_backend,
    supported_compute_capability,
    use_backends,
)

# Public name -> module that defines it, imported on first attribute access (PEP 562): the
# ops of the one list, and the autotuner's entry points.
_LAZY: dict[str, str] = {
    **_OPS,
    "autotune": "flashinfer.autotuner",
    "AutoTuner": "flashinfer.autotuner",
}


__all__ = [
    "Backend",
    "BackendSupportedError",
    "ExperimentalWarning",
    "UnsupportedInputsError",
    "api_inventory",
    "backend_requirement",
    "experimental_api",
    "experimental_auto_backends_allowed",
    "experimental_backend",
    "flashinfer_api",
    "flashinfer_experimental_api",
    "load_all_apis",
    "require_experimental_auto_backends",
    "reset_experimental_warnings",
    "supported_compute_capability",
    "use_backends",
    "warn_experimental_backend_once",
    *_LAZY,
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'flashinfer' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this hook
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


# Static tools see the lazy names ("as": re-exported under --strict); each op of the one list
# has its line here (tests/test_layout.py checks).
if TYPE_CHECKING:
    from flashinfer.autotuner import AutoTuner as AutoTuner
    from flashinfer.autotuner import autotune as autotune
    from flashinfer.fused_norm import fused_add_rmsnorm as fused_add_rmsnorm
    from flashinfer.gemm import mm as mm
    from flashinfer.norm import rmsnorm as rmsnorm
