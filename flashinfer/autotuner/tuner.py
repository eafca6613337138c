"""The autotuner: picks a (backend, tactic) per tuning key among the dispatcher's candidates.

How an op uses it (``flashinfer/gemm.py`` is the worked example)::

    @backend_requirement({...}, heuristic_func=...)
    def mm(a, b, *, out=None, backend="auto"):
        if backend == "auto":
            return AutoTuner.get().run(mm, MM_RUNNERS, (a, b, out))
        return MM_RUNNERS[backend]((a, b, out))

    AutoTuner.register(mm, MM_RUNNERS)   # at import: lets persisted results be validated

or, faster, ``AutoTuner.register(mm, MM_RUNNERS, direct=True)``: the dispatcher then hands
``backend="auto"`` calls straight to a router generated for the op (:mod:`.router`), with
this call's candidates and ``inputs`` = the arguments of every parameter but ``backend``, in
order (here ``(a, b, out)``), and the body only runs for explicit backends.

**Candidates.** :meth:`AutoTuner.run` only ever considers ``op.suitable_auto_backends``, the
candidate list the dispatcher computed for *this* call (support checks, capability, the
experimental gate, the heuristic's order); a routed call is handed that list itself.  The
tuner has no rule of its own about experimental backends: with the gate off they are not in
the list, so they are never timed nor picked.

**Tuning state is per thread** (see :mod:`._state`): ``with autotune():`` turns tuning on
for the code it wraps in the current thread (or asyncio task) only, and restores exactly
the previous state on exit.  The **tuned results are process-wide** (one
:class:`AutoTuner` per process, :meth:`AutoTuner.get`): read without a lock (a dict
lookup), written under one; tuning itself is serialised by a lock so that two threads do
not time kernels against each other.

**Failures and logging**: a (backend, tactic) that raises, or whose time is not finite, is
left out and listed by :meth:`AutoTuner.last_tuning`; every timing, failure and pick is
logged to the ``flashinfer.autotuner`` logger, and to stderr with
``FLASHINFER_AUTOTUNER_LOG=1`` (see :mod:`.candidate_timing`, which times the candidates).
The vocabulary (:class:`TunableRunner`, :class:`Choice`, ...) is defined in :mod:`._types`
and documented here.

**The block summary**: each ``autotune()`` block says once, when it ends, what it timed, what
it left out and why, and what it saved (an ``AutotuneReportWarning`` at the user's ``with``
line, and the logger); a noisy saved pick is timed again.  See :mod:`.block_report`.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterable, Mapping, Sequence
from contextvars import ContextVar
from typing import Any

from flashinfer.autotuner import distributed
from flashinfer.autotuner._choice_note import LOG_SWITCH, note_run
from flashinfer.autotuner._settings import (
    DEFAULT_BUDGET_S,
    DEFAULT_REPEAT,
    DEFAULT_WARMUP,
    check_budget_s,
    check_noisy_spread,
    check_repeat,
    check_switch_margin,
    check_warmup,
)
from flashinfer.autotuner._skip_ops import resolve_skip_ops
from flashinfer.autotuner._state import (
    BlockTokens,
    enter_block,
    is_tuning,
    leave_block,
    note_tuned,
    skipped_ops,
    tuning_now,
)
from flashinfer.autotuner._stats import OpStats, StatsBook
from flashinfer.autotuner._types import (
    Choice,
    ProgressCallback,
    TacticFailure,
    TunableOp,
    TunableRunner,
    TuningRecord,
    check_median,
)
from flashinfer.autotuner.block_report import (
    NOISY_SPREAD,
    AutotuneReport,
    FileReport,
    KeyReport,
    close_report,
    current_report,
    is_noisy,
    left_out_reasons,
    open_report,
)
from flashinfer.autotuner.candidate_timing import (
    AUTOTUNER_LOG_ENV,
    DEFAULT_SWITCH_MARGIN,
    time_candidates,
)
from flashinfer.autotuner.keys import MEMO_CAP, Key, declare_key_inputs, exact_signature, make_key
from flashinfer.autotuner.router import RouteEntry, Router
from flashinfer.autotuner.timing import refuse_during_capture
from flashinfer.autotuner.tuning_file.format import checked_path
from flashinfer.autotuner.tuning_file.load import LoadReport, load_into
from flashinfer.autotuner.tuning_file.save import save_into
from flashinfer.dispatch.block_entries import entry_to_leave
from flashinfer.gating.warn_once import warn_experimental_backend_once
from flashinfer.torch_boundary import block_boundary

__all__ = [
    "AUTOTUNER_LOG_ENV",
    "AutoTuner",
    "Choice",
    "OpStats",
    "ProgressCallback",
    "TacticFailure",
    "TunableOp",
    "TunableRunner",
    "TuningRecord",
    "autotune",
    "is_tuning",
]


_UNSEEN: Any = object()


class AutoTuner:
    """The process-wide autotuner (:meth:`get`).  See the module docstring."""

    _instance: AutoTuner | None = None
    _instance_lock = threading.Lock()
    #: Most entries each call-path memo (exact signature -> choice) holds; past it new
    #: signatures are looked up, not remembered.
    memo_cap = MEMO_CAP

    def __init__(self) -> None:
        #: key -> best choice; read lock-free on the hot path, replaced under ``_lock``.
        self._best: dict[Key, Choice] = {}
        #: exact call signature -> choice (None: untuned), for calls outside tuning.  A new
        #: dict replaces it whenever ``_best`` changes, so an entry is never stale; a reader
        #: that raced with the change writes into the discarded dict.
        self._fast: dict[tuple, Choice | None] = {}
        #: The same for routed ops (``register(direct=True)``): exact signature ->
        #: ready-to-call entry, read and filled by the op's router (:mod:`.router`), which
        #: reads this attribute anew on each call.  Replaced together with ``_fast``.
        self.route_memo: dict[tuple, RouteEntry] = {}
        #: Replaced right after ``route_memo``: what a dispatcher's verdict keeps with the
        #: entry its router looked up (an entry stands while the epoch is current), so that
        #: no verdict holds a discarded memo alive.
        self.route_epoch = object()
        #: op.api_key -> (op, runners), filled by :meth:`register` at import of the op.
        self._ops: dict[str, tuple[TunableOp, Mapping[str, TunableRunner]]] = {}
        self._lock = threading.Lock()
        self._local = threading.local()
        self._tune_lock = threading.RLock()
        # The timing settings: properties that check each value (see _settings).
        self._warmup = DEFAULT_WARMUP
        self._repeat = DEFAULT_REPEAT
        self._budget_s: float | None = DEFAULT_BUDGET_S
        self._switch_margin = DEFAULT_SWITCH_MARGIN
        self._noisy_spread = NOISY_SPREAD
        #: What was tuned, loaded and served, per op (:meth:`stats`).
        self.stats_book = StatsBook()
        #: key -> the interquartile range (seconds) of the timed calls behind its choice,
        #: where known: saved with it (``iqr_ms``) so that a noisy one is timed again.
        self._spread: dict[Key, float] = {}
        #: Keys whose choice was set (loaded from a file) with a noisy measurement: the
        #: next tuning-mode call of each times it again (see :mod:`.block_report`).
        self._retime: set[Key] = set()

    # ---- the timing settings (each checked at the assignment) -------------------------

    @property
    def warmup(self) -> int:
        """The least number of warm-up calls of each (backend, tactic) after its first call
        (default 1).  The first call is always made and never timed (it pays imports, JIT
        and lazy initialisation), and warm-up goes on until the timings settle, for at
        least ``timing.WARMUP_S`` (see :mod:`flashinfer.autotuner.timing`).  An int >= 0:
        anything else raises ``TypeError``/``ValueError`` at the assignment."""
        return self._warmup

    @warmup.setter
    def warmup(self, value: int) -> None:
        self._warmup = check_warmup(value)

    @property
    def repeat(self) -> int:
        """The least number of timed calls of each (backend, tactic) (default 5): timed
        calls are taken by time, for ``timing.REPEAT_S`` seconds, and at least this many;
        fewer when ``budget_s`` runs out, never fewer than one.  Their median is compared.
        An int >= 1: anything else raises ``TypeError``/``ValueError`` at the assignment."""
        return self._repeat

    @repeat.setter
    def repeat(self, value: int) -> None:
        self._repeat = check_repeat(value)

    @property
    def budget_s(self) -> float | None:
        """Seconds spent on each (backend, tactic) after its first call at most: warm-up
        (half of it at most) and timed calls; ``repeat`` shrinks to fit, never below one
        timed call (default 1.0; a cheap call takes about ``timing.WARMUP_S +
        timing.REPEAT_S``; None: no budget, the time targets alone end the timing).  A
        finite number > 0 or None: anything else raises ``TypeError``/``ValueError`` at the
        assignment."""
        return self._budget_s

    @budget_s.setter
    def budget_s(self, value: float | None) -> None:
        self._budget_s = check_budget_s(value)

    @property
    def switch_margin(self) -> float:
        """The default (first candidate, default tactic) is kept unless another (backend,
        tactic) is faster by more than this fraction; a near-tie goes to the earlier pair
        (default 0.03, i.e. 3 %; 0.0 always takes the fastest median).  A finite number
        >= 0: anything else (negative, NaN, infinite, a string, None, a bool) raises
        ``ValueError``/``TypeError`` at the assignment, naming the setting."""
        return self._switch_margin

    @switch_margin.setter
    def switch_margin(self, value: float) -> None:
        self._switch_margin = check_switch_margin(value)

    @property
    def noisy_spread(self) -> float:
        """A measurement is *noisy* when the interquartile range of its timed calls is more
        than this fraction of their median (default
        :data:`~flashinfer.autotuner.block_report.NOISY_SPREAD`, 0.1: 10 %): the block
        summary flags it, and a noisy saved pick is timed again by the next ``autotune()``
        block that loads it.  ``math.inf``: nothing is noisy, nothing is re-timed.  A number
        >= 0: anything else raises ``TypeError``/``ValueError`` at the assignment."""
        return self._noisy_spread

    @noisy_spread.setter
    def noisy_spread(self, value: float) -> None:
        self._noisy_spread = check_noisy_spread(value)

    # ---- the singleton and registration -----------------------------------------------

    @classmethod
    def get(cls) -> AutoTuner:
        """The process's autotuner."""
        inst = cls._instance
        if inst is None:
            with cls._instance_lock:
                inst = cls._instance
                if inst is None:
                    inst = cls._instance = cls()
        return inst

    @classmethod
    def register(
        cls, op: TunableOp, runners: Mapping[str, TunableRunner], *, direct: bool = False
    ) -> None:
        """Declare ``op`` tunable with one runner per backend (call at import of the op).

        Persisted results are validated against the registered runners' tactic spaces.
        ``ValueError`` if a runner is named after a backend ``op`` does not have.  Runners
        may declare which scalar inputs belong in the tuning key (``key_inputs``, see
        :mod:`flashinfer.autotuner.keys`); a bad declaration is a ``TypeError`` or
        ``ValueError`` here.

        ``direct=True`` routes the op's checked ``backend="auto"`` calls from the dispatcher
        straight to the tuner (:meth:`BackendRequirementOp.route_auto`), with the call's
        candidates and ``inputs`` = the API's arguments for every parameter but ``backend``,
        in declaration order: the body's ``AutoTuner.get().run(...)`` branch is then
        skipped, which saves its call and the per-thread lookup of the candidates.  Use it
        only when the body would build exactly that ``inputs`` tuple (``TypeError`` for an
        API with ``*args``/``**kwargs``, which cannot be routed).
        """
        unknown = [b for b in runners if b not in op.backend_checks]
        if unknown:
            raise ValueError(
                f"AutoTuner.register({op.api_key}): runners {unknown} name no backend of the "
                f"op; its backends are {list(op.backend_checks)}"
            )
        declare_key_inputs(op.api_key, runners)
        tuner = cls.get()
        if direct:
            Router(tuner, op, runners, tuner.stats_book.counters(op.api_key)).install()
        else:
            op.dispatcher.route_auto(None)
        with tuner._lock:
            tuner._ops[op.api_key] = (op, runners)
            tuner._forget_memos()  # they may hold a previous registration's runners

    def registered(self) -> dict[str, tuple[TunableOp, Mapping[str, TunableRunner]]]:
        """``api_key -> (op, runners)`` of every registered op."""
        return dict(self._ops)

    # ---- the call path ----------------------------------------------------------------

    def run(self, op: TunableOp, runners: Mapping[str, TunableRunner], inputs: tuple) -> Any:
        """Run the current ``backend="auto"`` call of ``op`` with the best known choice.

        Candidates are ``op.suitable_auto_backends`` (this call's list from the dispatcher)
        that have a runner.  Tuning (inside ``autotune()``): an untuned key, or one whose
        best backend is not among this call's candidates, times every (backend, tactic)
        and keeps the fastest.  Otherwise a tuned key runs its choice when its backend is a
        candidate, and anything else the first candidate with its default tactic.
        """
        return self.run_candidates(op, runners, op.suitable_auto_backends.current(), inputs)

    def run_candidates(
        self,
        op: TunableOp,
        runners: Mapping[str, TunableRunner],
        candidates: Sequence[str],
        inputs: tuple,
    ) -> Any:
        """:meth:`run` with the call's candidates given (what a routed call receives)."""
        if (tuning := tuning_now()) and distributed.group_in_effect() is not None:
            distributed.check_block(self, op.api_key)  # the ranks' settings, once per block
        if tuning and op.api_key in skipped_ops():
            choice = None  # autotune(skip_ops=...): the default, untimed
            if (report := current_report()) is not None:
                report.note_skipped(op.api_key)
        elif tuning:
            key = make_key(op.api_key, inputs)
            choice = self._best.get(key)
            retime = key in self._retime  # a saved noisy measurement: timed again
            if (
                choice is None
                or choice.backend not in candidates
                or retime
                or distributed.group_in_effect()
            ):
                was = (choice.median_s, self._spread.get(key, 0.0)) if retime and choice else None
                record = self._tune(op, runners, inputs, key, candidates)
            else:
                record, was = TuningRecord(key, choice, False), None
            self._local.last = record
            choice = record.choice
            if (report := current_report()) is not None:
                self._report_key(report, op, runners, candidates, inputs, record, was)
        else:
            fast = self._fast
            exact = exact_signature(op.api_key, inputs)
            choice = fast.get(exact, _UNSEEN)  # type: ignore[arg-type]
            if choice is _UNSEEN:
                choice = self._best.get(make_key(op.api_key, inputs))
                if len(fast) < self.memo_cap:
                    fast[exact] = choice
        hits = self.stats_book.hits.get(op.api_key) or self.stats_book.call_hits(op.api_key)
        if choice is not None and choice[0] in candidates and choice[0] in runners:
            backend, tactic = choice[0], choice[1]
            hits[0]()  # counted for AutoTuner.stats()
        else:
            backend, tactic = self.default_backend(op, runners, candidates), None
            hits[1]()
        if backend in op.experimental_backends:
            warn_experimental_backend_once(op.api_key, backend, automatic=True)
        if LOG_SWITCH.armed:  # its line on the flashinfer.dispatch logger, once
            note_run(self, op, backend, choice, candidates, inputs)
        return runners[backend](inputs, tactic)

    @staticmethod
    def default_backend(
        op: TunableOp, runners: Mapping[str, TunableRunner], candidates: Sequence[str]
    ) -> str:
        """The backend an untuned key runs (with its default tactic): the first candidate
        that has a runner.  ``RuntimeError`` if none has."""
        for backend in candidates:
            if backend in runners:
                return backend
        raise RuntimeError(
            f"{op.api_key}: none of the backend='auto' candidates {list(candidates)} has an "
            f"autotuner runner (runners: {list(runners)})"
        )

    def _tune(
        self,
        op: TunableOp,
        runners: Mapping[str, TunableRunner],
        inputs: tuple,
        key: Key,
        candidates: Sequence[str],
    ) -> TuningRecord:
        with self._tune_lock:
            choice = self._best.get(key)  # another thread may have tuned it meanwhile
            group = distributed.group_in_effect()
            if (
                group is None
                and choice is not None
                and choice.backend in candidates
                and key not in self._retime
            ):
                return TuningRecord(key, choice, False)
            # Timing (or the group's collective step) synchronises: never while capturing.
            refuse_during_capture(f"tune {op.api_key} (a key with no tuned choice)")
            if group is not None:  # a collective step: see flashinfer.autotuner.distributed
                args = (op.api_key, runners, inputs, key, candidates, choice, self)
                record = distributed.tune_in_group(group, *args)
            else:
                record = time_candidates(op.api_key, runners, inputs, key, candidates, self)
            if not record.timed:  # the ranks of the group already agreed on a choice
                return record
            self.stats_book.tuned(op.api_key, record.failures, record.choice is not None)
            if record.choice is None:
                return record
            with self._lock:
                self._best[key] = record.choice
                self._keep_spread(key, record.iqr_s)
                self._retime.discard(key)  # measured now: a noisy one waits for a later run
                self._forget_memos()
            note_tuned(key)
            return record

    def _keep_spread(self, key: Key, iqr_s: float | None) -> None:
        if iqr_s is None:
            self._spread.pop(key, None)
        else:
            self._spread[key] = float(iqr_s)

    def _report_key(
        self,
        report: AutotuneReport,
        op: TunableOp,
        runners: Mapping[str, TunableRunner],
        candidates: Sequence[str],
        inputs: tuple,
        record: TuningRecord,
        was_noisy: tuple[float, float] | None,
    ) -> None:
        """Tell this block's report (:mod:`.block_report`) what this tuning-mode call did;
        the backends left out are asked of the dispatcher only when a key is timed."""
        if not record.timed and report.count_call(record.key):
            return  # a key this block already reported: only counted
        if record.timed:
            entry = KeyReport(
                op.api_key,
                op.api_name,
                record.key,
                "timed" if was_noisy is None else "re-timed",
                timed=tuple(b for b in candidates if b in runners),
                pairs=record.tried,
                failures=record.failures,
                left_out=left_out_reasons(op, candidates, runners, inputs),
                choice=record.choice,
                iqr_s=record.iqr_s,
                was_noisy=was_noisy,
                limit=self._noisy_spread,
            )
        else:
            spread = self._spread.get(record.key)
            entry = KeyReport(
                op.api_key,
                op.api_name,
                record.key,
                "reused",
                choice=record.choice,
                iqr_s=spread,
                limit=self._noisy_spread,
            )
        report.note_key(entry)

    def _forget_memos(self) -> None:
        """Replace (never clear) the call-path memos, under ``_lock``: a reader that raced
        with a change writes into the discarded dicts, so no entry is ever stale."""
        self._fast, self.route_memo = {}, {}
        self.route_epoch = object()  # after the memo: see the router's slot

    # ---- inspecting and editing the results -------------------------------------------

    def last_tuning(self) -> TuningRecord | None:
        """The key, choice and whether timing happened, of this thread's last call made
        inside ``autotune()`` (None before any).  Not recorded outside tuning."""
        return getattr(self._local, "last", None)

    def choice(self, key: Key) -> Choice | None:
        """The tuned choice of ``key``, if any."""
        return self._best.get(key)

    def choices(self) -> dict[Key, Choice]:
        """A copy of every tuned (or loaded) result."""
        return dict(self._best)

    def set_choice(self, key: Key, choice: Choice, *, iqr_s: float | None = None) -> None:
        """Record ``choice`` for ``key`` (used by the tuning file's loader).

        ``iqr_s``: the interquartile range of the timed calls ``choice.median_s`` is the
        median of (None: unknown).  A *noisy* one (more than
        :data:`~flashinfer.autotuner.block_report.NOISY_SPREAD` of the median) makes the
        next tuning-mode call of ``key``, inside ``autotune()``, time it again.
        ``ValueError`` for a ``median_s`` (or an ``iqr_s``) that is not a finite number >= 0
        (``TypeError`` for one that is not a number): see
        :mod:`flashinfer.autotuner.tuning_file`.
        """
        check_median(choice.median_s)
        if iqr_s is not None:
            check_median(iqr_s)
        with self._lock:
            self._best[key] = choice
            self._keep_spread(key, iqr_s)
            if is_noisy(choice.median_s, iqr_s, self._noisy_spread):
                self._retime.add(key)
            else:
                self._retime.discard(key)
            self._forget_memos()

    def spread(self, key: Key) -> float | None:
        """The interquartile range, in seconds, of the timed calls behind ``key``'s choice
        (None: unknown, or no choice): what the tuning file saves as ``iqr_ms``."""
        return self._spread.get(key)

    def stats(self) -> dict[str, OpStats]:
        """Per op (``api_key``), since the process started: keys tuned, results loaded from
        files, ``backend="auto"`` calls served from a tuned key and from the default, and
        the (backend, tactic) pairs that failed while tuning, with the last reason (see
        :class:`OpStats`).  Ops nothing happened to are left out."""
        return self.stats_book.snapshot()

    def clear(self) -> None:
        """Forget every tuned result (registrations and :meth:`stats` stay)."""
        with self._lock:
            self._best = {}
            self._spread, self._retime = {}, set()
            self._forget_memos()

    # ---- the tuning file ----------------------------------------------------------------

    def save_tuning_file(self, path: str | os.PathLike[str], *, merge: bool = True) -> int:
        """Save every result of this tuner to ``path``; returns the entry count.  The same
        as :func:`flashinfer.autotuner.save_tuning_file`, which calls this on :meth:`get`."""
        return save_into(self, path, merge=merge)

    def load_tuning_file(self, path: str | os.PathLike[str]) -> LoadReport:
        """Load the results saved in ``path`` into this tuner; returns a
        :class:`~flashinfer.autotuner.LoadReport`.  The same as
        :func:`flashinfer.autotuner.load_tuning_file`, which calls this on :meth:`get`."""
        return load_into(self, path)

    # Upstream FlashInfer's names, which its users type: the very same methods, silently
    # (flashinfer.autotuner.tuning_file.OLD_SPELLINGS lists every old spelling).
    save_configs = save_tuning_file
    load_configs = load_tuning_file


