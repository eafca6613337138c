"""Per-thread tuning state: whether this thread (or asyncio task) tunes, its progress
callback, its skipped ops and the keys its innermost ``autotune()`` block tuned.

ContextVars, not process-wide flags: threads entering and leaving overlapping blocks each
restore their own state, and a thread serving requests never times kernels because another
thread tunes.
"""

from __future__ import annotations

from contextvars import ContextVar, Token

from flashinfer.autotuner._types import ProgressCallback
from flashinfer.autotuner.keys import Key

_tuning: ContextVar[bool] = ContextVar("flashinfer_autotune_enabled", default=False)
_progress: ContextVar[ProgressCallback | None] = ContextVar(
    "flashinfer_autotune_progress", default=None
)
#: Keys tuned in the innermost block (None outside any): with none, the file is not touched.
_new_keys: ContextVar[list[Key] | None] = ContextVar("flashinfer_autotune_new_keys", default=None)

#: api_keys of the ops the enclosing ``autotune(skip_ops=...)`` blocks leave untuned.
_skipped: ContextVar[frozenset[str]] = ContextVar(
    "flashinfer_autotune_skipped_ops", default=frozenset()
)

BlockTokens = tuple[
    Token[bool], Token[ProgressCallback | None], Token[list[Key] | None], Token[frozenset[str]]
]

#: :func:`is_tuning` for the call paths: the ContextVar's own ``get`` (no Python frame).
tuning_now = _tuning.get

#: This thread's progress callback (None: none), for the timing of candidates.
progress_callback = _progress.get

#: The api_keys of the ops this thread's blocks skip: they run their default, untimed.
skipped_ops = _skipped.get


def is_tuning() -> bool:
    """Whether the current thread (or task) is inside an enabled ``autotune()`` block."""
    return _tuning.get()


def enter_block(
    enabled: bool, progress: ProgressCallback | None, skip: frozenset[str] = frozenset()
) -> BlockTokens:
    """Set this thread's state for a block (``skip`` adds to the enclosing blocks')."""
    skipped = _skipped.set(_skipped.get() | skip)
    return _tuning.set(enabled), _progress.set(progress), _new_keys.set([]), skipped


def leave_block(tokens: BlockTokens) -> list[Key]:
    """Restore the state before the block; the keys it tuned count for the enclosing one too."""
    tuning, progress, new_keys, skipped = tokens
    tuned_here = _new_keys.get() or []
    _skipped.reset(skipped)
    _new_keys.reset(new_keys)
    _progress.reset(progress)
    _tuning.reset(tuning)
    outer = _new_keys.get()
    if outer is not None:
        outer.extend(tuned_here)
    return tuned_here


def note_tuned(key: Key) -> None:
    """Record that this thread tuned ``key`` (its innermost block saves it on exit)."""
    new_keys = _new_keys.get()
    if new_keys is not None:
        new_keys.append(key)
