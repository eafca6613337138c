"""The autotuner package's house: imports flow one way, the router uses only the tuner's
documented routing interface, and the old module paths keep their names and classes.
"""

from __future__ import annotations

import pickle
from typing import Any

import torch
from autotuner_fakes import FakeRunner, clean_tuner, make_op
from import_graph import find_cycle, import_graph

import flashinfer.autotuner as autotuner
from flashinfer.autotuner import router, tuner, tuning_file

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


class InterfaceOnlyTuner:
    """Exactly :class:`~flashinfer.autotuner.router.RoutedTuner`, delegating to the real
    tuner: any other attribute the router reads raises ``AttributeError``."""

    __slots__ = ("_real", "route_memo", "route_epoch", "memo_cap", "calls", "__weakref__")

    def __init__(self, real: Any) -> None:
        self._real = real
        self.route_memo: dict = {}
        self.route_epoch = object()
        self.memo_cap = 4
        self.calls: list[str] = []

    def choice(self, key):
        self.calls.append("choice")
        return self._real.choice(key)

    def default_backend(self, op, runners, candidates):
        self.calls.append("default_backend")
        return self._real.default_backend(op, runners, candidates)

    def run_candidates(self, op, runners, candidates, inputs):
        self.calls.append("run_candidates")
        return self._real.run_candidates(op, runners, candidates, inputs)


def test_the_router_uses_only_the_documented_tuner_interface():
    with clean_tuner(warmup=0, repeat=1) as real:
        runners = {"a": FakeRunner("a", [1, 2]), "b": FakeRunner("b")}
        op = make_op(runners, direct=False)
        key = autotuner.make_key(op.api_key, (torch.zeros(4),))
        real.set_choice(key, autotuner.Choice("b", None, 1e-6))
        fake = InterfaceOnlyTuner(real)
        router.Router(fake, op, runners).install()
        assert op(torch.zeros(4)) == ("b", None)  # memo miss: reads the choice
        assert op(torch.zeros(4)) == ("b", None)  # served from the memo
        assert len(fake.route_memo) == 1
        assert op(torch.zeros(64)) == ("a", None)  # untuned: the first candidate's default
        with autotuner.autotune():  # tuning: the readable path
            assert op(torch.zeros(4)) == ("b", None)
        assert {"choice", "default_backend", "run_candidates"} <= set(fake.calls)


def test_old_module_paths_keep_their_names():
    for module in (tuner, tuning_file):
        for name in module.__all__:
            assert getattr(module, name) is getattr(autotuner, name), (module.__name__, name)
    from flashinfer.autotuner.candidate_timing import one_line_reason as _one_line

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
