"""The one list of ops (which modules define the package's public APIs), and the one way to
import them.

The API inventory, the listing of experimental work, ``flashinfer backends``, the autotuner's
file loader and ``use_backends`` all need every API module imported (an op registers when its
module runs).  They call :func:`load_api_modules`; none keeps a list of its own.  This module
imports nothing of the package, so any module may use it without closing an import cycle.
"""

from __future__ import annotations

import importlib
import os
import re
from collections.abc import Iterable

OPS_BLOCK_HEADER = "# The one list of ops:"
"""The comment that opens the ops' block in ``flashinfer/__init__.py``."""

_OP_LINE = re.compile(r"    from (flashinfer(?:\.\w+)+) import (\w+) as \2\n")


def read_ops(init_source: str) -> dict[str, str]:
    """The ops' block of ``flashinfer/__init__.py``'s source: public name -> module, in order.

    The block is the ``if TYPE_CHECKING:`` that follows the :data:`OPS_BLOCK_HEADER` comment,
    one ``from <module> import <op> as <op>`` line per op.  ``ValueError`` when the header is
    missing or a line of the block is not of that form (say which, and how it should read)."""
    head = init_source.find("\n" + OPS_BLOCK_HEADER)
    if head < 0:
        raise ValueError(f"flashinfer/__init__.py has no {OPS_BLOCK_HEADER!r} block")
    block = init_source[head:].split("if TYPE_CHECKING:\n", 1)
    if len(block) != 2:
        raise ValueError("flashinfer/__init__.py: the ops' block has no `if TYPE_CHECKING:`")
    ops: dict[str, str] = {}
    for line in block[1].splitlines(keepends=True):
        if not line.strip():
            continue
        if not line.startswith("    "):
            break
        match = _OP_LINE.fullmatch(line if line.endswith("\n") else line + "\n")
        if match is None:
            raise ValueError(
                f"flashinfer/__init__.py, the ops' block: {line.strip()!r} is not an op's line; "
                "write `from <module> import <op> as <op>`, one op per line"
            )
        ops[match.group(2)] = match.group(1)
    return ops


# ``from <module> import <name> as <name>``, one name or a parenthesised list of them.
_IMPORT = re.compile(r"^    from ([\w.]+) import (\([^)]*\)|[^\n]*)", re.MULTILINE)
_SELF_ALIAS = re.compile(r"\b(\w+) as (\w+)\b")


def read_public(init_source: str) -> dict[str, str]:
    """Every name the ``if TYPE_CHECKING:`` blocks of ``flashinfer/__init__.py`` import as
    itself -> the module it comes from (``flashinfer`` itself for a submodule): the
    package's public names, written once, where static tools read them as imports."""
    public: dict[str, str] = {}
    for block in init_source.split("\nif TYPE_CHECKING:\n")[1:]:
        lines = (block + "\n").split("\n")
        n = next((i for i, line in enumerate(lines) if line and line[:4] != "    "), len(lines))
        for module, names in _IMPORT.findall("\n".join(lines[:n]) + "\n"):
            for name, alias in _SELF_ALIAS.findall(names):
                if name == alias:
                    public[name] = module
    return public


def _init_source() -> str:
    # Read as text: this module imports nothing of the package, and the blocks only run for
    # type checkers.  One small read at import (benchmarks/bench_import.py prints the cost).
    with open(os.path.join(os.path.dirname(__file__), "__init__.py"), encoding="utf-8") as f:
        return f.read()


_SOURCE = _init_source()

OPS: dict[str, str] = read_ops(_SOURCE)
"""The one list of ops: each public API's name -> the module that defines it, read from the
ops' block of ``flashinfer/__init__.py`` (:func:`read_ops`).  Adding an op is its module, its
kernel and one line there: ``flashinfer``'s lazy names, :data:`API_MODULES`, the CLI's op
lists and the API reference come from it, and ``tests/test_layout.py`` fails, naming the
block, when a module that defines an API is left out."""

API_MODULES: tuple[str, ...] = tuple(dict.fromkeys(OPS.values()))
"""Modules that define public APIs (an operator's module is imported on first use)."""

PUBLIC: dict[str, str] = read_public(_SOURCE)
"""Every public name of ``flashinfer`` -> the module that defines it (:func:`read_public`):
the lazy names and ``__all__`` of the package, the ops' included."""
del _SOURCE


def load_api_modules(modules: Iterable[str] | None = None) -> list[str]:
    """Import the modules that define APIs; return those that do not exist (yet).

    ``modules=None`` imports :data:`API_MODULES`.  A module whose *file* is missing is
    reported instead of raised, so a listing works on a tree where an operator has not
    landed; any other import error propagates.  :func:`load_all_apis` raises instead.
    """
    missing = []
    for module in API_MODULES if modules is None else modules:
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name != module:
                raise
            missing.append(module)
    return missing


def load_all_apis() -> None:
    """Import every module that defines public APIs, so the inventory lists them all.

    Raises ``ModuleNotFoundError`` for one missing from this build (after importing the
    others); :func:`load_api_modules` lists the missing ones instead.
    """
    missing = load_api_modules()
    if missing:
        raise ModuleNotFoundError(f"No module named {missing[0]!r}", name=missing[0])
