"""The ``stacklevel`` that points a warning at the user's line: skips flashinfer's frames
(generated code included), ``wrapt``'s, ``functools``' and torch's (FX graphs, inductor)."""

from __future__ import annotations

import os
import sys
from typing import Any


def _skipped(frame: Any) -> bool:
    name = frame.f_globals.get("__name__", "") or ""
    if name == "flashinfer" or name.startswith(("flashinfer.", "wrapt", "functools")):
        return True
    # torch's folder, read from sys.modules: this module does not import torch.
    torch_file = getattr(sys.modules.get("torch"), "__file__", None)
    torch_dir = os.path.dirname(torch_file) + os.sep if torch_file else "\0"
    filename = frame.f_code.co_filename
    return (
        name == "torch"
        or name.startswith("torch.")
        or filename.startswith((torch_dir, "<eval_with_key>"))
        or "torchinductor" in filename
    )


def user_stacklevel() -> int:
    """The ``stacklevel`` for a warning issued by the caller: up to the first frame of
    neither flashinfer nor torch, skipping importlib's as ``warnings.warn`` does."""
    frame: Any = sys._getframe(1)
    level = 1
    while frame is not None and _skipped(frame):
        frame = frame.f_back
        while (
            frame is not None
            and "importlib" in frame.f_code.co_filename
            and ("_bootstrap" in frame.f_code.co_filename)
        ):
            frame = frame.f_back
        level += 1
    return level
