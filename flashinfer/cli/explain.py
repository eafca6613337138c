"""``flashinfer explain``: what ``backend="auto"`` would pick for an op and some shapes, and
why: ``op.explain(...)`` on fake tensors (no memory, no kernel).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from typing import Any, TextIO

from flashinfer.cli.common import (
    DTYPES,
    PROG,
    TuningFileAction,
    UsageError,
    add_op_arguments,
    check_shape_exists,
    op_from_args,
)

__all__ = ["EXAMPLE", "add_explain_parser", "example_call_inputs"]

EXAMPLE = f"{PROG} explain mm --shapes 16x32x2048"
"""README's Quick look problem (``tests/test_explain_example.py`` runs it)."""


def _apis(name: str) -> dict[str, Any]:
    """The ops with backends, and ``name`` if it explains its calls itself (``explain_paths``)."""
    import importlib
    import types

    from flashinfer.api_modules import OPS
    from flashinfer.dispatch.backend_names import flashinfer_apis

    apis: dict[str, Any] = dict(flashinfer_apis())
    if name not in apis and name in OPS:
        op = getattr(importlib.import_module(OPS[name]), name, None)
        if callable(explain := getattr(op, "explain_paths", None)):
            apis[name] = types.SimpleNamespace(explain=explain)
    return apis


def _load_tuning_file(path: str, err: TextIO) -> None:
    import warnings

    from flashinfer.autotuner import TuningFileError, load_tuning_file

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            load_tuning_file(path)
        except TuningFileError as exc:  # not a file a tuning file can be: as autotune says
            raise UsageError(f"--tuning-file: {exc}") from None
        except OSError as exc:
            raise UsageError(f"--tuning-file {path}: {exc.strerror or exc}") from None
    for w in caught:
        print(f"{PROG} explain: warning: {w.message}", file=err)


def example_call_inputs(target: Any, dims: tuple[int, ...], dtype: Any, device: str) -> tuple:
    """The op's call inputs as ``autotune`` builds them, as fake tensors."""
    from flashinfer.torch_boundary import FakeTensorMode

    captured: list[tuple[tuple, dict]] = []
    try:
        with FakeTensorMode():
            target.call(
                lambda *args, **kwargs: captured.append((args, kwargs)), dims, dtype, device
            )
    except (RuntimeError, TypeError, OverflowError, ValueError) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise UsageError(
            f"--shapes: {'x'.join(map(str, dims))}: torch cannot describe these inputs ({first})"
        ) from None
    return captured[0]


def _cmd_explain(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    import torch

    from flashinfer.cli.autotune import parse_shapes
    from flashinfer.dispatch.backend_names import flashinfer_apis
    from flashinfer.testing import example_inputs_for

    name = args.op = op_from_args(
        args, lambda: "ops with backends: " + (", ".join(sorted(flashinfer_apis())) or "none")
    )
    apis = _apis(name)
    if name not in apis:
        known = ", ".join(sorted(apis)) or "none"
        raise UsageError(f"unknown op {name!r}; ops with backends: {known}")
    target = example_inputs_for(name)
    if target is None:
        raise UsageError(
            f"{name}: this command cannot build its inputs from a shape: the op declares no "
            "example inputs (declare_cases(..., examples=ExampleInputs(...)))"
        )
    shapes = parse_shapes(args.shapes, target)
    dtype = getattr(torch, args.dtype)
    for dims in shapes:
        check_shape_exists(dims, target, dtype)
    if args.device == "cuda" and not torch.cuda.is_available():
        raise UsageError("--device cuda: CUDA is not available on this machine; use --device cpu")
    inputs = [example_call_inputs(target, dims, dtype, args.device) for dims in shapes]
    if args.tuning_file is not None:
        _load_tuning_file(args.tuning_file, err)
    found = [apis[name].explain(*call_args, **kwargs) for call_args, kwargs in inputs]
    if args.json:
        docs = [
            {**dataclasses.asdict(e), "tactic": None if e.tactic is None else repr(e.tactic)}
            for e in found
        ]
        print(json.dumps(docs, indent=2), file=out)
    else:
        print("\n\n".join(str(e) for e in found), file=out)
    return 0


_EXAMPLE_HELP = (
    "example: README's Quick look problem (a 16x2048 times b 2048x32, float32),\n"
    "whose experimental backend can run but is left out by the gate:\n"
    f"  {EXAMPLE}\n"
    f"  {EXAMPLE.replace(' mm ', ' --op mm ')}   (the same)"
)


def _epilog() -> str:
    from flashinfer.cli.declarations import help_examples

    declared = help_examples(tunable_only=False)
    width = max(map(len, declared), default=0)
    shapes = "\n".join(
        f"  {name.ljust(width)}  --shapes {shape_help}, e.g. {example}"
        for name, (shape_help, example) in declared.items()
    )
    return f"ops and their --shapes:\n{shapes or '  none in this build'}\n\n{_EXAMPLE_HELP}"


class _HelpAction(argparse.Action):
    """``-h/--help`` that fills in the epilog first (reading the ops' declarations)."""

    def __init__(self, option_strings: Any, dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> None:
        parser.epilog = _epilog()
        parser.print_help()
        parser.exit()


def add_explain_parser(sub: Any) -> None:
    p = sub.add_parser(
        "explain",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        help="what backend='auto' would pick for an op and some shapes, and why",
        description=(
            "For each shape, describe inputs as `flashinfer autotune` builds them and print\n"
            "what a backend='auto' call would do: each backend's verdict (can it run; if it\n"
            "is not a candidate, what left it out), the candidates, the choice and where it\n"
            "comes from (heuristic, restriction, autotuner).  Name the op as `mm` or\n"
            "`--op mm`.  Runs the checks only, no kernel, on metadata only (fake tensors):\n"
            "a shape of any size allocates nothing; a shape no tensor can have is a usage\n"
            "error (exit 2)."
        ),
        epilog=_EXAMPLE_HELP,  # --help puts each op's --shapes format before it
        add_help=False,
    )
    p.add_argument("-h", "--help", action=_HelpAction, help="show this help message and exit")
    add_op_arguments(p, "to explain: an API with backends, e.g. mm or rmsnorm")
    p.add_argument(
        "--shapes",
        required=True,
        help="comma-separated shapes as for autotune, e.g. 16x32x2048 for mm (MxNxK: "
        "a is 16x2048, b 2048x32)",
    )
    p.add_argument(
        "--dtype", default="float32", choices=DTYPES, help="input dtype (default float32)"
    )
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda"), help="device (default cpu)")
    p.add_argument(
        "--tuning-file",
        "--cache",  # the old spelling (tuning_file.OLD_SPELLINGS), still accepted
        dest="tuning_file",
        action=TuningFileAction,
        metavar="FILE",
        help="load this tuning file first (see flashinfer autotune; --cache is the old "
        "spelling of --tuning-file, not to be given with it); only read: never written, "
        "locked nor created",
    )
    p.add_argument("--json", action="store_true", help="print JSON instead of tables")
    p.set_defaults(func=_cmd_explain)
