"""What the dispatcher may ask the autotuner, without importing it."""

from __future__ import annotations

from typing import Any, Protocol

__all__ = ["TunerView", "install_tuner_view", "tuner_view"]


class TunerView(Protocol):
    """The questions the dispatcher asks the process's tuner."""

    def registered(self, api_key: str) -> bool:
        """Whether the op is registered with the tuner (its ``"auto"`` calls are tuned)."""
        ...

    def tuning_now(self) -> bool:
        """Whether this thread is inside an ``autotune()`` block that times new keys."""
        ...

    def tuned_choice(self, api_key: str, inputs: tuple) -> tuple[str, Any, str] | None:
        """``(backend, tactic, where it comes from)`` of the tuned result, or None."""
        ...


_view: TunerView | None = None


def install_tuner_view(view: TunerView | None) -> None:
    """Called by :mod:`flashinfer.autotuner` on import (None removes it, for tests)."""
    global _view
    _view = view


def tuner_view() -> TunerView | None:
    """The installed view, or None when the program never imported the autotuner."""
    return _view
