"""Point warnings at the user's line: the ``stacklevel`` that skips flashinfer's own frames.

A frame is flashinfer's own when its module is ``flashinfer`` or ``flashinfer.<anything>``
(every module of the package, private ones included, and generated code, which runs in
``flashinfer.codegen.generated``), or is ``wrapt``'s or ``functools``'.
"""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["user_stacklevel"]


def _is_internal_frame(frame: Any) -> bool:
    name = frame.f_globals.get("__name__", "")
    return name == "flashinfer" or name.startswith(("flashinfer.", "wrapt", "functools"))


def _is_import_machinery(frame: Any) -> bool:
    # The test warnings.warn itself uses to leave importlib's frames out of ``stacklevel``.
    filename = frame.f_code.co_filename
    return "importlib" in filename and "_bootstrap" in filename


def user_stacklevel() -> int:
    """The ``stacklevel`` that makes a warning issued by the caller point at user code.

    Counts frames from the caller of this function up to the first frame outside the
    ``flashinfer`` package, leaving out importlib's frames as ``warnings.warn`` does (a
    warning issued while ``flashinfer`` is imported points at the ``import`` line).  Only
    called on the rare path that actually warns.
    """
    frame: Any = sys._getframe(1)
    level = 1
    while frame is not None and _is_internal_frame(frame):
        frame = frame.f_back
        while frame is not None and _is_import_machinery(frame):
            frame = frame.f_back
        level += 1
    return level
