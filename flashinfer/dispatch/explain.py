"""``op.explain(*args, **kwargs)``: what a ``backend="auto"`` call would do, and why."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from flashinfer.dispatch.choice_log import tuner_view
from flashinfer.dispatch.restrictions import restriction_source
from flashinfer.dispatch.selection import (
    DECLARATION_ORDER as DECLARATION_ORDER,  # re-exported for the compiled route
)
from flashinfer.dispatch.selection import (
    HEURISTIC as HEURISTIC,
)
from flashinfer.dispatch.selection import (
    RESTRICTED,
    UNDECIDED,
    common_refusal,
    metadata_only,
    select,
)
from flashinfer.dispatch.verdicts import VerdictCacheInfo
from flashinfer.gating.gate import experimental_auto_backends_allowed
from flashinfer.gating.messages import gate_verdict


@dataclass(frozen=True)
class BackendVerdict:
    """One backend's part in an explained call."""

    backend: str
    experimental: bool
    #: Its capability rule and support check accept the call.
    can_run: bool
    #: Why it cannot run (its capability rule's or its checker's reason), or None.
    why_not: str | None
    #: Its place among the candidates (0: first), or None when it is not one.
    rank: int | None
    #: What kept it from the candidates: ``"common check"`` (the call fails before any
    #: backend is looked at), ``"capability"``, ``"autograd"`` (it cannot differentiate and
    #: the call requires grad: see ``Backend.differentiable``), ``"checker"``,
    #: ``"undecided"`` (its checks need data that metadata-only inputs lack), ``"gate"``,
    #: ``"restriction"`` or ``"heuristic"``; None for a candidate.
    stage: str | None
    #: The same in words, or None for a candidate.
    reason: str | None
    #: False when the inputs carry metadata only and its checks need more (tensor values,
    #: a data pointer): whether it can run is unknown, and it is left out of the choice.
    decided: bool = True
    #: The release it graduated in, for a stable backend that was experimental; else None.
    graduated_in: str | None = None

    @property
    def candidate(self) -> bool:
        return self.rank is not None


def _kind(v: BackendVerdict) -> str:
    """The kind column: experimental, stable, or stable with the release it graduated in."""
    if v.experimental:
        return "experimental"
    return "stable" if v.graduated_in is None else f"stable (since {v.graduated_in})"


@dataclass(frozen=True)
class Explanation:
    """What ``op(*args, **kwargs, backend="auto")`` would do (``op.explain``).

    ``str()`` is a readable table; the attributes are for programs.
    """

    api: str  #: the API as users call it, e.g. ``"flashinfer.mm"``
    call: str  #: the arguments, summarised (dtype and shape of tensors)
    capability: int | None  #: the call's compute capability (None: no CUDA tensor)
    verdicts: tuple[BackendVerdict, ...]  #: one per backend, in declaration order
    candidates: tuple[str, ...]  #: what automatic selection would consider, best first
    chosen: str | None  #: the backend that would run (None: the call would raise)
    #: where the choice comes from: "heuristic", "declaration order" (no heuristic),
    #: "restricted", "tuned in this process", "loaded from a file"; None without a choice
    source: str | None
    restriction: str | None  #: "use_backends" or "FLASHINFER_BACKENDS" when restricted
    gate_on: bool  #: FLASHINFER_ALLOW_EXPERIMENTAL_AUTO_BACKENDS lets "auto" use them
    error: str | None = None  #: why the call would raise instead of running
    tactic: Any = None  #: the tuned tactic, when the autotuner's choice runs
    notes: tuple[str, ...] = field(default_factory=tuple)
    #: the op's verdict cache (call signatures whose checks are not run again); None when
    #: the op's verdicts are never cached
    cache: VerdictCacheInfo | None = None

    def verdict(self, backend: str) -> BackendVerdict:
        """The verdict of ``backend`` (``KeyError`` for a backend the op does not have)."""
        for v in self.verdicts:
            if v.backend == backend:
                return v
        raise KeyError(backend)

    def __str__(self) -> str:
        cc = self.capability
        where = "no CUDA tensor" if cc is None else f"compute capability {cc}"
        lines = [f"{self.api}({self.call}), backend='auto'; {where}"]
        rows = [("backend", "kind", "can run", "verdict", "why")]
        for v in self.verdicts:
            verdict = f"candidate {v.rank + 1}" if v.rank is not None else f"left out ({v.stage})"
            rows.append(
                (
                    v.backend,
                    _kind(v),
                    "yes" if v.can_run else "no" if v.decided else "unknown",
                    verdict,
                    v.reason or "",
                )
            )
        widths = [max(len(r[i]) for r in rows) for i in range(4)]
        for r in rows:
            cells = [c.ljust(w) for c, w in zip(r[:4], widths, strict=True)]
            lines.append(("  " + "  ".join([*cells, r[4]])).rstrip())
        lines.append(f"candidates: {list(self.candidates)}")
        if self.chosen is not None:
            tactic = "" if self.tactic is None else f", tactic {self.tactic!r}"
            source = self.source
            if source == RESTRICTED and self.restriction:
                source = f"restricted by {self.restriction}"
            lines.append(f"choice: {self.chosen!r} ({source}{tactic})")
        elif self.error is not None:
            lines.append(f"choice: none; the call raises: {self.error}")
        else:
            lines.append("choice: none to make")
        lines += [f"note: {n}" for n in self.notes]
        if self.cache is not None:
            c = self.cache
            lines.append(
                f"verdict cache: {c.size} of {c.cap} call signatures (stored {c.stored}, "
                f"evicted {c.evicted})"
            )
        return "\n".join(lines)


