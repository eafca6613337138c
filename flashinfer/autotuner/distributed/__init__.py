"""Tuning across the ranks of a ``torch.distributed`` process group: one choice everywhere.

Several processes that run one model (tensor-parallel ranks, one per GPU) must run the same
(backend, tactic) for a key: for collective kernels a different choice per rank means
divergence or a hang.  Give the tuner their group::

    import torch.distributed as dist
    from flashinfer.autotuner import autotune, set_autotune_process_group

    set_autotune_process_group(dist.group.WORLD)       # every autotune() block; None: off
    with autotune(process_group=group, tuning_file=path):    # or for one block only
        model(inputs)

Any backend works (the tuner uses ``all_gather_object`` and ``broadcast_object_list``; with
NCCL, set the current CUDA device first, as torch requires).  Inside the block, **every
rank must make the same tuning-mode calls in the same order**: tuning a key is a collective
step.  What happens for a key not tuned on every rank alike:

1. **Settings.** Every setting that changes the choice
   (:data:`~flashinfer.autotuner.distributed.agreement.SETTINGS`: ``AutoTuner.switch_margin``,
   ``repeat``, ``warmup`` and ``budget_s``, the ops ``skip_ops`` leaves untuned, whether the
   block was given a ``tuning_file``) is compared on entering an ``autotune()`` block (before the
   file is read), again at the block's first tuning-mode call (its own ``skip_ops`` are in
   effect from there), and with every key's plan.  A difference raises
   :class:`AutotuneConsistencyError` on every rank, naming the setting and each rank's
   value, before anything is timed.
2. **Agreement.** Each rank gathers every rank's op, tuning key, ``shard`` setting, candidate
   list (after the experimental gate and the heuristic), each candidate's tactics and the
   settings, and every rank compares them the same way.  A difference raises
   :class:`AutotuneConsistencyError` on every rank, naming the ranks and what differs; when
   ``FLASHINFER_ALLOW_EXPERIMENTAL_AUTO_BACKENDS`` differs too, the message names it with
   each rank's value.  A key every rank already has with the same choice (a file read for
   all ranks, a previous collective tuning) is accepted without timing.
3. **Timing.** Every rank times every (backend, tactic) of the plan, or with ``shard=True``
   (ranks on identical hardware) only its share: pair ``i`` on rank ``i % world_size``, so
   tuning takes about ``1/world_size`` of the time.
4. **One choice.** The timings are gathered and every rank combines them the same way.  A
   pair that failed on any rank failed on all (the reason names the ranks).  A pair's time
   is the **largest of its per-rank medians**: ranks that run one model in lockstep wait for
   the slowest of them at every collective, so the pair to prefer is the one whose slowest
   rank is fastest; a mean would hide a slow rank (a throttling GPU) behind fast ones, and
   the per-rank median already drops the noise of single calls.  The pick then follows the
   tuner's switch margin (:attr:`AutoTuner.switch_margin`), so every rank records the same
   choice.

**Never a hang.** Every rank makes the same collective calls on every path (one on entering
a block, one more with a ``tuning_file``, one at the block's first tuning-mode call; two per key
tuned, one per key checked; none for a key agreed before, nor for a skipped op): a tactic
that raises on one rank is a failed pair, a runner whose ``tactics()`` raises on one rank is
a difference, and a rank that dies or stops calling makes the others raise
:class:`AutotuneConsistencyError` within the group's timeout
(``init_process_group(timeout=...)``).  So every rank enters the same ``autotune()`` blocks,
and tunes in the same ones (``enabled`` is not compared: a rank that does not tune makes no
call).  A rank whose tuned results were changed alone (``AutoTuner.clear()`` on one rank)
cannot be told from a missing one.

**A group that is gone.** A group destroyed (``torch.distributed.destroy_process_group()``)
after ``set_autotune_process_group(group)`` or ``autotune(process_group=group)`` makes the
next use raise ``ValueError`` saying which of the two holds it and what to do: set a live
group, or ``None`` to tune in this process alone.

**Files.** With a group, ``autotune(tuning_file=path)`` has the group's rank 0 read the file and
broadcast what it read, so ranks never load different versions of a file being rewritten,
and only rank 0 writes it on exit.  :func:`~flashinfer.autotuner.load_tuning_file` and
:func:`~flashinfer.autotuner.save_tuning_file` called directly stay local to the process.
"""

