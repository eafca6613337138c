"""The ``autotune()`` block: tuning on for the code it wraps (this thread only), its tuning
file loaded on entry and saved on exit, its ``skip_ops`` and its summary."""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable, Iterable, Mapping
from contextvars import ContextVar
from typing import Any

from flashinfer.autotuner import distributed
from flashinfer.autotuner._state import BlockTokens, enter_block, leave_block
from flashinfer.autotuner._types import ProgressCallback
from flashinfer.autotuner.block_report import (
    AutotuneReport,
    FileReport,
    close_report,
    open_report,
)
from flashinfer.autotuner.disk import checked_path
from flashinfer.autotuner.tuner import AutoTuner
from flashinfer.dispatch.restrictions import entry_to_leave
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


_HOW = (
    "name each op by the op itself (e.g. flashinfer.mm), its API name (e.g. 'mm') or its "
    "qualified name (e.g. 'flashinfer.gemm.mm')"
)


def _shown(item: Any) -> str:
    text = repr(item)
    return text if len(text) <= 80 else text[:77] + "..."


def resolve_skip_ops(
    names: Iterable[Any] | None, registered: Callable[[], Mapping[str, tuple[Any, Any]]]
) -> frozenset[str]:
    """The api_keys of the ops ``names`` names among ``registered()`` (read once every op module
    is imported): ops or API/qualified names; ``None``: none.  ``ValueError`` naming the valid
    names; ``TypeError`` for any other item, or a single string or op instead of a list."""
    if names is None:
        return frozenset()
    if isinstance(names, (str, bytes)):
        raise TypeError(
            f"skip_ops must be a list of ops, not the string {_shown(names)}: write "
            f"skip_ops=[{_shown(names)}]"
        )
    single = _api_key_of(names)
    if single is not None:
        name = getattr(names, "api_name", single)
        raise TypeError(
            f"skip_ops must be a list of ops, not the op {name} itself: write skip_ops=[{name}]"
        )
    try:
        items = list(names)
    except TypeError:
        raise TypeError(
            f"skip_ops must be a list of ops, got {type(names).__name__} {_shown(names)}; {_HOW}"
        ) from None
    if not items:
        return frozenset()
    for position, item in enumerate(items):  # every item's kind, before any import
        if not isinstance(item, str) and _api_key_of(item) is None:
            raise TypeError(
                f"skip_ops[{position}] is {type(item).__name__} {_shown(item)}, not an op; {_HOW}"
            )
    from flashinfer.api_modules import load_api_modules

    load_api_modules()  # an op is registered when its module is imported
    by_name: dict[str, set[str]] = {}
    for api_key, (op, _) in registered().items():
        by_name.setdefault(api_key, set()).add(api_key)
        by_name.setdefault(getattr(op, "api_name", api_key), set()).add(api_key)
    keys: set[str] = set()
    for item in items:
        name = item if isinstance(item, str) else _api_key_of(item)
        assert name is not None  # checked above
        found = by_name.get(name)
        if found is None:
            valid = ", ".join(sorted(by_name)) or "none"
            what = (
                f"no autotunable op is named {name!r}"
                if isinstance(item, str)
                else f"the op {name} is not autotunable"
            )
            raise ValueError(
                f"skip_ops: {what}; name an op by the op itself, its API name or its "
                f"qualified name: {valid}"
            )
        keys |= found
    return frozenset(keys)


def _api_key_of(item: Any) -> str | None:
    """An op's ``api_key``, or None for anything that is not an op."""
    try:
        api_key = getattr(item, "api_key", None)
    except Exception:  # an object whose attribute access itself fails is not an op
        return None
    return api_key if isinstance(api_key, str) else None
