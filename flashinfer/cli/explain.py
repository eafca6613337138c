"""``flashinfer explain``: what ``backend="auto"`` would pick for an op and some shapes, and why.

The op is named either way, as for ``flashinfer autotune``: ``flashinfer explain mm ...`` or
``flashinfer explain --op mm ...``.  The help's example (:data:`EXAMPLE`) is README's Quick
look problem, so it shows what the Quick look says: the experimental backend can run and the
gate leaves it out (``tests/test_explain_example.py`` runs it and compares).

For each shape it describes inputs the way ``flashinfer autotune`` builds them (same shape
syntax), then prints ``op.explain(...)``: per backend whether it can run and what left it out
(capability, support check, the experimental gate, a restriction, the heuristic), the
candidates, the choice and where it comes from.  Nothing but the checks runs: no kernel.

It reasons on metadata: the inputs are fake tensors (``FakeTensorMode``: shape, strides,
dtype and device, no storage), so a problem of any size costs no memory.  Checks that read
only metadata (every shipped one) decide as on real tensors; a backend whose checks read
tensor data is reported as not decided (see :mod:`flashinfer.dispatch.explain`).  A shape no
tensor can have (a dimension past ``2**63 - 1``, or a tensor of the problem with more bytes
than that) is a usage error, exit 2.
``FLASHINFER_BACKENDS`` and ``FLASHINFER_ALLOW_EXPERIMENTAL_AUTO_BACKENDS`` apply as they
would to the program; ``--tuning-file`` loads a tuning file first, to show what a process
that loaded it runs.
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

__all__ = [
    "EXAMPLE",
    "add_explain_parser",
    "example_call_inputs",
]

EXAMPLE = f"{PROG} explain mm --shapes 16x32x2048"
"""The example in the help: README's Quick look problem, ``mm`` of a ``16x2048`` and a
``2048x32`` float32 tensor (``--shapes`` is ``MxNxK``), the one whose experimental backend
the Quick look shows left out of ``"auto"`` by the gate."""


def _known_ops() -> str:
    from flashinfer.dispatch.backend_names import flashinfer_apis

    return "ops with backends: " + (", ".join(sorted(flashinfer_apis())) or "none")


def _resolve(name: str) -> tuple[Any, Any]:
    """The op named ``name`` and how to build its inputs from a shape."""
    from flashinfer.dispatch.backend_names import flashinfer_apis
    from flashinfer.testing import example_inputs_for

    apis = dict(flashinfer_apis())
    op = _op_without_backends(name) if name not in apis else None
    if op is not None:  # an op whose module explains it (no backends to choose between)
        apis[name] = op
    known = ", ".join(sorted(apis)) or "none"
    if name not in apis:
        raise UsageError(f"unknown op {name!r}; ops with backends: {known}")
    target = example_inputs_for(name)
    if target is None:
        raise UsageError(
            f"{name}: this command cannot build its inputs from a shape: the op declares no "
            "example inputs (declare_cases(..., examples=ExampleInputs(...)))"
        )
    return apis[name], target


def _op_without_backends(name: str) -> Any:
    """The op of the one list named ``name`` that has no backends but explains its calls
    itself (an ``explain_paths`` attribute, returning a ``PathExplanation``), as something
    with the ``explain`` of an op with backends; or None."""
    import importlib
    import types

    from flashinfer.api_modules import OPS

    if name not in OPS:
        return None
    explain = getattr(
        getattr(importlib.import_module(OPS[name]), name, None), "explain_paths", None
    )
    return types.SimpleNamespace(explain=explain) if callable(explain) else None


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


def _as_dict(explanation: Any) -> dict[str, Any]:
    doc = dataclasses.asdict(explanation)
    doc["tactic"] = repr(explanation.tactic) if explanation.tactic is not None else None
    return doc


def example_call_inputs(target: Any, dims: tuple[int, ...], dtype: Any, device: str) -> tuple:
    """The inputs the command's call of the op takes, as fake tensors: built by the target
    (as ``autotune`` builds them) inside ``FakeTensorMode``, so nothing of the problem's
    size is allocated.  ``UsageError`` if torch cannot describe them."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    captured: list[tuple[tuple, dict]] = []

    def capture(*args: Any, **kwargs: Any) -> None:
        captured.append((args, kwargs))

    try:
        with FakeTensorMode():
            target.call(capture, dims, dtype, device)
    except (RuntimeError, TypeError, OverflowError, ValueError) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise UsageError(
            f"--shapes: {'x'.join(map(str, dims))}: torch cannot describe these inputs ({first})"
        ) from None
    return captured[0]


def _cmd_explain(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    import torch

    from flashinfer.cli.autotune import parse_shapes

    args.op = op_from_args(args, _known_ops)
    op, target = _resolve(args.op)
    shapes = parse_shapes(args.shapes, target)
    dtype = getattr(torch, args.dtype)
    for dims in shapes:
        check_shape_exists(dims, target, dtype)
    if args.device == "cuda" and not torch.cuda.is_available():
        raise UsageError("--device cuda: CUDA is not available on this machine; use --device cpu")
    inputs = [example_call_inputs(target, dims, dtype, args.device) for dims in shapes]
    if args.tuning_file is not None:
        _load_tuning_file(args.tuning_file, err)
    found = [op.explain(*call_args, **kwargs) for call_args, kwargs in inputs]
    if args.json:
        print(json.dumps([_as_dict(e) for e in found], indent=2), file=out)
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
    """Each op's ``--shapes`` format, then the example.  Computed when ``--help`` is asked
    for, from the ops' declarations read from source (importing them would import torch)."""
    from flashinfer.cli.declarations import help_examples

    declared = help_examples(tunable_only=False)
    if declared:
        width = max(len(name) for name in declared)
        shapes = "\n".join(
            f"  {name.ljust(width)}  --shapes {shape_help}, e.g. {example}"
            for name, (shape_help, example) in declared.items()
        )
    else:
        shapes = "  none in this build"
    return f"ops and their --shapes:\n{shapes}\n\n{_EXAMPLE_HELP}"


class _HelpAction(argparse.Action):
    """``-h/--help`` that fills in the epilog first (it reads the ops' declarations)."""

    def __init__(self, option_strings: Any, dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> None:
        parser.epilog = _epilog()
        parser.print_help()
        parser.exit()


def add_explain_parser(sub: Any) -> None:
    """Add the ``explain`` sub-command to the ``flashinfer`` parser's sub-parsers."""
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
