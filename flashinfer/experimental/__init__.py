"""Experimental APIs and backends of flashinfer: the policy in short.

* An **experimental API** is a public function that may change or disappear. It is marked
  ``@flashinfer_experimental_api``; calling it is the opt-in, and its first call warns once
  with :class:`ExperimentalWarning`.
* An **experimental backend** is an implementation behind a *stable* API that is not ready
  for stable support. Its checker, under ``flashinfer/experimental/<feature>/support.py``, is
  marked ``@experimental_backend``. Naming it (``backend="name"``) is the opt-in and warns
  once per API and backend; ``backend="auto"`` and the autotuner skip it unless
  ``FLASHINFER_ALLOW_EXPERIMENTAL_AUTO_BACKENDS=1``.
* ``import flashinfer`` never imports this package; core imports only the light ``support``
  modules of features, and kernels on first use. Importing this package has no side effects.

The full policy (admission, ownership, lifecycle, graduation) is in ``README.md`` beside
this file.
"""

from flashinfer.api_logging import (
    ExperimentalWarning,
    experimental_auto_backends_allowed,
    flashinfer_experimental_api,
    require_experimental_auto_backends,
    warn_experimental_backend_once,
)
from flashinfer.backend_dispatch import experimental_backend

__all__ = [
    "ExperimentalWarning",
    "experimental_auto_backends_allowed",
    "experimental_backend",
    "flashinfer_experimental_api",
    "require_experimental_auto_backends",
    "warn_experimental_backend_once",
]
