"""What one ``autotune()`` block did, said once when it ends: the block summary (an
:class:`AutotuneReport`; an :class:`AutotuneReportWarning` at the user's ``with`` line for an
outermost block that tuned, INFO on the ``flashinfer.autotuner`` logger for every outermost
block).  The guide: docs/api/autotuner.rst ("What a block says when it ends").
"""

from __future__ import annotations

import logging
import threading
import warnings
from collections.abc import Callable, Iterable, Sequence
from contextvars import ContextVar, Token
from dataclasses import dataclass, field
from typing import Any

from flashinfer.autotuner._types import Choice, TacticFailure, describe_tactic
from flashinfer.autotuner.keys import Key, key_to_json
from flashinfer.gating.exposed import exposed_in
from flashinfer.gating.messages import tuning_left_out_by_gate
from flashinfer.settings.stacklevel import user_stacklevel

#: The default ``AutoTuner.noisy_spread``.  ``benchmarks/bench_measure_spread.py`` on a
#: shared 2-core CPU: a small matmul's spread is 5 % at the 90th percentile unloaded, 10-19 %
#: loaded; 10 % flags the loaded outliers (a wrong flag costs one more timing later).
NOISY_SPREAD = 0.10

_logger = logging.getLogger("flashinfer.autotuner")

#: The "nothing was tuned" line names at most this many autotunable ops.
_NAMES_SHOWN = 8


@exposed_in("flashinfer.autotuner")
class AutotuneReportWarning(UserWarning):
    """The summary of an ``autotune()`` block, issued once when it ends: what was timed,
    left out and why, and saved.  Filter it by category to silence it; the same text goes
    to the ``flashinfer.autotuner`` logger at INFO."""


def is_noisy(median_s: float, iqr_s: float | None, limit: float = NOISY_SPREAD) -> bool:
    """Whether a measurement's spread (``iqr_s``, None: unknown) is more than ``limit``
    (``AutoTuner.noisy_spread``) of its median."""
    return iqr_s is not None and median_s > 0 and iqr_s > limit * median_s


def _ms(seconds: float) -> str:
    """A time as the summary shows it: in us below a millisecond, else in ms."""
    if seconds < 1e-3:
        return f"{seconds * 1e6:.4g} us"
    return f"{seconds * 1e3:.4g} ms"


def _spread_text(median_s: float, iqr_s: float, limit: float) -> str:
    share = iqr_s / median_s if median_s > 0 else 0.0
    return (
        f"median {_ms(median_s)}, IQR {_ms(iqr_s)} ({share:.0%} of the median, over the "
        f"{limit:.0%} of AutoTuner.noisy_spread)"
    )


