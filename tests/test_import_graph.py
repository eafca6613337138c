"""The package's house: imports flow one way (down the ordered layers of
tests/layout_rules.py's ``LAYERS``, and no module reaches itself through the modules it
imports, counting imports inside functions and under ``TYPE_CHECKING``), and each module has
one job that its docstring states (the folder and facade rules: tests/test_layout.py)."""

from __future__ import annotations

import ast

import pytest
from import_graph import find_cycle, import_graph, imported_modules, package_modules
from layout_rules import LAYERS, layer_of, layer_problems

from flashinfer.api_modules import API_MODULES


def test_the_cycle_finder_finds_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None
    assert find_cycle({"a": {"a"}}) == ["a", "a"]


def test_the_graph_counts_relative_function_level_and_type_only_imports():
    graph = import_graph()
    # Relative, at module level: the dispatcher's op imports its emitter.
    assert "flashinfer.dispatch.emitter" in graph["flashinfer.dispatch.op"]
    # Inside a function: rmsnorm's Triton backend loads its kernel on first use.
    assert "flashinfer.kernels.rmsnorm_triton" in graph["flashinfer.norm"]
    # ``from pkg import submodule`` is an edge to the submodule, not to pkg's __init__.
    assert "flashinfer.autotuner.distributed" in graph["flashinfer.autotuner.tuner"]
    assert "flashinfer.autotuner" not in graph["flashinfer.autotuner.tuner"]
    # ``from pkg import name`` is an edge to pkg: a kernel imports its package's helpers.
    assert "flashinfer.kernels" in graph["flashinfer.kernels.mm_triton"]
    # Type-only: the package's names for type checkers.
    assert "flashinfer.gemm" in graph["flashinfer"]


def test_no_module_of_the_package_imports_in_a_cycle():
    """A cycle held apart only by a function-level import breaks when a tidy-imports pass
    hoists it; the module later in the chain must not reach back."""
    cycle = find_cycle(import_graph())
    assert cycle is None, " -> ".join(cycle)


def test_every_module_says_its_job():
    """One concept per module, stated in its docstring.  Size is no law: around 600 lines is
    a smell worth a look (is it one concept?), not a reason to split by line count; the
    folder and facade rules are tests/test_layout.py's."""
    silent = [
        name
        for name, path in package_modules().items()
        if not ast.get_docstring(ast.parse(path.read_text()))
    ]
    assert not silent, f"add a docstring that says the module's job: {silent}"


def _hidden_imports(source: str) -> list[str]:
    """Package modules reached by name at run time (``importlib.import_module("flashinfer.x")``,
    ``sys.modules["flashinfer.x"]``, ``sys.modules.get("flashinfer")``): edges the import
    graph cannot see."""
    found = []
    for node in ast.walk(ast.parse(source)):
        target = None
        if isinstance(node, ast.Call) and node.args:
            func = ast.unparse(node.func)
            if func.endswith(("import_module", "sys.modules.get", "__import__")):
                target = node.args[0]
        elif isinstance(node, ast.Subscript) and ast.unparse(node.value) == "sys.modules":
            target = node.slice
        if isinstance(target, ast.Constant) and str(target.value).split(".")[0] == "flashinfer":
            found.append(target.value)
    return found


def test_the_hidden_import_finder_finds_them():
    source = (
        "import importlib, sys\n"
        "importlib.import_module('flashinfer.autotuner._choice_note')\n"
        "sys.modules.get('flashinfer.autotuner.tuner')\n"
        "sys.modules['flashinfer'].__version__\n"
        "sys.modules.get(name)\n"
        "importlib.import_module('torch')\n"
    )
    assert _hidden_imports(source) == [
        "flashinfer.autotuner._choice_note",
        "flashinfer.autotuner.tuner",
        "flashinfer",
    ]


def test_no_module_reaches_another_by_name_at_run_time():
    """Looking a module up by name hides an import from the graph above (the dispatcher
    once asked ``sys.modules`` for the tuner, which imports the dispatcher).  A lower module
    that needs something from a higher one gets it installed (the autotuner's
    ``TunerView``), or the fact moves below both (``_version``, ``api_modules``)."""
    hidden = {
        name: found
        for name, path in package_modules().items()
        if (found := _hidden_imports(path.read_text()))
    }
    assert not hidden, hidden