from __future__ import annotations

import os
import weakref
from collections.abc import Mapping, Sequence
from contextvars import ContextVar, Token
from typing import Any, NamedTuple

from flashinfer.autotuner._types import Choice, TunableRunner, TunedResults, TuningRecord
from flashinfer.autotuner.candidate_timing import (
    Outcome,
    TimingSettings,
    decide,
    log,
    one_line_reason,
    time_pairs,
)
from flashinfer.autotuner.disk import TuningFileError, path_problem
from flashinfer.autotuner.distributed.agreement import (
    AutotuneConsistencyError,
    Manifest,
    choice_id,
    consistency_error,
    differences,
    local_manifest,
    local_settings,
)
from flashinfer.autotuner.keys import Key
from flashinfer.autotuner.persist import LoadReport, load_data, load_into, save_into

__all__ = [
    "AutotuneConsistencyError",
    "BlockHandle",
    "GroupSetting",
    "TimingSettings",
    "check_block",
    "close_block",
    "combine_outcomes",
    "enter_group",
    "get_autotune_process_group",
    "group_in_effect",
    "load_for_block",
    "open_block",
    "save_for_block",
    "set_autotune_process_group",
    "tune_in_group",
]


class GroupSetting(NamedTuple):
    """The process group tuning runs across, and whether it shards the plan."""

    group: Any  # a torch.distributed ProcessGroup
    shard: bool


_global: GroupSetting | None = None
_block: ContextVar[GroupSetting | None] = ContextVar("flashinfer_autotune_group", default=None)
#: Per group: key -> the (backend, tactic) its ranks agreed on.  A key is served without a
#: collective only while this rank's choice is still the agreed one.
_agreed: weakref.WeakKeyDictionary[Any, dict[Key, tuple[str, str]]] = weakref.WeakKeyDictionary()


def _check_group(group: Any, who: str) -> None:
    """``ValueError`` unless ``group`` is a process group this process belongs to."""
    import torch.distributed as dist  # lazily: only programs that pass a group need it

    if not (dist.is_available() and dist.is_initialized()):
        raise ValueError(
            f"{who}: torch.distributed is not initialized (never, or no longer: "
            "destroy_process_group() was called); call "
            "torch.distributed.init_process_group(...) first"
        )
    if not isinstance(group, dist.ProcessGroup):
        raise TypeError(
            f"{who}: expected a torch.distributed ProcessGroup (e.g. dist.group.WORLD or "
            f"dist.new_group(...)), got {type(group).__name__}"
        )
    try:
        rank = dist.get_rank(group)
    except (ValueError, RuntimeError) as exc:  # "... is not registered"
        raise ValueError(
            f"{who}: this group is not a live process group ({one_line_reason(exc)}): it was "
            "destroyed, or made before torch.distributed was initialized again; pass a live "
            "group (e.g. dist.group.WORLD or dist.new_group(...))"
        ) from exc
    if rank < 0:
        raise ValueError(f"{who}: this process (global rank {dist.get_rank()}) is not in the group")


def set_autotune_process_group(group: Any, *, shard: bool = False) -> None:
    """Tune across the ranks of ``group`` in every ``autotune()`` block of this process
    (``None`` turns it off); ``shard=True`` splits each key's (backend, tactic) plan across
    the ranks (for ranks on identical hardware).  See :mod:`flashinfer.autotuner.distributed`.
    ``autotune(process_group=...)`` overrides it for one block.  Upstream's name."""
    global _global
    if group is not None:
        _check_group(group, "set_autotune_process_group")
    _global = None if group is None else GroupSetting(group, bool(shard))


def get_autotune_process_group() -> Any:
    """The group set by :func:`set_autotune_process_group` (None: none)."""
    return None if _global is None else _global.group


def group_in_effect() -> GroupSetting | None:
    """The group this thread's tuning runs across: its innermost ``autotune()`` block's,
    else the one set for the process, else None."""
    return _block.get() or _global


