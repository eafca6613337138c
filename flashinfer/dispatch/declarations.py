"""Backend declarations: one backend of an API as one value, and the reading of a backend table."""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import KW_ONLY, dataclass
from typing import Any

AUTO = "auto"

# Upstream's spellings, "cute-dsl" included.  Never ``|`` or ``,``: a traced call's token
# (``"auto|a,b"``) and ``FLASHINFER_BACKENDS`` separate names with them.  Nothing generated
# needs a name to be an identifier (generated code spells it as a string literal).
_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]*")


def backend_name_problem(name: object) -> str | None:
    """What is wrong with ``name`` as a backend name, as the end of a sentence, or None."""
    if not isinstance(name, str):
        return f"is a {type(name).__name__}, not a str; name it with a string such as 'rowwise'"
    if name == AUTO:
        return (
            "is reserved: backend='auto' asks the dispatcher to choose among the backends; "
            "name the backend after its kernel or method, e.g. 'rowwise'"
        )
    if not _NAME.fullmatch(name):
        return (
            "is not a backend name: use ASCII letters, digits, underscores and hyphens, "
            "starting with a letter (such as 'split_k', 'rowwise' or 'cute-dsl')"
        )
    return None


def qualified_check_name(fn: Any) -> str:
    """``module.qualname`` of a check (unwrapped; a callable object: its class)."""
    target = inspect.unwrap(fn) if inspect.isroutine(fn) else fn
    if not hasattr(target, "__qualname__"):
        target = type(target)
    return f"{getattr(target, '__module__', '?')}.{getattr(target, '__qualname__', '?')}"


@dataclass(frozen=True)
class Backend:
    """One backend of an API, declared once: ``Backend("rowwise", check=..., run=...)``
    (see ``docs/api/dispatch.rst``).

    Attributes:
        name: what ``backend="..."`` selects: ASCII letters, digits, underscores and
            hyphens, starting with a letter, not ``"auto"``; unique within the API.
        check: the support checker (the API's parameters or a subset; ``True``, ``False``
            or ``ValueError`` saying why not), carrying the backend's marks.
        run: what the API's body calls for this backend (``api.implementations[name]``).
        prefer: experimental backends only: called like a checker when the backend is a
            candidate of ``"auto"``; True puts it ahead of the heuristic's order.
        differentiable: whether results carry gradients when an input requires grad;
            ``None`` takes the checker's family's answer.  A backend that cannot
            differentiate is left out of ``"auto"`` (and refused by name) when grad is
            required.

    Raises:
        ValueError: a name that is not a backend name.
        TypeError: ``check``, ``run`` or ``prefer`` is not callable, or ``differentiable``
            is not a bool or None.
    """

    name: str
    _: KW_ONLY
    check: Callable[..., Any]
    run: Callable[..., Any]
    prefer: Callable[..., Any] | None = None
    differentiable: bool | None = None

    def __post_init__(self) -> None:
        problem = backend_name_problem(self.name)
        if problem is not None:
            raise ValueError(f"Backend: the name {self.name!r} {problem}")
        for field in ("check", "run", "prefer"):
            value = getattr(self, field)
            if not callable(value) and not (field == "prefer" and value is None):
                raise TypeError(
                    f"Backend {self.name!r}: {field} must be callable, got "
                    f"{type(value).__name__} {value!r}"
                )
        if self.differentiable is not None and not isinstance(self.differentiable, bool):
            raise TypeError(
                f"Backend {self.name!r}: differentiable must be True, False or None (the "
                f"checker's family decides), got {type(self.differentiable).__name__} "
                f"{self.differentiable!r}"
            )


class ImplementationTable(dict):  # type: ignore[type-arg]
    """``backend name -> run`` of an API's declared backends."""

    def _refuse(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError(
            "the implementations of an API's backends are fixed by its backend table; add "
            "or remove a backend there (a Backend declaration), not here"
        )

    def __setitem__(self, name: str, run: Any) -> None:
        if name not in self:
            raise KeyError(
                f"{name!r} is not a backend of this API ({', '.join(map(repr, self))}); a "
                "backend is added by a Backend declaration in the API's table"
            )
        super().__setitem__(name, run)

    __delitem__ = pop = popitem = clear = setdefault = update = __ior__ = _refuse

    def __reduce__(self) -> tuple[Any, ...]:
        return (dict, (dict(self),))  # a copy or a pickle is a plain dict of the same items


def _refuse_mixed(api: str, name: str) -> TypeError:
    return TypeError(
        f"backend_requirement: {api}'s table maps {name!r} to a Backend declaration; pass "
        "declarations as a list, [Backend(...), ...] (each carries its own name), or map "
        "names to support checkers (upstream's form), not both"
    )


def read_table(
    table: Mapping[str, Callable[..., Any]] | Iterable[Backend], api: str
) -> tuple[dict[str, Callable[..., Any]], dict[str, Backend]]:
    """``(name -> checker, name -> declaration)`` of an API's backend table."""
    if isinstance(table, Mapping):
        for name, checker in table.items():
            problem = backend_name_problem(name)
            if problem is not None:
                raise ValueError(f"backend_requirement: {api}: the backend name {name!r} {problem}")
            if isinstance(checker, Backend):
                raise _refuse_mixed(api, name)
        return dict(table), {}
    if isinstance(table, (str, bytes)) or not isinstance(table, Iterable):
        raise TypeError(
            f"backend_requirement: {api}'s backend table must be a list of Backend "
            "declarations or a mapping of backend names to support checkers, got "
            f"{type(table).__name__}"
        )
    declared: dict[str, Backend] = {}
    for i, item in enumerate(table):
        if not isinstance(item, Backend):
            raise TypeError(
                f"backend_requirement: {api}'s backend table is a list, so each item must be "
                f"a Backend declaration; item {i} is {type(item).__name__} {item!r}"
            )
        first = declared.get(item.name)
        if first is not None:
            raise ValueError(
                f"backend_requirement: {api} has two backends named {item.name!r}: one "
                f"checked by {qualified_check_name(first.check)}, one by "
                f"{qualified_check_name(item.check)}. A backend's name is unique within its "
                "API: give the new backend a name of its own (after its kernel or method); to "
                "replace a backend, remove the old declaration"
            )
        declared[item.name] = item
    return {name: d.check for name, d in declared.items()}, declared
