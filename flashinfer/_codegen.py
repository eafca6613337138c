"""Generate wrappers that take exactly the wrapped function's parameters.

A ``def wrapper(*args, **kwargs)`` pays for packing and unpacking arguments on every call; a
wrapper generated with the wrapped function's own parameter list lets the interpreter bind
the arguments once, in C, and pass them on by name.  This is what ``dataclasses`` does for
``__init__``; both the experimental marker and the dispatcher use it.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Collection
from typing import Any

__all__ = ["CallSpec", "ParameterList", "compile_function", "render_call"]

_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)

# How one parameter is passed on: ("pos" | "star" | "kw" | "starstar", name).
CallSpec = list[tuple[str, str]]


class ParameterList:
    """The parameters of a function, and how to re-declare and forward them.

    ``omit``: names left out, as if the function did not declare them (parameters that the
    generated wrapper handles itself and does not pass on).
    """

    def __init__(self, func: Callable[..., Any], omit: Collection[str] = ()) -> None:
        signature = inspect.signature(func)
        if omit:
            kept = [p for p in signature.parameters.values() if p.name not in omit]
            signature = signature.replace(parameters=kept)
        self.signature = signature
        self.params = list(self.signature.parameters.values())
        self.names = [p.name for p in self.params]
        self.has_var = any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in self.params)
        for name in self.names:
            if name.startswith("_"):  # would collide with the generated code's own names
                raise TypeError(
                    f"cannot generate a wrapper for {func.__qualname__}: parameter {name!r} "
                    "starts with an underscore, which generated wrappers reserve"
                )

    def call_spec(self) -> CallSpec:
        """How to pass the bound values on to a callable with the same signature."""
        kinds = {
            inspect.Parameter.POSITIONAL_ONLY: "pos",
            inspect.Parameter.POSITIONAL_OR_KEYWORD: "pos",
            inspect.Parameter.VAR_POSITIONAL: "star",
            inspect.Parameter.KEYWORD_ONLY: "kw",
            inspect.Parameter.VAR_KEYWORD: "starstar",
        }
        return [(kinds[p.kind], p.name) for p in self.params]

    def matches_positionally(self, other: ParameterList) -> bool:
        """Whether ``other`` can take all our values positionally, in our order."""
        return (
            not self.has_var
            and other.names == self.names
            and all(p.kind in _POSITIONAL for p in other.params)
        )

    def def_params(self, ns: dict[str, Any], extra_kwonly: str | None = None) -> str:
        """The parameter list of a ``def``; defaults are stored in ``ns`` as ``_d_<name>``."""
        pieces: list[str] = []
        star_done = False
        last_pos_only = max(
            (i for i, p in enumerate(self.params) if p.kind == p.POSITIONAL_ONLY), default=-1
        )
        for i, p in enumerate(self.params):
            if p.kind == p.VAR_POSITIONAL:
                pieces.append(f"*{p.name}")
                star_done = True
                continue
            if p.kind == p.VAR_KEYWORD:
                if extra_kwonly:
                    if not star_done:
                        pieces.append("*")
                        star_done = True
                    pieces.append(extra_kwonly)
                    extra_kwonly = None
                pieces.append(f"**{p.name}")
                continue
            if p.kind == p.KEYWORD_ONLY and not star_done:
                pieces.append("*")
                star_done = True
            text = p.name
            if p.default is not p.empty:
                ns[f"_d_{p.name}"] = p.default
                text += f"=_d_{p.name}"
            pieces.append(text)
            if i == last_pos_only:
                pieces.append("/")
        if extra_kwonly:
            if not star_done:
                pieces.append("*")
            pieces.append(extra_kwonly)
        return ", ".join(pieces)


def render_call(target: str, spec: CallSpec, lead: str = "") -> str:
    """``target(<args>)`` passing the spec's names on; ``lead`` is an extra first argument."""
    forms = {"pos": "{}", "star": "*{}", "kw": "{0}={0}", "starstar": "**{}"}
    parts = [lead] if lead else []
    parts += [forms[how].format(name) for how, name in spec]
    return f"{target}({', '.join(parts)})"


def compile_function(
    lines: list[str], ns: dict[str, Any], filename: str, name: str = "generated"
) -> Callable[..., Any]:
    """Compile ``def generated(...)`` from ``lines`` in namespace ``ns`` and return it."""
    source = "\n".join(lines) + "\n"
    # Frames of generated code count as flashinfer-internal when warnings look for the
    # user's line (see api_logging.user_stacklevel).
    ns.setdefault("__name__", "flashinfer._generated")
    exec(compile(source, filename, "exec"), ns)
    fn = ns[name]
    fn.__generated_source__ = source
    return fn
