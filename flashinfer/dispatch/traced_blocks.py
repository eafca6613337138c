"""``use_backends`` blocks written inside a compiled function, obeyed by the calls they hold.

Such a block encloses the same calls on every run, so its restriction is known while
tracing: ``__enter__``/``__exit__`` push and pop it on a stack of the trace (constant
functions to Dynamo) and each traced call reads its API's entry.  A transparent call chooses
among the listed backends; an opaque one passes them in ``backend`` (``"auto|triton,torch"``)
and its real kernel runs the dispatcher inside an equivalent block.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping

from flashinfer.torch_boundary import constant_for_dynamo, tracing_context

RESTRICTED_PREFIX = "auto|"  # backend names hold neither "|" nor "," (.declarations)

_UNSET = object()
_local = threading.local()  # .trace: the TracingContext of the stack, .stack: its entries


def _stack() -> list[Mapping[str, tuple[str, ...]]]:
    """This thread's stack for the trace under way, emptied when another trace starts."""
    key = tracing_context()  # None outside a trace: hence the sentinel
    if getattr(_local, "trace", _UNSET) is not key:
        _local.trace, _local.stack = key, []
    stack: list[Mapping[str, tuple[str, ...]]] = _local.stack
    return stack


def enter_traced(backends: Mapping[str, tuple[str, ...]]) -> None:
    """A block restricting ``backends`` (``api_key -> names``) is entered in traced code."""
    _stack().append(dict(backends))


def leave_traced() -> None:
    """The newest block entered in traced code is left."""
    stack = _stack()
    if stack:
        stack.pop()


def traced_restriction(api_key: str) -> str | None:
    """The innermost traced block's restriction of ``api_key`` as a token, or None."""
    for backends in reversed(_stack()):
        listed = backends.get(api_key)
        if listed is not None:
            return restricted_token(listed)
    return None


# Constants to Dynamo: the blocks are the traced function's own code.
for _f in (enter_traced, leave_traced, traced_restriction):
    constant_for_dynamo(_f)


def restricted_token(backends: tuple[str, ...]) -> str:
    """``"auto"`` restricted to ``backends``, as an operator's ``backend`` argument."""
    return RESTRICTED_PREFIX + ",".join(backends)


def token_backends(backend: str) -> tuple[str, ...] | None:
    """The backends a :func:`restricted_token` lists, or None for any other ``backend``."""
    if not backend.startswith(RESTRICTED_PREFIX):
        return None
    return tuple(backend[len(RESTRICTED_PREFIX) :].split(","))
