"""The house's rules, as functions of the package's source (tests/test_layout.py runs them on
the real package and on fixtures that break each one).

- **A small root.** The package root holds the public surface: the facades (upstream import
  paths that only re-export), the version, the one list of ops, and the op modules that list
  names.  Anything else belongs in the folder of its job (``gating/``, ``dispatch/``,
  ``autotuner/``, ``cli/``, ``testing/``, ``kernels/``, an op's folder).
- **Facades only re-export.** A facade's body is imports, ``__all__`` and aliases.
- **Machinery never imports a facade.** Only the op modules (the package's own users of its
  public surface) and experimental features, written the way a kernel author writes them,
  import through the facades; everything else imports the module that defines a name.
- **One list of ops.** A module that defines a public API (a function marked
  ``@flashinfer_api``, ``@flashinfer_experimental_api`` or ``@backend_requirement``) is in
  :data:`flashinfer.api_modules.API_MODULES`, or listings, conformance and ``flashinfer
  backends`` silently leave it out.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping

FACADES = frozenset(
    {
        "flashinfer.aliasing",
        "flashinfer.api_logging",
        "flashinfer.backend_dispatch",
        "flashinfer.backend_families",
        "flashinfer.lifecycle",
        "flashinfer.utils",
    }
)
"""Upstream and documented import paths whose code lives elsewhere: re-exports only."""

ROOT_MODULES = frozenset(
    {
        "flashinfer",  # the public names
        "flashinfer.__main__",  # python -m flashinfer
        "flashinfer._version",  # the version, which pyproject.toml reads
        "flashinfer.api_modules",  # the one list of ops
        "flashinfer.torch_boundary",  # every private torch name the package uses (issue 44)
        *FACADES,
    }
)
"""What the root holds besides the op modules (and folders): at most :data:`ROOT_LIMIT`."""

ROOT_LIMIT = 12

FACADE_DEFINITIONS: Mapping[str, frozenset[str]] = {
    # A type checker names a type by the module that defines it: users read
    # ``flashinfer.backend_dispatch.BackendOp[...]`` in their errors, the path they import.
    # The decorator that returns it, and the type variables of both, stay beside it.
    "flashinfer.backend_dispatch": frozenset(
        {"BackendOp", "backend_requirement", "P", "R", "R_co"}
    ),
}
"""The definitions a facade may hold, with the reason."""

API_MARKERS = frozenset(
    {"flashinfer_api", "flashinfer_experimental_api", "experimental_api", "backend_requirement"}
)


def top_level_modules(modules: Iterable[str]) -> list[str]:
    """The modules that sit directly in the package root (``flashinfer.x`` but not the
    ``__init__`` of a folder ``flashinfer/x/``)."""
    return sorted(m for m in modules if m.count(".") <= 1)


def root_problems(
    root_modules: Iterable[str], packages: Iterable[str], api_modules: Iterable[str]
) -> list[str]:
    """A root module that is neither part of the public surface (:data:`ROOT_MODULES`, at
    most :data:`ROOT_LIMIT` modules) nor a listed op module."""
    ops = set(api_modules)
    packages = set(packages)
    return [
        f"{m}: a new module in the package root; put it in the folder of its job "
        "(gating/, dispatch/, autotuner/, cli/, testing/, kernels/, or its op's folder), "
        "or, if it defines an op, list it in flashinfer/api_modules.py"
        for m in root_modules
        if m not in ROOT_MODULES and m not in ops and m not in packages
    ]


def facade_import_problems(graph: Mapping[str, set[str]], api_modules: Iterable[str]) -> list[str]:
    """Machinery that imports a facade (or the package root), from the import graph."""
    clients = set(api_modules) | FACADES | {"flashinfer"}
    problems = []
    for module, imported in sorted(graph.items()):
        if module in clients or module.startswith(
            ("flashinfer.experimental", "flashinfer.features")
        ):
            continue
        for facade in sorted(imported & (FACADES | {"flashinfer"})):
            problems.append(
                f"{module} imports the facade {facade}: import the module that defines the "
                "name (the facade's own import line says which)"
            )
    return problems


def _is_reexport(node: ast.stmt) -> bool:
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
        return True  # the docstring
    if isinstance(node, ast.Import | ast.ImportFrom):
        return True
    if isinstance(node, ast.AnnAssign) and node.value is None:
        return True  # a name declared for type checkers
    if isinstance(node, ast.Assign):
        names = [ast.unparse(t) for t in node.targets]
        if names == ["__all__"]:
            return True
        return isinstance(node.value, ast.Name | ast.Attribute)  # an alias
    if isinstance(node, ast.If) and ast.unparse(node.test) in {
        "TYPE_CHECKING",
        "typing.TYPE_CHECKING",
    }:
        return all(isinstance(n, ast.Import | ast.ImportFrom) for n in node.body + node.orelse)
    return False


def _defined_names(node: ast.stmt) -> list[str]:
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return [node.name]
    if isinstance(node, ast.Assign):
        return [ast.unparse(t) for t in node.targets]
    if isinstance(node, ast.AnnAssign):
        return [ast.unparse(node.target)]
    return [f"line {node.lineno}: {ast.unparse(node).splitlines()[0]}"]


def facade_definition_problems(sources: Mapping[str, str]) -> list[str]:
    """Code in a facade (anything but imports, ``__all__`` and aliases), outside the
    definitions :data:`FACADE_DEFINITIONS` allows."""
    problems = []
    for module in sorted(FACADES & set(sources)):
        allowed = FACADE_DEFINITIONS.get(module, frozenset())
        for node in ast.parse(sources[module]).body:
            if _is_reexport(node):
                continue
            for name in _defined_names(node):
                if name not in allowed:
                    problems.append(
                        f"{module} defines {name}: a facade only re-exports; move the code "
                        "to the module of its job and import it here"
                    )
    return problems


def _marker_name(decorator: ast.expr) -> str:
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    return ast.unparse(target).rsplit(".", 1)[-1]


def defines_an_api(source: str) -> bool:
    """Whether a module marks a top-level function as a public API."""
    return any(
        _marker_name(d) in API_MARKERS
        for node in ast.parse(source).body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        for d in node.decorator_list
    )


def unlisted_api_modules(sources: Mapping[str, str], api_modules: Iterable[str]) -> list[str]:
    """Modules that define a public API but are missing from the one list of ops.
    Experimental features are reached through their stable op or their API module."""
    listed = set(api_modules)
    return [
        f"{module} defines a public API but is not in the one list of ops: add its line, "
        "`from <module> import <op> as <op>`, to the ops' block at the end of "
        "flashinfer/__init__.py (OPS, conformance, listings and `flashinfer backends` read it)"
        for module, source in sorted(sources.items())
        if module not in listed
        and not module.startswith("flashinfer.experimental")
        and module not in FACADES
        and defines_an_api(source)
    ]


# -- layers: imports point one way -----------------------------------------------------------

LEAVES = "leaves"
"""The layer above the settings: each of its units (code generation, which serves gating,
dispatch and the autotuner alike; the kernels; the version; the one list of ops) imports
nothing else of the package but the settings."""

LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    # The one reader of the environment, which every layer reads its variables through.
    ("settings", ("flashinfer.settings",)),
    # Every private torch name, behind one module that imports nothing of flashinfer.
    ("torch boundary", ("flashinfer.torch_boundary",)),
    (
        LEAVES,
        (
            "flashinfer.codegen",
            "flashinfer.kernels",
            "flashinfer._version",
            "flashinfer.api_modules",
        ),
    ),
    ("gating", ("flashinfer.gating",)),
    ("dispatch", ("flashinfer.dispatch",)),
    ("autotuner", ("flashinfer.autotuner",)),
    ("testing", ("flashinfer.testing",)),
    ("facades", tuple(sorted(FACADES))),
    # and every module of OPS, with its folder; features/ holds graduated features' code
    ("ops", ("flashinfer.experimental", "flashinfer.features")),
    ("models", ("flashinfer.nn",)),
    ("cli", ("flashinfer.cli",)),
    ("entry points", ("flashinfer", "flashinfer.__main__", "flashinfer.experimental.__main__")),
)
"""The package's layers, lowest first.  A module imports only from its own layer or a lower
one; a unit of :data:`LEAVES` only from itself.  Every import counts: module level, inside a
function, and under ``TYPE_CHECKING`` (a type a lower layer names from a higher one is a
dependency all the same; the lower layer declares a Protocol instead, as dispatch's
``TunerView`` does).  A module is in the layer of its longest matching prefix; the op modules
(:data:`flashinfer.api_modules.API_MODULES`, and the folders they head) are ``ops``."""


def layer_of(module: str, api_modules: Iterable[str]) -> tuple[int, str, str] | None:
    """``(rank, layer, unit)`` of ``module`` (``unit``: the prefix that placed it), or None."""
    best: tuple[int, str, str] | None = None
    prefixes = [(rank, name, p) for rank, (name, ps) in enumerate(LAYERS) for p in ps]
    ops_rank = next(rank for rank, (name, _) in enumerate(LAYERS) if name == "ops")
    prefixes += [(ops_rank, "ops", m) for m in api_modules]
    for rank, name, prefix in prefixes:
        # The package root's name places only the root module, not everything under it.
        exact_only = prefix == "flashinfer"
        matches = module == prefix or (not exact_only and module.startswith(prefix + "."))
        if matches and (best is None or len(prefix) > len(best[2])):
            best = (rank, name, prefix)
    return best


def layer_problems(graph: Mapping[str, set[str]], api_modules: Iterable[str]) -> list[str]:
    """Each import that points up the layers (or out of a leaf), and each module in no layer."""
    api_modules = tuple(api_modules)
    order = " -> ".join(name for name, _ in LAYERS)
    problems = []
    for module, imported in sorted(graph.items()):
        here = layer_of(module, api_modules)
        if here is None:
            problems.append(
                f"{module} is in no layer: add its folder to tests/layout_rules.py's LAYERS "
                f"({order}), below everything that imports it"
            )
            continue
        for target in sorted(imported):
            there = layer_of(target, api_modules)
            if there is None:
                continue  # reported as a module of its own
            if there[0] > here[0]:
                problems.append(
                    f"{module} ({here[1]}) imports {target} ({there[1]}): layers point one "
                    f"way ({order}), a module imports only from its own layer or below; move "
                    "what both need down, or have the higher layer install it"
                )
            elif here[1] == LEAVES and there[1] == LEAVES and there[2] != here[2]:
                problems.append(
                    f"{module} ({here[1]}) imports {target}: {here[2]} is a leaf and imports "
                    "nothing else of flashinfer"
                )
    return problems


# -- privacy: a name another module imports is public where it is defined ------------------


def _private(part: str) -> bool:
    return part.startswith("_") and not (part.startswith("__") and part.endswith("__"))


def _owner_package(module: str, is_package: bool) -> str:
    return module if is_package else module.rpartition(".")[0]


def private_import_problems(sources: Mapping[str, str], packages: Iterable[str] = ()) -> list[str]:
    """Imports of an underscore name from another module of the package (``from m import _x``,
    ``import m._x``), and of a private module (``m._impl``) from outside the package that
    holds it.  ``sources`` maps a module name to its source; ``packages`` names the modules
    that are packages (their ``__init__``).  A name another module needs is public in its
    own module (no underscore), or its use stays inside."""
    package_names = set(packages)
    problems = []
    for module, source in sorted(sources.items()):
        home = _owner_package(module, module in package_names)
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                targets = [node.module]
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.Import):
                targets, names = [alias.name for alias in node.names], []
            else:
                continue
            for target in targets:
                if not target.split(".")[0] == "flashinfer":
                    continue
                parts = target.split(".")
                for i, part in enumerate(parts):
                    owner = ".".join(parts[:i])
                    if _private(part) and not (home == owner or home.startswith(owner + ".")):
                        problems.append(
                            f"{module} (line {node.lineno}) imports the private module "
                            f"{'.'.join(parts[: i + 1])} from outside {owner}: make it public "
                            "(drop the underscore) or keep its use inside its package"
                        )
                        break
                for name in names:
                    if _private(name):
                        problems.append(
                            f"{module} (line {node.lineno}) imports the private name {name} "
                            f"from {target}: make it public there (drop the underscore, "
                            "and say what it is for) or keep its use inside that module"
                        )
    return problems
