"""What the ranks of an autotune process group compare before they tune a key, and the
error every rank raises when they differ.

Each rank describes what it is about to time in a :class:`Manifest` (plain, picklable data:
strings and tuples); :mod:`.distributed` gathers every rank's manifest, and each rank runs
the same pure function of the gathered list (:func:`differences`), so all ranks reach the
same verdict without another collective call.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from flashinfer.autotuner._state import skipped_ops
from flashinfer.autotuner._types import Choice, TunableRunner, describe_tactic
from flashinfer.autotuner.candidate_timing import Pair, TimingSettings, one_line_reason
from flashinfer.autotuner.keys import Key
from flashinfer.gating.exposed import exposed_in
from flashinfer.gating.gate import (
    ALLOW_EXPERIMENTAL_AUTO_BACKENDS_ENV,
    experimental_auto_backends_allowed,
)
from flashinfer.gating.messages import gate_differs_between_ranks

__all__ = [
    "SETTINGS",
    "AutotuneConsistencyError",
    "Manifest",
    "Setting",
    "consistency_error",
    "differences",
    "local_manifest",
    "local_settings",
]


@exposed_in("flashinfer.autotuner.distributed")
class AutotuneConsistencyError(RuntimeError):
    """The ranks of an autotune process group cannot tune a key together.

    Raised on **every** rank: when the ranks are about to time different things (another op
    or tuning key, other candidates, e.g. because ``FLASHINFER_ALLOW_EXPERIMENTAL_AUTO_BACKENDS``
    differs, other tactics, another ``shard`` setting), or with different settings that
    change the choice (:data:`SETTINGS`: the switch margin, repeat, warm-up and budget,
    ``skip_ops``, whether ``tuning_file`` is given), or when the group itself failed during tuning
    (a rank died, was interrupted, or never made the call; the wait is bounded by the
    group's timeout).  ``differences`` maps what differed (a setting by its name in
    :data:`SETTINGS`, e.g. ``"switch_margin"``) to ``{rank: value}`` (empty when the group
    failed).  A ``RuntimeError``.
    """

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


def _skipped_keys() -> tuple[str, ...]:
    return tuple(sorted(skipped_ops()))


class Setting(NamedTuple):
    """A setting that changes the choice: how a message names it, and how a rank reads it
    from its tuner (:class:`~flashinfer.autotuner.AutoTuner`) and whether its innermost
    ``autotune()`` block was given a ``tuning_file``."""

    label: str
    read: Callable[[TimingSettings, bool], Any]


#: Every setting that changes what a tuning picks, compared across the ranks before any
#: timing (on entering an ``autotune()`` block, at its first tuning-mode call, and with each
#: key's plan): a difference raises :class:`AutotuneConsistencyError` on every rank, naming
#: the setting and each rank's value.  A setting added here is compared with no other change;
#: ``tests/test_autotune_settings_agree.py`` runs one case per entry (and fails for an entry
#: it has no case for).
SETTINGS: dict[str, Setting] = {
    "switch_margin": Setting(
        "AutoTuner.switch_margin", lambda tuner, file_given: tuner.switch_margin
    ),
    "repeat": Setting("AutoTuner.repeat", lambda tuner, file_given: tuner.repeat),
    "warmup": Setting("AutoTuner.warmup", lambda tuner, file_given: tuner.warmup),
    "budget_s": Setting("AutoTuner.budget_s", lambda tuner, file_given: tuner.budget_s),
    # the ops this thread's blocks skip (by api_key, sorted): a rank that skips an op makes
    # no collective call for it, so a rank that tunes it would wait for nothing
    "skip_ops": Setting("autotune(skip_ops=...)", lambda tuner, file_given: _skipped_keys()),
    # with a group, a block given a tuning file has rank 0 read it for all: a collective
    # call that a rank without one would not make
    "tuning_file": Setting("autotune(tuning_file=...)", lambda tuner, file_given: file_given),
}


def local_settings(tuner: TimingSettings, file_given: bool) -> tuple[tuple[str, Any], ...]:
    """This rank's value of every setting in :data:`SETTINGS` (plain data: it is pickled)."""
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
#: Differences that another one explains (field -> its causes): left out of the message,
#: kept in ``AutotuneConsistencyError.differences``.
_EXPLAINED_BY = {"tactics": ("candidates", "tactics_error", "skip_ops"), "key": ("op",)}


def choice_id(choice: Choice | None) -> tuple[str, str] | None:
    """What identifies a choice across ranks: its backend and tactic (times differ)."""
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
    """This rank's manifest, its plan, and the exception a runner's ``tactics()`` raised
    (caught: the other ranks must learn of it rather than wait).  ``settings``: this rank's
    :func:`local_settings`."""
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
    manifest = Manifest(
        op=api_key,
        key=repr(key),
        shard=shard,
        candidates=tuple(candidates),
        tactics=tuple(tactics),
        tactics_error=None if error is None else f"{backend}: {one_line_reason(error)}",
        gate=os.environ.get(ALLOW_EXPERIMENTAL_AUTO_BACKENDS_ENV),  # shown, not decided on
        gate_on=experimental_auto_backends_allowed(),
        choice=choice_id(choice),
        settings=settings,
    )
    return manifest, plan, error


def differences(manifests: Sequence[Manifest]) -> dict[str, dict[int, Any]]:
    """``field -> {rank: value}`` of every compared field, and every setting of
    :data:`SETTINGS` (by its name), whose value is not the same on all ranks; with the
    gate's raw values added (``"gate"``) when those differ too.  Settings come first: they
    are the cause of the other differences they bring."""
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
    """The distinct values, in order of first rank, each with the ranks that hold it."""
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
    if field == "skip_ops":
        return repr(list(value or ()))
    if field == "tuning_file":
        return "given" if value else "not given"
    if field == "tactics":
        return "{" + ", ".join(f"{b}: [{', '.join(ts)}]" for b, ts in value) + "}"
    if field == "candidates":
        return repr(list(value))
    if field == "tactics_error" and value is None:
        return "no error"
    return str(value)


def _show_gate(manifests: Sequence[Manifest]) -> str:
    parts = []
    for value, ranks in _by_value({r: (m.gate, m.gate_on) for r, m in enumerate(manifests)}):
        raw, on = value
        shown = "unset" if raw is None else repr(raw)
        parts.append(f"{_ranks(ranks)}: {shown} ({'on' if on else 'off'})")
    return "; ".join(parts)


def _says(field: str) -> str:
    setting = SETTINGS.get(field)
    return COMPARED[field] if setting is None else f"{setting.label} differs"


def consistency_error(
    manifests: Sequence[Manifest],
    found: Mapping[str, Mapping[int, Any]],
    rank: int,
    where: str | None = None,
) -> AutotuneConsistencyError:
    """The error every rank raises for ``found`` (see :func:`differences`); ``where`` says
    when the ranks compared (default: the op and key of this rank's manifest)."""
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
        lines.append(f"  {_says(field)}: {shown}")
    if "gate" in found:
        lines.append(gate_differs_between_ranks(_show_gate(manifests)))
    lines.append(
        "Every rank raised this error and nothing was timed: make the same tuning-mode calls, "
        "with the same settings and environment, on every rank of the group."
    )
    return AutotuneConsistencyError("\n".join(lines), found)
