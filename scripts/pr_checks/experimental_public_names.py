#!/usr/bin/env python3
"""Public-names check: experimental code uses only the public names of stable modules.

Standard library only (an AST scan; nothing of the package is imported).  Experimental code
that reaches into a stable module's privates breaks, with nothing to catch it, the day the
stable module renames them.  So in every module under ``flashinfer/experimental/``, each
import from a stable ``flashinfer`` module (any module outside ``flashinfer.experimental``),
absolute or relative, anywhere in the file (module level, functions, ``TYPE_CHECKING``),
fails when it names:

* a private module component (``flashinfer._dispatch.op``, ``from ... import _private_mod``),
  or a module of the package's machinery (:data:`INTERNAL_PACKAGES`: ``flashinfer.dispatch``,
  ``flashinfer.gating``), whose public names the facades re-export;
* a private name (leading underscore; dunders such as ``__version__`` are public);
* a name that is not in the module's ``__all__``, when the module defines one (which must
  then be readable statically: a literal list or tuple of strings, optionally with
  ``*NAME`` of a module-level literal list, tuple, set or dict);
* a module that does not exist in the package.

The same rules apply to attributes read through an imported stable module
(``from ... import norm`` then ``norm._private``) and to ``importlib.import_module`` /
``__import__`` with a literal name.  Imports between experimental modules are not checked.

Usage: ``python scripts/pr_checks/experimental_public_names.py [--root REPO_ROOT]``.  Exit 0
when clean, 1 with one ``path:line: message`` per violation.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from containment import (  # noqa: E402 - a sibling script, not a package
    EXPERIMENTAL,
    PACKAGE,
    Violation,
    dynamic_import,
    module_name,
    not_a_root,
    parse_file,
    resolve_relative,
    run_check,
)

REPO_ROOT = Path(__file__).resolve().parents[2]

_ADVICE = (
    "experimental code may use only public names of stable modules: use a name the module "
    "exports, or give the stable module a public name for what you need (in a reviewed change)"
)


INTERNAL_PACKAGES = {
    "flashinfer.dispatch": "flashinfer.backend_dispatch",
    "flashinfer.gating": "flashinfer.api_logging",
}
"""The machinery's folders, named without an underscore but internal all the same: the public
path that re-exports what users need of each."""


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _is_stable(module: str) -> bool:
    """A module of the package outside ``flashinfer.experimental``."""
    in_package = module == PACKAGE or module.startswith(PACKAGE + ".")
    experimental = module == EXPERIMENTAL or module.startswith(EXPERIMENTAL + ".")
    return in_package and not experimental


# --------------------------------------------------------------------------------------
# What the stable modules export, read from their source
# --------------------------------------------------------------------------------------


class _Unreadable(Exception):
    """An ``__all__`` that is not a literal this check can read."""


def _strings(node: ast.expr, literals: dict[str, ast.expr]) -> list[str]:
    """The strings of a literal list/tuple/set (or a dict's keys), ``*NAME`` spread."""
    if isinstance(node, ast.Dict):
        items: list[ast.expr | None] = list(node.keys)
    elif isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        items = list(node.elts)
    else:
        raise _Unreadable
    found: list[str] = []
    for item in items:
        if isinstance(item, ast.Constant) and isinstance(item.value, str):
            found.append(item.value)
        elif isinstance(item, ast.Starred) and isinstance(item.value, ast.Name):
            spread = literals.get(item.value.id)
            if spread is None:
                raise _Unreadable
            found.extend(_strings(spread, literals))
        else:
            raise _Unreadable
    return found


def _assignments(tree: ast.Module) -> Iterator[tuple[str, str, ast.expr]]:
    """Module-level ``(target, operator, value)`` of ``=``, ``: T =`` and ``+=``."""
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            target = stmt.targets[0]
            if isinstance(target, ast.Name):
                yield target.id, "=", stmt.value
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            if isinstance(stmt.target, ast.Name):
                yield stmt.target.id, "=", stmt.value
        elif isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Name):
            if isinstance(stmt.op, ast.Add):
                yield stmt.target.id, "+=", stmt.value


def read_all(tree: ast.Module) -> list[str] | None:
    """The module's ``__all__`` (None when it defines none); ``_Unreadable`` if not literal."""
    literals: dict[str, ast.expr] = {}
    exported: list[str] | None = None
    for target, operator, value in _assignments(tree):
        if target != "__all__":
            literals[target] = value
        elif operator == "=":
            exported = _strings(value, literals)
        else:
            exported = [*(exported or []), *_strings(value, literals)]
    return exported


@dataclass
class Package:
    """The stable modules of a source tree, parsed on first use."""

    package_dir: Path
    _exports: dict[str, list[str] | None | _Unreadable] = field(default_factory=dict)

    def file_of(self, module: str) -> Path | None:
        """The source file of ``module``, or None if it is not a module of the tree."""
        rel = Path(*module.split("."))
        for candidate in (rel.with_suffix(".py"), rel / "__init__.py"):
            path = self.package_dir.parent / candidate
            if path.is_file():
                return path
        return None

    def exports(self, module: str) -> list[str] | None:
        """``module.__all__`` (None: it defines none).  Raises ``_Unreadable``."""
        if module not in self._exports:
            path = self.file_of(module)
            try:
                tree = ast.parse(path.read_text(encoding="utf-8")) if path else None
                self._exports[module] = read_all(tree) if tree else None
            except (SyntaxError, _Unreadable):
                self._exports[module] = _Unreadable()
        found = self._exports[module]
        if isinstance(found, _Unreadable):
            raise found
        return found


# --------------------------------------------------------------------------------------
# The rules
# --------------------------------------------------------------------------------------


