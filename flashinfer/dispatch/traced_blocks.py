"""``use_backends`` blocks written inside a compiled function, obeyed by the calls they hold.

Such a block encloses the same calls on every run, so its restriction is known while
tracing: its ``__enter__``/``__exit__`` push and pop it on a stack of the trace (functions
Dynamo calls as constants, leaving nothing in the graph), and each traced call reads its
API's entry (:func:`traced_restriction`).  A transparent call chooses among the listed
backends; an opaque one passes the restriction in its ``backend`` argument
(``"auto|triton,torch"``), and the operator's real kernel runs the dispatcher inside an
equivalent block.  The stack belongs to one trace (Dynamo's ``TracingContext``), so a trace
that restarts leaves nothing behind.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping

from flashinfer.torch_boundary import constant_for_dynamo, tracing_context

__all__ = [
    "RESTRICTED_PREFIX",
    "enter_traced",
    "leave_traced",
    "restricted_token",
    "token_backends",
    "traced_restriction",
]

RESTRICTED_PREFIX = "auto|"
"""How an opaque traced call's ``backend`` argument carries a block's restriction:
``"auto|triton,torch"`` is ``"auto"`` restricted to those backends, in that order (a
backend's name is letters, digits, ``_`` and ``-``, so it holds neither ``|`` nor ``,``: see
:mod:`.declarations`)."""

_UNSET = object()
_local = threading.local()  # .trace: the TracingContext of the stack, .stack: its entries


def _stack() -> list[Mapping[str, tuple[str, ...]]]:
    """This thread's stack for the trace under way, emptied when another trace starts."""
    key = tracing_context()
    # A sentinel, not None: outside any TracingContext the key is None, and a thread that
    # never traced has no stack yet (it depended on what an earlier test ran).
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
    """The restriction the innermost traced block naming ``api_key`` gives its calls, as
    the ``backend`` token an opaque call passes on (:func:`restricted_token`), or None."""
    for backends in reversed(_stack()):
        listed = backends.get(api_key)
        if listed is not None:
            return restricted_token(listed)
    return None


# Dynamo calls these while tracing and uses their results as constants: the blocks are
# the traced function's own code, the same on every run of the graph.
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
