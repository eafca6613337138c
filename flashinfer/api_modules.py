"""The one list of ops (read from ``flashinfer/__init__.py``) and the one way to import
them (:func:`load_api_modules`).  Imports nothing of the package."""

from __future__ import annotations

import importlib
import os
import re
from collections.abc import Iterable

OPS_BLOCK_HEADER = "# The one list of ops:"

_OP_LINE = re.compile(r"    from (flashinfer(?:\.\w+)+) import (\w+) as \2\n")


def read_ops(init_source: str) -> dict[str, str]:
    """The ops' block (the ``if TYPE_CHECKING:`` after :data:`OPS_BLOCK_HEADER`): public name
    -> module, in order; ``ValueError`` naming a line that is not an op's."""
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
    """Every name the ``if TYPE_CHECKING:`` blocks import as itself -> its module."""
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
    # Read as text: the blocks only run for type checkers.
    with open(os.path.join(os.path.dirname(__file__), "__init__.py"), encoding="utf-8") as f:
        return f.read()


_SOURCE = _init_source()

OPS: dict[str, str] = read_ops(_SOURCE)  # each op's name -> its module
API_MODULES: tuple[str, ...] = tuple(dict.fromkeys(OPS.values()))
PUBLIC: dict[str, str] = read_public(_SOURCE)  # every public name -> its module
del _SOURCE


def load_api_modules(modules: Iterable[str] | None = None) -> list[str]:
    """Import the modules that define APIs (default :data:`API_MODULES`); return those whose
    file is missing (a listing works on a tree where an op has not landed)."""
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
    """Import every module that defines public APIs, so the inventory lists them all
    (``ModuleNotFoundError`` for one missing from this build)."""
    missing = load_api_modules()
    if missing:
        raise ModuleNotFoundError(f"No module named {missing[0]!r}", name=missing[0])
