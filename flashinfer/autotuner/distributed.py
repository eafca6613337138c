"""Tuning across the ranks of a ``torch.distributed`` process group: one choice on every rank.

The ranks compare settings and plans, time (optionally sharded), gather and combine the
timings alike; any difference raises on every rank, and every rank makes the same collective
calls on every path so nothing hangs.  Guide: docs/api/autotuner.rst ("Tuning across ranks").
"""

from __future__ import annotations

import os
import weakref
from collections.abc import Callable, Mapping, Sequence
from contextvars import ContextVar, Token
from typing import TYPE_CHECKING, Any, NamedTuple

from flashinfer.autotuner._types import (
    Choice,
    TunableRunner,
    TunedResults,
    TuningRecord,
    describe_tactic,
    skipped_ops,
)
from flashinfer.autotuner.keys import Key
from flashinfer.autotuner.timing import (
    Outcome,
    Pair,
    TimingSettings,
    decide,
    log,
    one_line_reason,
    time_pairs,
)
from flashinfer.gating.exposed import exposed_in
from flashinfer.gating.gate import (
    ALLOW_EXPERIMENTAL_AUTO_BACKENDS_ENV,
    experimental_auto_backends_allowed,
)
from flashinfer.gating.messages import gate_differs_between_ranks
from flashinfer.settings import raw as environment_value

if TYPE_CHECKING:
    from flashinfer.autotuner.persist import LoadReport


class GroupSetting(NamedTuple):
    """The process group tuning runs across, and whether it shards the plan."""

    group: Any  # a torch.distributed ProcessGroup
    shard: bool


_global: GroupSetting | None = None
_block: ContextVar[GroupSetting | None] = ContextVar("flashinfer_autotune_group", default=None)
#: Per group: key -> the agreed (backend, tactic); served without a collective while current.
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
    """Tune across the ranks of ``group`` in every ``autotune()`` block (``None``: off);
    ``shard=True`` splits each key's (backend, tactic) plan across the ranks (identical
    hardware).  ``autotune(process_group=...)`` overrides it for one block.  Upstream's name."""
    global _global
    if group is not None:
        _check_group(group, "set_autotune_process_group")
    _global = None if group is None else GroupSetting(group, bool(shard))


def get_autotune_process_group() -> Any:
    """The group set by :func:`set_autotune_process_group` (None: none)."""
    return None if _global is None else _global.group


def group_in_effect() -> GroupSetting | None:
    """This thread's group: its innermost block's, else the process's, else None."""
    return _block.get() or _global


def enter_group(process_group: Any, shard: bool | None) -> Token[GroupSetting | None]:
    """Set a block's group (None: the enclosing one's) and ``shard`` (None: its setting)."""
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
    """This rank and the group's size; ``ValueError`` naming the setting of a gone group."""
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


def _collective(group: Any, obj: Any, step: str, what: str, *, broadcast: bool = False) -> Any:
    """Every rank's ``obj`` in rank order (``broadcast``: rank 0's)."""
    import torch.distributed as dist

    rank, world = _rank_and_size(group)
    if world == 1:
        return obj if broadcast else [obj]
    out: list[Any] = [obj] if broadcast else [None] * world
    try:  # gloo and NCCL raise RuntimeError subclasses
        if broadcast:
            dist.broadcast_object_list(out, src=dist.get_global_rank(group, 0), group=group)
        else:
            dist.all_gather_object(out, obj, group=group)
    except Exception as exc:
        raise _failed(step, rank, world, exc, what) from exc
    return out[0] if broadcast else out


# ---- tuning one key ----------------------------------------------------------------------


def combine_outcomes(gathered: Sequence[Mapping[int, tuple]], size: int) -> dict[int, Outcome]:
    """Per pair: failed if it failed on any rank, else the slowest rank's outcome."""
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
    """Tune ``key`` with every rank of the group: each returns the same choice."""
    group, shard = setting
    agreed = _agreed.setdefault(group, {})
    if local is not None and local.backend in candidates and agreed.get(key) == choice_id(local):
        return TuningRecord(key, local, False)
    rank, world = _rank_and_size(group)
    what = f"{api_key}, key {key!r}"
    manifest, plan, tactics_error = local_manifest(
        api_key, key, runners, inputs, candidates, shard, local, _settings_here(settings)
    )
    manifests: list[Manifest] = _collective(group, manifest, "comparing what to tune", what)
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
    gathered = _collective(group, plain, "gathering the timings", what)
    log(f"  combined the timings of {world} ranks (each pair: the slowest rank's median)")
    record = decide(
        api_key, key, plan, combine_outcomes(gathered, len(plan)), settings.switch_margin
    )
    if record.choice is not None:
        agreed[key] = choice_id(record.choice)  # type: ignore[assignment]
    return record


