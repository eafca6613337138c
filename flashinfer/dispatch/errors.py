"""The exceptions a dispatched call raises when a backend cannot run it."""

from __future__ import annotations

from flashinfer.gating.exposed import exposed_in

__all__ = ["BackendSupportedError", "UnsupportedInputsError"]

_PUBLIC_MODULE = "flashinfer.backend_dispatch"


@exposed_in(_PUBLIC_MODULE)
class BackendSupportedError(Exception):
    """The requested backend, or every candidate of ``backend="auto"``, cannot run the call."""


@exposed_in(_PUBLIC_MODULE)
class UnsupportedInputsError(BackendSupportedError, ValueError):
    """A named backend cannot run these inputs: its support check (or the common check)
    refused them.

    Both a :class:`BackendSupportedError` and a ``ValueError``: upstream raises a
    ``ValueError`` ("Problem size is not supported for <api>") here, and code written
    against either keeps working.  The message names the API, the backend and the reason
    (the checker's own ``ValueError`` message, which is also the ``__cause__``).
    """