@exposed_in("flashinfer.autotuner")
@dataclass
class KeyReport:
    """What a block did with one tuning key of one op."""

    op: str  #: the op's ``api_key``
    name: str  #: the op as users call it (its ``api_name``)
    key: Key
    #: ``"timed"``, ``"re-timed"`` (a saved noisy measurement timed again) or ``"reused"``
    #: (already tuned: loaded from a file, or tuned earlier in this process)
    outcome: str
    #: the backends whose (backend, tactic) pairs were timed, in plan order
    timed: tuple[str, ...] = ()
    pairs: int = 0  #: how many (backend, tactic) pairs were timed
    failures: tuple[TacticFailure, ...] = ()
    #: (backend, why) for every backend of the op that was not timed
    left_out: tuple[tuple[str, str], ...] = ()
    choice: Choice | None = None
    iqr_s: float | None = None  #: the spread of the pick's timed calls (None: unknown)
    #: the saved measurement that was timed again: (median_s, iqr_s)
    was_noisy: tuple[float, float] | None = None
    calls: int = 0  #: tuning-mode calls of this key in the block
    limit: float = NOISY_SPREAD  #: ``AutoTuner.noisy_spread`` when it was reported

    @property
    def noisy(self) -> bool:
        """Whether the pick's measurement (this block's, or the one reused) is noisy."""
        return self.choice is not None and is_noisy(self.choice.median_s, self.iqr_s, self.limit)

    def shape(self) -> str:
        """The key's inputs as the summary shows them: ``float32[16, 64], float32[64, 32]
        on cpu`` (dimensions as the key buckets them)."""
        data = key_to_json(self.key)
        parts = []
        for item in data["inputs"]:
            if isinstance(item, dict) and "shape" in item:
                parts.append(f"{item['dtype']}{item['shape']}")
            elif isinstance(item, dict) and "value" in item:
                parts.append(repr(item["value"]))
        where = data["device"] or "no device"
        return f"{', '.join(parts)} on {where}"

    def lines(self, *, failures: bool = True) -> list[str]:
        """This key's part of the summary (``failures=False``: without the failed pairs)."""
        head = f"{self.name}({self.shape()})"
        calls = f"{self.calls} call{'s' * (self.calls != 1)}"
        if self.outcome == "reused":
            assert self.choice is not None
            line = f"  {head}: already tuned ({calls}): {self._pick()}"
            if self.noisy and self.iqr_s is not None:
                line += f"; noisy ({_spread_text(self.choice.median_s, self.iqr_s, self.limit)})"
            return [line]
        what = "re-timed" if self.outcome == "re-timed" else "timed"
        failed = f", {len(self.failures)} failed" if self.failures else ""
        lines = [
            f"  {head}: {what} {', '.join(self.timed) or 'nothing'} "
            f"({self.pairs} (backend, tactic) pair{'s' * (self.pairs != 1)}{failed}; {calls})"
        ]
        if self.was_noisy is not None:
            lines.append(
                "    re-timed because the saved measurement was noisy "
                f"({_spread_text(*self.was_noisy, self.limit)})"
            )
        by_reason: dict[str, list[str]] = {}  # one line per reason: Triton's is long
        for backend, why in self.left_out:
            by_reason.setdefault(why, []).append(backend)
        for why, backends in by_reason.items():
            lines.append(f"    left out {', '.join(backends)}: {why}")
        for f in self.failures if failures else ():
            lines.append(f"    failed {f.backend} {describe_tactic(f.tactic)}: {f.reason}")
        if self.choice is None:
            lines.append("    no pick: nothing could be timed; calls run the first candidate")
            return lines
        lines.append(f"    picked {self._pick()}")
        if self.noisy and self.iqr_s is not None:
            spread = _spread_text(self.choice.median_s, self.iqr_s, self.limit)
            lines.append(
                f"    noisy: {spread}: the machine was busy? Saved with its spread; the next "
                "autotune() block that loads it times it again (or run `flashinfer autotune "
                "--force` on a quiet machine)"
            )
        return lines

    def _pick(self) -> str:
        assert self.choice is not None
        c = self.choice
        spread = "" if self.iqr_s is None else f", IQR {_ms(self.iqr_s)}"
        tactic = "" if c.tactic is None else f" {describe_tactic(c.tactic)}"
        return f"{c.backend}{tactic} (median {_ms(c.median_s)}{spread})"


@exposed_in("flashinfer.autotuner")
@dataclass
class FileReport:
    """What a block did with one tuning file."""

    path: str
    loaded: int | None = None  #: entries loaded on entry (None: not read, it did not exist)
    skipped: int = 0  #: entries of it not loaded (see the load's TuningFileWarning)
    saved: int | None = None  #: entries written on exit (None: not written)
    why_not_saved: str | None = None  #: why it was not written, when it was not

    def lines(self) -> list[str]:
        if self.loaded is None:
            read = "did not exist yet"
        else:
            skipped = f" ({self.skipped} skipped)" if self.skipped else ""
            read = f"loaded {self.loaded} entr{'y' if self.loaded == 1 else 'ies'}{skipped}"
        if self.saved is not None:
            done = f"saved {self.saved} entr{'y' if self.saved == 1 else 'ies'}"
        else:
            done = f"nothing saved ({self.why_not_saved or 'not written'})"
        return [f"  tuning file {self.path!r}: {read}; {done}"]


