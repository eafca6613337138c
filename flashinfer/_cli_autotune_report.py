"""What ``flashinfer autotune`` shows: the progress line on stderr, and the summary table
with every failed (backend, tactic) pair listed under it on stdout."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TextIO

from .cli_common import _table

#: Progress lines are at most this long: they fit an 80-column terminal, and a line of
#: exactly 80 characters makes some terminals wrap the cursor when redrawn in place.
PROGRESS_WIDTH = 79
#: The reason of a failed pair is cut to this many characters (Triton's can be long).
REASON_WIDTH = 100


def _fit(text: str, width: int) -> str:
    """``text`` on one line (control characters become spaces), cut to ``width`` (>= 3)
    characters; ``...`` marks a cut."""
    if not text.isprintable():
        text = "".join(c if c.isprintable() else " " for c in text)
    return text if len(text) <= width else text[: width - 3] + "..."


class _Progress:
    """A plain-text progress bar on stderr (redrawn in place on a terminal), every line at
    most :data:`PROGRESS_WIDTH` characters."""

    def __init__(self, stream: TextIO, total_shapes: int, width: int = 12) -> None:
        self.stream = stream
        self.tty = bool(getattr(stream, "isatty", lambda: False)())
        self.total_shapes = total_shapes
        self.width = width
        self.shape_index = 0
        self.shape_label = ""
        self._last_len = 0

    def start_shape(self, index: int, label: str) -> None:
        self.shape_index = index
        self.shape_label = label

    def line(self, done: int, total: int, label: str) -> str:
        filled = self.width if total == 0 else self.width * min(max(done, 0), total) // total
        bar = "#" * filled + "." * (self.width - filled)
        head = f"[{self.shape_index + 1}/{self.total_shapes}] "
        counts = f" [{bar}] {done}/{total} "
        # The shape keeps what the counts and at least 16 characters of the label leave.
        room = max(PROGRESS_WIDTH - len(head) - len(counts) - 16, 8)
        return _fit(head + _fit(self.shape_label, room) + counts + label, PROGRESS_WIDTH)

    def end_line(self) -> None:
        """End a line left open by an in-place redraw (before other output)."""
        if self._last_len:
            self.stream.write("\n")
            self.stream.flush()
            self._last_len = 0

    def __call__(self, done: int, total: int, label: str) -> None:
        line = self.line(done, total, label)
        if self.tty:
            pad = " " * max(0, self._last_len - len(line))
            self.stream.write(f"\r{line}{pad}")
            self._last_len = len(line)
            if done == total:
                self.stream.write("\n")
                self._last_len = 0
        else:
            self.stream.write(line + "\n")
        self.stream.flush()


def _median_cell(median_s: float, iqr_s: float | None) -> str:
    """``median+-IQR`` in ms, one word (the spread is known only for a key timed now)."""
    spread = "" if iqr_s is None else f"+-{iqr_s * 1e3:.4f}"
    return f"{median_s * 1e3:.4f}{spread}"


@dataclass
class _ShapeResult:
    """What tuning one shape did: the tuner's record, and the call's error if it raised."""

    shape: str
    record: Any  # TuningRecord | None (None: the call never reached the tuner)
    error: str | None = None

    @property
    def choice(self) -> Any:
        return None if self.record is None else self.record.choice

    @property
    def tuned_now(self) -> bool:
        return self.record is not None and self.record.timed and self.choice is not None

    def row(self) -> tuple[str, ...]:
        rec = self.record
        failed = f"{len(rec.failures)}/{rec.tried}" if rec is not None and rec.timed else "-"
        if self.choice is None:
            return (self.shape, "-", "-", "-", failed, "nothing could be timed")
        source = "tuned" if rec.timed else "reused (key already tuned)"
        tactic = json.dumps(self.choice.tactic, sort_keys=True)
        return (
            self.shape,
            self.choice.backend,
            tactic,
            _median_cell(self.choice.median_s, rec.iqr_s if rec.timed else None),
            failed,
            source,
        )

    def failure_lines(self) -> list[str]:
        """One line per failed pair: the whole tactic (it tells the pairs apart) and the
        reason, cut to :data:`REASON_WIDTH`."""
        lines = []
        for failure in () if self.record is None else self.record.failures:
            tactic = json.dumps(failure.tactic, sort_keys=True, separators=(",", ":"))
            reason = _fit(failure.reason, REASON_WIDTH)
            lines.append(f"  {self.shape} {failure.backend} {tactic}: {reason}")
        if self.error is not None:
            lines.append(f"  {self.shape} (the call itself): {_fit(self.error, REASON_WIDTH)}")
        return lines


def _print_summary(results: Sequence[_ShapeResult], out: TextIO) -> None:
    header = ("SHAPE", "BACKEND", "TACTIC", "MEDIAN+-IQR MS", "FAILED", "SOURCE")
    print(_table([header, *(r.row() for r in results)]), file=out)
    tried = sum(r.record.tried for r in results if r.record is not None and r.record.timed)
    failed = [line for r in results for line in r.failure_lines()]
    failures = sum(len(r.record.failures) for r in results if r.record is not None)
    if failed:
        print(file=out)
        print(f"{failures} of {tried} (backend, tactic) pairs failed:", file=out)
        for line in failed:
            print(line, file=out)
