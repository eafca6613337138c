"""The house's rules hold for the package, and each rule catches what it is for.

Each rule (tests/layout_rules.py) runs on the real package, where it must find nothing, and
on a fixture that breaks it, where it must say what is wrong and what to do: a new module in
the root, a facade import from the machinery, a definition in a facade, and an op module left
out of the one list.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from import_graph import PACKAGE_DIR, import_graph, imported_modules, package_modules
from layout_rules import (
    FACADES,
    ROOT_LIMIT,
    ROOT_MODULES,
    defines_an_api,
    facade_definition_problems,
    facade_import_problems,
    private_import_problems,
    root_problems,
    top_level_modules,
    unlisted_api_modules,
)

import flashinfer
from flashinfer.api_modules import API_MODULES, OPS


def _sources() -> dict[str, str]:
    return {name: path.read_text() for name, path in package_modules().items()}


def _packages() -> set[str]:
    return {name for name, path in package_modules().items() if path.name == "__init__.py"}


# -- the real package ------------------------------------------------------------------------


def test_the_root_holds_the_public_surface_and_the_listed_ops():
    modules = package_modules()
    problems = root_problems(top_level_modules(modules), _packages(), API_MODULES)
    assert not problems, "\n".join(problems)
    assert len(ROOT_MODULES) <= ROOT_LIMIT


def test_the_machinery_never_imports_a_facade():
    problems = facade_import_problems(import_graph(), API_MODULES)
    assert not problems, "\n".join(problems)


def test_facades_only_reexport():
    problems = facade_definition_problems(_sources())
    assert not problems, "\n".join(problems)


def test_every_module_that_defines_an_api_is_in_the_one_list():
    problems = unlisted_api_modules(_sources(), API_MODULES)
    assert not problems, "\n".join(problems)
    # ...and the list names only modules that do define one (a stale line fails too).
    sources = _sources()
    assert all(defines_an_api(sources[m]) for m in API_MODULES), API_MODULES


def test_the_lazy_names_come_from_the_one_list():
    for name, module in OPS.items():
        assert flashinfer._LAZY[name] == module
        assert name in flashinfer.__all__


def test_the_type_checkers_names_are_the_one_list():
    """Static tools cannot run code: they read the ops' block of ``__init__.py`` as imports,
    and :data:`OPS` is that block read as text, so the two cannot disagree."""
    tree = ast.parse((PACKAGE_DIR / "__init__.py").read_text())
    blocks = [
        n for n in tree.body if isinstance(n, ast.If) and ast.unparse(n.test) == "TYPE_CHECKING"
    ]
    typed = {
        alias.asname: node.module
        for node in blocks[-1].body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    assert typed == OPS
    assert list(OPS) and set(API_MODULES) == set(OPS.values())


@pytest.mark.parametrize(
    ("block", "problem"),
    [
        ("", "has no '# The one list of ops:' block"),
        ("# The one list of ops: x\nx = 1\n", "has no `if TYPE_CHECKING:`"),
        (
            "# The one list of ops: x\nif TYPE_CHECKING:\n"
            "    from flashinfer.norm import rmsnorm\n",
            "is not an op's line",
        ),
        (
            "# The one list of ops: x\nif TYPE_CHECKING:\n    from flashinfer.a import b as c\n",
            "is not an op's line",
        ),
    ],
)
def test_a_malformed_ops_block_is_refused_naming_the_line(block, problem):
    from flashinfer.api_modules import read_ops

    with pytest.raises(ValueError, match=re.escape(problem)):
        read_ops("import x\n" + block)


def test_the_ops_block_reads_in_order_and_stops_at_the_block_end():
    from flashinfer.api_modules import read_ops

    source = (
        "x = 1\n# The one list of ops: one line each\nif TYPE_CHECKING:\n"
        "    from flashinfer.b import zed as zed\n\n    from flashinfer.a.b import ab as ab\n"
        "y = 2\n    from flashinfer.c import c as c\n"
    )
    assert list(read_ops(source).items()) == [("zed", "flashinfer.b"), ("ab", "flashinfer.a.b")]


def test_every_op_with_backends_declares_its_cli_inputs():
    """``flashinfer autotune`` and ``flashinfer explain`` build an op's inputs from what the
    op declares (``declare_cases(..., examples=ExampleInputs(...))``): an op of the one list
    with backends but without them would be missing from both commands, silently; and no
    table in ``flashinfer/cli/`` names an op."""
    from flashinfer.autotuner import AutoTuner
    from flashinfer.testing import EXAMPLE_INPUTS

    flashinfer.load_all_apis()
    with_backends = {n for n in OPS if hasattr(getattr(flashinfer, n), "dispatcher")}
    assert with_backends, "no op of the one list has backends"
    missing = with_backends - set(EXAMPLE_INPUTS)
    assert not missing, f"declare example inputs (declare_cases(..., examples=)) for {missing}"
    tunable = {
        op.api_name
        for op, _ in AutoTuner.get().registered().values()
        if op.api_key.rpartition(".")[0] in API_MODULES
    }
    assert tunable, "no op of the one list is registered with the autotuner"
    assert tunable <= set(EXAMPLE_INPUTS)
    cli = Path(flashinfer.__file__).parent / "cli"
    for path in sorted(cli.glob("*.py")):
        for line in path.read_text().splitlines():
            keys = re.findall(r"""["']([a-z_]+)["']\s*:""", line)
            assert not set(keys) & set(OPS), f"{path.name} names an op in a table: {line.strip()}"


def test_no_module_imports_a_private_name_of_another():
    problems = private_import_problems(_sources(), _packages())
    assert not problems, "\n".join(problems)


# -- fixtures: each rule catches what it is for ---------------------------------------------


def test_a_new_root_module_is_caught():
    root = [*ROOT_MODULES, *API_MODULES, "flashinfer.gemm", "flashinfer.helpers"]
    problems = root_problems(root, {"flashinfer", "flashinfer.gemm"}, API_MODULES)
    assert len(problems) == 1
    assert problems[0].startswith("flashinfer.helpers: a new module in the package root")
    assert "flashinfer/api_modules.py" in problems[0]


def test_a_facade_import_from_the_machinery_is_caught(tmp_path):
    """Read from source as the real graph is: a dispatcher module importing the upstream
    path, at function level."""
    module = tmp_path / "flashinfer" / "dispatch" / "newjob.py"
    module.parent.mkdir(parents=True)
    module.write_text(
        '"""A new job."""\n\ndef f():\n    from flashinfer.api_logging import flashinfer_api\n'
    )
    modules = {**package_modules(), "flashinfer.dispatch.newjob": module}
    imported = imported_modules(module, modules, "flashinfer.dispatch.newjob")
    graph = {**import_graph(), "flashinfer.dispatch.newjob": imported}
    problems = facade_import_problems(graph, API_MODULES)
    assert problems == [
        "flashinfer.dispatch.newjob imports the facade flashinfer.api_logging: import the "
        "module that defines the name (the facade's own import line says which)"
    ]
    # An op module and an experimental feature may: they use the public surface.
    graph = {**import_graph(), "flashinfer.experimental.feat.support": {"flashinfer.api_logging"}}
    assert not facade_import_problems(graph, API_MODULES)


@pytest.mark.parametrize(
    "code, what",
    [
        ("def helper():\n    return 1\n", "helper"),
        ("class Thing:\n    pass\n", "Thing"),
        ("LIMIT = 3\n", "LIMIT"),
        ("print('hi')\n", "line 3: print('hi')"),
    ],
)
def test_a_definition_in_a_facade_is_caught(code, what):
    facade = "flashinfer.api_logging"
    source = '"""Facade."""\n\n' + code
    problems = facade_definition_problems({facade: source})
    assert problems == [
        f"{facade} defines {what}: a facade only re-exports; move the code to the module "
        "of its job and import it here"
    ]


def test_what_a_facade_may_hold():
    source = (
        '"""Facade."""\n'
        "from __future__ import annotations\n"
        "from typing import TYPE_CHECKING\n"
        "from flashinfer.gating.gate import ALLOW_EXPERIMENTAL_AUTO_BACKENDS_ENV\n"
        '__all__ = ["ALLOW_EXPERIMENTAL_AUTO_BACKENDS_ENV"]\n'
        "_OLD_NAME = ALLOW_EXPERIMENTAL_AUTO_BACKENDS_ENV\n"
        "_typed: set[str]\n"
        "if TYPE_CHECKING:\n"
        "    from flashinfer.gating.gate import gate_fast_read\n"
    )
    assert facade_definition_problems({"flashinfer.utils": source}) == []
    assert set(FACADES) >= {"flashinfer.utils", "flashinfer.api_logging"}


def test_an_op_module_missing_from_the_list_is_caught():
    source = (
        '"""A new op."""\n'
        "from flashinfer.api_logging import flashinfer_api\n"
        "from flashinfer.backend_dispatch import backend_requirement\n\n"
        "@flashinfer_api\n"
        "@backend_requirement([])\n"
        "def unlisted(x, backend='auto'):\n"
        "    return x\n"
    )
    sources = {**_sources(), "flashinfer.unlisted_op": source}
    problems = unlisted_api_modules(sources, API_MODULES)
    assert problems == [
        "flashinfer.unlisted_op defines a public API but is not in the one list of ops: add its "
        "line, `from <module> import <op> as <op>`, to the ops' block at the end of "
        "flashinfer/__init__.py (OPS, conformance, listings and `flashinfer backends` read it)"
    ]
    assert not unlisted_api_modules(sources, (*API_MODULES, "flashinfer.unlisted_op"))
    # An experimental API marked with the alias counts as well.
    marked = '"""x"""\n@experimental_api(owner="@a")\ndef f():\n    pass\n'
    assert defines_an_api(marked)
    assert not defines_an_api('"""x"""\n# @flashinfer_api in a comment\ndef f():\n    pass\n')


@pytest.mark.parametrize(
    ("module", "code", "caught"),
    [
        (
            "flashinfer.cli.explain",
            "from flashinfer.cli.common import _table",
            "private name _table",
        ),
        ("flashinfer.cli.explain", "from flashinfer.cli.common import (x, _y as y)", "_y"),
        (
            "flashinfer.cli.explain",
            "from flashinfer.autotuner._stats import spread",
            "private module",
        ),
        ("flashinfer.cli.explain", "import flashinfer.autotuner._stats", "private module"),
        ("flashinfer.autotuner.tuner", "from flashinfer.autotuner._stats import spread", None),
        ("flashinfer.autotuner", "from flashinfer.autotuner._stats import spread", None),
        ("flashinfer.cli.explain", "from flashinfer.cli.common import __version__", None),
        ("flashinfer.cli.explain", "from flashinfer.cli.common import table", None),
        ("flashinfer.cli.explain", "from torch._subclasses import FakeTensorMode", None),
    ],
)
def test_a_private_import_across_modules_is_caught(module, code, caught):
    packages = {"flashinfer.autotuner"}
    problems = private_import_problems({module: code}, packages)
    if caught is None:
        assert problems == []
    else:
        assert len(problems) == 1 and caught in problems[0], problems
        assert module in problems[0] and "public" in problems[0]