@exposed_in("flashinfer.autotuner")
@dataclass
class AutotuneReport:
    """What an ``autotune()`` block (with the blocks nested in it) did: ``str()`` is the
    summary the block says when it ends."""

    #: whether some block of it tuned (``enabled=True``); else only the logger is told
    enabled: bool = False
    #: per tuning key, in the order first seen
    keys: dict[Key, KeyReport] = field(default_factory=dict)
    #: api_key -> calls that ``skip_ops`` ran untimed
    skipped_ops: dict[str, int] = field(default_factory=dict)
    files: list[FileReport] = field(default_factory=list)
    #: the autotunable ops (their ``api_name``), for the "nothing was tuned" line
    tunable: tuple[str, ...] = ()

    @property
    def timed(self) -> list[KeyReport]:
        """The keys timed (or re-timed) in the block."""
        return [k for k in self.keys.values() if k.outcome != "reused"]

    @property
    def noisy(self) -> list[KeyReport]:
        """The keys whose pick rests on a noisy measurement."""
        return [k for k in self.keys.values() if k.noisy]

    def headline(self) -> str:
        timed, reused = len(self.timed), len(self.keys) - len(self.timed)
        if not self.keys and self.skipped_ops:
            return (
                "autotune() block: nothing was timed: the only backend='auto' calls of "
                "autotunable ops were of ops its skip_ops leaves untuned"
            )
        if not self.keys:
            shown = list(self.tunable[:_NAMES_SHOWN])
            if len(self.tunable) > _NAMES_SHOWN:
                shown.append(f"and {len(self.tunable) - _NAMES_SHOWN} more")
            return (
                "autotune() block: nothing was tuned: no backend='auto' call of an "
                f"autotunable op ran in it. Autotunable ops: {', '.join(shown) or 'none'}; "
                "calls with an explicit backend= and ops that are not autotunable are never "
                "timed"
            )
        noisy = f", {len(self.noisy)} noisy" if self.noisy else ""
        return (
            f"autotune() block: {timed} key{'s' * (timed != 1)} timed, {reused} already "
            f"tuned{noisy}"
        )

    def lines(self, *, files: bool = True, failures: bool = True) -> list[str]:
        """The summary, one line each; ``files=False``/``failures=False`` leave out the tuning
        files' and failed pairs' lines (``flashinfer autotune`` prints its own)."""
        lines = [self.headline()]
        for report in self.keys.values():
            lines += report.lines(failures=failures)
        for api_key, calls in sorted(self.skipped_ops.items()):
            lines.append(f"  {api_key}: {calls} call(s) left untuned by skip_ops (untimed)")
        if files:
            for f in self.files:
                lines += f.lines()
            if not self.files:
                lines.append(
                    "  no tuning_file= given: the results stay in this process "
                    "(autotune(tuning_file=path), or save_tuning_file(path), saves them)"
                )
        return lines

    def __str__(self) -> str:
        return "\n".join(self.lines())

    # ---- what the tuner records (only on the tuning path) --------------------------------

    def note_call(
        self,
        op: Any,
        runners: Any,
        candidates: Sequence[str],
        inputs: tuple,
        record: Any,
        was_noisy: tuple[float, float] | None,
        spread: float | None,
        limit: float,
    ) -> None:
        """What a tuning-mode call did (``record``, a ``TuningRecord``); the left out backends
        are asked of the dispatcher only when a key is timed."""
        if not record.timed and self.count_call(record.key):
            return  # a key this block already reported: only counted
        timing: dict[str, Any] = {}
        if record.timed:
            timing = {
                "timed": tuple(b for b in candidates if b in runners),
                "pairs": record.tried,
                "failures": record.failures,
                "left_out": left_out_reasons(op, candidates, runners, inputs),
            }
        outcome = "reused" if not record.timed else "timed" if was_noisy is None else "re-timed"
        iqr_s = record.iqr_s if record.timed else spread
        self.note_key(
            KeyReport(
                op.api_key,
                op.api_name,
                record.key,
                outcome,
                choice=record.choice,
                iqr_s=iqr_s,
                was_noisy=was_noisy,
                limit=limit,
                **timing,
            )
        )

    def count_call(self, key: Key) -> bool:
        """Count a call of a key already reported (True), else False: :meth:`note_key` it."""
        held = self.keys.get(key)
        if held is None:
            return False
        with _lock:
            held.calls += 1
        return True

    def note_key(self, report: KeyReport) -> None:
        """A tuning-mode call of ``report.key``: the first report is kept, later calls counted."""
        with _lock:
            held = self.keys.get(report.key)
            if held is None or (held.outcome == "reused" and report.outcome != "reused"):
                report.calls += 0 if held is None else held.calls
                self.keys[report.key] = held = report
            held.calls += 1

    def note_skipped(self, api_key: str) -> None:
        with _lock:
            self.skipped_ops[api_key] = self.skipped_ops.get(api_key, 0) + 1