def test_the_dispatcher_never_imports_the_autotuner():
    graph = import_graph()
    for module, imported in graph.items():
        if module.startswith("flashinfer.dispatch"):
            assert not {m for m in imported if m.startswith("flashinfer.autotuner")}, module


def test_imports_point_down_the_layers():
    """settings -> torch boundary -> leaves (codegen, kernels, the version, the op list) ->
    gating -> dispatch -> autotuner -> testing -> facades -> ops -> cli -> entry points: a
    module imports only from its own layer or a lower one, and every module is in a layer."""
    problems = layer_problems(import_graph(), API_MODULES)
    assert not problems, "\n".join(problems)


def test_codegen_is_a_leaf_that_gating_and_dispatch_use():
    graph = import_graph()
    codegen = {m for m in graph if m.startswith("flashinfer.codegen")}
    assert codegen >= {"flashinfer.codegen.compiler", "flashinfer.codegen.generated"}
    assert all(imported <= codegen for m in codegen for imported in [graph[m]])
    users = {m.split(".")[1] for m, imported in graph.items() if imported & codegen} - {"codegen"}
    assert users >= {"gating", "dispatch"}


def test_the_layers_place_each_module_by_its_longest_prefix():
    assert layer_of("flashinfer", API_MODULES)[1] == "entry points"
    assert layer_of("flashinfer.experimental.__main__", API_MODULES)[1] == "entry points"
    assert layer_of("flashinfer.experimental.a_feature.support", API_MODULES)[1] == "ops"
    assert layer_of("flashinfer.gemm", API_MODULES)[1] == "ops"
    assert layer_of("flashinfer.api_logging", API_MODULES)[1] == "facades"
    assert layer_of("flashinfer.gating.op_registry", API_MODULES)[1] == "gating"
    assert layer_of("flashinfer.newfolder.job", API_MODULES) is None
    assert [name for name, _ in LAYERS].index("gating") < [n for n, _ in LAYERS].index("dispatch")


_BACK_EDGES = {
    "module level": "from flashinfer.dispatch.op import registered_ops\n",
    "function level": "def f():\n    from flashinfer.autotuner import tuner\n    return tuner\n",
    "type checking": (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from flashinfer.dispatch.op import BackendRequirementOp\n"
    ),
}


@pytest.mark.parametrize("where", sorted(_BACK_EDGES))
def test_a_back_edge_fails_naming_both_modules_and_the_rule(tmp_path, where):
    """A synthetic gating module that imports up (dispatch, the autotuner), read from source
    as the real graph is: the problem names the importer, the imported module and the rule."""
    module = tmp_path / "flashinfer" / "gating" / "newjob.py"
    module.parent.mkdir(parents=True)
    module.write_text('"""A new job."""\n' + _BACK_EDGES[where])
    modules = {**package_modules(), "flashinfer.gating.newjob": module}
    imported = imported_modules(module, modules, "flashinfer.gating.newjob")
    graph = {**import_graph(), "flashinfer.gating.newjob": imported}
    (problem,) = layer_problems(graph, API_MODULES)
    target = "flashinfer.autotuner.tuner" if where == "function level" else "flashinfer.dispatch.op"
    layer = target.split(".")[1]
    assert problem.startswith(f"flashinfer.gating.newjob (gating) imports {target} ({layer}): ")
    assert (
        "layers point one way (settings -> torch boundary -> leaves -> gating -> dispatch -> "
        in problem
    )


def test_a_leaf_importing_another_leaf_fails_and_the_settings_import_nothing():
    graph = {**import_graph(), "flashinfer.codegen.compiler": {"flashinfer.kernels.availability"}}
    (problem,) = layer_problems(graph, API_MODULES)
    assert problem == (
        "flashinfer.codegen.compiler (leaves) imports flashinfer.kernels.availability: "
        "flashinfer.codegen is a leaf and imports nothing else of flashinfer"
    )
    graph = {**import_graph(), "flashinfer.settings": {"flashinfer.kernels.availability"}}
    (problem,) = layer_problems(graph, API_MODULES)
    assert problem.startswith("flashinfer.settings (settings) imports flashinfer.kernels")


def test_a_module_in_no_layer_fails():
    graph = {**import_graph(), "flashinfer.newfolder.job": set()}
    (problem,) = layer_problems(graph, API_MODULES)
    assert problem.startswith("flashinfer.newfolder.job is in no layer: add its folder to ")
