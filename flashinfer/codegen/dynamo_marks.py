"""How flashinfer's code tells Dynamo (``torch.compile``'s tracer) where not to trace,
without importing Dynamo: the marks Dynamo reads on functions and code objects.

* :func:`run_outside_dynamo`: a code object whose frames, and every frame they call, run
  eagerly when Dynamo would start a frame there (a call from a frame Dynamo gave up on, or
  ``torch.compile`` of the function itself).  Dynamo still inlines what an API hands it
  for tracing (``_torchdynamo_inline``): this only stops frame-by-frame compilation.
* :func:`block_boundary`: a ``with`` block's ``__enter__`` and ``__exit__``, which change
  context-local state that a compiled graph cannot hold, are a clean graph break: without
  ``fullgraph`` the compiled function runs from there eagerly (and correctly); with it, the
  error names the block and says to enter it around the compiled call.
"""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["block_boundary", "run_outside_dynamo"]


def run_outside_dynamo(code: Any) -> None:
    """Never let Dynamo trace a frame of ``code`` nor any frame it calls.

    What ``torch.compiler.disable`` does to a function, done to a code object through the
    interpreter hook's own table; on a torch without that table, the frames are traced as
    before (slower, still correct).
    """
    hook: Any = getattr(getattr(torch._C, "_dynamo", None), "eval_frame", None)
    strategy = getattr(hook, "_FrameExecStrategy", None)
    action = getattr(hook, "_FrameAction", None)
    if strategy is None or action is None or not hasattr(hook, "set_code_exec_strategy"):
        return
    hook.set_code_exec_strategy(code, strategy(action.SKIP, action.SKIP))


def block_boundary(block: type, how: str) -> None:
    """Mark ``block``'s construction, ``__enter__`` and ``__exit__`` as a graph break that names it;
    ``how`` is how the block is written, e.g. ``"use_backends(...)"``."""
    message = (
        f"flashinfer.{how} cannot be entered inside a compiled function: it sets "
        "context-local state that a compiled graph cannot hold. Enter it around the compiled "
        f"call (with flashinfer.{how}: compiled(x)), or compile without fullgraph=True, "
        "which runs the function eagerly from the block on"
    )
    for name in ("__init__", "__enter__", "__exit__"):
        method = getattr(block, name)
        method._torchdynamo_disable = True  # Dynamo's mark (torch.compiler.disable's)
        method._torchdynamo_disable_msg = message
        run_outside_dynamo(method.__code__)