#: Guards the reports' counts (threads sharing a block's context write to its report).
_lock = threading.Lock()

#: The report of this context's outermost ``autotune()`` block (None outside any).
_current: ContextVar[AutotuneReport | None] = ContextVar("flashinfer_autotune_report", default=None)

#: :func:`current_report` for the tuning path: the ContextVar's own ``get``.
current_report = _current.get


def open_report(enabled: bool) -> tuple[AutotuneReport, Token[AutotuneReport | None] | None]:
    """The enclosing block's report, or (outermost) a new one with its token."""
    report = _current.get()
    if report is not None:
        report.enabled |= enabled
        return report, None
    report = AutotuneReport(enabled=enabled)
    return report, _current.set(report)


def close_report(
    report: AutotuneReport,
    token: Token[AutotuneReport | None],
    tunable: Callable[[], Iterable[str]],
    *,
    warn: bool,
) -> None:
    """The outermost block ended: log the summary and, with ``warn`` (not left by an exception),
    warn it at the user's line."""
    _current.reset(token)
    if not report.keys:
        report.tunable = tuple(tunable())
    text = str(report)
    _logger.info("%s", text)
    if warn and report.enabled:
        warnings.warn(text, AutotuneReportWarning, stacklevel=user_stacklevel())


def left_out_reasons(
    op: Any, candidates: Sequence[str], runners: Any, inputs: tuple
) -> tuple[tuple[str, str], ...]:
    """(backend, why) for every backend of ``op`` this tuning does not time, with the reason
    ``op.explain()`` gives (asked only when a key is timed)."""
    found = [
        (b, "no autotuner runner (the op registers none for it)")
        for b in candidates
        if b not in runners
    ]
    others = [b for b in op.backend_checks if b not in candidates]
    if not others:
        return tuple(found)
    reasons: dict[str, str] = {}
    try:  # the routed inputs are the API's parameters but backend, in order
        names = op.dispatcher.routed_inputs()
        if names is not None and len(names) == len(inputs):
            explanation = op.explain(**dict(zip(names, inputs, strict=True)))
            for v in explanation.verdicts:
                if v.candidate or v.reason is None:
                    continue
                reasons[v.backend] = tuning_left_out_by_gate() if v.stage == "gate" else v.reason
    except Exception:  # noqa: BLE001 - the summary never breaks a tuning
        pass
    for b in others:
        why = reasons.get(b, f"not a candidate of this call ({op.api_name}.explain(...) says why)")
        found.append((b, why))
    return tuple(found)
