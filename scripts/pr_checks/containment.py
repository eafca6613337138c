#!/usr/bin/env python3
"""Containment check: core code keeps experimental code out of its import-time graph, and
``flashinfer/experimental/`` keeps its own import-time graph light.

Standard library only (an AST scan; nothing of the package is imported).  The rules, from
``flashinfer/experimental/README.md``:

* ``flashinfer/__init__.py`` never imports ``flashinfer.experimental``, in any form, anywhere
  in the file (``import flashinfer`` must never load it).
* A core module -- any ``.py`` under ``flashinfer/`` outside ``flashinfer/experimental/`` --
  may import from ``flashinfer.experimental`` at module level only a feature's light
  ``support`` module: ``flashinfer.experimental.<feature>.support`` (or names from it).
  Everything else (kernels, the package's re-exports) is imported inside a function, on
  first use.  Imports under ``if TYPE_CHECKING:`` never run and are allowed.
* Inside ``flashinfer/experimental/``, what core (or ``import flashinfer.experimental``)
  loads stays light:

  - ``flashinfer/experimental/__init__.py`` imports no feature at module level;
  - a feature's ``__init__.py`` is empty or a docstring (importing the feature imports
    nothing);
  - a feature's ``support.py`` imports at module level neither Triton nor any experimental
    module but a ``support`` module (its kernel is imported inside the function that runs
    it).

  ``scripts/pr_checks/experimental_placement.py`` also imports each ``support.py`` in a
  fresh interpreter, which catches what it loads indirectly.

Absolute imports, relative imports (``from .experimental.x import kernel``,
``from . import experimental``) and ``importlib.import_module("flashinfer.experimental...")``
/ ``__import__`` with a literal name are all recognised.

Usage: ``python scripts/pr_checks/containment.py [--root REPO_ROOT]``.  Exit 0 when clean,
1 with one ``path:line: message`` per violation.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

PACKAGE = "flashinfer"
EXPERIMENTAL = "flashinfer.experimental"
REPO_ROOT = Path(__file__).resolve().parents[2]
NOT_A_ROOT = "no flashinfer/__init__.py: not a repository root"


@dataclass(frozen=True)
class Violation:
    path: str
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.message}"


def not_a_root(package_dir: Path) -> list[Violation]:
    """The one violation of a ``--root`` whose ``flashinfer/`` is no package; empty if it is."""
    if (package_dir / "__init__.py").is_file():
        return []
    return [Violation(str(package_dir), 0, NOT_A_ROOT)]


def parse_file(path: Path, display: str) -> ast.Module | Violation:
    """``path`` parsed, or the violation that says it cannot be (shown as ``display``)."""
    try:
        return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except SyntaxError as exc:
        return Violation(display, exc.lineno or 0, f"cannot parse: {exc.msg}")


def module_name(path: Path, package_dir: Path) -> str:
    """Dotted module name of ``path`` (a file under ``package_dir``)."""
    rel = path.relative_to(package_dir.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def resolve_relative(current: str, is_package: bool, level: int, module: str | None) -> str:
    """Absolute name of ``from <level dots><module> import ...`` written in ``current``."""
    base = current.split(".")
    if not is_package:
        base = base[:-1]
    if level > 1:
        base = base[: len(base) - (level - 1)]
    name = ".".join(base)
    if module:
        name = f"{name}.{module}" if name else module
    return name


def is_experimental(name: str) -> bool:
    return name == EXPERIMENTAL or name.startswith(EXPERIMENTAL + ".")


def is_support(name: str) -> bool:
    """``flashinfer.experimental.<feature>.support`` or something inside it."""
    parts = name.split(".")
    return len(parts) >= 4 and parts[:2] == ["flashinfer", "experimental"] and parts[3] == "support"


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _walk(
    node: ast.AST, in_function: bool = False, type_only: bool = False
) -> Iterator[tuple[ast.AST, bool, bool]]:
    """Yield (node, inside a function, under ``if TYPE_CHECKING``) for every node."""
    for child in ast.iter_child_nodes(node):
        child_in_function = in_function or isinstance(
            child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
        )
        yield child, in_function, type_only
        if isinstance(child, ast.If) and _is_type_checking(child.test):
            for stmt in child.body:
                yield stmt, in_function, True
                yield from _walk(stmt, in_function, True)
            for stmt in child.orelse:
                yield stmt, in_function, type_only
                yield from _walk(stmt, in_function, type_only)
            continue
        yield from _walk(child, child_in_function, type_only)


def imported_names(node: ast.AST, current: str, is_package: bool) -> list[str]:
    """The absolute module names (or ``module.name``) that an import node brings in."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom):
        base = (
            resolve_relative(current, is_package, node.level, node.module)
            if node.level
            else (node.module or "")
        )
        return [base if alias.name == "*" else f"{base}.{alias.name}" for alias in node.names]
    if isinstance(node, ast.Call):
        name = dynamic_import(node)
        if name is not None:
            return [name]
    return []


def dynamic_import(node: ast.Call) -> str | None:
    """The literal module name of ``importlib.import_module("...")`` / ``__import__("...")``."""
    func = node.func
    dynamic = (isinstance(func, ast.Name) and func.id in ("__import__", "import_module")) or (
        isinstance(func, ast.Attribute) and func.attr == "import_module"
    )
    if dynamic and node.args:
        first = node.args[0]
        if isinstance(first, ast.Constant) and isinstance(first.value, str):
            return first.value
    return None


