"""The torch operator schema of an API, read from its signature (see :mod:`.torch_op`), or why
it has none, in one sentence.

Types map as torch spells them (``int`` -> ``SymInt``, ``torch.dtype`` -> ``ScalarType``,
``X | None`` -> ``X?``).  A written argument (the overlap rule's) is mutated
(``Tensor(a!)``), or, when it defaults to ``None``, an ``out=`` argument with an ``out``
overload of its own (the default overload returns a new tensor).
"""

from __future__ import annotations

import inspect
import types
import typing
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

import torch

__all__ = ["OpSchema", "SchemaUnavailable", "op_schema"]

DISPATCHER_ARGUMENTS = ("backend", "skip_check")  # a dispatcher's, last (backend if declared)

_SCALARS: dict[Any, str] = {
    torch.Tensor: "Tensor",
    float: "float",
    int: "SymInt",
    bool: "bool",
    str: "str",
    torch.dtype: "ScalarType",
}


class SchemaUnavailable(Exception):
    """The API's signature has no torch schema; the message says why, as a sentence."""


@dataclass(frozen=True)
class OpSchema:
    """The schemas of one API's torch operator and how its parameters map onto them.

    ``default``/``out``: the overloads' schemas without the name (``out`` None: no ``out=``
    parameter, ``out_param``); ``flat``: the default's arguments all positional and without
    defaults (the no-grad operator's: a compiled program passes them fastest);
    ``positional``/``keyword``: how each parameter is passed; ``returns``: ``"tensor"``,
    ``"tensors"`` or ``"none"``; ``numbers``: the ``float``/``int``
    parameters with their type; ``dispatcher``: the dispatcher's arguments, last.
    """

    default: str
    out: str | None
    out_param: str | None
    positional: tuple[str, ...]
    keyword: tuple[str, ...]
    tensors: tuple[str, ...]
    required: tuple[str, ...]
    mutated: tuple[str, ...]
    returns: str
    numbers: tuple[tuple[str, type], ...] = ()
    flat: str = ""
    dispatcher: tuple[str, ...] = ()


def op_schema(func: Callable[..., Any], written: Collection[str], *, dispatcher: bool) -> OpSchema:
    """The schema of ``func``'s operator (``written``: the parameters it writes;
    ``dispatcher``: a ``backend_requirement`` op's, with ``backend`` and ``skip_check``).
    ``SchemaUnavailable`` when a parameter or the result has no schema type."""
    try:
        hints = typing.get_type_hints(func)
    except Exception as exc:  # names only the defining scope knew (a local class)
        raise SchemaUnavailable(f"its annotations cannot be resolved ({exc})") from None
    signature = inspect.signature(func)
    positional: list[str] = []
    keyword: list[str] = []
    tensors: list[str] = []
    numbers: list[tuple[str, type]] = []
    required: list[str] = []
    mutated_names: list[str] = []
    pieces: list[tuple[str, str, bool]] = []  # (name, declaration, keyword-only)
    flat: list[str] = []  # the declarations without defaults, positional first
    out_param: str | None = None
    extra: list[str] = []  # the dispatcher's arguments, declared last (keyword-only)
    if dispatcher:
        backend = signature.parameters.get("backend")
        if backend is not None:
            d = backend.default
            default = "" if d is backend.empty else "=" + _default(d, "backend")
            extra.append(f"str{'?' if d is None else ''} backend{default}")
        extra.append("bool skip_check=False")
    alias_sets = iter("abcdefghijklmnopqrstuvwxyz")
    for p in signature.parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            raise SchemaUnavailable(f"it takes *{p.name} or **{p.name}")
        if dispatcher and p.name in DISPATCHER_ARGUMENTS:  # (see extra)
            continue
        if p.name not in hints:
            raise SchemaUnavailable(f"parameter {p.name!r} has no annotation")
        kind, optional = _schema_type(hints[p.name], p.name)
        if kind == "Tensor":
            tensors.append(p.name)
        elif kind in ("float", "SymInt"):
            numbers.append((p.name, float if kind == "float" else int))
        if p.default is p.empty:
            required.append(p.name)
        if p.name in written:
            if kind != "Tensor":
                raise SchemaUnavailable(f"it writes {p.name!r}, which is not a tensor")
            if optional and p.default is None:  # an out= argument: the out overload's
                if out_param is not None:
                    raise SchemaUnavailable(
                        f"it has two out= arguments, {out_param!r} and {p.name!r}"
                    )
                out_param = p.name
                continue
            kind = f"Tensor({next(alias_sets)}!)"
            mutated_names.append(p.name)
        text = f"{kind}{'?' if optional else ''} {p.name}"
        flat.append(text)
        if p.default is not p.empty:
            text += f"={_default(p.default, p.name)}"
        kw_only = p.kind == p.KEYWORD_ONLY
        pieces.append((p.name, text, kw_only))
        (keyword if kw_only else positional).append(p.name)
    returns, result = _returns(hints.get("return", inspect.Signature.empty))
    if out_param is not None and returns != "tensor":
        raise SchemaUnavailable(f"it takes {out_param}= but does not return a tensor")
    default = _render(pieces, [], extra, result)
    out = None
    if out_param is not None:
        out = _render(pieces, [f"Tensor(z!) {out_param}"], extra, "()")
    in_order = [flat[i] for i, (_, _, kw) in enumerate(pieces) if not kw]
    in_order += [flat[i] for i, (_, _, kw) in enumerate(pieces) if kw]
    in_order += [e.split("=", 1)[0] for e in extra]
    return OpSchema(
        default,
        out,
        out_param,
        tuple(positional),
        tuple(keyword),
        tuple(tensors),
        tuple(required),
        tuple(mutated_names),
        returns,
        tuple(numbers),
        f"({', '.join(in_order)}) -> {result}",
        tuple(e.split("=", 1)[0].split()[1] for e in extra),
    )


def _render(
    pieces: list[tuple[str, str, bool]], out: list[str], extra: list[str], result: str
) -> str:
    front = [text for _, text, kw in pieces if not kw]
    back = [text for _, text, kw in pieces if kw] + out + extra
    args = front + (["*", *back] if back else [])
    return f"({', '.join(args)}) -> {result}"


def _schema_type(hint: Any, name: str) -> tuple[str, bool]:
    """``(schema type, optional)`` of an annotation."""
    optional = False
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        members = [a for a in typing.get_args(hint) if a is not type(None)]
        optional = len(members) < len(typing.get_args(hint))
        if len(members) != 1:
            raise SchemaUnavailable(f"parameter {name!r} is a union of several types")
        hint = members[0]
    kind = _SCALARS.get(hint)
    if kind is None:
        raise SchemaUnavailable(f"parameter {name!r} has type {hint!r}, which no schema type holds")
    return kind, optional


def _default(value: Any, name: str) -> str:
    if value is None:
        return "None"
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str) and value.isascii() and "'" not in value and "\\" not in value:
        return f"'{value}'"
    raise SchemaUnavailable(f"parameter {name!r} has a default ({value!r}) no schema can state")


def _returns(hint: Any) -> tuple[str, str]:
    if hint is None or hint is type(None):
        return "none", "()"
    if hint is torch.Tensor:
        return "tensor", "Tensor"
    if typing.get_origin(hint) is tuple:
        args = typing.get_args(hint)
        if args and all(a is torch.Tensor for a in args):
            return "tensors", f"({', '.join(['Tensor'] * len(args))})"
    raise SchemaUnavailable(f"it returns {hint!r}; a schema returns tensors or nothing")
