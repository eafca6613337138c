"""The dispatcher's public import paths and the one-way imports of its internals.

``flashinfer.backend_dispatch`` is the public home of the dispatcher's names (and
``flashinfer.utils`` upstream's path to them); the work lives in ``flashinfer.dispatch``,
one job per module.  These tests pin what users and the rest of the package rely on.
"""

from __future__ import annotations

import pickle

import pytest
from import_graph import find_cycle, import_graph

import flashinfer
import flashinfer.backend_dispatch as backend_dispatch
import flashinfer.utils as utils
from flashinfer.backend_dispatch import BackendSupportedError, UnsupportedInputsError


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


_PACKAGE = "flashinfer.dispatch"
_FACADES = {"flashinfer.backend_dispatch", "flashinfer.utils"}


def test_internal_modules_import_one_way():
    """No internal module imports the public facade, and their imports of each other form
    no cycle (function-level imports included): each reads without the ones after it."""
    graph: dict[str, set[str]] = {}
    for module, imported in import_graph().items():
        if not module.startswith(f"{_PACKAGE}."):
            continue
        assert not imported & _FACADES, f"{module} imports the facade"
        graph[module] = {m for m in imported if m.startswith(f"{_PACKAGE}.")}
    assert {f"{_PACKAGE}.{m}" for m in ("capability", "plan", "selection", "emitter", "op")} <= set(
        graph
    )
    assert find_cycle(graph) is None, find_cycle(graph)
