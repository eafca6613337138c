"""The ``autotune()`` block: tuning on for the code it wraps (this thread only), its tuning
file loaded on entry and saved on exit, its ``skip_ops``, and what it did, said once when it
ends: the block summary (an :class:`AutotuneReport`; an :class:`AutotuneReportWarning` at
the user's ``with`` line for an outermost block that tuned, INFO on the
``flashinfer.autotuner`` logger for every outermost block).  The guide: docs/api/autotuner.rst
("What a block says when it ends")."""

from __future__ import annotations

import logging
import os
import sys
import threading
import warnings
from collections.abc import Callable, Iterable, Sequence
from contextvars import ContextVar, Token
from dataclasses import dataclass, field
from typing import Any

from flashinfer.autotuner import distributed
from flashinfer.autotuner._types import (
    NOISY_SPREAD,
    BlockTokens,
    Choice,
    ProgressCallback,
    TacticFailure,
    describe_tactic,
    enter_block,
    is_noisy,
    leave_block,
    report_var,
    resolve_skip_ops,
)
from flashinfer.autotuner.disk import checked_path
from flashinfer.autotuner.keys import Key, key_to_json
from flashinfer.autotuner.tuner import AutoTuner
from flashinfer.dispatch.restrictions import entry_to_leave
from flashinfer.gating.exposed import exposed_in
from flashinfer.gating.messages import tuning_left_out_by_gate
from flashinfer.settings.stacklevel import user_stacklevel
from flashinfer.torch_boundary import block_boundary


class autotune:  # noqa: N801 - used like a function: ``with autotune():``
    """Tune ``backend="auto"`` calls of tunable ops made inside the block (this thread only).

    ``enabled=False``: no tuning inside (tuned results are still used).  ``tuning_file=path``
    (old spelling ``cache=``; ``TypeError`` for both) is loaded on entry if it exists and, if the
    block (or one nested in it) tuned a key, saved on exit, also when the block raises; a block
    that tuned nothing never writes, locks nor creates it.  ``ValueError`` at once for an empty
    path, :class:`~flashinfer.autotuner.tuning_file.TuningFileError` for one that is not a
    regular file or lies in a missing directory.  ``progress`` is called before each timing
    (:data:`ProgressCallback`).  ``skip_ops``: ops (``flashinfer.mm``, ``"mm"`` or
    ``"flashinfer.gemm.mm"``) left untuned, running their first candidate's default tactic
    (nested blocks add to it); ``ValueError`` naming the valid names for one that is not
    autotunable, ``TypeError`` for any other item.  ``process_group`` (None: the one set by
    ``set_autotune_process_group``) tunes across its ranks, one choice on every rank; ``shard=True``
    splits the timing across them; with a group only rank 0 reads and writes ``tuning_file``.
    ``with`` yields the :class:`AutoTuner`; the previous state is restored on exit.

    A class, not a ``contextlib`` generator: the load's warnings point at the user's ``with``.
    One object may be entered again, nested, and from several threads or tasks at once: each
    entry restores its own state in the context that entered it; blocks left out of order are
    restored (and saved) once the blocks entered after them are left.  A block left in another
    thread than the one that entered it raises ``RuntimeError`` there."""

    def __init__(
        self,
        enabled: bool = True,
        *,
        tuning_file: str | os.PathLike[str] | None = None,
        cache: str | os.PathLike[str] | None = None,
        progress: ProgressCallback | None = None,
        skip_ops: Iterable[Any] | None = (),
        process_group: Any = None,
        shard: bool | None = None,
    ) -> None:
        self.enabled = bool(enabled)
        # With a group, rank 0 checks the path on entry for all (hosts differ): here, its form.
        grouped = process_group is not None or distributed.group_in_effect() is not None
        if cache is not None:
            if tuning_file is not None:
                raise TypeError(
                    "autotune(): got both tuning_file= and cache= (its old spelling); "
                    "pass tuning_file= only"
                )
            tuning_file = cache
        self.tuning_file = (
            None if tuning_file is None else checked_path(tuning_file, local=not grouped)
        )
        self.progress = progress
        self.skip_ops = resolve_skip_ops(skip_ops, AutoTuner.get().registered)
        self.process_group, self.shard = process_group, shard
        self._open: list[_TuneEntry] = []  # this block's entries not left yet, any context
        #: What the block did, from its entry on (a nested block's: its outermost's).
        self.report: AutotuneReport | None = None

    def __enter__(self) -> AutoTuner:
        tuner = AutoTuner.get()
        _unwind_left(tuner)  # entries of this context left from elsewhere
        group = distributed.open_block(tuner, self.tuning_file, self.process_group, self.shard)
        tokens = enter_block(self.enabled, self.progress, self.skip_ops)
        entry = _TuneEntry(self, tokens, group, sys._getframe(1))
        entry.report, entry.report_token = open_report(self.enabled)
        self.report = entry.report
        if self.tuning_file is not None:
            loaded = group.loaded
            entry.file = FileReport(
                self.tuning_file,
                None if loaded is None else loaded.loaded,
                0 if loaded is None else loaded.total_skipped,
            )
            entry.report.files.append(entry.file)
        with _entries_lock:
            self._open.append(entry)
        _entries.set((*_entries.get(), entry))
        return tuner

    def __exit__(self, *exc_info: object) -> None:
        frame = sys._getframe(1)
        raised = exc_info[0] is not None
        mine = [e for e in _entries.get() if e.block is self and not e.left]
        with _entries_lock:
            found = entry_to_leave(mine, self._open, frame)
            if found is None:
                raise RuntimeError(
                    "autotune(): this block was left more times than it was entered; "
                    "leave a block once per entry (a with statement does)"
                )
            entry, is_here = found
            self._open.remove(entry)
            if not is_here:  # entered in another context: left (and restored) there later
                entry.left, entry.frame = True, None
                raise RuntimeError(
                    "autotune(): this block was left in a thread or task that did not "
                    "enter it (a generator suspended inside the block, closed from another "
                    "thread?); the thread that entered it stays in tuning mode until it "
                    "next enters or leaves an autotune() block. Leave a block in the "
                    "thread that entered it, e.g. close such a generator there"
                )
            entry.left, entry.frame = True, None
            entry.raised = raised
        _unwind_left(AutoTuner.get())


