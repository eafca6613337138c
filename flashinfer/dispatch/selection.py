"""One selection: which backends may run a ``backend="auto"`` call, and in what order."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from flashinfer.dispatch.capability import BackendSupportedError, capability_reason
from flashinfer.dispatch.plan import invoke
from flashinfer.dispatch.restrictions import BACKENDS_ENV, restriction_source
from flashinfer.dispatch.verdicts import reads_tensor_data_marked
from flashinfer.gating.gate import experimental_auto_backends_allowed
from flashinfer.gating.messages import (
    every_candidate_rejected,
    gate_exclusion_reason,
    only_experimental_fit,
    restriction_cannot_run,
)
from flashinfer.torch_boundary import FakeTensor

HEURISTIC = "heuristic"
DECLARATION_ORDER = "declaration order"
RESTRICTED = "restricted"
UNDECIDED = "not decided on metadata-only inputs"


@dataclass
class Selection:
    """What :func:`select` decided for one call."""

    candidates: list[str]  #: best first; empty: the call cannot run
    dropped: tuple[str, ...]  #: experimental backends that fit, left out by the gate
    listed: tuple[str, ...] | None  #: the restriction in force, or None
    #: backend -> (stage, reason): why each backend it looked at cannot run (stages
    #: "capability", "autograd", "checker", "undecided"), in the order it looked
    refusals: dict[str, tuple[str, str]]
    #: backend -> (stage, reason): what else kept a backend that can run from the candidates
    #: ("gate", "heuristic"; a restriction's are the explanation's to name)
    left: dict[str, tuple[str, str]]
    source: str  #: "heuristic", "declaration order" or "restricted"
    certain: bool = True  #: False when metadata could not decide the order
    notes: list[str] = field(default_factory=list)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def _no_data(value: Any) -> bool:
    """Whether ``value`` is a tensor with metadata only."""
    return getattr(value, "is_meta", False) is True or isinstance(value, FakeTensor)


def metadata_only(bound: Mapping[str, Any]) -> bool:
    """Whether some tensor among the call's arguments carries metadata only."""
    return any(_no_data(v) for v in bound.values())


def backend_refusal(
    op: Any,
    name: str,
    cc: int | None,
    bound: Mapping[str, Any],
    *,
    no_data: bool = False,
    explaining: bool = False,
) -> tuple[str, str] | None:
    """Why backend ``name`` cannot run a call (``(stage, reason)``), or None if it can."""
    checker = op.backend_checks[name]
    reason = capability_reason(checker, cc)
    if reason is not None:
        return ("capability", reason)
    reason = op.grad_refusal(name, bound)
    if reason is not None:
        return ("autograd", reason)
    if no_data and reads_tensor_data_marked(checker):
        return (
            "undecided",
            f"{UNDECIDED}: its support check reads tensor data (it is marked "
            "reads_tensor_data); explain real tensors to decide",
        )
    try:
        fits = op.check_result(name, invoke(checker, op._specs[name], bound))
    except ValueError as exc:
        return ("checker", f"support check rejected the inputs: {exc}")
    except Exception as exc:
        if not explaining:
            raise
        if no_data:
            return (
                "undecided",
                f"{UNDECIDED}: its support check needs more than shapes "
                f"({_first_line(exc)}); explain real tensors to decide",
            )
        return ("checker", f"support check raised {type(exc).__name__}: {exc}")
    return None if fits else ("checker", "support check returned False for these inputs")


def common_refusal(
    op: Any, cc: int | None, bound: Mapping[str, Any], *, no_data: bool = False
) -> str | None:
    """Why the API's common check refuses a call, or None (also when it has none)."""
    if op.common_check is None:
        return None
    if not op.backend_checks:
        reason = capability_reason(op.common_check, cc)
        if reason is not None:
            return f"the API does not support compute capability {cc}: {reason}"
    if no_data and reads_tensor_data_marked(op.common_check):
        return (
            f"{UNDECIDED}: its common check reads tensor data (it is marked "
            "reads_tensor_data); explain real tensors to decide"
        )
    try:
        if op.check_result(None, invoke(op.common_check, op._specs["__common__"], bound)):
            return None
        return "its common check returned False for these inputs"
    except ValueError as exc:
        return f"its common check rejected the inputs: {exc}"
    except Exception as exc:
        if not no_data:
            raise
        return (
            f"{UNDECIDED}: its common check needs more than shapes ({_first_line(exc)}); "
            "explain real tensors to decide"
        )


