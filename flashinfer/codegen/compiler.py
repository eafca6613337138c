"""The one compiler of the package's generated code, and the parameter lists it re-declares."""

from __future__ import annotations

import inspect
import linecache
import sys
import threading
import types
import weakref
from collections.abc import Callable, Collection
from typing import Any

from flashinfer.codegen import generated as generated_package

GENERATED_PACKAGE = "flashinfer.codegen.generated"
"""The module under which each generated namespace is a module of its own."""

POSITIONAL_KINDS = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)

# How one parameter is passed on: ("pos" | "star" | "kw" | "starstar", name).
CallSpec = list[tuple[str, str]]


class ParameterList:
    """The parameters of a function, and how to re-declare and forward them."""

    def __init__(
        self, func: Callable[..., Any], omit: Collection[str] = (), *, redeclared: bool = True
    ) -> None:
        signature = inspect.signature(func)
        if omit:
            kept = [p for p in signature.parameters.values() if p.name not in omit]
            signature = signature.replace(parameters=kept)
        self.signature = signature
        self.params = list(self.signature.parameters.values())
        self.names = [p.name for p in self.params]
        self.has_var = any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in self.params)
        for name in self.names if redeclared else ():
            if name.startswith("_"):  # would collide with the generated code's own names
                raise TypeError(
                    f"cannot generate a wrapper for {func.__qualname__}: parameter {name!r} "
                    "starts with an underscore, which generated wrappers reserve"
                )

    def bind(self, *args: Any, **kwargs: Any) -> inspect.BoundArguments:
        """A call's arguments bound to these parameters, defaults applied (``TypeError``
        for arguments the function could not take, as a call would raise)."""
        bound = self.signature.bind(*args, **kwargs)
        bound.apply_defaults()
        return bound

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
            and all(p.kind in POSITIONAL_KINDS for p in other.params)
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
    params: str,
    body: list[str],
    ns: dict[str, Any],
    *,
    role: str,
    api: str,
    keyword: str = "def",
) -> Callable[..., Any]:
    """Compile ``<keyword> <name>(<params>):`` followed by ``body`` (lines already indented as a
    function body) in namespace ``ns``, and return the function."""
    name = _free_name(_def_name(api, role), ns)
    source = "\n".join([f"{keyword} {name}({params}):", *body]) + "\n"
    filename = _unique_filename(role, api)
    # Frames of generated code count as flashinfer-internal when warnings look for the
    # user's line (see stacklevel.user_stacklevel); a namespace that is not a module of its
    # own (module_namespace) names the package of generated code, a real module.
    ns.setdefault("__name__", GENERATED_PACKAGE)
    exec(compile(source, filename, "exec"), ns)
    fn = ns.pop(name)
    _register_source(fn.__code__, filename, source)
    fn.__qualname__ = f"{api}[{role}]"
    fn.__generated_source__ = source
    return fn


_module_lock = threading.Lock()
_modules_given: dict[str, int] = {}


def module_namespace(api: str, role: str) -> dict[str, Any]:
    """A new, empty module namespace for generated code."""
    base = _def_name(api, role)
    with _module_lock:
        n = _modules_given.get(base, 0) + 1
        _modules_given[base] = n
    name = f"{GENERATED_PACKAGE}.{base}" if n == 1 else f"{GENERATED_PACKAGE}.{base}_{n}"
    module = types.ModuleType(name, f"Generated {role} of {api}.")
    sys.modules[name] = module
    setattr(generated_package, name.rpartition(".")[2], module)
    return module.__dict__


def _def_name(api: str, role: str) -> str:
    """An identifier of the API's last name and the role."""
    text = f"{api.rpartition('.')[2]} {role}"
    words = "".join(c if c.isalnum() or c == "_" else " " for c in text).split()
    name = "_".join(words) or "generated"
    return name if name.isidentifier() else f"_{name}"


def _free_name(name: str, ns: dict[str, Any]) -> str:
    """``name``, or ``name_2``, ``name_3``...."""
    candidate, n = name, 1
    while candidate in ns:
        n += 1
        candidate = f"{name}_{n}"
    return candidate


_filename_lock = threading.Lock()
_filenames_given: dict[str, int] = {}  # base filename -> how many were given out


def _unique_filename(role: str, api: str) -> str:
    """A filename no other generated code has."""
    base = f"flashinfer generated {role} for {api}"
    with _filename_lock:
        n = _filenames_given.get(base, 0)
        while True:
            n += 1
            filename = f"<{base}>" if n == 1 else f"<{base} #{n}>"
            if filename not in linecache.cache:
                break
        _filenames_given[base] = n
    return filename


def _register_source(code: Any, filename: str, source: str) -> None:
    """Make ``source`` what :mod:`linecache` reads for ``filename`` while ``code`` lives."""
    linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)
    finalizer = weakref.finalize(code, linecache.cache.pop, filename, None)
    finalizer.atexit = False
