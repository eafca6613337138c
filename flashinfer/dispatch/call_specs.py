"""How to call a checker or the heuristic with the API's arguments, and what is kept of the
heuristic's answer (``filter_heuristic``).

Worked out once per checker at decoration (``checker_spec``): positionally when its
parameters are the API's, else by name, with ``**kwargs`` taking the rest.  The generated
path spells the spec out as a call (``_codegen.render_call``); the reference path replays it
on bound arguments (``invoke``).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Collection, Mapping
from typing import Any

from flashinfer.codegen.compiler import POSITIONAL_KINDS, CallSpec, ParameterList
from flashinfer.dispatch.results import heuristic_names

__all__ = ["checker_spec", "filter_heuristic", "invoke"]


def checker_spec(
    api: ParameterList, fn: Callable[..., Any], role: str, name: str, *, lead: bool = False
) -> CallSpec:
    """How to call a checker: positionally when its parameters match the API's, else by name
    (as upstream calls every checker; its parameters may have any names, underscored ones included).

    A checker takes the API's parameters, or a subset of them, or ``**kwargs``; it may add
    parameters of its own only with defaults (rejected here, at decoration, otherwise).
    ``lead``: ``fn`` takes one argument first, before the API's (the heuristic's
    candidates).
    """
    try:
        theirs = ParameterList(functools.partial(fn, None) if lead else fn, redeclared=False)
    except (TypeError, ValueError):
        return api.call_spec()
    if api.matches_positionally(theirs):
        return [("pos", n) for n in api.names]
    var = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    ours = {p.name: p for p in api.params}
    for p in theirs.params:
        if p.name not in ours and p.default is p.empty and p.kind not in var:
            raise TypeError(
                f"{role} of {name} has parameter {p.name!r}, which {name} does not have; "
                f"a checker takes (a subset of) the API's parameters: {api.names}"
            )
    if _leads_with(theirs, api):  # the API's own parameter list, then defaulted extras
        return api.call_spec()
    # By name.  Positional-only parameters (always first) can only be passed by position.
    spec: CallSpec = []
    for p in theirs.params:
        mine = ours.get(p.name)
        if mine is None:
            continue
        if p.kind == p.POSITIONAL_ONLY:
            spec.append(("pos", p.name))
        elif p.kind in var:  # *args to *args, **kwargs to **kwargs; else by name below
            if mine.kind == p.kind:
                spec.append(("star" if p.kind == p.VAR_POSITIONAL else "starstar", p.name))
        else:
            spec.append(("kw", p.name))
    if any(p.kind == p.VAR_KEYWORD for p in theirs.params):
        # The rest of the API's arguments go to the checker's **kwargs, by name
        # (``*args`` as the tuple it is, ``**kwargs`` spread out).
        taken = {n for _, n in spec}
        for q in api.params:
            if q.name not in taken:
                spec.append(("starstar" if q.kind == q.VAR_KEYWORD else "kw", q.name))
    order = {"pos": 0, "star": 1, "kw": 2, "starstar": 3}
    return sorted(spec, key=lambda item: order[item[0]])


def _leads_with(theirs: ParameterList, api: ParameterList) -> bool:
    """Whether ``theirs`` starts with ``api``'s parameters: same names, order and kinds."""
    if len(theirs.params) < len(api.params):
        return False
    for mine, other in zip(api.params, theirs.params[: len(api.params)], strict=True):
        if mine.name != other.name:
            return False
        if mine.kind in POSITIONAL_KINDS:
            if other.kind not in POSITIONAL_KINDS:
                return False
        elif mine.kind != other.kind:
            return False
    return True


def filter_heuristic(
    ordered: Any,
    candidates: list[str],
    heuristic: Any = None,
    api: str | None = None,
    backends: Collection[str] = (),
) -> list[str]:
    """A heuristic orders and may drop candidates; it can never add a backend of the op
    (one of ``backends``) that is not a candidate (refused by its checks, or dropped by
    the gate), nor name one twice (the first mention counts).  A name that is no backend
    of the op is kept where it stands: upstream's heuristics may return the body's own
    runner names (``"cutlass_sm10x"``) for it to pick.  Its answer must be a list or tuple
    of names (:func:`~flashinfer.dispatch.results.heuristic_names`: a ``TypeError`` naming
    ``heuristic`` and ``api`` otherwise)."""
    kept: list[str] = []
    for b in heuristic_names(ordered, heuristic, api):
        if (b in candidates or b not in backends) and b not in kept:
            kept.append(b)
    return kept


def invoke(
    fn: Callable[..., Any], spec: list[tuple[str, str]], bound: Mapping[str, Any], *lead: Any
) -> Any:
    """Reference-path equivalent of a generated call."""
    args: list[Any] = list(lead)
    kwargs: dict[str, Any] = {}
    for how, name in spec:
        if how == "pos":
            args.append(bound[name])
        elif how == "star":
            args.extend(bound[name])
        elif how == "kw":
            kwargs[name] = bound[name]
        else:
            kwargs.update(bound[name])
    return fn(*args, **kwargs)