def enter_group(process_group: Any, shard: bool | None) -> Token[GroupSetting | None]:
    """Set the group of an ``autotune()`` block: ``process_group`` (None: keep the enclosing
    block's or the process's), and ``shard`` (None: keep that group's setting)."""
    if process_group is not None:
        _check_group(process_group, "autotune(process_group=...)")
        setting: GroupSetting | None = GroupSetting(process_group, bool(shard))
    else:
        setting = group_in_effect()
        if shard and setting is None:
            raise ValueError(
                "autotune(shard=True) needs a process group: pass process_group=... or "
                "call flashinfer.autotuner.set_autotune_process_group(group) first"
            )
        if shard is not None and setting is not None:
            setting = setting._replace(shard=bool(shard))
    return _block.set(setting)


def _gone(group: Any, exc: BaseException | None) -> ValueError:
    """The error for a group that no longer exists, naming where flashinfer got it."""
    gone = "it was destroyed (torch.distributed.destroy_process_group()), or torch.distributed"
    gone += " is no longer initialized"
    if exc is not None:
        gone += f" ({one_line_reason(exc)})"
    if _global is not None and group is _global.group:
        return ValueError(
            "flashinfer autotuner: the process group set by set_autotune_process_group() is "
            f"gone: {gone}. Call flashinfer.autotuner.set_autotune_process_group(group) with "
            "a live group, or set_autotune_process_group(None) to tune in this process alone"
        )
    return ValueError(
        "flashinfer autotuner: the process group passed to autotune(process_group=...) is "
        f"gone: {gone}. Pass a live group, or none to tune in this process alone"
    )


def _rank_and_size(group: Any) -> tuple[int, int]:
    """This process's rank in ``group`` and the group's size; ``ValueError`` saying which
    setting holds the group when the group is gone (every use of a group comes here)."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        raise _gone(group, None)
    try:
        return dist.get_rank(group), dist.get_world_size(group)
    except (ValueError, RuntimeError) as exc:  # "... is not registered", and the like
        raise _gone(group, exc) from exc


def _failed(step: str, rank: int, world: int, exc: Exception, what: str) -> Exception:
    return AutotuneConsistencyError(
        f"flashinfer autotuner: the autotune process group failed on rank {rank} of {world} "
        f"while {step} ({what}): {one_line_reason(exc)}. Another rank may have died, been "
        "interrupted, or not made this call: every rank of the group must make the same "
        "tuning-mode calls inside autotune(); the wait is bounded by the group's timeout."
    )


def _all_gather(group: Any, obj: Any, step: str, what: str) -> list[Any]:
    """Every rank's ``obj``, in rank order; a failure of the group raises
    :class:`AutotuneConsistencyError`."""
    import torch.distributed as dist

    rank, world = _rank_and_size(group)
    if world == 1:
        return [obj]
    out: list[Any] = [None] * world
    try:
        dist.all_gather_object(out, obj, group=group)
    except Exception as exc:  # gloo and NCCL raise RuntimeError subclasses
        raise _failed(step, rank, world, exc, what) from exc
    return out


def _broadcast(group: Any, obj: Any, step: str, what: str) -> Any:
    """Rank 0's ``obj`` on every rank."""
    import torch.distributed as dist

    rank, world = _rank_and_size(group)
    if world == 1:
        return obj
    box = [obj]
    try:
        dist.broadcast_object_list(box, src=dist.get_global_rank(group, 0), group=group)
    except Exception as exc:
        raise _failed(step, rank, world, exc, what) from exc
    return box[0]


# ---- tuning one key ----------------------------------------------------------------------


def combine_outcomes(gathered: Sequence[Mapping[int, tuple]], size: int) -> dict[int, Outcome]:
    """One outcome per pair from every rank's: failed if it failed on any rank (the reason
    names the ranks unless all that timed it failed), else the slowest rank's median (and
    that rank's spread).  The same pure function on every rank."""
    combined: dict[int, Outcome] = {}
    for i in range(size):
        reports = [(rank, Outcome(*got[i])) for rank, got in enumerate(gathered) if i in got]
        failed = [(rank, o) for rank, o in reports if not o.ok]
        if failed:
            reason = failed[0][1].reason or "failed"
            if len(failed) < len(reports):
                ranks = ", ".join(str(rank) for rank, _ in failed)
                reason = f"{reason} (on rank {ranks} only; left out on every rank)"
            combined[i] = Outcome(None, reason=reason)
        elif reports:
            combined[i] = max((o for _, o in reports), key=lambda o: o.median_s or 0.0)
    return combined


