"""What the autotuner tells the dispatcher about its choices: the log line of a backend it
runs for a ``backend="auto"`` call (``flashinfer.dispatch``, once per (op, backend, how)),
and the tuned result ``op.explain`` shows.

The router and the tuner call :func:`note_run` only while :data:`LOG_SWITCH` ``.armed`` (one
attribute test; see ``flashinfer.dispatch.choice_log``).  Like the router, this module sees
the tuner only through its arguments, never ``tuner.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from flashinfer.autotuner._state import tuning_now as tuning_now
from flashinfer.autotuner._types import TunableOp
from flashinfer.autotuner.fingerprint import loaded_fingerprint
from flashinfer.autotuner.keys import make_key
from flashinfer.dispatch.choice_log import LOG_SWITCH as LOG_SWITCH
from flashinfer.dispatch.choice_log import note_tuner_choice
from flashinfer.dispatch.restrictions import restriction_for

__all__ = ["LOG_SWITCH", "ChoiceView", "note_run", "tuned_choice", "tuning_now"]

TUNED_HERE = "tuned in this process"
LOADED = "loaded from a file"


def _source(tuner: Any, api_key: str, inputs: tuple) -> tuple[Any, str] | None:
    """The tuned choice of these inputs and where it comes from, or None (untuned)."""
    key = make_key(api_key, inputs)
    choice = tuner.choice(key)
    if choice is None:
        return None
    return choice, LOADED if loaded_fingerprint(tuner, key, choice) is not None else TUNED_HERE


def note_run(
    tuner: Any, op: TunableOp, backend: str, tuned: Any, candidates: Sequence[str], inputs: tuple
) -> None:
    """Log that the tuner runs ``backend`` for this call: its tuned choice, or the first
    candidate with its default tactic.  ``tuned``: whether it is the tuned choice, or the
    choice the tuner looked up (None: untuned), which ran if ``backend`` is its backend."""
    log = op.dispatcher.choice_log
    restricted = restriction_for(op.api_key) is not None
    if tuned is True or (tuned not in (None, False) and tuned[0] == backend):
        if backend is log.tuned:
            return
        found = _source(tuner, op.api_key, inputs)
        source = TUNED_HERE if found is None else found[1]
    else:
        if backend is (log.tuner_restricted if restricted else log.tuner_auto):
            return
        source = None
    dropped = op.dispatcher.dropped_experimental_backends.current()
    note_tuner_choice(log, backend, candidates, dropped, restricted, source)


def tuned_choice(tuner: Any, api_key: str, inputs: tuple) -> tuple[str, Any, str] | None:
    """``(backend, tactic, source)`` of the tuned result for these inputs of a registered
    op, or None (not registered, untuned, or inputs the key cannot read)."""
    if api_key not in tuner.registered():
        return None
    try:
        found = _source(tuner, api_key, inputs)
    except Exception:  # noqa: BLE001 - explain reports no tuned result rather than fail
        return None
    if found is None:
        return None
    choice, source = found
    return choice.backend, choice.tactic, source


class ChoiceView:
    """The dispatcher's :class:`~flashinfer.dispatch.tuner_view.TunerView` of the tuner that
    ``get_tuner`` returns (``AutoTuner.get``; installed by :mod:`flashinfer.autotuner`)."""

    def __init__(self, get_tuner: Callable[[], Any]) -> None:
        self._get_tuner = get_tuner

    def registered(self, api_key: str) -> bool:
        return api_key in self._get_tuner().registered()

    def tuning_now(self) -> bool:
        return tuning_now()

    def tuned_choice(self, api_key: str, inputs: tuple) -> tuple[str, Any, str] | None:
        return tuned_choice(self._get_tuner(), api_key, inputs)
