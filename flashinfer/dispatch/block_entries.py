"""Which entry of a block object an exit ends, for the blocks that may be entered several times at
once (``use_backends`` here, the autotuner's ``autotune()``)."""

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
    """The entry an exit from ``frame`` ends, and whether it is one of this context's."""
    for entry in reversed(here):
        if entry.frame is frame:
            return entry, True
    elsewhere = next((e for e in reversed(anywhere) if e.frame is frame), None)
    if here and elsewhere is None:
        return here[-1], True
    if anywhere:
        return elsewhere or anywhere[-1], False
    return None