# ---- the tuning file of an autotune() block ----------------------------------------------


def _read_on_rank0(path: str) -> tuple[str, Any]:
    # Rank 0 alone reads and writes the file, so it alone checks the path (on its host).
    from flashinfer.autotuner.disk import path_problem  # the file's code: when a file is used

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
    """Load ``path`` if it exists (None if not)."""
    from flashinfer.autotuner.persist import load_data, load_into  # only a block with a file

    setting = group_in_effect()
    if setting is None:
        return load_into(tuner, path) if os.path.exists(path) else None
    rank, _ = _rank_and_size(setting.group)
    mine = _read_on_rank0(path) if rank == 0 else ("", None)
    kind, payload = _collective(
        setting.group, mine, "reading the tuning file", path, broadcast=True
    )
    if kind == "missing":
        return None
    if kind == "refused":
        message, where, reason = payload
        by = " (checked by rank 0 of the autotune process group, which reads and writes it)"
        from flashinfer.autotuner.disk import TuningFileError

        raise TuningFileError(message + by, path=where, reason=reason)
    if kind == "error":
        errno, strerror = payload
        raise OSError(errno, f"{strerror} (read by rank 0 of the autotune process group)", path)
    return load_data(tuner, path, payload)


# ---- the settings of an autotune() block -------------------------------------------------


class _BlockFacts:
    """Of one block entry: whether it has a ``tuning_file``, and whether it compared yet."""

    __slots__ = ("file_given", "checked")

    def __init__(self, file_given: bool) -> None:
        self.file_given, self.checked = file_given, False


_facts: ContextVar[_BlockFacts | None] = ContextVar("flashinfer_autotune_block", default=None)


class BlockHandle(NamedTuple):
    """:func:`open_block`'s tokens for :func:`close_block`, and what it loaded."""

    group: Token[GroupSetting | None]
    facts: Token[_BlockFacts | None]
    loaded: LoadReport | None = None


def _settings_here(tuner: Any) -> tuple[tuple[str, Any], ...]:
    facts = _facts.get()
    return local_settings(tuner, facts is not None and facts.file_given)


def _compare_settings(setting: GroupSetting, tuner: Any, step: str, where: str) -> None:
    """Gather every rank's settings; raise on every rank if they differ."""
    rank, _ = _rank_and_size(setting.group)
    mine = Manifest(
        op="", key="", shard=setting.shard, candidates=(), tactics=(), tactics_error=None,
        gate=None, gate_on=False, choice=None, settings=_settings_here(tuner),
    )  # fmt: skip
    manifests: list[Manifest] = _collective(setting.group, mine, step, where)
    found = differences(manifests)
    if found:
        raise consistency_error(manifests, found, rank, where)


def check_block(tuner: Any, api_key: str) -> None:
    """At a block's first tuning-mode call, compare again: its ``skip_ops`` now apply."""
    facts = _facts.get()
    setting = group_in_effect()
    if facts is None or facts.checked or setting is None:
        return
    where = f"at the first tuning-mode call of an autotune() block, {api_key}"
    _compare_settings(setting, tuner, "comparing the settings", where)
    facts.checked = True


def open_block(
    tuner: TunedResults, tuning_file: str | None, process_group: Any, shard: bool | None
) -> BlockHandle:
    """On a block's entry: set its group, compare the settings (before the read, which a rank
    without a ``tuning_file`` would not join) and load its tuning file."""
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
    """On a block's exit: save if it ``tuned`` (the entry count, or None); restore."""
    try:
        if tuning_file is None or not tuned:
            return None
        setting = group_in_effect()  # with a group only rank 0 writes: every rank agrees
        if setting is not None and _rank_and_size(setting.group)[0] != 0:
            return None
        from flashinfer.autotuner.persist import save_into

        return save_into(tuner, tuning_file)
    finally:
        _facts.reset(handle.facts)
        _block.reset(handle.group)


