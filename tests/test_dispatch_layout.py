"""The dispatcher's public import paths and the one-way imports of its internals.

``flashinfer.backend_dispatch`` is the public home of the dispatcher's names (and
``flashinfer.utils`` upstream's path to them); the work lives in ``flashinfer._dispatch``,
one job per module.  These tests pin what users and the rest of the package rely on.
"""

from __future__ import annotations

import ast
import pickle
from pathlib import Path

import pytest

import flashinfer
import flashinfer.backend_dispatch as backend_dispatch
import flashinfer.utils as utils
from flashinfer.backend_dispatch import BackendSupportedError, UnsupportedInputsError

_INTERNALS = Path(backend_dispatch.__file__).parent / "_dispatch"


@pytest.mark.parametrize("error", [BackendSupportedError, UnsupportedInputsError])
def test_errors_keep_their_public_module(error):
    """``except``/pickle/listings name the public module, wherever the class is defined."""
    assert error.__module__ == "flashinfer.backend_dispatch"
    assert getattr(backend_dispatch, error.__name__) is error
    raised = pickle.loads(pickle.dumps(error("no backend fits")))
    assert type(raised) is error and str(raised) == "no backend fits"


def test_every_public_name_stays_importable_from_its_paths():
    """The names of ``__all__``, and those the package imports from the facade, resolve to
    one object whichever path they are imported from."""
    names = set(backend_dispatch.__all__)
    assert set(utils.__all__) <= names
    for name in names:
        obj = getattr(backend_dispatch, name)
        if name in utils.__all__:
            assert getattr(utils, name) is obj, name
        if hasattr(flashinfer, name):
            assert getattr(flashinfer, name) is obj, name
    # Imported from the facade elsewhere in the package (the tuner's keys and types).
    assert callable(backend_dispatch.device_capability)
    assert backend_dispatch.PerThreadList.__name__ == "PerThreadList"


_PACKAGE = "flashinfer._dispatch"
_FACADES = {"flashinfer.backend_dispatch", "flashinfer.utils"}


def _imported_modules(path: Path) -> set[str]:
    """The absolute names of the modules one internal module imports (anywhere in it)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = _PACKAGE.rsplit(".", node.level - 1)[0]
                base = f"{parent}.{base}" if base else parent
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)  # submodules
    return found


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of ``graph`` (module -> modules it imports), or None."""
    done: set[str] = set()

    def visit(module: str, path: list[str]) -> list[str] | None:
        if module in path:
            return [*path[path.index(module) :], module]
        if module in done:
            return None
        for imported in sorted(graph.get(module, ())):
            cycle = visit(imported, [*path, module])
            if cycle:
                return cycle
        done.add(module)
        return None

    return next((c for m in sorted(graph) if (c := visit(m, []))), None)


def test_cycle_finder_finds_a_cycle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]


def test_internal_modules_import_one_way():
    """No internal module imports the public facade, and their imports of each other form
    no cycle (function-level imports included): each reads without the ones after it."""
    graph: dict[str, set[str]] = {}
    for path in _INTERNALS.glob("*.py"):
        imported = _imported_modules(path)
        assert not imported & _FACADES, f"{path.name} imports the facade"
        graph[path.stem] = {m.split(".")[2] for m in imported if m.startswith(f"{_PACKAGE}.")}
    assert {"errors", "plan", "reference", "emitter", "op"} <= graph.keys()
    assert _cycle(graph) is None, _cycle(graph)
