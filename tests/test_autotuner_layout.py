"""The autotuner package's house: imports flow one way, and the old module paths keep their
names and classes.
"""

from __future__ import annotations

import pickle

from import_graph import find_cycle, import_graph

import flashinfer.autotuner as autotuner
from flashinfer.autotuner import tuner, tuning_file

PACKAGE = "flashinfer.autotuner"


def test_autotuner_modules_import_one_way():
    """No cycle among the package's modules, counting function-level and type-only imports
    (the tuning file's module -> tuner.py -> it, and tuner.py <-> router.py were cycles);
    the package-wide rule is tests/test_import_graph.py."""
    graph = import_graph()
    assert f"{PACKAGE}.tuner" in graph[f"{PACKAGE}.tuning_file"]  # the graph is really read
    autotuner_only = {
        m: {n for n in edges if n.startswith(PACKAGE + ".")}
        for m, edges in graph.items()
        if m.startswith(PACKAGE + ".")
    }
    assert find_cycle(autotuner_only) is None, find_cycle(autotuner_only)


def test_old_module_paths_keep_their_names():
    for module in (tuner, tuning_file):
        for name in module.__all__:
            assert getattr(module, name) is getattr(autotuner, name), (module.__name__, name)
    from flashinfer.autotuner.timing import one_line_reason as _one_line

    assert _one_line(ValueError("first\nsecond")) == "ValueError: first"


def test_public_classes_keep_their_module_and_pickle():
    homes = {
        "flashinfer.autotuner.tuner": ["Choice", "TacticFailure", "TuningRecord"],
        "flashinfer.autotuner.tuning_file": ["TuningFileWarning", "TuningFileError", "LoadReport"],
    }
    for home, names in homes.items():
        for name in names:
            assert getattr(autotuner, name).__module__ == home, name
    choice = autotuner.Choice("torch", {"BLOCK": [64, 2]}, 1e-3)
    record = autotuner.TuningRecord(
        ("op", (), "cpu", None), choice, True, 2, (autotuner.TacticFailure("x", 1, "boom"),)
    )
    error = autotuner.TuningFileError("no", path="p", reason="r")
    report = autotuner.LoadReport("p", 1, {"why": 2})
    for value in (choice, record, report):
        assert pickle.loads(pickle.dumps(value)) == value
    assert pickle.loads(pickle.dumps(error)).args == ("no",)