class _TuneEntry:
    """One entry into a block: its tokens, group handle, entering frame (while open), whether it
    was left (restored once it is this context's newest entry) and its report."""

    __slots__ = (
        "block", "tokens", "group", "frame", "left", "raised", "report", "report_token", "file",
    )  # fmt: skip

    def __init__(self, block: autotune, tokens: BlockTokens, group: Any, frame: Any) -> None:
        self.block, self.tokens, self.group, self.frame = block, tokens, group, frame
        self.left = self.raised = False
        self.report: AutotuneReport = AutotuneReport()
        self.report_token: Any = None
        self.file: FileReport | None = None


#: This context's ``autotune()`` entries, oldest first.
_entries: ContextVar[tuple[_TuneEntry, ...]] = ContextVar("flashinfer_autotune_entries", default=())
_entries_lock = threading.Lock()


def _unwind_left(tuner: AutoTuner) -> None:
    """Restore each left entry at the top of this context's entries, newest first, saving its
    tuning file (a ContextVar token is exact only when reset in reverse order)."""
    entries = _entries.get()
    if not entries or not entries[-1].left:
        return
    entry = entries[-1]
    _entries.set(entries[:-1])
    saved_ok = False
    try:
        tuned = False
        try:
            tuned = bool(leave_block(entry.tokens))
        finally:
            saved = distributed.close_block(entry.group, tuner, entry.block.tuning_file, tuned)
        if entry.file is not None:  # what became of the block's tuning file
            entry.file.saved = saved
            if saved is None:
                entry.file.why_not_saved = (
                    "rank 0 of the autotune process group saves it"
                    if tuned
                    else "nothing new was tuned in the block; the file is left unchanged"
                )
        saved_ok = True
    finally:
        if entry.report_token is not None:  # the outermost block: say what it did, once
            close_report(
                entry.report,
                entry.report_token,
                lambda: _tunable_names(tuner),
                warn=saved_ok and not entry.raised,
            )
        _unwind_left(tuner)


def _tunable_names(tuner: AutoTuner) -> list[str]:
    """The autotunable ops as users call them: flashinfer's own first, then a program's."""
    from flashinfer.api_modules import load_api_modules

    load_api_modules()
    ops = sorted(
        (not key.startswith("flashinfer."), getattr(op, "api_name", key))
        for key, (op, _) in tuner.registered().items()
    )
    return list(dict.fromkeys(name for _, name in ops))


block_boundary(autotune, "autotune(...)")


# ---- the block summary ----------------------------------------------------------------

_logger = logging.getLogger("flashinfer.autotuner")

#: The "nothing was tuned" line names at most this many autotunable ops.
_NAMES_SHOWN = 8


@exposed_in("flashinfer.autotuner")
class AutotuneReportWarning(UserWarning):
    """The summary of an ``autotune()`` block, issued once when it ends: what was timed,
    left out and why, and saved.  Filter it by category to silence it; the same text goes
    to the ``flashinfer.autotuner`` logger at INFO."""


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


def open_report(enabled: bool) -> tuple[AutotuneReport, Token[AutotuneReport | None] | None]:
    """The enclosing block's report, or (outermost) a new one with its token."""
    report = report_var.get()
    if report is not None:
        report.enabled |= enabled
        return report, None
    report = AutotuneReport(enabled=enabled)
    return report, report_var.set(report)


def close_report(
    report: AutotuneReport,
    token: Token[AutotuneReport | None],
    tunable: Callable[[], Iterable[str]],
    *,
    warn: bool,
) -> None:
    """The outermost block ended: log the summary and, with ``warn`` (not left by an exception),
    warn it at the user's line."""
    report_var.reset(token)
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
