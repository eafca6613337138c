#!/usr/bin/env python3
"""Placement check: experimental backends are marked, their checkers live in
``flashinfer/experimental/<feature>/support.py``, and those support modules stay light.

Rule 1 of the policy, and what a kernel author can get wrong without any other check
noticing.  Two halves, because the marks are runtime attributes but a mistake should be
named at its line:

Read from the source (AST, nothing imported):

* ``experimental_backend`` is applied (as a decorator or a call) only in a
  ``flashinfer/experimental/<feature>/support.py``;
* there it is the outermost of a checker's marks (``@experimental_backend(...)`` above
  ``@backend_family(...)`` / ``@supported_compute_capability(...)``: one order everywhere);
* a core function (``flashinfer/`` outside ``experimental/``) imports experimental code
  (any module under ``flashinfer.experimental`` but a ``support`` module) only when it is
  an experimental API's entry point (``@flashinfer_experimental_api``).  A stable API's
  experimental backend reaches its kernel through its declaration in the feature's
  ``support.py`` (``Backend(name, check=..., run=...)``), never through core code.

Read from the imported package (``flashinfer.API_MODULES``; a module that cannot be imported
is reported with its error):

* a backend whose checker is not marked has neither its checker nor its declared
  implementation defined under ``flashinfer/experimental/``, nor importing from it: that
  rule is the dispatcher's own (``flashinfer.dispatch.plan``), applied when the API is
  decorated, so such a module fails to import and is reported here with the dispatcher's
  message (written once, there);
* a checker marked ``@experimental_backend`` is defined in a
  ``flashinfer/experimental/<feature>/support.py``;
* every ``flashinfer/experimental/<feature>/support.py``, imported alone in a fresh
  interpreter, loads neither Triton nor any experimental module but support modules
  (``containment.py`` checks the module's own imports; this catches what they pull in).

Usage: ``python scripts/pr_checks/experimental_placement.py [--root REPO_ROOT]``
(``--root``: check the package in that tree, e.g. a copy).  Exit 0 when clean, 1 with one
``path:line: message`` per violation.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import os
import subprocess
import sys
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from containment import (  # noqa: E402 - a sibling script, not a package
    NOT_A_ROOT,
    PACKAGE,
    Violation,
    imported_names,
    is_experimental,
    is_support,
    module_name,
    not_a_root,
    parse_file,
    run_check,
)

REPO_ROOT = Path(__file__).resolve().parents[2]
MARKER = "experimental_backend"
OTHER_MARKS = frozenset({"backend_family", "supported_compute_capability"})
API_MARKERS = frozenset({"flashinfer_experimental_api", "experimental_api"})
FIX_BACKEND = (
    "A stable API's experimental backend is declared in "
    "flashinfer/experimental/<feature>/support.py: Backend(name, check=<checker marked "
    "@experimental_backend>, run=<function that imports the kernel inside>), added to the "
    "API's table with one line."
)


# --------------------------------------------------------------------------------------------
# Names and places


def _support_parts(path: Path, root: Path) -> bool:
    """Whether ``path`` is ``root/flashinfer/experimental/<feature>/support.py``."""
    try:
        parts = path.resolve().relative_to(root.resolve()).parts
    except ValueError:
        return False
    return len(parts) == 4 and parts[:2] == (PACKAGE, "experimental") and parts[3] == "support.py"


def _under(path: Path, folder: Path) -> bool:
    path, folder = path.resolve(), folder.resolve()
    return path == folder or folder in path.parents


def _display(path: Path, root: Path) -> str:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return str(path)


def _mark_name(node: ast.expr) -> str | None:
    """The name a decorator or call uses: ``x`` of ``@x``, ``@m.x``, ``@x(...)``."""
    if isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


# --------------------------------------------------------------------------------------------
# From the source


def _marker_uses(tree: ast.AST) -> Iterator[int]:
    """Lines where ``experimental_backend`` is applied: decorators and calls."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            for deco in node.decorator_list:
                if not isinstance(deco, ast.Call) and _mark_name(deco) == MARKER:
                    yield deco.lineno
        if isinstance(node, ast.Call) and _mark_name(node) == MARKER:
            yield node.lineno


