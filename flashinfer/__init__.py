"""flashinfer: kernels with gated experimental APIs and backends.

Importing this package is cheap: it imports neither torch nor Triton.  Every public name loads
on first use (PEP 562): the markers and the dispatcher (``flashinfer.Backend``,
``flashinfer.use_backends``: torch loads then), the operators and their kernels
(``flashinfer.mm`` imports ``flashinfer.gemm``; Triton loads when a Triton kernel first runs).
``import flashinfer`` never imports ``flashinfer.experimental``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from flashinfer._version import __version__ as __version__
from flashinfer.api_modules import API_MODULES as API_MODULES
from flashinfer.api_modules import OPS as _OPS
from flashinfer.api_modules import load_all_apis

# The gate's module reads FLASHINFER_ALLOW_EXPERIMENTAL_AUTO_BACKENDS once as it loads, so a
# bad value warns at the user's `import flashinfer` line (it imports no torch).
from flashinfer.gating import gate as _gate  # noqa: F401

# The markers and the dispatcher's names, from their facades.  They import torch, so they
# load on first access too: ``from flashinfer._version import __version__`` and the
# ``flashinfer --version`` command stay free of torch.
_FACADE_NAMES: dict[str, str] = {
    **dict.fromkeys(
        (
            "ExperimentalWarning",
            "api_inventory",
            "experimental_api",
            "experimental_auto_backends_allowed",
            "flashinfer_api",
            "flashinfer_experimental_api",
            "require_experimental_auto_backends",
            "reset_experimental_warnings",
            "warn_experimental_backend_once",
        ),
        "flashinfer.api_logging",
    ),
    **dict.fromkeys(
        (
            "Backend",
            "BackendSupportedError",
            "UnsupportedInputsError",
            "backend_requirement",
            "experimental_backend",
            "supported_compute_capability",
            "use_backends",
        ),
        "flashinfer.backend_dispatch",
    ),
}

# Public name -> module that defines it, imported on first attribute access (PEP 562): the
# facades' names, the ops of the one list, and the autotuner's entry points.
_LAZY: dict[str, str] = {
    **_FACADE_NAMES,
    **_OPS,
    "autotune": "flashinfer.autotuner",
    "AutoTuner": "flashinfer.autotuner",
}

# The facades themselves, which ``import flashinfer`` used to load: ``flashinfer.api_logging``
# after a bare ``import flashinfer`` still works (imported on first access); and
# ``flashinfer.nn``, the modules for a model, reachable as ``torch.nn`` is.
_LAZY_SUBMODULES = ("api_logging", "backend_dispatch", "nn")


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
    *(name for name in _LAZY if name not in _FACADE_NAMES),
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is not None:
        value = getattr(importlib.import_module(module), name)
    elif name in _LAZY_SUBMODULES:
        value = importlib.import_module(f"{__name__}.{name}")
    else:
        # A renamed API's deprecated alias, or the tombstone of a removed one (its message
        # says since when and what to use), or the plain AttributeError.
        from flashinfer.gating.history import missing_attribute

        return missing_attribute(__name__, name)
    globals()[name] = value  # later lookups skip this hook
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY) | set(_LAZY_SUBMODULES))


# Static tools see the lazy names ("as": re-exported under --strict); the ops have their own
# block, the one list of ops, at the end of this file.
if TYPE_CHECKING:
    from flashinfer import api_logging as api_logging
    from flashinfer import backend_dispatch as backend_dispatch
    from flashinfer import nn as nn
    from flashinfer.api_logging import ExperimentalWarning as ExperimentalWarning
    from flashinfer.api_logging import api_inventory as api_inventory
    from flashinfer.api_logging import experimental_api as experimental_api
    from flashinfer.api_logging import (
        experimental_auto_backends_allowed as experimental_auto_backends_allowed,
    )
    from flashinfer.api_logging import flashinfer_api as flashinfer_api
    from flashinfer.api_logging import (
        flashinfer_experimental_api as flashinfer_experimental_api,
    )
    from flashinfer.api_logging import (
        require_experimental_auto_backends as require_experimental_auto_backends,
    )
    from flashinfer.api_logging import (
        reset_experimental_warnings as reset_experimental_warnings,
    )
    from flashinfer.api_logging import (
        warn_experimental_backend_once as warn_experimental_backend_once,
    )
    from flashinfer.autotuner import AutoTuner as AutoTuner
    from flashinfer.autotuner import autotune as autotune
    from flashinfer.backend_dispatch import Backend as Backend
    from flashinfer.backend_dispatch import BackendSupportedError as BackendSupportedError
    from flashinfer.backend_dispatch import UnsupportedInputsError as UnsupportedInputsError
    from flashinfer.backend_dispatch import backend_requirement as backend_requirement
    from flashinfer.backend_dispatch import experimental_backend as experimental_backend
    from flashinfer.backend_dispatch import (
        supported_compute_capability as supported_compute_capability,
    )
    from flashinfer.backend_dispatch import use_backends as use_backends


# The one list of ops: one line per op, `from <module> import <op> as <op>`.  Static tools read
# it as imports; flashinfer.api_modules.OPS reads it as text, and with it the lazy names,
# API_MODULES and the API reference (docs/api/operators.rst).  Adding an op is its module,
# its kernel and its line here.
if TYPE_CHECKING:
    from flashinfer.fused_norm import fused_add_rmsnorm as fused_add_rmsnorm
    from flashinfer.gemm import mm as mm
    from flashinfer.norm import rmsnorm as rmsnorm
