"""Which function each line of a Python source belongs to, which functions count as the
whole module, and which repository files a file imports.

A line's scope is the innermost ``def`` whose *body* holds it, by qualified name
(``Class.method``, ``outer.<locals>.inner``); everything else (imports, class bodies, a
``def``'s decorators, defaults and signature, which run when the module is imported) is
``<module>``.  Lines are named by scope, not number, so a map recorded at one commit still
reads a diff taken at another.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

MODULE = "<module>"

# A function decorated so is not "the tests that ran it": its body runs once and is cached
# (functools caches), or is compiled, not run, by Python (Triton kernels).  A change inside
# it counts as module level: every test that imported the module.
WHOLE_MODULE_DECORATORS = frozenset(
    {"cache", "lru_cache", "cached_property", "jit", "autotune", "heuristics"}
)


@dataclass
class Scopes:
    """The scopes of one source: ``lines[n]`` is line ``n``'s scope (1-based; 0 unused)."""

    lines: list[str]
    whole_module: set[str] = field(default_factory=set)  # functions that count as <module>

    def scope_of(self, line: int) -> str:
        if 0 < line < len(self.lines):
            return self.lines[line]
        return MODULE

    def effective(self, line: int) -> str:
        """The scope a change on ``line`` selects by: a whole-module function is ``<module>``."""
        scope = self.scope_of(line)
        # A nested function of a cached one is cached with it.
        for name in self.whole_module:
            if scope == name or scope.startswith(name + "."):
                return MODULE
        return scope

    def functions(self) -> set[str]:
        return {s for s in self.lines[1:] if s != MODULE}


def _decorator_name(node: ast.expr) -> str:
    target = node.func if isinstance(node, ast.Call) else node
    return ast.unparse(target).rsplit(".", 1)[-1]


def parse_scopes(source: str) -> Scopes:
    """The scopes of ``source``; a source that does not parse is all ``<module>``."""
    n_lines = source.count("\n") + 2
    lines = [MODULE] * n_lines
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return Scopes(lines)
    whole: set[str] = set()

    def visit(body: Iterable[ast.stmt], prefix: str, in_function: bool) -> None:
        for node in body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                name = f"{prefix}{node.name}"
                if any(_decorator_name(d) in WHOLE_MODULE_DECORATORS for d in node.decorator_list):
                    whole.add(name)
                first = node.body[0].lineno
                # A docstring-only first line still belongs to the body.
                end = node.end_lineno or first
                for n in range(first, min(end, n_lines - 1) + 1):
                    lines[n] = name
                visit(node.body, f"{name}.<locals>.", True)
            elif isinstance(node, ast.ClassDef):
                visit(node.body, f"{prefix}{node.name}.", in_function)
            else:
                for child in ast.iter_child_nodes(node):
                    if isinstance(child, ast.stmt):
                        visit([child], prefix, in_function)
                # Bodies of if/for/with/try hold statements in fields, not as direct children
                # of the same kind; iter_child_nodes covers them.

    visit(tree.body, "", False)
    return Scopes(lines, whole)


def scopes_of_file(path: Path) -> Scopes:
    try:
        return parse_scopes(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError):
        return Scopes([MODULE])


# -- imports ---------------------------------------------------------------------------------


def module_file(root: Path, dotted: str, search: Iterable[str] = ("", "tests")) -> list[str]:
    """The repository files that importing ``dotted`` runs: each package's ``__init__.py`` on
    the way and the module itself (paths relative to ``root``)."""
    for base in search:
        parts = dotted.split(".")
        found: list[str] = []
        here = root / base if base else root
        ok = True
        for i, part in enumerate(parts):
            here = here / part
            last = i == len(parts) - 1
            if (here / "__init__.py").is_file():
                found.append((here / "__init__.py").relative_to(root).as_posix())
            elif last and here.with_suffix(".py").is_file():
                found.append(here.with_suffix(".py").relative_to(root).as_posix())
            elif i > 0 and found:
                break  # `from pkg import name`: name is not a module
            else:
                ok = False
                break
        if ok and found:
            return found
    return []


def imported_files(root: Path, rel: str, source: str) -> set[str]:
    """The repository files ``rel`` imports directly (every import statement, at module
    level or in a function, absolute or relative)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return set()
    package = Path(rel).parent
    is_init = Path(rel).name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package
                for _ in range(node.level - 1):
                    base = base.parent
                prefix = ".".join(base.parts)
                mod = ".".join(filter(None, [prefix, node.module or ""]))
            else:
                mod = node.module or ""
            names = [mod] + [f"{mod}.{a.name}" for a in node.names]
            _ = is_init
        for name in names:
            if name:
                found.update(module_file(root, name))
    found.discard(rel)
    return found


def import_closure(root: Path, start: Iterable[str], cache: dict[str, set[str]]) -> set[str]:
    """Every repository file reachable from ``start`` through imports (``start`` included)."""
    seen: set[str] = set()
    todo = list(start)
    while todo:
        rel = todo.pop()
        if rel in seen:
            continue
        seen.add(rel)
        if rel not in cache:
            try:
                text = (root / rel).read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                text = ""
            cache[rel] = imported_files(root, rel, text)
        todo.extend(cache[rel] - seen)
    return seen