def _order_problems(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """Checkers whose experimental marker is not the outermost of their marks."""
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        names = [_mark_name(d) for d in node.decorator_list]
        if MARKER not in names:
            continue
        marker_at = names.index(MARKER)
        above = [n for n in names[:marker_at] if n in OTHER_MARKS]
        if above:
            yield (
                node.decorator_list[0].lineno,
                f"checker {node.name}: @{above[0]} is above @{MARKER}; write @{MARKER}(...) "
                "first (outermost), then the family or capability marks, the one order the "
                "docs and the shipped code use",
            )


def _experimental_imports(
    node: ast.AST, current: str, is_package: bool, allowed: bool = False
) -> Iterator[tuple[ast.AST, str, bool]]:
    """``(import node, name, inside an experimental API)`` for experimental code imported
    inside a function of ``node`` (module-level imports are containment.py's)."""
    for child in ast.iter_child_nodes(node):
        inside_api = allowed or (
            isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
            and any(_mark_name(d) in API_MARKERS for d in child.decorator_list)
        )
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            for inner in ast.walk(child):
                for name in imported_names(inner, current, is_package):
                    if is_experimental(name) and not is_support(name):
                        yield inner, name, inside_api
            continue
        yield from _experimental_imports(child, current, is_package, inside_api)


def _enclosing_function(tree: ast.AST, line: int) -> str:
    best = "<module>"
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if node.lineno <= line <= (node.end_lineno or node.lineno):
                best = node.name
    return best


def check_source(root: Path) -> list[Violation]:
    """The source half: every ``.py`` under ``root/flashinfer``."""
    package_dir = root / PACKAGE
    if missing := not_a_root(package_dir):
        return missing
    found: list[Violation] = []
    for path in sorted(package_dir.rglob("*.py")):
        display = _display(path, root)
        tree = parse_file(path, display)
        if isinstance(tree, Violation):
            found.append(tree)
            continue
        if _support_parts(path, root):
            found += [Violation(display, line, msg) for line, msg in _order_problems(tree)]
        else:
            found += [
                Violation(
                    display,
                    line,
                    f"@{MARKER} is applied outside a feature's support.py; the checkers of "
                    "experimental backends live in flashinfer/experimental/<feature>/support.py "
                    "(policy rule 1): move the checker there and import it from the API's module",
                )
                for line in sorted(set(_marker_uses(tree)))
            ]
        if _under(path, package_dir / "experimental"):
            continue
        current, is_package = module_name(path, package_dir), path.name == "__init__.py"
        for node, name, inside_api in _experimental_imports(tree, current, is_package):
            if inside_api:
                continue
            line = getattr(node, "lineno", 0)
            found.append(
                Violation(
                    display,
                    line,
                    f"core function {current}.{_enclosing_function(tree, line)} imports "
                    f"{name}; in core, only an experimental API's entry point "
                    f"(@flashinfer_experimental_api) imports experimental code. {FIX_BACKEND}",
                )
            )
    return found


# --------------------------------------------------------------------------------------------
# From the imported package


def _code_owner(obj: Any) -> Any:
    """What holds the code of a checker or implementation: the function, or for a callable
    object its class."""
    target = inspect.unwrap(obj) if inspect.isroutine(obj) else obj
    if not (inspect.isroutine(target) or inspect.isclass(target)):
        target = type(target)
    return target


def _source_of(obj: Any) -> tuple[Path, int] | None:
    """``(file, first line)`` of a function or class, or None (no source)."""
    try:
        file = inspect.getsourcefile(obj)
        first = inspect.getsourcelines(obj)[1]
    except (OSError, TypeError):
        return None
    return None if file is None else (Path(file), max(first, 1))


def backend_violations(ops: Iterable[Any], root: Path) -> list[Violation]:
    """Checkers of ``ops``' backends (APIs decorated with ``backend_requirement``) marked
    ``@experimental_backend`` but defined under ``root/flashinfer`` outside a feature's
    ``support.py``.  (An unmarked backend that is experimental code is the dispatcher's to
    refuse, at decoration.)"""
    package_dir = root / PACKAGE
    found: list[Violation] = []
    for op in ops:
        api = f"{op.__module__}.{op.__qualname__}"
        for backend, checker in op.backend_checks.items():
            if getattr(checker, "is_experimental_backend", False) is not True:
                continue
            owner = _code_owner(checker)
            source = _source_of(owner)
            if source is None or not _under(source[0], package_dir):
                continue
            file, line = source
            display = _display(file, root)
            if not _support_parts(file, root):
                found.append(
                    Violation(
                        display,
                        line,
                        f"the checker of {api}'s backend {backend!r} "
                        f"({getattr(owner, '__module__', '?')}.{owner.__qualname__}) is marked "
                        f"@{MARKER} but defined in {display}; the checkers of experimental "
                        "backends live in flashinfer/experimental/<feature>/support.py "
                        "(policy rule 1)",
                    )
                )
    return found


def load_package_ops(root: Path) -> tuple[list[Any], list[Violation]]:
    """Import ``flashinfer``'s API modules; its APIs with backends, and a violation for each
    module that failed to import (the dispatcher refuses some placements at decoration)."""
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    import flashinfer
    from flashinfer.backend_dispatch import registered_ops

    failed = []
    for module in flashinfer.API_MODULES:
        try:
            importlib.import_module(module)
        except Exception as exc:  # noqa: BLE001 - reported, and the rest still checked
            path = module.replace(".", "/") + ".py"
            failed.append(
                Violation(path, 0, f"cannot import {module}: {type(exc).__name__}: {exc}")
            )
    package_dir = (root / PACKAGE).resolve()
    ops = []
    for op in registered_ops():
        source = _source_of(_code_owner(op))
        if source is not None and _under(source[0], package_dir):
            ops.append(op)
    return ops, failed


# --------------------------------------------------------------------------------------------
# Support modules in a fresh interpreter

# Run once: import torch (what every support module imports first, and the cost of a start;
# it loads neither Triton nor flashinfer), then for each support module fork a child that
# imports it and sends back the heavy modules it loaded, or the error.  Each child is an
# interpreter in which nothing of flashinfer was imported before the support module: what a
# fresh one would load, without one torch import per module.
_PROBE = """
import importlib, json, os, sys, traceback
try:
    import torch
except ImportError:
    pass
import gc
gc.freeze()  # the children leave the shared heap unwritten by the collector
results = {}
for name in sys.argv[1:]:
    read, write = os.pipe()
    sys.stdout.flush()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        try:
            importlib.import_module(name)
            heavy = sorted(
                m for m in sys.modules
                if m == "triton" or m.startswith("triton.")
                or (m.startswith("flashinfer.experimental.") and m.count(".") >= 3
                    and m.rsplit(".", 1)[1] != "support")
            )
            found = {"heavy": heavy}
        except BaseException as exc:
            found = {"error": traceback.format_exception_only(exc)[-1].strip()}
        os.write(write, json.dumps(found).encode())
        os._exit(0)
    os.close(write)
    data = b""
    while chunk := os.read(read, 1 << 16):
        data += chunk
    os.close(read)
    os.waitpid(pid, 0)
    results[name] = json.loads(data) if data else {"error": "no output (the import crashed)"}
print(json.dumps(results))
"""


def support_modules(root: Path) -> list[Path]:
    return sorted((root / PACKAGE / "experimental").glob("*/support.py"))


def _summarise(heavy: Sequence[str]) -> list[str]:
    """``triton`` once for all of its submodules, every other module by name."""
    shown = ["triton"] if any(m.split(".")[0] == "triton" for m in heavy) else []
    return shown + [m for m in heavy if m.split(".")[0] != "triton"]


def support_import_violations(root: Path, timeout: float = 300) -> list[Violation]:
    """Import each support module alone in a fresh interpreter (``root`` first on the path;
    each a child forked from one that imported only torch)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(root), env.get("PYTHONPATH", "")])
    paths = {module_name(path, root / PACKAGE): path for path in support_modules(root)}
    if not paths:
        return []
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE, *paths],
        capture_output=True,
        text=True,
        cwd=root,
        env=env,
        timeout=timeout,
    )
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return [Violation(_display(root / PACKAGE, root), 0, f"support import probe fails: {last}")]
    results = json.loads(proc.stdout.strip().splitlines()[-1])
    found = []
    for name, path in paths.items():
        display, result = _display(path, root), results[name]
        if "error" in result:
            found.append(Violation(display, 0, f"importing {name} alone fails: {result['error']}"))
            continue
        heavy = _summarise(result["heavy"])
        if heavy:
            found.append(
                Violation(
                    display,
                    0,
                    f"importing {name} alone loads {', '.join(heavy)}; core imports support "
                    "modules at its own import, so they stay light: import Triton and kernels "
                    "inside the function that runs them (also through the modules it imports)",
                )
            )
    return found


# --------------------------------------------------------------------------------------------


def check(root: Path) -> list[Violation]:
    """Every violation of the tree at ``root`` (its package is imported)."""
    found = check_source(root)
    if found and found[0].message == NOT_A_ROOT:
        return found
    ops, failed = load_package_ops(root)
    return found + failed + backend_violations(ops, root) + support_import_violations(root)


def main(argv: Sequence[str] | None = None) -> int:
    ok = "experimental checkers marked and in their features' support.py; support modules light"
    return run_check("experimental_placement", __doc__.split("\n\n")[0], check, ok, argv)


if __name__ == "__main__":
    sys.exit(main())
