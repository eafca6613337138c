"""Helpers shared by the ``flashinfer`` command's sub-commands: usage errors, tables, the gate."""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from typing import Any

PROG = "flashinfer"
DTYPES = ("float32", "float16", "bfloat16")


class UsageError(Exception):
    """A bad command line: reported with the usage, exit code 2."""

    def __init__(self, message: str, parser: argparse.ArgumentParser | None = None) -> None:
        super().__init__(message)
        self.parser = parser


# --------------------------------------------------------------------------------------
# Shared helpers
# --------------------------------------------------------------------------------------


def _table(rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows
    )


def _gate_state() -> dict[str, Any]:
    """The experimental gate: the variable's raw value and whether it is on."""
    import warnings

    from flashinfer.gating.gate import (
        ACCEPTED_GATE_VALUES,
        ALLOW_EXPERIMENTAL_AUTO_BACKENDS_ENV,
        GATE_OFF_VALUES,
        experimental_auto_backends_allowed,
    )

    raw = os.environ.get(ALLOW_EXPERIMENTAL_AUTO_BACKENDS_ENV)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # an unrecognised value is reported below instead
        on = experimental_auto_backends_allowed()
    note = None
    if raw is not None and raw != "1" and raw not in GATE_OFF_VALUES:
        note = f"unrecognised value, treated as off (accepted: {ACCEPTED_GATE_VALUES})"
    return {"variable": ALLOW_EXPERIMENTAL_AUTO_BACKENDS_ENV, "value": raw, "on": on, "note": note}


def _gate_line(gate: dict[str, Any]) -> str:
    value = "unset" if gate["value"] is None else repr(gate["value"])
    state = "on" if gate["on"] else "off"
    meaning = (
        "backend='auto' and the autotuner may pick experimental backends"
        if gate["on"]
        else "backend='auto' and the autotuner skip experimental backends"
    )
    extra = f"; {gate['note']}" if gate["note"] else ""
    return f"experimental gate: {gate['variable']}={value} -> {state}\n  ({meaning}{extra})"