class autotune:  # noqa: N801 - used like a function: ``with autotune():``
    """Tune ``backend="auto"`` calls of tunable ops made inside the block (this thread only).

    ``enabled=False`` turns tuning off inside the block (tuned results are still used).
    ``tuning_file=path`` loads the results saved there on entry, if the file exists, and, if the
    block tuned a key (blocks nested in it included), saves every result to it on exit
    (also when the block raises), see :func:`flashinfer.autotuner.save_tuning_file`.  A block
    that tuned nothing new, e.g. ``autotune(False, tuning_file=path)`` serving from a tuned file,
    never writes, locks nor creates a file (read-only deployments and mounts work).
    ``cache=path`` is the old spelling of ``tuning_file=path``, still accepted (upstream
    FlashInfer's keyword; ``TypeError`` when both are given).
    ``ValueError`` at once for an empty ``tuning_file`` path, and
    :class:`~flashinfer.autotuner.tuning_file.TuningFileError` for a path that exists and is
    not a regular file or lies in a missing directory (with a process group: on entry, as
    rank 0 sees it, on every rank).  ``progress`` is called before each timing (see
    :data:`ProgressCallback`).  ``skip_ops`` lists ops (the ops themselves, e.g.
    ``flashinfer.mm``, their API names, e.g. ``"mm"``, or qualified names) that the block
    leaves untuned: their calls run the first candidate's default tactic, untimed (nested
    blocks add to the enclosing blocks' list); ``ValueError`` at once, naming the valid
    names, for an op or name that is not autotunable, ``TypeError`` naming any other item.
    ``process_group``: tune across the ranks of this ``torch.distributed`` group, one
    choice on every rank (None: the one set by ``set_autotune_process_group``, if any), and
    ``shard=True`` splits the timing across them; with a group only rank 0 reads (for
    every rank) and writes ``tuning_file``: see :mod:`flashinfer.autotuner.distributed`.
    The previous state is restored on exit,
    also when blocks are nested or left by an exception; ``with`` yields the
    :class:`AutoTuner`.

    A class rather than a ``contextlib`` generator so that the warnings of loading the tuning
    file point at the user's ``with`` line (no ``contextlib`` frame in between).

    The same object may be entered again, also while already entered, and from several
    threads or asyncio tasks at once: each entry is kept in the context that entered it and
    restores its own state there, so no thread stays in tuning mode once its entries are
    left.  Blocks of one thread left out of order (generators suspended inside them, closed
    in any order) are restored, and their ``tuning_file`` saved, once the blocks entered after
    them are left too.  A block must be left in the thread (or task) that entered it: a
    generator suspended inside one and closed from another thread raises ``RuntimeError``
    there, and its own thread is restored when it next enters or leaves an ``autotune()``
    block.
    """

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
        # With a process group only its rank 0 reads and writes the file, and checks the path
        # on entry for every rank (another host may lack the directory): here, only its form.
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
        #: What the block did (:class:`~flashinfer.autotuner.block_report.AutotuneReport`),
        #: from its entry on (a nested block's is its outermost block's); None before.
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
    """One entry into an ``autotune()`` block: the block, the tokens that restore the state
    before it, the frame that entered it (while open), and whether it has been left (it is
    restored once it is this context's newest entry)."""

    __slots__ = (
        "block", "tokens", "group", "frame", "left", "raised", "report", "report_token", "file",
    )  # fmt: skip

    def __init__(self, block: autotune, tokens: BlockTokens, group: Any, frame: Any) -> None:
        self.block, self.tokens, self.group, self.frame = block, tokens, group, frame
        self.left = self.raised = False
        #: the report this entry writes to, the token that ends it (outermost entry only),
        #: and its tuning file's part of it
        self.report: AutotuneReport = AutotuneReport()
        self.report_token: Any = None
        self.file: FileReport | None = None


