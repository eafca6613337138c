"""Which entry of a block object an exit ends, for the blocks that may be entered several
times at once (``use_backends`` here, the autotuner's ``autotune()``).

One block object may be open in several contexts (threads, tasks) and nested in one.  A
``with`` statement leaves a block from the frame that entered it, so each entry keeps its
frame (``entry.frame``, None once left) and an exit is matched to the entry of its frame.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import FrameType
from typing import Any, Protocol, TypeVar

__all__ = ["HasFrame", "entry_to_leave"]


class HasFrame(Protocol):
    """An entry: the frame that entered it while it is open."""

    frame: FrameType | None


E = TypeVar("E", bound=HasFrame)


def entry_to_leave(here: Sequence[E], anywhere: Sequence[E], frame: Any) -> tuple[E, bool] | None:
    """The entry an exit from ``frame`` ends, and whether it is one of this context's.

    ``here``: the block's open entries in this context, ``anywhere``: its open entries in
    every context, oldest first.  This context's entry by ``frame``; else an entry by
    ``frame`` held elsewhere (a generator suspended inside the block, closed from another
    thread); else, for exits called by hand, this context's newest entry, or the newest
    anywhere.  None when the block has no open entry (left more often than entered)."""
    for entry in reversed(here):
        if entry.frame is frame:
            return entry, True
    elsewhere = next((e for e in reversed(anywhere) if e.frame is frame), None)
    if here and elsewhere is None:
        return here[-1], True
    if anywhere:
        return elsewhere or anywhere[-1], False
    return None
