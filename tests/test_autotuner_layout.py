"""The autotuner package's house: imports flow one way, the router uses only the tuner's
documented routing interface, and the old module paths keep their names and classes.
"""

from __future__ import annotations

import ast
import pickle
from pathlib import Path
from typing import Any

import torch
from autotuner_fakes import FakeRunner, clean_tuner, make_op

import flashinfer.autotuner as autotuner
from flashinfer.autotuner import cache, router, tuner

PACKAGE = "flashinfer.autotuner"
PACKAGE_DIR = Path(autotuner.__file__).parent


def _imported_modules(path: Path) -> set[str]:
    """Every module of the package ``path`` imports anywhere (module level, in functions
    and under ``TYPE_CHECKING`` alike), as a dotted name."""
    imported = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            imported |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0:
                base = node.module or ""
            else:  # relative to the package (level 1) or above it
                parent = PACKAGE.rsplit(".", node.level - 1)[0] if node.level > 1 else PACKAGE
                base = f"{parent}.{node.module}" if node.module else parent
            imported.add(base)
            imported |= {f"{base}.{alias.name}" for alias in node.names}
    return {name for name in imported if name.startswith(PACKAGE + ".")}


def _import_graph() -> dict[str, set[str]]:
    modules = {f"{PACKAGE}.{p.stem}": p for p in PACKAGE_DIR.glob("*.py") if p.stem != "__init__"}
    return {name: _imported_modules(path) & set(modules) for name, path in modules.items()}


def _find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A cycle of ``graph`` as a path that ends where it starts, or None (iterative DFS)."""
    state: dict[str, str] = {}  # "open": on the current path, "done": fully explored
    for root in sorted(graph):
        if root in state:
            continue
        path, stack = [root], [iter(sorted(graph[root]))]
        state[root] = "open"
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                stack.pop()
                state[path.pop()] = "done"
            elif state.get(nxt) == "open":
                return path[path.index(nxt) :] + [nxt]
            elif nxt not in state:
                state[nxt] = "open"
                path.append(nxt)
                stack.append(iter(sorted(graph[nxt])))
    return None


def test_the_cycle_finder_finds_a_cycle():
    assert _find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None


def test_autotuner_modules_import_one_way():
    """No cycle among the package's modules, counting function-level and type-only imports
    (cache.py -> tuner.py -> cache.py and tuner.py <-> router.py were cycles)."""
    graph = _import_graph()
    assert f"{PACKAGE}.tuner" in graph[f"{PACKAGE}.cache"]  # the graph is really read
    assert _find_cycle(graph) is None


class InterfaceOnlyTuner:
    """Exactly :class:`~flashinfer.autotuner.router.RoutedTuner`, delegating to the real
    tuner: any other attribute the router reads raises ``AttributeError``."""

    __slots__ = ("_real", "route_memo", "memo_cap", "calls")

    def __init__(self, real: Any) -> None:
        self._real = real
        self.route_memo: dict = {}
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
        assert op(torch.zeros(4)) == ("b", None)  # learns the pattern (readable path)
        assert op(torch.zeros(4)) == ("b", None)  # memo miss: reads the choice
        assert op(torch.zeros(4)) == ("b", None)  # served by the generated lookup
        assert len(fake.route_memo) == 1
        assert op(torch.zeros(64)) == ("a", None)  # untuned: the first candidate's default
        assert {"choice", "default_backend", "run_candidates"} <= set(fake.calls)


def test_old_module_paths_keep_their_names():
    for module in (tuner, cache):
        for name in module.__all__:
            assert getattr(module, name) is getattr(autotuner, name), (module.__name__, name)
    from flashinfer.autotuner._time_candidates import one_line_reason as _one_line

    assert _one_line(ValueError("first\nsecond")) == "ValueError: first"


def test_public_classes_keep_their_module_and_pickle():
    homes = {
        "flashinfer.autotuner.tuner": ["Choice", "TacticFailure", "TuningRecord"],
        "flashinfer.autotuner.cache": ["AutotuneCacheWarning", "AutotuneCacheError", "LoadReport"],
    }
    for home, names in homes.items():
        for name in names:
            assert getattr(autotuner, name).__module__ == home, name
    choice = autotuner.Choice("torch", {"BLOCK": [64, 2]}, 1e-3)
    record = autotuner.TuningRecord(
        ("op", (), "cpu", None), choice, True, 2, (autotuner.TacticFailure("x", 1, "boom"),)
    )
    error = autotuner.AutotuneCacheError("no", path="p", reason="r")
    report = autotuner.LoadReport("p", 1, {"why": 2})
    for value in (choice, record, report):
        assert pickle.loads(pickle.dumps(value)) == value
    assert pickle.loads(pickle.dumps(error)).args == ("no",)
