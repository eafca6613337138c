"""Point warnings at the user's line: the ``stacklevel`` that skips flashinfer's own frames.

A frame is flashinfer's own when its module is ``flashinfer`` or ``flashinfer.<anything>``
(generated code included: it runs in ``flashinfer.codegen.generated``), ``wrapt``'s or
``functools``'; above such a frame, torch's frames and the code torch generates (FX graphs,
inductor's output: what sits between a compiled program and an operator's implementation)
count as flashinfer's too.  Here, below every other module, since the settings warn too.
"""

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
    """The ``stacklevel`` that makes a warning issued by the caller point at user code: the
    frames from the caller up to the first one of neither flashinfer nor torch, leaving out
    importlib's as ``warnings.warn`` does (a warning issued while ``flashinfer`` is imported
    points at the ``import`` line).  Only called on the rare path that warns."""
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
