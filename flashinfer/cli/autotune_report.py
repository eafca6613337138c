"""The ops ``flashinfer autotune`` tunes (:func:`tunable_ops`, also for ``--help``) and what
it shows: the progress on stderr (a ``tqdm`` bar per shape on a terminal, at most
:data:`PROGRESS_WIDTH` columns; plain lines to a file or a pipe, no ``\r``) and the summary
table, with every failed (backend, tactic) pair under it, on stdout."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TextIO

from tqdm import tqdm

from flashinfer.cli.common import format_table

if TYPE_CHECKING:
    from flashinfer.testing.examples import ExampleInputs

#: Progress lines fit 80 columns (exactly 80 makes some terminals wrap when redrawn).
PROGRESS_WIDTH = 79
#: The reason of a failed pair is cut to this many characters (Triton's can be long).
REASON_WIDTH = 100


def tunable_ops() -> dict[str, tuple[Any, ExampleInputs]]:
    """``api_name -> (op, target)`` of the ops registered with the autotuner that declare example
    inputs, in the order of ``flashinfer.api_modules.OPS`` (others after)."""
    from flashinfer.api_modules import OPS, load_api_modules
    from flashinfer.autotuner import AutoTuner
    from flashinfer.testing import example_inputs_for

    load_api_modules()
    found: dict[str, tuple[Any, ExampleInputs]] = {}
    for op, _ in AutoTuner.get().registered().values():
        name = getattr(op, "api_name", None)
        target = example_inputs_for(name) if isinstance(name, str) else None
        if isinstance(name, str) and target is not None:
            found[name] = (op, target)
    order = {name: i for i, name in enumerate(OPS)}
    return dict(sorted(found.items(), key=lambda item: order.get(item[0], len(order))))


def _fit(text: str, width: int) -> str:
    """``text`` on one line (control characters as spaces), cut to ``width`` with ``...``."""
    if not text.isprintable():
        text = "".join(c if c.isprintable() else " " for c in text)
    return text if len(text) <= width else text[: width - 3] + "..."


class _Bar(tqdm):
    """tqdm with a ``{label}`` field in its format (the pair being timed)."""

    monitor_interval = 0  # no monitor thread: the command redraws the bar itself

    def __init__(self, *args: Any, label: str = "", **kwargs: Any) -> None:
        self.label = label  # read by the first draw, at the end of tqdm's __init__
        super().__init__(*args, **kwargs)

    @property
    def format_dict(self) -> dict[str, Any]:
        return {**super().format_dict, "label": self.label}


def _fit_middle(text: str, width: int) -> str:
    """:func:`_fit`, cut in the middle: labels of one backend differ at their ends."""
    text = _fit(text, len(text))
    if len(text) <= width:
        return text
    if width < 9:
        return _fit(text, width)
    tail = (width - 3) // 2
    return text[: width - 3 - tail] + "..." + text[len(text) - tail :]


def _initials(key: str) -> str:
    """``BLOCK_M`` -> ``BM``, ``num_warps`` -> ``nw``: the first letter of each part."""
    parts = [part for part in key.replace("-", "_").split("_") if part]
    return "".join(part[0] for part in parts) or key


def short_label(label: str) -> str:
    """A pair's label written short for the bar: ``triton {"BLOCK_K": 64, "num_warps": 8}`` ->
    ``triton BK=64,nw=8`` (a key's initials, the whole key where two clash)."""
    backend, _, tactic = label.partition(" ")
    try:
        value = json.loads(tactic)
    except ValueError:
        return label
    if isinstance(value, dict) and value:
        short = {key: _initials(str(key)) for key in value}
        clash = {s for s in short.values() if list(short.values()).count(s) > 1}
        items = [
            f"{key if short[key] in clash else short[key]}="
            f"{json.dumps(v, sort_keys=True, separators=(',', ':'))}"
            for key, v in value.items()
        ]
        return f"{backend} {','.join(items)}"
    return f"{backend} {json.dumps(value, sort_keys=True, separators=(',', ':'))}"


def _is_terminal(stream: TextIO) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):  # no isatty, or a closed stream
        return False


