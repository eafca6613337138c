#!/usr/bin/env python3
"""API inventory check: the stable API reference and the stable inventory say the same thing.

Rules (from ``flashinfer/experimental/README.md``):

* Every stable API -- each ``@flashinfer_api`` record that is not experimental, and each
  public name in ``flashinfer.__all__`` that is not experimental -- has a docstring and an
  entry (``autofunction``/``autoclass``/... directive) in the API reference, ``docs/api/``.
* No experimental API is in the stable reference, and none is in the stable inventory
  (``api_inventory(experimental=False)``): not one defined under ``flashinfer.experimental``
  and recorded as stable, and not one whose experimental marker is hidden under another
  wrapper (for example ``@flashinfer_api`` over ``@backend_requirement`` over
  ``@flashinfer_experimental_api``).

It imports the package (after ``flashinfer.load_all_apis()``; an API module whose file does
not exist yet is reported as a note, any other import error fails).

Usage: ``python scripts/pr_checks/api_inventory.py [--root ROOT] [--docs-api DIR]
[--module MOD ...]``.  ``--module`` (for tests) imports those modules instead of the package's
API modules and checks only their ``__all__`` and inventory records.  Exit 0 clean, 1 with
one line per problem.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import re
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flashinfer.lifecycle import load_api_modules
from flashinfer.lifecycle import wrapper_chain as chain

REPO_ROOT = Path(__file__).resolve().parents[2]

_RST_DIRECTIVE = re.compile(
    r"^\s*\.\.\s+(auto(?:function|class|data|method|attribute|exception|decorator|module))"
    r"::\s*(\S+)\s*$"
)
_MYST_DIRECTIVE = re.compile(
    r"^\s*(?:```|:::)\{(auto(?:function|class|data|method|attribute|exception|decorator|module))"
    r"\}\s*(\S+)\s*$"
)


_OPERATORS_DIRECTIVE = re.compile(r"^\s*\.\.\s+flashinfer-operators::\s*$")
"""The docs' directive that renders one ``autofunction`` per stable op of the one list of ops
(``docs/_ext/flashinfer_reference.py``): read here as those entries."""


@dataclass(frozen=True)
class DocEntry:
    path: str
    line: int
    directive: str
    target: str
    members: bool  # automodule with :members:


def reference_entries(docs_api: Path, display_root: Path) -> list[DocEntry]:
    """Every autodoc directive in the reference pages (``.rst`` and ``.md`` under docs_api)."""
    entries = []
    for path in sorted([*docs_api.rglob("*.rst"), *docs_api.rglob("*.md")]):
        lines = path.read_text(encoding="utf-8").splitlines()
        for i, text in enumerate(lines):
            if _OPERATORS_DIRECTIVE.match(text):
                entries += [
                    DocEntry(_shown(path, display_root), i + 1, "autofunction", target, False)
                    for target in _stable_ops()
                ]
                continue
            m = _RST_DIRECTIVE.match(text) or _MYST_DIRECTIVE.match(text)
            if not m:
                continue
            members = False
            if m.group(1) == "automodule":
                for option in lines[i + 1 : i + 8]:
                    if ":members:" in option:
                        members = True
                    if option.strip() and not option.strip().startswith(":"):
                        break
            entries.append(
                DocEntry(_shown(path, display_root), i + 1, m.group(1), m.group(2), members)
            )
    return entries


def _stable_ops() -> list[str]:
    """``flashinfer.<op>`` for each stable op of the one list, as the directive lists them."""
    from flashinfer.api_modules import OPS

    return [f"flashinfer.{n}" for n in OPS if not is_experimental(resolve(f"flashinfer.{n}"))]


def resolve(target: str) -> Any:
    """Import ``a.b.c.name.attr``: the longest importable module prefix, then attributes."""
    parts = target.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)
        return obj
    raise ImportError(f"no importable module in {target!r}")


def is_experimental(obj: Any) -> bool:
    """Marked ``@flashinfer_experimental_api``, on any layer of its wrappers."""
    return any(getattr(layer, "is_experimental", None) is True for layer in chain(obj))


def _public_members(module: Any) -> list[Any]:
    names = getattr(module, "__all__", None)
    if names is None:
        names = [
            n
            for n, v in vars(module).items()
            if not n.startswith("_") and getattr(v, "__module__", None) == module.__name__
        ]
    return [getattr(module, n) for n in names]


def _public_names(module_name: str) -> tuple[list[tuple[str, Any]], list[str]]:
    """(name, object) of each resolvable name in ``module.__all__``; notes for the rest."""
    module = importlib.import_module(module_name)
    found, notes = [], []
    for name in getattr(module, "__all__", []):
        try:
            found.append((f"{module_name}.{name}", getattr(module, name)))
        except ModuleNotFoundError as exc:
            notes.append(
                f"note: {module_name}.{name} is declared but its module {exc.name} does not exist"
            )
    return found, notes


def _load(modules: Iterable[str] | None) -> list[str]:
    """Import the API modules; notes for those of the package that do not exist (yet).

    Modules named explicitly (``--module``) must all import.
    """
    if modules is not None:
        for module in modules:
            importlib.import_module(module)
        return []
    return [
        f"note: API module {module} does not exist; nothing of it is checked"
        for module in load_api_modules()
    ]


def _shown(path: Path, root: Path) -> str:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return str(path)


def check(
    docs_api: Path, display_root: Path, modules: Sequence[str] | None = None
) -> tuple[list[str], list[str]]:
    """Return (problems, notes)."""
    from flashinfer.api_logging import api_inventory

    problems: list[str] = []
    notes = _load(modules)
    surfaces = list(modules) if modules else ["flashinfer"]
    scope = tuple(s + "." for s in surfaces)

    # The stable APIs: inventory records and public names, by identity.
    stable: dict[int, tuple[str, Any]] = {}
    for record in api_inventory(experimental=False):
        if not record.name.startswith(scope):
            continue
        if is_experimental(record.obj):
            problems.append(
                f"{record.name}: experimental API listed in the stable inventory: a wrapper "
                "hides its @flashinfer_experimental_api marker (put @flashinfer_experimental_api "
                "outermost, or make the wrapper forward is_experimental)"
            )
            continue
        module = getattr(record.obj, "__module__", "") or ""
        if module == "flashinfer.experimental" or module.startswith("flashinfer.experimental."):
            problems.append(
                f"{record.name}: defined under flashinfer.experimental but recorded as a stable "
                "API; mark it @flashinfer_experimental_api"
            )
            continue
        stable[id(record.obj)] = (record.name, record.obj)
    for surface in surfaces:
        names, more = _public_names(surface)
        notes.extend(more)
        for name, obj in names:
            if inspect.ismodule(obj) or is_experimental(obj):
                continue
            if any(id(layer) in stable for layer in chain(obj)):
                continue
            stable[id(obj)] = (name, obj)

    # What the reference documents.
    documented: set[int] = set()
    for entry in reference_entries(docs_api, display_root):
        where = f"{entry.path}:{entry.line}"
        try:
            obj = resolve(entry.target)
        except (ImportError, AttributeError) as exc:
            problems.append(f"{where}: {entry.directive} {entry.target} does not resolve: {exc}")
            continue
        objs = _public_members(obj) if entry.members else [obj]
        if entry.directive == "automodule" and not entry.members:
            continue
        for item in objs:
            if is_experimental(item):
                label = getattr(item, "__qualname__", entry.target)
                problems.append(
                    f"{where}: experimental API {label} is in the stable API reference; "
                    "document it on the experimental page until it graduates"
                )
                continue
            documented.update(id(layer) for layer in chain(item))

    for name, obj in sorted(stable.values(), key=lambda t: t[0]):
        if not (inspect.getdoc(obj) or "").strip():
            problems.append(f"{name}: stable API without a docstring")
        if not any(id(layer) in documented for layer in chain(obj)):
            problems.append(
                f"{name}: stable API missing from the API reference; add an autodoc entry "
                f"(e.g. `.. autofunction:: {name}`) under {_shown(docs_api, display_root)}/"
            )
    return problems, notes


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=REPO_ROOT, help="repository root")
    parser.add_argument("--docs-api", type=Path, help="API reference folder (ROOT/docs/api)")
    parser.add_argument(
        "--module", action="append", help="check these modules instead (repeatable; for tests)"
    )
    args = parser.parse_args(argv)
    root = args.root.resolve()
    docs_api = (args.docs_api or root / "docs" / "api").resolve()
    if not docs_api.is_dir():
        print(f"api_inventory: no API reference folder {docs_api}")
        return 1
    problems, notes = check(docs_api, root, args.module)
    for note in notes:
        print(note, file=sys.stderr)
    for problem in problems:
        print(problem)
    if problems:
        print(f"api_inventory: {len(problems)} problem(s)", file=sys.stderr)
        return 1
    print("api_inventory: OK (stable APIs documented; no experimental API in the stable lists)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
