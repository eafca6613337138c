"""The package's house: imports flow one way (no module reaches itself through the modules
it imports, counting imports inside functions and under ``TYPE_CHECKING``), and each module
has one job that its docstring states (the folder and facade rules: tests/test_layout.py)."""

from __future__ import annotations

import ast

from import_graph import find_cycle, import_graph, package_modules


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