def module_problem(package: Package, module: str) -> str | None:
    """What is wrong with importing the stable module ``module`` itself, or None."""
    parts = module.split(".")
    for internal, public in INTERNAL_PACKAGES.items():
        if module == internal or module.startswith(internal + "."):
            return (
                f"imports {module}, the package's machinery; import from {public}, the public "
                f"path that re-exports what you need. {_ADVICE}"
            )
    for i, part in enumerate(parts[1:], 1):
        if _is_private(part):
            where = ".".join(parts[: i + 1])
            return (
                f"imports the private module {where} (in {module}); import from a public "
                f"module that re-exports what you need. {_ADVICE}"
            )
    if package.file_of(module) is None:
        return f"imports {module}, which is not a module of the package; fix the import"
    return None


def name_problem(package: Package, module: str, name: str) -> str | None:
    """What is wrong with taking ``name`` from the stable module ``module``, or None.

    ``name`` may be a submodule (then only its privacy counts) or a name the module defines.
    """
    if package.file_of(f"{module}.{name}") is not None:
        return module_problem(package, f"{module}.{name}")
    if _is_private(name):
        return f"uses the private name {name} of {module}. {_ADVICE}"
    if name.startswith("__"):
        return None  # a dunder (__version__, __file__): public by convention
    try:
        exported = package.exports(module)
    except _Unreadable:
        return (
            f"uses {name} of {module}, whose __all__ cannot be read statically; write "
            f"{module}.__all__ as a literal list of strings"
        )
    if exported is not None and name not in exported:
        return (
            f"uses {name} of {module}, which is not in {module}.__all__ {sorted(exported)}. "
            f"{_ADVICE}"
        )
    return None


# --------------------------------------------------------------------------------------
# Scanning one experimental module
# --------------------------------------------------------------------------------------


def _attribute_chain(node: ast.Attribute) -> tuple[str, list[str]] | None:
    """``a.b.c`` as ``("a", ["b", "c"])``; None unless it starts at a plain name."""
    attrs: list[str] = []
    current: ast.expr = node
    while isinstance(current, ast.Attribute):
        attrs.append(current.attr)
        current = current.value
    if not isinstance(current, ast.Name):
        return None
    return current.id, attrs[::-1]


class _FileScan:
    """The violations of one experimental module."""

    def __init__(self, package: Package, path: Path, display: str) -> None:
        self.package = package
        self.current = module_name(path, package.package_dir)
        self.is_package = path.name == "__init__.py"
        self.display = display
        self.modules: dict[str, str] = {}  # local name -> stable module it is bound to
        self.found: list[Violation] = []

    def report(self, node: ast.AST, problem: str | None) -> None:
        if problem is not None:
            self.found.append(Violation(self.display, getattr(node, "lineno", 0), problem))

    def scan(self, tree: ast.Module) -> list[Violation]:
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                self._import(node)
            elif isinstance(node, ast.ImportFrom):
                self._import_from(node)
            elif isinstance(node, ast.Call):
                name = dynamic_import(node)
                if name is not None and _is_stable(name):
                    self.report(node, module_problem(self.package, name))
        inner = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and id(node) not in inner:
                self._attribute(node)
        return self.found

    def _import(self, node: ast.Import) -> None:
        for alias in node.names:
            if not _is_stable(alias.name):
                continue
            self.report(node, module_problem(self.package, alias.name))
            if alias.asname:
                self.modules[alias.asname] = alias.name
            else:  # `import a.b.c` binds `a`
                self.modules[alias.name.split(".")[0]] = alias.name.split(".")[0]

    def _import_from(self, node: ast.ImportFrom) -> None:
        base = (
            resolve_relative(self.current, self.is_package, node.level, node.module)
            if node.level
            else (node.module or "")
        )
        if not _is_stable(base):
            return
        problem = module_problem(self.package, base)
        if problem is not None:
            self.report(node, problem)
            return
        for alias in node.names:
            if alias.name == "*":
                continue  # takes the module's public names only
            self.report(node, name_problem(self.package, base, alias.name))
            if self.package.file_of(f"{base}.{alias.name}") is not None:
                self.modules[alias.asname or alias.name] = f"{base}.{alias.name}"

    def _attribute(self, node: ast.Attribute) -> None:
        chain = _attribute_chain(node)
        if chain is None or chain[0] not in self.modules:
            return
        module = self.modules[chain[0]]
        for attr in chain[1]:
            if not _is_stable(module):
                return
            problem = name_problem(self.package, module, attr)
            if problem is not None:
                self.report(node, problem)
                return
            if self.package.file_of(f"{module}.{attr}") is None:
                return  # a name of the module, not a submodule: the rest is its own
            module = f"{module}.{attr}"


def check_file(path: Path, package: Package, display_root: Path) -> list[Violation]:
    display = path.relative_to(display_root).as_posix()
    tree = parse_file(path, display)
    if isinstance(tree, Violation):
        return [tree]
    return _FileScan(package, path, display).scan(tree)


def check_tree(root: Path) -> list[Violation]:
    """Every violation under ``root/flashinfer/experimental`` (``root``: a repository root)."""
    package_dir = root / PACKAGE
    if missing := not_a_root(package_dir):
        return missing
    package = Package(package_dir)
    violations = []
    for path in sorted((package_dir / "experimental").rglob("*.py")):
        violations.extend(sorted(check_file(path, package, root), key=lambda v: v.line))
    return violations


def main(argv: Sequence[str] | None = None) -> int:
    ok = "experimental code uses only public stable names"
    return run_check("experimental_public_names", __doc__.split("\n\n")[0], check_tree, ok, argv)


if __name__ == "__main__":
    sys.exit(main())
