"""What the ``flashinfer`` command's sub-commands share."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Sequence
from typing import Any

PROG = "flashinfer"

ISSUE_TEMPLATE = ".github/ISSUE_TEMPLATE/bug_report.md"
ISSUE_TRACKER = (  # its template asks for `flashinfer backends`' output, which prints this last
    "https://github.com/flashinfer-gating/flashinfer-gating/issues/new?template=bug_report.md"
)
DTYPES = ("float32", "float16", "bfloat16")


class UsageError(Exception):
    """A bad command line: reported with the usage, exit code 2."""

    def __init__(self, message: str, parser: argparse.ArgumentParser | None = None) -> None:
        super().__init__(message)
        self.parser = parser


_OP_OPTION_DEST = "op_option"


class TuningFileAction(argparse.Action):
    """``--tuning-file`` with ``--cache`` (its old spelling) is a usage error, not the last."""

    def __call__(self, parser: Any, namespace: Any, values: Any, option: Any = None) -> None:
        first = getattr(namespace, "tuning_file_option", None)
        if first is not None and first != option:
            parser.error(
                f"{first} and {option} both given ({self.option_strings[1]} is the old "
                f"spelling of {self.option_strings[0]}); pass {self.option_strings[0]} only"
            )
        namespace.tuning_file_option = option
        setattr(namespace, self.dest, values)


def add_op_arguments(parser: argparse.ArgumentParser, what: str) -> None:
    """The op as a positional ``op`` or ``--op`` (both only if they agree)."""
    parser.add_argument(
        "op",
        nargs="?",
        help=f"the op {what}; `--op OP` is the same (give either, or both alike)",
    )
    parser.add_argument(
        "--op",
        dest=_OP_OPTION_DEST,
        metavar="OP",
        help="the op as an option: `--op mm` is the same as the positional `mm`",
    )


def op_from_args(args: argparse.Namespace, known: Callable[[], str]) -> str:
    """The op named as ``op`` or ``--op`` (``known()``, the ops, only for the error)."""
    positional, option = args.op, getattr(args, _OP_OPTION_DEST)
    command = f"{PROG} {args.command}"
    if positional is None and option is None:
        raise UsageError(
            f"no op given; name one, e.g. `{command} mm ...` or `{command} --op mm ...` ({known()})"
        )
    if positional is not None and option is not None and positional != option:
        raise UsageError(
            f"two different ops given: {positional!r} and --op {option!r}; name one op, "
            "either way (`mm` or `--op mm`)"
        )
    return positional if positional is not None else option


MAX_EXTENT = 2**63 - 1  # torch describes sizes and bytes with signed 64-bit ints


def check_shape_exists(dims: tuple[int, ...], target: Any, dtype: Any) -> None:
    """``UsageError`` unless each tensor of the ``--shapes`` item ``dims`` fits in ``dtype``."""
    shape = "x".join(map(str, dims))
    for d in dims:
        if d > MAX_EXTENT:
            raise UsageError(
                f"--shapes: {shape}: dimension {d} is larger than any tensor can have "
                "(2**63 - 1); use sizes that fit in memory"
            )
    tensors = target.tensors
    if tensors is None:
        return
    size = dtype.itemsize
    for role, extent in tensors(dims).items():
        count = math.prod(extent)
        if count * size > MAX_EXTENT:
            raise UsageError(
                f"--shapes: {shape}: {role} would be {'x'.join(map(str, extent))}, "
                f"{count * size} bytes, more than a tensor can address (2**63 - 1); use "
                "smaller sizes"
            )


def format_table(rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows
    )


def gate_state() -> dict[str, Any]:
    import warnings

    from flashinfer import settings
    from flashinfer.gating.gate import (
        ACCEPTED_GATE_VALUES,
        ALLOW_EXPERIMENTAL_AUTO_BACKENDS_ENV,
        GATE_OFF_VALUES,
        experimental_auto_backends_allowed,
    )

    raw = settings.raw(ALLOW_EXPERIMENTAL_AUTO_BACKENDS_ENV)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # an unrecognised value is reported below instead
        on = experimental_auto_backends_allowed()
    note = None
    if raw is not None and raw != "1" and raw not in GATE_OFF_VALUES:
        note = f"unrecognised value, treated as off (accepted: {ACCEPTED_GATE_VALUES})"
    return {"variable": ALLOW_EXPERIMENTAL_AUTO_BACKENDS_ENV, "value": raw, "on": on, "note": note}


def gate_line(gate: dict[str, Any]) -> str:
    value = "unset" if gate["value"] is None else repr(gate["value"])
    state = "on" if gate["on"] else "off"
    meaning = (
        "backend='auto' and the autotuner may pick experimental backends"
        if gate["on"]
        else "backend='auto' and the autotuner skip experimental backends"
    )
    extra = f"; {gate['note']}" if gate["note"] else ""
    return f"experimental gate: {gate['variable']}={value} -> {state}\n  ({meaning}{extra})"
