"""What a check may return, the one rule both paths apply, and the error naming a check that
breaks it.

A support checker or a common check returns ``True`` or ``False`` (a numpy bool is taken
as the bool it is), or raises ``ValueError`` saying why not.  A heuristic returns a list or
tuple of backend names (``str``), best first.  Anything else (``None`` from a path that ends
without a ``return``, the string ``"False"``, a tensor, a set, a numpy array) is a
``TypeError`` naming the check by its qualified name and what it returned, raised by the
call that got it, the same on the generated and the reference path.  Truthiness is never
asked of such a value: ``"False"`` would have counted as support and ``None`` as a refusal.

The generated path tests ``is True`` / ``is False`` itself and calls :func:`check_verdict`
only for a value that is neither, so a well-behaved check costs an identity test.
"""

from __future__ import annotations

import inspect
import sys
from typing import Any

__all__ = ["check_verdict", "heuristic_names", "qualified_check_name"]

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
    """Whether ``value`` is a numpy bool (numpy is never imported here: a value of its
    types implies it is loaded)."""
    numpy = sys.modules.get("numpy")
    return numpy is not None and isinstance(value, numpy.bool_)


def check_verdict(value: Any, check: Any, role: str, api: str) -> bool:
    """``value`` (what ``check`` returned) as a verdict: a bool, or a ``TypeError``.

    ``role`` names the check in the op (``"the support checker of backend 'torch'"``,
    ``"the common check"``) and ``api`` the op.
    """
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
    """``answer`` (what ``heuristic`` returned), checked to be a list or tuple of backend
    names (``str``); a ``TypeError`` naming the heuristic otherwise.  Which names are kept,
    and in what order, is :func:`~flashinfer.dispatch.call_specs.filter_heuristic`'s job."""
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
