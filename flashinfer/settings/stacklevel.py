"""Point warnings at the user's line: the ``stacklevel`` that skips flashinfer's own frames.

A frame is flashinfer's own when its module is ``flashinfer`` or ``flashinfer.<anything>``
(every module of the package, private ones included, and generated code, which runs in
``flashinfer.codegen.generated``), or is ``wrapt``'s or ``functools``'.
"""

from __future__ import annotations

import os
import sys
from typing import Any

__all__ = ["user_stacklevel"]


def _is_internal_frame(frame: Any) -> bool:
    name = frame.f_globals.get("__name__", "")
    return name == "flashinfer" or name.startswith(("flashinfer.", "wrapt", "functools"))


def _torch_dir() -> str:
    """torch's folder (code torch generates names its source after the module that wrote
    it); read from ``sys.modules``: this layer does not import torch."""
    torch = sys.modules.get("torch")
    path = getattr(torch, "__file__", None)
    return os.path.dirname(path) + os.sep if path else "\0"


def _is_torch_frame(frame: Any) -> bool:
    """torch's own frames, and code it generates (FX graphs, inductor's output): what sits
    between a compiled program's line and an operator's real implementation."""
    name = frame.f_globals.get("__name__", "") or ""
    filename = frame.f_code.co_filename
    return (
        name == "torch"
        or name.startswith("torch.")
        or filename.startswith((_torch_dir(), "<eval_with_key>"))
        or "torchinductor" in filename
    )


def _is_import_machinery(frame: Any) -> bool:
    # The test warnings.warn itself uses to leave importlib's frames out of ``stacklevel``.
    filename = frame.f_code.co_filename
    return "importlib" in filename and "_bootstrap" in filename


def user_stacklevel() -> int:
    """The ``stacklevel`` that makes a warning issued by the caller point at user code.

    Counts frames from the caller of this function up to the first frame outside the
    ``flashinfer`` package and torch (the frames between a compiled program and the
    operator it calls), leaving out importlib's frames as ``warnings.warn`` does (a
    warning issued while ``flashinfer`` is imported points at the ``import`` line).  Only
    called on the rare path that actually warns.
    """
    frame: Any = sys._getframe(1)
    level = 1
    # torch's frames count as flashinfer's above a flashinfer frame: a compiled program
    # calls an operator whose real implementation is flashinfer's (torch/_ops.py, the
    # graph's code, Dynamo's and AOTAutograd's wrappers sit in between).
    while frame is not None and (_is_internal_frame(frame) or _is_torch_frame(frame)):
        frame = frame.f_back
        while frame is not None and _is_import_machinery(frame):
            frame = frame.f_back
        level += 1
    return level