def tune_in_group(
    setting: GroupSetting,
    api_key: str,
    runners: Mapping[str, TunableRunner],
    inputs: tuple,
    key: Key,
    candidates: Sequence[str],
    local: Choice | None,
    settings: TimingSettings,
) -> TuningRecord:
    """Tune ``key`` with every rank of ``setting.group`` (see the module docstring); every
    rank returns a record with the same choice.  ``local``: this rank's choice for the key;
    ``settings``: the tuner's (warm-up, repetitions, budget, switch margin)."""
    group, shard = setting
    agreed = _agreed.setdefault(group, {})
    if local is not None and local.backend in candidates and agreed.get(key) == choice_id(local):
        return TuningRecord(key, local, False)
    rank, world = _rank_and_size(group)
    what = f"{api_key}, key {key!r}"
    manifest, plan, tactics_error = local_manifest(
        api_key, key, runners, inputs, candidates, shard, local, _settings_here(settings)
    )
    manifests: list[Manifest] = _all_gather(group, manifest, "comparing what to tune", what)
    found = differences(manifests)
    if found:
        raise consistency_error(manifests, found, rank) from tactics_error
    if tactics_error is not None:  # every rank's runner raised alike: each raises its own
        raise tactics_error
    held = manifests[0].choice
    if held is not None and held[0] in candidates and all(m.choice == held for m in manifests):
        agreed[key] = held  # every rank has this choice already (e.g. read from one file)
        return TuningRecord(key, local, False)
    mine = range(rank, len(plan), world) if shard else range(len(plan))
    log(
        f"tuning {api_key} for key {key} on rank {rank} of {world}: {len(mine)} of "
        f"{len(plan)} (backend, tactic) pairs{' (sharded)' if shard else ''}"
    )
    outcomes = time_pairs(plan, mine, inputs, settings)
    plain = {i: tuple(o) for i, o in outcomes.items()}  # plain tuples cross processes
    gathered = _all_gather(group, plain, "gathering the timings", what)
    log(f"  combined the timings of {world} ranks (each pair: the slowest rank's median)")
    record = decide(
        api_key, key, plan, combine_outcomes(gathered, len(plan)), settings.switch_margin
    )
    if record.choice is not None:
        agreed[key] = choice_id(record.choice)  # type: ignore[assignment]
    return record


# ---- the tuning file of an autotune() block ----------------------------------------------


def _read_on_rank0(path: str) -> tuple[str, Any]:
    # Rank 0 alone reads and writes the file, so it alone checks the path (on its host: the
    # other ranks' hosts may not have the directory), and every rank raises its refusal.
    problem = path_problem(path, writing=True)
    if problem is not None:
        return "refused", (str(problem), problem.path, problem.reason)
    try:
        with open(path, "rb") as f:
            return "data", f.read()
    except FileNotFoundError:
        return "missing", None
    except OSError as exc:
        return "error", (exc.errno, exc.strerror or str(exc))


def load_for_block(tuner: TunedResults, path: str) -> LoadReport | None:
    """Load ``path`` into ``tuner`` if it exists (None if not).  With a group in effect, its
    rank 0 checks the path (as a file it will save to: :func:`.tuning_file.path_problem`), reads
    the file and broadcasts the bytes, so every rank loads the same version; rank 0's
    refusal of the path (:class:`TuningFileError`) or ``OSError`` is raised on every
    rank, before any tuning."""
    setting = group_in_effect()
    if setting is None:
        return load_into(tuner, path) if os.path.exists(path) else None
    rank, _ = _rank_and_size(setting.group)
    mine = _read_on_rank0(path) if rank == 0 else ("", None)
    kind, payload = _broadcast(setting.group, mine, "reading the tuning file", path)
    if kind == "missing":
        return None
    if kind == "refused":
        message, where, reason = payload
        by = " (checked by rank 0 of the autotune process group, which reads and writes it)"
        raise TuningFileError(message + by, path=where, reason=reason)
    if kind == "error":
        errno, strerror = payload
        raise OSError(errno, f"{strerror} (read by rank 0 of the autotune process group)", path)
    return load_data(tuner, path, payload)


