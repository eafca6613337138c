"""flashinfer: kernels with gated experimental APIs and backends.

Importing it imports neither torch nor Triton nor ``flashinfer.experimental``: every public
name loads on first use (PEP 562).  The public names are written once, as the
``TYPE_CHECKING`` imports at the end (``flashinfer.api_modules.PUBLIC`` reads them as text).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from flashinfer._version import __version__ as __version__
from flashinfer.api_modules import API_MODULES as API_MODULES
from flashinfer.api_modules import PUBLIC as _LAZY
from flashinfer.api_modules import load_all_apis

# Reads the gate variable once, so a bad value warns at the user's `import flashinfer`.
from flashinfer.gating import gate as _gate  # noqa: F401

# The submodules among them (the facades, and flashinfer.nn as torch.nn) are not in __all__.
__all__ = ["load_all_apis", *(name for name, module in _LAZY.items() if module != __name__)]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module == __name__:
        value = importlib.import_module(f"{__name__}.{name}")
    elif module is not None:
        value = getattr(importlib.import_module(module), name)
    else:
        # A renamed API's alias, a removed one's tombstone, or the plain AttributeError.
        from flashinfer.gating.history import missing_attribute

        return missing_attribute(__name__, name)
    globals()[name] = value  # later lookups skip this hook
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


# The public names (loaded on first access: ``flashinfer --version`` stays free of torch).
if TYPE_CHECKING:
    from flashinfer import api_logging as api_logging  # noqa: I001
    from flashinfer import backend_dispatch as backend_dispatch
    from flashinfer import nn as nn
    from flashinfer.api_logging import (
        ExperimentalWarning as ExperimentalWarning,
        api_inventory as api_inventory,
        experimental_api as experimental_api,
        experimental_auto_backends_allowed as experimental_auto_backends_allowed,
        flashinfer_api as flashinfer_api,
        flashinfer_experimental_api as flashinfer_experimental_api,
        require_experimental_auto_backends as require_experimental_auto_backends,
        reset_experimental_warnings as reset_experimental_warnings,
        warn_experimental_backend_once as warn_experimental_backend_once,
    )
    from flashinfer.autotuner import AutoTuner as AutoTuner
    from flashinfer.autotuner import autotune as autotune
    from flashinfer.backend_dispatch import (
        Backend as Backend,
        BackendSupportedError as BackendSupportedError,
        UnsupportedInputsError as UnsupportedInputsError,
        backend_requirement as backend_requirement,
        experimental_backend as experimental_backend,
        supported_compute_capability as supported_compute_capability,
        use_backends as use_backends,
    )


# The one list of ops: one line per op, `from <module> import <op> as <op>`, read as text by
# flashinfer.api_modules.OPS (the lazy names, API_MODULES, docs/api/operators.rst).
if TYPE_CHECKING:
    from flashinfer.fused_norm import fused_add_rmsnorm as fused_add_rmsnorm
    from flashinfer.gemm import mm as mm
    from flashinfer.norm import rmsnorm as rmsnorm