@exposed_in("flashinfer.autotuner.distributed")
class AutotuneConsistencyError(RuntimeError):
    """The ranks of an autotune process group cannot tune a key together (a ``RuntimeError``
    raised on every rank): they are about to time different things, their settings that
    change the choice (:data:`SETTINGS`) differ, or the group failed (a rank died or never
    made the call).  ``differences`` maps what differed (a setting by its name in
    :data:`SETTINGS`) to ``{rank: value}`` (empty when the group failed)."""

    def __init__(self, message: str, differences: Mapping[str, Mapping[int, Any]] | None = None):
        super().__init__(message)
        self.differences: dict[str, dict[int, Any]] = {
            what: dict(per_rank) for what, per_rank in (differences or {}).items()
        }

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.args[0], self.differences))


class Manifest(NamedTuple):
    """What one rank is about to tune for one key."""

    op: str
    key: str  # repr of the tuning key
    shard: bool
    candidates: tuple[str, ...]  # the dispatcher's list: after the gate and the heuristic
    tactics: tuple[tuple[str, tuple[str, ...]], ...]  # (backend, its tactics) per runner
    tactics_error: str | None  # "backend: reason" when a runner's tactics() raised
    gate: str | None  # the gate variable's raw value (None: unset)
    gate_on: bool
    choice: tuple[str, str] | None  # (backend, tactic) this rank has for the key already
    #: ``(name, value)`` of every setting in :data:`SETTINGS`, in its order
    settings: tuple[tuple[str, Any], ...] = ()


class Setting(NamedTuple):
    """A setting that changes the choice: its label, and its read (tuner, file given)."""

    label: str
    read: Callable[[TimingSettings, bool], Any]


#: Every setting that changes what a tuning picks, compared across the ranks before any
#: timing; one added here needs no other change (a test runs one case per entry).
SETTINGS: dict[str, Setting] = {
    "switch_margin": Setting("AutoTuner.switch_margin", lambda t, f: t.switch_margin),
    "repeat": Setting("AutoTuner.repeat", lambda t, f: t.repeat),
    "warmup": Setting("AutoTuner.warmup", lambda t, f: t.warmup),
    "budget_s": Setting("AutoTuner.budget_s", lambda t, f: t.budget_s),
    # a rank that skips an op makes no collective call for it
    "skip_ops": Setting("autotune(skip_ops=...)", lambda t, f: tuple(sorted(skipped_ops()))),
    # with a group, rank 0 reads a block's tuning file for all: a collective call
    "tuning_file": Setting("autotune(tuning_file=...)", lambda t, f: f),
}


def local_settings(tuner: TimingSettings, file_given: bool) -> tuple[tuple[str, Any], ...]:
    """This rank's value of every setting in :data:`SETTINGS` (pickled)."""
    return tuple((name, setting.read(tuner, file_given)) for name, setting in SETTINGS.items())


#: The fields that must be equal on every rank, and how a message says that one differs.
COMPARED = {
    "op": "the op differs (the ranks made different tuning-mode calls)",
    "key": "the tuning key differs",
    "shard": "shard= differs",
    "candidates": "the backend='auto' candidates (after the experimental gate and the "
    "heuristic) differ",
    "tactics": "the candidates' tactics differ",
    "tactics_error": "a runner's tactics() raised on some ranks",
}
#: Differences another explains (field -> causes): kept in ``.differences``, not the message.
_EXPLAINED_BY = {"tactics": ("candidates", "tactics_error", "skip_ops"), "key": ("op",)}


def choice_id(choice: Choice | None) -> tuple[str, str] | None:
    """A choice across ranks: its backend and tactic (times differ)."""
    return None if choice is None else (choice.backend, describe_tactic(choice.tactic))