def check_file(path: Path, package_dir: Path, display_root: Path) -> list[Violation]:
    current = module_name(path, package_dir)
    is_package = path.name == "__init__.py"
    is_root_init = is_package and current == PACKAGE
    display = path.relative_to(display_root).as_posix()
    tree = parse_file(path, display)
    if isinstance(tree, Violation):
        return [tree]
    found = []
    for node, in_function, type_only in _walk(tree):
        for name in imported_names(node, current, is_package):
            if not is_experimental(name):
                continue
            line = getattr(node, "lineno", 0)
            if is_root_init:
                found.append(
                    Violation(
                        display,
                        line,
                        f"flashinfer/__init__.py imports {name}; `import flashinfer` must never "
                        f"import {EXPERIMENTAL} (not even inside a function: move the code to "
                        "the module that needs it)",
                    )
                )
            elif not in_function and not type_only and not is_support(name):
                found.append(
                    Violation(
                        display,
                        line,
                        f"core module {current} imports {name} at module level; core may import "
                        f"only a feature's light support module ({EXPERIMENTAL}.<feature>.support)"
                        " at module level. Import kernels inside the function that uses them.",
                    )
                )
    return found


def _is_triton(name: str) -> bool:
    return name == "triton" or name.startswith("triton.")


def _module_level_imports(
    tree: ast.AST, current: str, is_package: bool
) -> Iterator[tuple[int, str]]:
    """``(line, name)`` of every import that runs when the module is imported."""
    for node, in_function, type_only in _walk(tree):
        if in_function or type_only:
            continue
        for name in imported_names(node, current, is_package):
            yield getattr(node, "lineno", 0), name


def _code_after_docstring(tree: ast.Module) -> list[ast.stmt]:
    """The module's statements, its docstring left out."""
    body = tree.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        return body[1:]
    return body


def check_experimental_file(path: Path, package_dir: Path, display_root: Path) -> list[Violation]:
    """The rules for ``flashinfer/experimental/``'s own files (see the module docstring)."""
    rel = path.relative_to(package_dir / "experimental").parts
    is_root_init = rel == ("__init__.py",)
    is_feature_init = len(rel) == 2 and rel[1] == "__init__.py"
    is_support_file = len(rel) == 2 and rel[1] == "support.py"
    if not (is_root_init or is_feature_init or is_support_file):
        return []  # kernels and other modules of a feature may import what they like
    display = path.relative_to(display_root).as_posix()
    tree = parse_file(path, display)
    if isinstance(tree, Violation):
        return [tree]
    current = module_name(path, package_dir)
    if is_feature_init:
        code = _code_after_docstring(tree)
        if not code:
            return []
        return [
            Violation(
                display,
                code[0].lineno,
                f"{display} holds code; a feature's __init__.py is empty or a docstring, so "
                f"that importing {current} imports nothing. Move the code into a module of "
                "the feature (its support.py, kernel.py or an implementation module).",
            )
        ]
    found = []
    for line, name in _module_level_imports(tree, current, path.name == "__init__.py"):
        if is_root_init and is_experimental(name) and name != current:
            found.append(
                Violation(
                    display,
                    line,
                    f"{EXPERIMENTAL} imports {name} at module level; the package re-exports "
                    "the markers only, so that importing it loads no feature",
                )
            )
        elif is_support_file and (
            _is_triton(name) or (is_experimental(name) and not is_support(name))
        ):
            what = "Triton" if _is_triton(name) else name
            found.append(
                Violation(
                    display,
                    line,
                    f"support module {current} imports {what} at module level; core imports "
                    "support modules at its own import, so they stay light (torch, "
                    "flashinfer's markers and helpers). Import kernels and Triton inside the "
                    "function that runs them.",
                )
            )
    return found


def check_tree(root: Path) -> list[Violation]:
    """Every violation under ``root/flashinfer`` (``root`` is a repository root)."""
    package_dir = root / PACKAGE
    if missing := not_a_root(package_dir):
        return missing
    experimental_dir = package_dir / "experimental"
    violations = []
    for path in sorted(package_dir.rglob("*.py")):
        if experimental_dir in path.parents:
            violations.extend(check_experimental_file(path, package_dir, root))
        else:
            violations.extend(check_file(path, package_dir, root))
    return violations


def run_check(
    name: str,
    description: str,
    check: Callable[[Path], list[Violation]],
    ok: str,
    argv: Sequence[str] | None,
) -> int:
    """The command line the AST checks share: ``--root``, one line per violation, a count on
    stderr and exit 1, or ``<name>: OK (<ok>)``."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--root", type=Path, default=REPO_ROOT, help="repository root")
    args = parser.parse_args(argv)
    violations = check(args.root.resolve())
    for v in violations:
        print(v)
    if violations:
        print(f"{name}: {len(violations)} violation(s)", file=sys.stderr)
        return 1
    print(f"{name}: OK ({ok})")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    ok = (
        "core imports of flashinfer.experimental are contained, and its support modules "
        "and package files are light"
    )
    return run_check("containment", __doc__.split("\n\n")[0], check_tree, ok, argv)


if __name__ == "__main__":
    sys.exit(main())
