"""Public module names: every class or function whose ``__module__`` names its public home
is given it by ``flashinfer.gating.exposed.exposed_in``, and that home really exports it
(reprs, pickles and warning filters resolve the name there)."""

from __future__ import annotations

import ast
import importlib
import pickle
from pathlib import Path

import pytest

import flashinfer
from flashinfer.gating.exposed import exposed_in, exposed_objects

PACKAGE = Path(flashinfer.__file__).parent
FAKE_HOME = "flashinfer.somewhere"  # the test of the helper itself records one


def _load_everything() -> None:
    flashinfer.load_all_apis()
    importlib.import_module("flashinfer.autotuner")
    importlib.import_module("flashinfer.lifecycle")


def test_exposed_in_names_the_public_module_and_records_it():
    @exposed_in(FAKE_HOME)
    class Thing:
        pass

    assert Thing.__module__ == FAKE_HOME
    assert (Thing, FAKE_HOME) in exposed_objects()


def test_every_exposed_object_is_exported_by_its_public_module():
    _load_everything()
    exposed = [
        (obj, module) for obj, module in exposed_objects() if module != "flashinfer.somewhere"
    ]
    assert len(exposed) >= 10  # the errors, the tuner's types, the warning, the tuning file's types
    for obj, module in exposed:
        home = importlib.import_module(module)
        assert getattr(home, obj.__qualname__, None) is obj, f"{module} does not export {obj}"


def test_exposed_exceptions_pickle_through_their_public_module():
    _load_everything()
    for obj, module in exposed_objects():
        if (
            isinstance(obj, type)
            and issubclass(obj, Exception)
            and module != "flashinfer.somewhere"
        ):
            try:
                error = obj("message")
            except TypeError:
                continue  # an exception with required keyword fields
            assert type(pickle.loads(pickle.dumps(error))) is obj


def _module_assignments(source: str) -> list[int]:
    """Lines that name an object's public home by hand: ``X.__module__ = "flashinfer..."``
    (or a name holding it), or ``__module__ = ...`` in a class body.  Copying another
    object's module (``wrapper.__module__ = cls.__module__``) names no home, and is fine."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Assign) or not isinstance(node.value, ast.Constant | ast.Name):
            continue
        for target in node.targets:
            if isinstance(target, ast.Attribute) and target.attr == "__module__":
                lines.append(node.lineno)
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ClassDef):
            for stmt in node.body:
                if isinstance(stmt, ast.Assign) and any(
                    isinstance(t, ast.Name) and t.id == "__module__" for t in stmt.targets
                ):
                    lines.append(stmt.lineno)
    return sorted(set(lines))


def test_the_finder_finds_hand_written_module_names():
    source = (
        "class A:\n    __module__ = 'x'\n"
        "class B: pass\nB.__module__ = 'y'\n"
        "C = D.__module__ = 'z'\n"
        "name = B.__module__\n"
        "wrapper.__module__ = B.__module__\n"
    )
    assert _module_assignments(source) == [4, 5, 2] or sorted(_module_assignments(source)) == [
        2,
        4,
        5,
    ]


@pytest.mark.parametrize(
    "path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: str(p.relative_to(PACKAGE))
)
def test_no_module_names_a_public_home_by_hand(path):
    """One helper for public module names: a hand-written ``__module__ = ...`` elsewhere is
    a second way that skips the export check above."""
    if path == PACKAGE / "gating" / "exposed.py":
        return
    lines = _module_assignments(path.read_text())
    assert not lines, f"{path}:{lines}: use flashinfer.gating.exposed.exposed_in"