@dataclass(frozen=True)
class PathExplanation:
    """What a call of an API without backends (no ``backend=`` to choose, e.g. an
    experimental API that runs a kernel when it can and a torch composition otherwise)
    would run, and why: its :class:`Explanation` where there is nothing to select.  Built
    by :func:`explain_paths` from the API's own rules; nothing runs."""

    api: str  #: the API as users call it, e.g. ``"flashinfer.fused_add_rmsnorm"``
    call: str  #: the arguments, summarised (dtype and shape of tensors)
    capability: int | None  #: the call's compute capability (None: no CUDA tensor)
    paths: tuple[tuple[str, str | None], ...]
    """Each way the API can run, in the order it tries them, with why it cannot run this
    call (None: it can)."""
    chosen: str | None  #: the path that would run (None: the call would raise)
    error: str | None = None  #: why the call would raise instead of running
    tactic: Any = None  #: always None (no tuning); kept so the JSON has Explanation's keys
    notes: tuple[str, ...] = field(default_factory=tuple)

    def __str__(self) -> str:
        cc = self.capability
        where = "no CUDA tensor" if cc is None else f"compute capability {cc}"
        lines = [
            f"{self.api}({self.call}); {where}",
            "  no backends to choose between (no backend= argument): it runs the first of "
            "these that can run the call",
        ]
        rows = [("path", "can run", "why not")]
        rows += [(name, "no" if why else "yes", why or "") for name, why in self.paths]
        widths = [max(len(r[i]) for r in rows) for i in range(2)]
        for r in rows:
            lines.append(f"  {r[0].ljust(widths[0])}  {r[1].ljust(widths[1])}  {r[2]}".rstrip())
        if self.chosen is not None:
            lines.append(f"choice: {self.chosen!r}")
        else:
            lines.append(f"choice: none; the call raises: {self.error}")
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)


def explain_paths(
    api: str,
    bound: Mapping[str, Any],
    paths: Mapping[str, str | None],
    error: str | None = None,
    notes: tuple[str, ...] = (),
) -> PathExplanation:
    """The :class:`PathExplanation` of a call with arguments ``bound`` (by name), given
    each path's reason (None: it can run) in the order the API tries them; ``error``: why
    the call would raise (then nothing is chosen)."""
    cc = None
    for value in bound.values():
        device = getattr(value, "device", None)
        if getattr(device, "type", None) == "cuda":
            cc = capability_of(device)
            break
    chosen = None if error else next((n for n, why in paths.items() if why is None), None)
    return PathExplanation(
        api=api,
        call=_call_text(bound),
        capability=cc,
        paths=tuple(paths.items()),
        chosen=chosen,
        error=error,
        notes=notes,
    )


def capability_of(device: Any) -> int | None:
    """``major * 10 + minor`` of a CUDA ``device``; None when torch cannot say."""
    import torch

    try:
        major, minor = torch.cuda.get_device_capability(device)
    except (RuntimeError, AssertionError):
        return None
    return major * 10 + minor


def _summary(value: Any) -> str:
    shape = getattr(value, "shape", None)
    dtype = getattr(value, "dtype", None)
    if shape is not None and dtype is not None:
        name = str(dtype).replace("torch.", "")
        device = getattr(value, "device", None)
        return f"{name}{list(shape)}" + (f" on {device}" if device is not None else "")
    text = repr(value)
    return text if len(text) <= 30 else text[:27] + "..."