#: This context's ``autotune()`` entries, oldest first: each block leaves its own entry in
#: its own context, whatever other threads and tasks do with the same block object.
_entries: ContextVar[tuple[_TuneEntry, ...]] = ContextVar("flashinfer_autotune_entries", default=())
_entries_lock = threading.Lock()


def _unwind_left(tuner: AutoTuner) -> None:
    """Restore the state before each left entry at the top of this context's entries,
    newest first, saving each one's tuning file: a ContextVar token is only exact when reset in
    the reverse order of setting."""
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
        _note_save(entry, tuned, saved)
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


def _note_save(entry: _TuneEntry, tuned: bool, saved: int | None) -> None:
    """Record in the block's report what became of its tuning file."""
    if entry.file is None:
        return
    entry.file.saved = saved
    if saved is None:
        entry.file.why_not_saved = (
            "rank 0 of the autotune process group saves it"
            if tuned
            else "nothing new was tuned in the block; the file is left unchanged"
        )


def _tunable_names(tuner: AutoTuner) -> list[str]:
    """The autotunable ops, as users call them (every op module loaded first): flashinfer's
    own first, then those a program registered."""
    from flashinfer.api_modules import load_api_modules

    load_api_modules()
    ops = sorted(
        (not key.startswith("flashinfer."), getattr(op, "api_name", key))
        for key, (op, _) in tuner.registered().items()
    )
    return list(dict.fromkeys(name for _, name in ops))


block_boundary(autotune, "autotune(...)")