def local_manifest(
    api_key: str,
    key: Key,
    runners: Mapping[str, TunableRunner],
    inputs: tuple,
    candidates: Sequence[str],
    shard: bool,
    choice: Choice | None,
    settings: tuple[tuple[str, Any], ...] = (),
) -> tuple[Manifest, list[Pair], Exception | None]:
    """This rank's manifest, plan and the exception a ``tactics()`` raised (the other ranks must
    learn of it rather than wait)."""
    plan: list[Pair] = []
    tactics: list[tuple[str, tuple[str, ...]]] = []
    error: Exception | None = None
    for backend in candidates:
        runner = runners.get(backend)
        if runner is None:
            continue
        try:
            listed = list(runner.tactics(inputs))
        except Exception as exc:
            error = exc
            break
        plan += [Pair(backend, runner, tactic) for tactic in listed]
        tactics.append((backend, tuple(describe_tactic(t) for t in listed)))
    gate = environment_value(ALLOW_EXPERIMENTAL_AUTO_BACKENDS_ENV)  # shown, not decided on
    why = None if error is None else f"{backend}: {one_line_reason(error)}"
    manifest = Manifest(
        api_key, repr(key), shard, tuple(candidates), tuple(tactics), why, gate,
        experimental_auto_backends_allowed(), choice_id(choice), settings,
    )  # fmt: skip
    return manifest, plan, error


def differences(manifests: Sequence[Manifest]) -> dict[str, dict[int, Any]]:
    """``field -> {rank: value}`` of every setting and field not equal on all ranks (and the gate's
    raw values under ``"gate"`` if those differ)."""
    found: dict[str, dict[int, Any]] = {}
    per_rank = [dict(m.settings) for m in manifests]
    for name in SETTINGS:
        values = [settings.get(name) for settings in per_rank]
        if any(v != values[0] for v in values):
            found[name] = dict(enumerate(values))
    for field in COMPARED:
        values = [getattr(m, field) for m in manifests]
        if any(v != values[0] for v in values):
            found[field] = dict(enumerate(values))
    gates = [(m.gate, m.gate_on) for m in manifests]
    if found and any(g != gates[0] for g in gates):
        found["gate"] = {rank: m.gate for rank, m in enumerate(manifests)}
    return found


def _ranks(ranks: list[int]) -> str:
    return f"rank {ranks[0]}" if len(ranks) == 1 else f"ranks {', '.join(map(str, ranks))}"


def _by_value(per_rank: Mapping[int, Any]) -> list[tuple[Any, list[int]]]:
    """The distinct values, in order of first rank, each with its ranks."""
    groups: list[tuple[Any, list[int]]] = []
    for rank, value in sorted(per_rank.items()):
        for held, ranks in groups:
            if held == value:
                ranks.append(rank)
                break
        else:
            groups.append((value, [rank]))
    return groups


def _show(field: str, value: Any) -> str:
    if field in ("skip_ops", "candidates"):
        return repr(list(value or ()))
    if field == "tactics":
        return "{" + ", ".join(f"{b}: [{', '.join(ts)}]" for b, ts in value) + "}"
    if field == "tuning_file":
        return "given" if value else "not given"
    return "no error" if field == "tactics_error" and value is None else str(value)


def _show_gate(manifests: Sequence[Manifest]) -> str:
    parts = []
    for value, ranks in _by_value({r: (m.gate, m.gate_on) for r, m in enumerate(manifests)}):
        raw, on = value
        shown = "unset" if raw is None else repr(raw)
        parts.append(f"{_ranks(ranks)}: {shown} ({'on' if on else 'off'})")
    return "; ".join(parts)


def consistency_error(
    manifests: Sequence[Manifest],
    found: Mapping[str, Mapping[int, Any]],
    rank: int,
    where: str | None = None,
) -> AutotuneConsistencyError:
    """The error every rank raises for ``found``; ``where``: when they compared."""
    mine = manifests[rank]
    where = f"op {mine.op}, key {mine.key}" if where is None else where
    lines = [
        f"flashinfer autotuner: the {len(manifests)} ranks of the autotune process group "
        f"disagree on what to tune (this is rank {rank}; {where}):"
    ]
    for field, per_rank in found.items():
        if field == "gate" or any(cause in found for cause in _EXPLAINED_BY.get(field, ())):
            continue
        shown = "; ".join(f"{_ranks(r)}: {_show(field, v)}" for v, r in _by_value(per_rank))
        says = f"{SETTINGS[field].label} differs" if field in SETTINGS else COMPARED[field]
        lines.append(f"  {says}: {shown}")
    if "gate" in found:
        lines.append(gate_differs_between_ranks(_show_gate(manifests)))
    lines.append(
        "Every rank raised this error and nothing was timed: make the same tuning-mode calls, "
        "with the same settings and environment, on every rank of the group."
    )
    return AutotuneConsistencyError("\n".join(lines), found)
