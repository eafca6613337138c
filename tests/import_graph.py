"""Reading the package's import graph from its source (shared by the layout tests).

Every import counts: module level, inside functions and under ``TYPE_CHECKING`` alike,
since a function-level import is a cycle waiting for a tidy-imports pass to hoist it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import flashinfer

PACKAGE_DIR = Path(flashinfer.__file__).parent


def module_name(path: Path) -> str:
    """``flashinfer/dispatch/op.py`` -> ``flashinfer.dispatch.op`` (a package is its
    ``__init__``'s name)."""
    parts = list(path.relative_to(PACKAGE_DIR.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def package_modules() -> dict[str, Path]:
    """Every module of the package, by dotted name."""
    return {module_name(p): p for p in sorted(PACKAGE_DIR.rglob("*.py"))}


def imported_modules(path: Path, modules: dict[str, Path], name: str | None = None) -> set[str]:
    """The package modules ``path`` imports.  ``from pkg import sub`` names the submodule
    ``pkg.sub``; ``from pkg import name`` (not a module) names ``pkg`` itself.  ``name`` is
    the module's dotted name, for a file outside the package (a fixture)."""
    name = module_name(path) if name is None else name
    package = name if path.stem == "__init__" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{parent}.{base}" if base else parent
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                found.add(sub if sub in modules else base)
    return {m for m in found if m in modules and m != name}


def import_graph(modules: dict[str, Path] | None = None) -> dict[str, set[str]]:
    """Module -> the package modules it imports."""
    modules = package_modules() if modules is None else modules
    return {name: imported_modules(path, modules) for name, path in modules.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A cycle of ``graph`` as a path that ends where it starts, or None (iterative DFS)."""
    state: dict[str, str] = {}  # "open": on the current path, "done": fully explored
    for root in sorted(graph):
        if root in state:
            continue
        path, stack = [root], [iter(sorted(graph[root]))]
        state[root] = "open"
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                stack.pop()
                state[path.pop()] = "done"
            elif state.get(nxt) == "open":
                return path[path.index(nxt) :] + [nxt]
            elif nxt not in state:
                state[nxt] = "open"
                path.append(nxt)
                stack.append(iter(sorted(graph.get(nxt, ()))))
    return None
