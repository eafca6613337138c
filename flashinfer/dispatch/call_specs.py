"""How to call a checker or the heuristic with the API's arguments, what a check may return, and
what is kept of the heuristic's answer (``filter_heuristic``)."""

from __future__ import annotations

import functools
import inspect
import sys
from collections.abc import Callable, Collection, Mapping
from typing import Any

from flashinfer.codegen.compiler import POSITIONAL_KINDS, CallSpec, ParameterList

__all__ = [
    "check_verdict",
    "checker_spec",
    "filter_heuristic",
    "heuristic_names",
    "invoke",
    "qualified_check_name",
]


def checker_spec(
    api: ParameterList, fn: Callable[..., Any], role: str, name: str, *, lead: bool = False
) -> CallSpec:
    """How to call a checker."""
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
    """A heuristic orders and may drop candidates."""
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


_REPR_LIMIT = 80


def qualified_check_name(fn: Any) -> str:
    """``module.qualname`` of a check (unwrapped; a callable object: its class)."""
    target = inspect.unwrap(fn) if inspect.isroutine(fn) else fn
    if not hasattr(target, "__qualname__"):
        target = type(target)
    return f"{getattr(target, '__module__', '?')}.{getattr(target, '__qualname__', '?')}"


def _described(value: Any) -> str:
    """``None``, or the value's type and a repr cut to a line."""
    if value is None:
        return "None"
    text = repr(value)
    if len(text) > _REPR_LIMIT:
        text = text[: _REPR_LIMIT - 3] + "..."
    return f"{type(value).__name__} {text}"


def _numpy_bool(value: Any) -> bool:
    """Whether ``value`` is a numpy bool (numpy is never imported here)."""
    numpy = sys.modules.get("numpy")
    return numpy is not None and isinstance(value, numpy.bool_)


def check_verdict(value: Any, check: Any, role: str, api: str) -> bool:
    """``value`` (what ``check`` returned) as a verdict."""
    if value is True or value is False:
        return value
    if _numpy_bool(value):
        return bool(value)
    hint = ""
    if value is None:
        hint = " (None: does a path through it end without a return statement?)"
    elif isinstance(value, str):
        hint = " (a non-empty str would have counted as support)"
    raise TypeError(
        f"{api}: {role} ({qualified_check_name(check)}) returned {_described(value)}"
        f"{hint}; a check returns True or False (a numpy bool is accepted), or raises "
        "ValueError saying why the inputs are not supported"
    )


def _names_problem(answer: Any) -> str | None:
    """What is wrong with a heuristic's answer, or None: a list or tuple of str."""
    if not isinstance(answer, (list, tuple)):
        if answer is None:
            return " (None: does a path through it end without a return statement?)"
        if isinstance(answer, (set, frozenset)):
            return " (a set has no order)"
        if type(answer).__module__ == "numpy":
            return " (a numpy array: return array.tolist())"
        return ""
    for i, name in enumerate(answer):
        if not isinstance(name, str):
            return f" (item {i} is {_described(name)})"
    return None


def heuristic_names(
    answer: Any, heuristic: Any = None, api: str | None = None
) -> list[str] | tuple[str, ...]:
    """``answer`` (what ``heuristic`` returned), checked to be a list or tuple of backend names
    (``str``)."""
    problem = _names_problem(answer)
    if problem is None:
        return answer  # type: ignore[no-any-return]
    who = (
        "the heuristic"
        if heuristic is None
        else f"the heuristic ({qualified_check_name(heuristic)})"
    )
    where = f"{api}: " if api else ""
    raise TypeError(
        f"{where}{who} returned {_described(answer)}{problem}; a heuristic returns a list "
        "(or tuple) of backend names (str), best first, taken from the candidates it is given"
    )
