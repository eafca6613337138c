"""What the op modules declare for the commands' help, read from their source.

``flashinfer autotune --help`` lists the tunable ops with their shape format, and ``flashinfer
explain --help`` every op's shape format.  Those come from each op's own declaration
(``declare_cases(op, ..., examples=ExampleInputs(shape_help=..., example=...))`` and
``AutoTuner.register(op, ...)``), but importing an op module imports torch, which takes
seconds: so the help reads the declarations from the modules' source (the one list of ops
says which modules), and imports nothing.  ``tests/test_cli_help_imports.py`` holds what
this reads to what the imported modules declare, op by op.
"""

from __future__ import annotations

import ast
import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path

__all__ = ["DeclaredExamples", "declared_examples", "help_examples"]


@dataclass(frozen=True)
class DeclaredExamples:
    """One op's declared example inputs, as its source spells them."""

    op: str
    shape_help: str
    example: str
    tunable: bool
    """Whether the module registers the op with the autotuner."""


def _called(node: ast.AST, name: str) -> bool:
    """Whether ``node`` is a call of ``name`` (``name(...)`` or ``x.name(...)``)."""
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    return (isinstance(func, ast.Name) and func.id == name) or (
        isinstance(func, ast.Attribute) and func.attr == name
    )


def _literal(call: ast.Call, keyword: str) -> str | None:
    for kw in call.keywords:
        if kw.arg == keyword:
            try:
                value = ast.literal_eval(kw.value)
            except ValueError:
                return None
            return value if isinstance(value, str) else None
    return None


def _read_module(source: str) -> tuple[dict[str, tuple[str, str]], set[str]]:
    """``(op -> (shape_help, example), ops registered with the autotuner)`` of one module."""
    examples: dict[str, tuple[str, str]] = {}
    tunable: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        first = node.args[0]
        if not isinstance(first, ast.Name):
            continue
        if _called(node, "declare_cases"):
            for kw in node.keywords:
                if kw.arg == "examples" and _called(kw.value, "ExampleInputs"):
                    assert isinstance(kw.value, ast.Call)
                    shape_help = _literal(kw.value, "shape_help")
                    example = _literal(kw.value, "example")
                    if shape_help is not None and example is not None:
                        examples[first.id] = (shape_help, example)
        elif _called(node, "register") and isinstance(node.func, ast.Attribute):
            owner = node.func.value
            if isinstance(owner, ast.Name) and owner.id == "AutoTuner":
                tunable.add(first.id)
    return examples, tunable


def declared_examples() -> dict[str, DeclaredExamples]:
    """Every op of the one list whose module declares example inputs, in the list's order
    (read from source; a module missing from the build is skipped)."""
    from flashinfer.api_modules import OPS

    found: dict[str, DeclaredExamples] = {}
    for op, module in OPS.items():
        spec = importlib.util.find_spec(module)
        if spec is None or spec.origin is None:
            continue
        examples, tunable = _read_module(Path(spec.origin).read_text(encoding="utf-8"))
        if op in examples:
            shape_help, example = examples[op]
            found[op] = DeclaredExamples(op, shape_help, example, op in tunable)
    return found


def help_examples(tunable_only: bool) -> dict[str, tuple[str, str]]:
    """``op -> (shape_help, example)`` for a command's help: what the ops registered in this
    process declare when torch and the autotuner are imported already (nothing to save,
    and ops registered at run time count too), else what :func:`declared_examples` reads
    from source.  ``tunable_only``: the ops registered with the autotuner."""
    if "torch" in sys.modules and "flashinfer.autotuner" in sys.modules:
        from flashinfer.api_modules import load_api_modules
        from flashinfer.testing.examples import EXAMPLE_INPUTS

        load_api_modules()
        if tunable_only:
            from flashinfer.cli.autotune_run import tunable_ops

            targets = [target for _, target in tunable_ops().values()]
        else:
            targets = list(EXAMPLE_INPUTS.values())
        return {t.op_name: (t.shape_help, t.example) for t in targets}
    return {
        name: (d.shape_help, d.example)
        for name, d in declared_examples().items()
        if d.tunable or not tunable_only
    }
