"""The ops' ``--shapes`` formats for ``autotune --help`` and ``explain --help``, read from
their modules' source (``ExampleInputs(...)``, ``AutoTuner.register``): importing an op would
import torch.
"""

from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path
from typing import NamedTuple

__all__ = ["DeclaredExamples", "declared_examples", "help_examples"]


class DeclaredExamples(NamedTuple):
    """One op's example inputs as its source spells them (``tunable``: autotuner-registered)."""

    op: str
    shape_help: str
    example: str
    tunable: bool


def _call_name(node: ast.AST) -> str | None:  # name(...) or x.name(...)
    if not isinstance(node, ast.Call):
        return None
    func = node.func
    return func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)


def declared_examples() -> dict[str, DeclaredExamples]:
    """Every op of the one list whose module declares example inputs, in its order."""
    from flashinfer.api_modules import OPS

    found: dict[str, DeclaredExamples] = {}
    for op, module in OPS.items():
        spec = importlib.util.find_spec(module)
        if spec is None or spec.origin is None:
            continue
        examples: dict[str, tuple[str, str]] = {}
        tunable: set[str] = set()
        for node in ast.walk(ast.parse(Path(spec.origin).read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call) or not node.args:
                continue
            first = node.args[0]
            if not isinstance(first, ast.Name):
                continue
            if _call_name(node) == "declare_cases":
                for kw in node.keywords:
                    if kw.arg == "examples" and _call_name(kw.value) == "ExampleInputs":
                        assert isinstance(kw.value, ast.Call)
                        given = {
                            k.arg: k.value.value
                            for k in kw.value.keywords
                            if isinstance(k.value, ast.Constant) and isinstance(k.value.value, str)
                        }
                        if "shape_help" in given and "example" in given:
                            examples[first.id] = (given["shape_help"], given["example"])
            elif _call_name(node) == "register" and isinstance(node.func, ast.Attribute):
                if isinstance(node.func.value, ast.Name) and node.func.value.id == "AutoTuner":
                    tunable.add(first.id)
        if op in examples:
            found[op] = DeclaredExamples(op, *examples[op], op in tunable)
    return found


def help_examples(tunable_only: bool) -> dict[str, tuple[str, str]]:
    """``op -> (shape_help, example)``: what the ops registered in this process declare once
    torch and the autotuner are imported (fakes included), else :func:`declared_examples`."""
    if "torch" in sys.modules and "flashinfer.autotuner" in sys.modules:
        from flashinfer.api_modules import load_api_modules
        from flashinfer.testing.examples import EXAMPLE_INPUTS

        load_api_modules()
        if tunable_only:
            from flashinfer.cli.autotune_report import tunable_ops

            targets = [target for _, target in tunable_ops().values()]
        else:
            targets = list(EXAMPLE_INPUTS.values())
        return {t.op_name: (t.shape_help, t.example) for t in targets}
    return {
        name: (d.shape_help, d.example)
        for name, d in declared_examples().items()
        if d.tunable or not tunable_only
    }