class TuningProgress:
    """The progress on stderr: a bar per shape redrawn in place on a terminal, else one plain line
    per pair and one per shape done."""

    def __init__(
        self, stream: TextIO, total_shapes: int, width: int = 12, *, tty: bool | None = None
    ) -> None:
        self.stream = stream
        self.total_shapes = total_shapes
        self.width = width
        self.tty = _is_terminal(stream) if tty is None else tty
        self.shape_index = 0
        self.shape_label = ""
        self._bar: _Bar | None = None

    def start_shape(self, index: int, label: str) -> None:
        self.end_line()
        self.shape_index = index
        self.shape_label = label

    def _fields(self, done: int, total: int, label: str) -> tuple[str, str]:
        """The text before the bar and the label after it, cut so that the line fits."""
        counts = len(f" [{'#' * self.width}] {done}/{total} ")
        head = f"[{self.shape_index + 1}/{self.total_shapes}] "
        # The shape keeps what the counts and at least 16 characters of the label leave.
        room = max(PROGRESS_WIDTH - len(head) - counts - 16, 8)
        desc = _fit(head + _fit(self.shape_label, room), max(PROGRESS_WIDTH - counts - 3, 3))
        return desc, _fit_middle(short_label(label), max(PROGRESS_WIDTH - len(desc) - counts, 3))

    def end_line(self) -> None:
        """Leave the current bar as drawn and end its line (before other output)."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def __call__(self, done: int, total: int, label: str) -> None:
        if not self.tty:
            self._line(done, total, label)
            return
        desc, label = self._fields(done, total, label)
        if self._bar is None or self._bar.total != total:
            self.end_line()
            self._bar = _Bar(
                total=total,
                initial=done,
                desc=desc,
                label=label,
                file=self.stream,
                ncols=PROGRESS_WIDTH,
                bar_format=f"{{desc}} [{{bar:{self.width}}}] {{n_fmt}}/{{total_fmt}} {{label}}",
                ascii=".#",
                mininterval=0,
            )
        else:
            self._bar.n, self._bar.label = done, label
            self._bar.set_description_str(desc, refresh=False)
            self._bar.refresh()
        if done == total:
            self.end_line()

    def _line(self, done: int, total: int, label: str) -> None:
        """One plain line: the shape, which pair of how many, its label (or done)."""
        desc, label = self._fields(done, total, label)
        print(f"{desc} {done + (done < total)}/{total} {label}", file=self.stream, flush=True)


@dataclass
class ShapeResult:
    """What tuning one shape did: the tuner's record, and the call's error if it raised."""

    shape: str
    record: Any  # TuningRecord | None (None: the call never reached the tuner)
    error: str | None = None
    retimed: bool = False  # its key was in the file, but its saved timing was noisy

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
        if rec.timed and self.retimed:
            source = "re-timed (its saved timing was noisy)"
        if rec.timed and getattr(rec, "too_noisy", False):
            # a faster-looking pair was within the spread of the timed calls: not a win
            source = "tuned; too noisy to choose (kept the earlier pair)"
        tactic = json.dumps(self.choice.tactic, sort_keys=True)
        spread = rec.iqr_s if rec.timed else None  # known only for a key timed now
        return (
            self.shape,
            self.choice.backend,
            tactic,
            f"{self.choice.median_s * 1e3:.4f}"
            + ("" if spread is None else f"+-{spread * 1e3:.4f}"),
            failed,
            source,
        )

    def failure_lines(self) -> list[str]:
        """One line per failed pair: the whole tactic and the reason (cut)."""
        lines = []
        for failure in () if self.record is None else self.record.failures:
            tactic = json.dumps(failure.tactic, sort_keys=True, separators=(",", ":"))
            reason = _fit(failure.reason, REASON_WIDTH)
            lines.append(f"  {self.shape} {failure.backend} {tactic}: {reason}")
        if self.error is not None:
            lines.append(f"  {self.shape} (the call itself): {_fit(self.error, REASON_WIDTH)}")
        return lines


def print_summary(results: Sequence[ShapeResult], out: TextIO) -> None:
    header = ("SHAPE", "BACKEND", "TACTIC", "MEDIAN+-IQR MS", "FAILED", "SOURCE")
    print(format_table([header, *(r.row() for r in results)]), file=out)
    tried = sum(r.record.tried for r in results if r.record is not None and r.record.timed)
    failed = [line for r in results for line in r.failure_lines()]
    failures = sum(len(r.record.failures) for r in results if r.record is not None)
    if failed:
        print(file=out)
        print(f"{failures} of {tried} (backend, tactic) pairs failed:", file=out)
        for line in failed:
            print(line, file=out)


def print_block_report(report: Any, out: TextIO) -> None:
    """The block's summary, without what the command prints itself (files, failures)."""
    if report is None:
        return
    print(file=out)
    for line in report.lines(files=False, failures=False):  # the table lists failures
        print(line, file=out)


def print_stats(stats: Mapping[str, Any], out: TextIO) -> None:
    """The tuner's per-op counts (``AutoTuner.get().stats()``: ``api_key -> OpStats``)."""
    if not stats:
        return
    header = ("OP", "KEYS TUNED", "LOADED", "CALLS TUNED", "CALLS DEFAULT", "FAILED")
    rows = [
        (
            api_key,
            *map(str, s[:5]),
            "-" if s.last_failure is None else _fit(s.last_failure, REASON_WIDTH),
        )
        for api_key, s in stats.items()
    ]
    print(file=out)
    print("autotuner stats (AutoTuner.get().stats()):", file=out)
    print(format_table([(*header, "LAST FAILURE"), *rows]), file=out)