def save_for_block(tuner: TunedResults, path: str) -> int | None:
    """Save ``tuner``'s results to ``path`` (the entry count); with a group in effect only
    its rank 0 writes (None elsewhere): every rank holds the same choices."""
    setting = group_in_effect()
    if setting is not None and _rank_and_size(setting.group)[0] != 0:
        return None
    return save_into(tuner, path)


# ---- the settings of an autotune() block -------------------------------------------------


class _BlockFacts:
    """What the ranks compare of one ``autotune()`` entry besides the tuner's settings:
    whether it was given a ``tuning_file``, and whether its first tuning-mode call compared the
    settings yet (see :func:`check_block`)."""

    __slots__ = ("file_given", "checked")

    def __init__(self, file_given: bool) -> None:
        self.file_given, self.checked = file_given, False


_facts: ContextVar[_BlockFacts | None] = ContextVar("flashinfer_autotune_block", default=None)


class BlockHandle(NamedTuple):
    """What :func:`open_block` gives the block to hand back to :func:`close_block`, and
    what it loaded from its tuning file (None: no file, or none there yet)."""

    group: Token[GroupSetting | None]
    facts: Token[_BlockFacts | None]
    loaded: LoadReport | None = None


def _settings_here(tuner: Any) -> tuple[tuple[str, Any], ...]:
    facts = _facts.get()
    return local_settings(tuner, facts is not None and facts.file_given)


def _compare_settings(setting: GroupSetting, tuner: Any, step: str, where: str) -> None:
    """Gather every rank's settings (one collective call) and raise
    :class:`AutotuneConsistencyError` on every rank if they differ."""
    rank, _ = _rank_and_size(setting.group)
    mine = Manifest(
        op="", key="", shard=setting.shard, candidates=(), tactics=(), tactics_error=None,
        gate=None, gate_on=False, choice=None, settings=_settings_here(tuner),
    )  # fmt: skip
    manifests: list[Manifest] = _all_gather(setting.group, mine, step, where)
    found = differences(manifests)
    if found:
        raise consistency_error(manifests, found, rank, where)


def check_block(tuner: Any, api_key: str) -> None:
    """At the first tuning-mode call of an ``autotune()`` block with a group in effect
    (``api_key``'s), compare every rank's settings once more (one collective call), before
    any timing: the block's own ``skip_ops`` are only in effect from here, and a rank that
    skips an op, or holds an agreed choice, makes no collective call for it."""
    facts = _facts.get()
    setting = group_in_effect()
    if facts is None or facts.checked or setting is None:
        return
    _compare_settings(
        setting,
        tuner,
        "comparing the settings",
        f"at the first tuning-mode call of an autotune() block, {api_key}",
    )
    facts.checked = True


def open_block(
    tuner: TunedResults, tuning_file: str | None, process_group: Any, shard: bool | None
) -> BlockHandle:
    """What an ``autotune()`` block does on entry besides turning tuning on: set its group
    (:func:`enter_group`); with a group in effect, compare every rank's settings (one
    collective call, before the file is read: a rank without a ``tuning_file`` would not join
    rank 0's read); and load its tuning file (:func:`load_for_block`).  The handle goes back
    to :func:`close_block`."""
    token = enter_group(process_group, shard)
    facts = _facts.set(_BlockFacts(tuning_file is not None))
    try:
        setting = group_in_effect()
        if setting is not None:
            _compare_settings(setting, tuner, "comparing the settings", "entering autotune()")
        loaded = None if tuning_file is None else load_for_block(tuner, tuning_file)
    except BaseException:
        _facts.reset(facts)
        _block.reset(token)
        raise
    return BlockHandle(token, facts, loaded)


def close_block(
    handle: BlockHandle, tuner: TunedResults, tuning_file: str | None, tuned: bool
) -> int | None:
    """What an ``autotune()`` block does on exit: save its tuning file if it ``tuned`` a key
    (:func:`save_for_block`; returns the entry count written, None when nothing was), and
    restore the enclosing block's group and settings."""
    try:
        if tuning_file is not None and tuned:
            return save_for_block(tuner, tuning_file)
        return None
    finally:
        _facts.reset(handle.facts)
        _block.reset(handle.group)