def _call_text(bound: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={_summary(v)}" for k, v in bound.items() if k != "backend")


def _tuned(op: Any, bound: Mapping[str, Any], notes: list[str]) -> tuple[str, Any, str] | None:
    """The autotuner's result for this call as (backend, tactic, source), if the program imported
    the autotuner and the op's ``"auto"`` calls are routed to it."""
    view = tuner_view()
    if view is None or not view.registered(op.api_key):
        return None
    names = op.routed_inputs()
    if op.auto_route is None or names is None:
        notes.append(
            "the API body calls the autotuner, which may run a tuned backend instead of the "
            "first candidate (not shown: register the op with direct=True to see it)"
        )
        return None
    if view.tuning_now():
        notes.append("inside autotune(): the call would time the candidates if not tuned yet")
    return view.tuned_choice(op.api_key, tuple(bound[n] for n in names))


def explain_call(
    op: Any,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    *,
    restricted: tuple[str, ...] | None = None,
) -> Explanation:
    """:meth:`BackendRequirementOp.explain`'s work (see the module doc)."""
    notes: list[str] = []
    kwargs = dict(kwargs)
    kwargs.pop("skip_check", None)
    bound = dict(op._sig.bind(*args, **kwargs).arguments)  # TypeError as for a call
    if op.backend_checks and bound.get("backend", "auto") != "auto":
        notes.append(f"backend={bound['backend']!r} was given; explained as backend='auto'")
    if "backend" in bound:
        bound["backend"] = "auto"
    cc = op._call_capability(bound)
    gate_on = experimental_auto_backends_allowed()
    listed = op._restriction() if restricted is None else restricted
    who = "use_backends" if restricted is not None else None
    no_data = metadata_only(bound)
    error = common_refusal(op, cc, bound, no_data=no_data)
    if error is not None:
        not_checked = ("common check", "not checked: the common check rejects the call")
        if error.startswith(UNDECIDED):
            not_checked = ("common check", "not checked: the common check is not decided")
        refusals: dict[str, tuple[str, str]] = dict.fromkeys(op.backend_checks, not_checked)
        candidates: list[str] = []
        left = dict(refusals)
        source: str | None = None
        later: list[str] = []
    else:
        sel = select(op, cc, bound, listed, no_data=no_data, explaining=True)
        refusals, candidates, source = sel.refusals, sel.candidates, sel.source
        left = dict(refusals)
        for b, r in sel.left.items():  # explain's own words for the gate
            left[b] = ("gate", gate_verdict()) if r[0] == "gate" else r
        later = sel.notes
        if listed is not None:
            who = who or restriction_source(op.api_key) or "use_backends"
            for b in op.backend_checks:
                if b not in listed:
                    left[b] = ("restriction", f"not listed by {who} ({list(listed)})")
    undecided = [b for b, r in refusals.items() if r[0] == "undecided"]
    if undecided:
        notes.append(
            f"the inputs carry metadata only: whether {', '.join(map(repr, undecided))} can "
            "run is not decided, and the choice leaves it out"
        )
    notes += later
    chosen = candidates[0] if candidates else None
    tactic = None
    if chosen is not None:
        tuned = _tuned(op, bound, notes)
        if tuned is not None and tuned[0] in candidates:
            chosen, tactic, source = tuned
        elif tuned is not None:
            notes.append(
                f"the autotuner's choice {tuned[0]!r} is not a candidate of this call; the "
                "first candidate runs with its default tactic"
            )
    elif error is None and op.backend_checks:
        error = "no backend is a candidate for these inputs (see the table)"
    elif error is None:
        notes.append("the API has no backends to choose from: its body runs")
    from flashinfer.gating import history  # only when explaining

    rank = {b: i for i, b in enumerate(candidates)}
    verdicts = tuple(
        BackendVerdict(
            backend=b,
            experimental=b in op.experimental_backends,
            can_run=b not in refusals,
            why_not=refusals[b][1] if b in refusals else None,
            rank=rank.get(b),
            stage=None if b in rank else left[b][0],
            reason=None if b in rank else left[b][1],
            decided=b not in undecided,
            graduated_in=history.graduated_in(op.api_key, b),
        )
        for b in op.backend_checks
    )
    return Explanation(
        api=op.choice_log.name,
        call=_call_text(bound),
        capability=cc,
        verdicts=verdicts,
        candidates=tuple(candidates),
        chosen=chosen,
        source=source if chosen is not None else None,
        restriction=(who or restriction_source(op.api_key)) if listed is not None else None,
        gate_on=gate_on,
        error=error if chosen is None else None,
        tactic=tactic,
        notes=tuple(notes),
        cache=op.verdict_cache.info() if op.verdicts_cacheable else None,
    )
