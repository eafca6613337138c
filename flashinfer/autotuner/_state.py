"""Per-thread tuning state: whether this thread (or asyncio task) tunes, its progress
callback, and the keys its innermost ``autotune()`` block tuned.

Each is a :class:`contextvars.ContextVar`, so ``with autotune():`` turns tuning on for the
code it wraps in the current thread only, and restores exactly the previous state on exit,
also when nested or left by an exception.  A process-wide flag could not do that when
threads enter and leave overlapping blocks (the last one out would restore someone else's
state), and a thread serving requests should not start timing kernels because another
thread is tuning.  Threads started inside the block do not tune unless they enter
``autotune()`` themselves.
"""

from __future__ import annotations

from contextvars import ContextVar

from ._types import ProgressCallback
from .keys import Key

__all__ = ["is_tuning"]

_tuning: ContextVar[bool] = ContextVar("flashinfer_autotune_enabled", default=False)
_progress: ContextVar[ProgressCallback | None] = ContextVar(
    "flashinfer_autotune_progress", default=None
)
#: Keys tuned in the innermost ``autotune()`` block (None outside any): a block that tuned
#: nothing new has nothing to save, and must not touch a cache file it only read.
_new_keys: ContextVar[list[Key] | None] = ContextVar("flashinfer_autotune_new_keys", default=None)


def is_tuning() -> bool:
    """Whether the current thread (or task) is inside an enabled ``autotune()`` block."""
    return _tuning.get()