def select(
    op: Any,
    cc: int | None,
    bound: Mapping[str, Any],
    listed: tuple[str, ...] | None,
    *,
    no_data: bool = False,
    explaining: bool = False,
) -> Selection:
    """The candidates of a ``backend="auto"`` call with arguments ``bound`` at capability ``cc``
    under the restriction ``listed`` (None: none), and why not the others."""
    refusals: dict[str, tuple[str, str]] = {}
    viable: list[str] = []
    checked = op.backend_checks if listed is None or explaining else listed
    for name in checked:
        refused = backend_refusal(op, name, cc, bound, no_data=no_data, explaining=explaining)
        if refused is None:
            viable.append(name)
        else:
            refusals[name] = refused
    left: dict[str, tuple[str, str]] = {}
    if listed is not None:
        candidates = [b for b in listed if b in viable]
        return Selection(candidates, (), listed, refusals, left, RESTRICTED)
    dropped = tuple(b for b in viable if b in op.experimental_backends)
    if dropped and not experimental_auto_backends_allowed():
        viable = [b for b in viable if b not in op.experimental_backends]
        for b in dropped:
            left[b] = ("gate", gate_exclusion_reason())
    else:
        dropped = ()
    notes: list[str] = []
    candidates, source, certain = order_candidates(op, bound, viable, no_data, notes, left)
    return Selection(candidates, dropped, None, refusals, left, source, certain, notes)


def order_candidates(
    op: Any,
    bound: Mapping[str, Any],
    candidates: list[str],
    no_data: bool = False,
    notes: list[str] | None = None,
    left: dict[str, tuple[str, str]] | None = None,
) -> tuple[list[str], str, bool]:
    """``"auto"``'s order of ``candidates`` (the viable, ungated backends, in declaration order)."""
    notes = [] if notes is None else notes
    source, certain = DECLARATION_ORDER, True
    if candidates and op.heuristic_func is not None:
        spec = op._specs["__heuristic__"]
        ordered: list[str] | None
        try:
            answer = invoke(op.heuristic_func, spec, bound, list(candidates))
            ordered = op.heuristic_order(answer, candidates)
        except Exception as exc:
            if not no_data:
                raise
            notes.append(
                f"the heuristic needs more than shapes ({_first_line(exc)}): not applied, "
                "the candidates are in declaration order"
            )
            ordered, certain = None, False
        if ordered is not None:
            if left is not None:
                for b in candidates:
                    if b not in ordered:
                        left[b] = ("heuristic", "left out by the heuristic for these inputs")
            candidates, source = ordered, HEURISTIC
    try:
        preferred = op.prefer_first(candidates, bound)
    except Exception as exc:
        if not no_data:
            raise
        notes.append(f"a preference needs more than shapes ({_first_line(exc)}): not applied")
        preferred, certain = candidates, False
    if preferred is not candidates:
        notes.append(
            f"{preferred[0]!r} comes first: its declaration prefers these inputs (Backend.prefer)"
        )
        candidates = preferred
    return list(candidates), source, certain


def selection_error(op: Any, sel: Selection) -> BackendSupportedError:
    """The error of a call whose selection has no candidate, each backend's reason in it."""
    api = op.api_name
    reasons = {b: r[1] for b, r in sel.refusals.items()}
    if sel.listed is not None:
        source = restriction_source(op.api_key)
        variable = source if source == BACKENDS_ENV else None
        return BackendSupportedError(restriction_cannot_run(api, sel.listed, reasons, variable))
    reasons |= {b: r[1] for b, r in sel.left.items()}
    if sel.dropped:
        return BackendSupportedError(only_experimental_fit(api, list(sel.dropped), reasons))
    return BackendSupportedError(every_candidate_rejected(api, reasons))
