"""The ``flashinfer`` command (console script ``flashinfer``, or ``python -m flashinfer``).

Sub-commands::

    flashinfer backends [--json]        every API, its backends, what runs here, the gate
    flashinfer autotune --op mm --shapes 128x4096x4096,64x256x512 --cache tuned.json \\
        [--dtype float32|float16|bfloat16] [--device cpu|cuda] [--force]
    flashinfer experimental [--json]    experimental APIs and backends with lifecycle data

Exit codes: ``0`` success, ``1`` a runtime failure (a kernel or the cache file failed),
``2`` a usage error (unknown command, op or dtype, malformed shape, CUDA asked for on a
machine without it).  Errors are one line on stderr, starting ``flashinfer: error:`` (or
``flashinfer <command>: error:``); ``FLASHINFER_CLI_TRACEBACK=1`` adds the traceback of a
runtime failure.

``autotune`` loads the cache file first (keys already in it are not timed again; ``--force``
re-times them), tunes each shape inside :func:`flashinfer.autotuner.autotune` with a
plain-text progress bar on stderr, then saves (merging with the file, atomically) and prints
one row per shape: the picked backend, tactic and median time, and whether it was timed now.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

__all__ = ["UsageError", "build_parser", "main"]

PROG = "flashinfer"
DTYPES = ("float32", "float16", "bfloat16")


class UsageError(Exception):
    """A bad command line: reported with the usage, exit code 2."""

    def __init__(self, message: str, parser: argparse.ArgumentParser | None = None) -> None:
        super().__init__(message)
        self.parser = parser


class _Parser(argparse.ArgumentParser):
    """argparse that raises :class:`UsageError` instead of exiting, so ``main`` returns."""

    def error(self, message: str) -> Any:  # type: ignore[override]
        raise UsageError(message, self)


# --------------------------------------------------------------------------------------
# Shared helpers
# --------------------------------------------------------------------------------------


def _table(rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows
    )


def _gate_state() -> dict[str, Any]:
    """The experimental gate: the variable's raw value and whether it is on."""
    import warnings

    from .api_logging import (
        ALLOW_EXPERIMENTAL_AUTO_BACKENDS_ENV,
        experimental_auto_backends_allowed,
    )

    raw = os.environ.get(ALLOW_EXPERIMENTAL_AUTO_BACKENDS_ENV)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # an unrecognised value is reported below instead
        on = experimental_auto_backends_allowed()
    note = None
    if raw not in (None, "", "0", "1"):
        note = "unrecognised value, treated as off (accepted: 1, 0 or unset)"
    return {"variable": ALLOW_EXPERIMENTAL_AUTO_BACKENDS_ENV, "value": raw, "on": on, "note": note}


def _gate_line(gate: dict[str, Any]) -> str:
    value = "unset" if gate["value"] is None else repr(gate["value"])
    state = "on" if gate["on"] else "off"
    meaning = (
        "backend='auto' and the autotuner may pick experimental backends"
        if gate["on"]
        else "backend='auto' and the autotuner skip experimental backends"
    )
    extra = f"; {gate['note']}" if gate["note"] else ""
    return f"experimental gate: {gate['variable']}={value} -> {state} ({meaning}{extra})"


def _load_apis() -> list[str]:
    """Import every API module; return those missing from this build."""
    from .lifecycle import load_api_modules

    return load_api_modules()


def _machine_capability() -> tuple[int | None, str]:
    """Compute capability of CUDA device 0 (None without CUDA) and a description."""
    import torch

    if not torch.cuda.is_available():
        return None, "cpu only (no CUDA device)"
    major, minor = torch.cuda.get_device_capability(0)
    return major * 10 + minor, f"cuda:0 {torch.cuda.get_device_name(0)} (sm{major}{minor})"


def _uses_triton(checker: Any) -> bool:
    """Whether a backend's checker says it runs a Triton kernel.

    A checker may declare ``uses_triton = True``; otherwise a checker that asks
    :func:`flashinfer.kernels.triton_device_reason` is a Triton backend.
    """
    declared = getattr(checker, "uses_triton", None)
    if declared is not None:
        return bool(declared)
    fn = inspect.unwrap(checker)
    code = getattr(fn, "__code__", None)
    return code is not None and "triton_device_reason" in code.co_names


def _runnable_reason(op: Any, backend: str, cc: int | None) -> str | None:
    """Why ``backend`` of ``op`` cannot run on this machine (None: it can)."""
    reason = op.backend_runnable_reason(backend, cc)
    if reason is None and _uses_triton(op.backend_checks[backend]):
        import torch

        from .kernels import triton_device_reason

        device = "cpu" if cc is None else "cuda"
        reason = triton_device_reason(torch.empty(0, device=device))
    return reason


# --------------------------------------------------------------------------------------
# flashinfer backends
# --------------------------------------------------------------------------------------


def backends_report() -> dict[str, Any]:
    """Every API with its backends and whether each can run here (the ``backends`` data)."""
    from .api_logging import api_inventory
    from .backend_dispatch import registered_ops

    missing = _load_apis()
    cc, machine = _machine_capability()
    ops = {op.api_key: op for op in registered_ops()}
    apis: dict[str, dict[str, Any]] = {}
    for record in api_inventory():
        apis[record.name] = {"api": record.name, "experimental": record.experimental}
    for key in ops:
        apis.setdefault(key, {"api": key, "experimental": False})
    for key, entry in apis.items():
        op = ops.get(key)
        backends = []
        if op is not None:
            for b in op.backend_checks:
                reason = _runnable_reason(op, b, cc)
                backends.append(
                    {
                        "name": b,
                        "experimental": b in op.experimental_backends,
                        "runnable": reason is None,
                        "reason": reason,
                    }
                )
        entry["backends"] = backends
    return {
        "machine": machine,
        "compute_capability": cc,
        "gate": _gate_state(),
        "apis": [apis[k] for k in sorted(apis)],
        "missing_modules": missing,
    }


def _cmd_backends(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    report = backends_report()
    if args.json:
        print(json.dumps(report, indent=2), file=out)
        return 0
    rows = [("API", "KIND", "BACKEND", "EXPERIMENTAL", "RUNS HERE", "WHY NOT")]
    for api in report["apis"]:
        kind = "experimental" if api["experimental"] else "stable"
        if not api["backends"]:
            rows.append((api["api"], kind, "-", "-", "-", "no backend table (not dispatched)"))
        for b in api["backends"]:
            rows.append(
                (
                    api["api"],
                    kind,
                    b["name"],
                    "yes" if b["experimental"] else "no",
                    "yes" if b["runnable"] else "no",
                    b["reason"] or "",
                )
            )
    print(f"machine: {report['machine']}", file=out)
    print(_gate_line(report["gate"]), file=out)
    print(file=out)
    print(_table(rows), file=out)
    for module in report["missing_modules"]:
        print(f"note: API module {module} is missing from this build; not listed", file=err)
    return 0


# --------------------------------------------------------------------------------------
# flashinfer autotune
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _TuneTarget:
    """How the CLI builds the inputs of one tunable op from a shape ``AxBxC``."""

    op_name: str
    shape_help: str
    ndims: tuple[int, ...]  # accepted numbers of dimensions
    call: Callable[[Any, tuple[int, ...], Any, Any], Any]  # (op, dims, dtype, device)


def _call_mm(op: Any, dims: tuple[int, ...], dtype: Any, device: Any) -> Any:
    import torch

    m, n, k = dims
    a = torch.randn(m, k, dtype=dtype, device=device)
    b = torch.randn(k, n, dtype=dtype, device=device)
    return op(a, b)


def _call_rmsnorm(op: Any, dims: tuple[int, ...], dtype: Any, device: Any) -> Any:
    import torch

    x = torch.randn(*dims, dtype=dtype, device=device)
    w = torch.randn(dims[-1], dtype=dtype, device=device)
    return op(x, w)


_TARGETS = {
    "mm": _TuneTarget("mm", "MxNxK (a is MxK, b is KxN)", (3,), _call_mm),
    "rmsnorm": _TuneTarget(
        "rmsnorm", "TOKENSxHIDDEN (or any AxBx...xHIDDEN)", (1, 2, 3, 4), _call_rmsnorm
    ),
}


def _parse_shapes(text: str, target: _TuneTarget) -> list[tuple[int, ...]]:
    shapes = []
    for item in text.split(","):
        item = item.strip()
        if not item:
            raise UsageError(f"--shapes: empty shape in {text!r}")
        try:
            dims = tuple(int(d) for d in item.lower().split("x"))
        except ValueError:
            raise UsageError(
                f"--shapes: malformed shape {item!r}; expected {target.shape_help}, "
                "e.g. 128x4096x4096, positive integers joined by 'x'"
            ) from None
        if any(d <= 0 for d in dims):
            raise UsageError(f"--shapes: every dimension of {item!r} must be a positive integer")
        if len(dims) not in target.ndims:
            raise UsageError(
                f"--shapes: {item!r} has {len(dims)} dimensions; {target.op_name} takes "
                f"{target.shape_help}"
            )
        shapes.append(dims)
    return shapes


def _resolve_op(name: str) -> tuple[Any, _TuneTarget]:
    from .autotuner import AutoTuner

    _load_apis()
    registered = AutoTuner.get().registered()
    tunable = {
        op.api_name: (op, _TARGETS[op.api_name])
        for op, _ in registered.values()
        if getattr(op, "api_name", None) in _TARGETS
    }
    for key, (op, _) in registered.items():
        if name == key and getattr(op, "api_name", None) in tunable:
            return tunable[op.api_name]
    if name in tunable:
        return tunable[name]
    available = ", ".join(sorted(tunable)) or "none"
    if name in _TARGETS:
        raise UsageError(
            f"--op {name}: this op is not autotunable (it registers no runners with the "
            f"autotuner); autotunable ops: {available}"
        )
    raise UsageError(f"--op {name}: unknown op; autotunable ops: {available}")


class _Progress:
    """A plain-text progress bar on stderr (redrawn in place on a terminal)."""

    def __init__(self, stream: TextIO, total_shapes: int, width: int = 24) -> None:
        self.stream = stream
        self.tty = bool(getattr(stream, "isatty", lambda: False)())
        self.total_shapes = total_shapes
        self.width = width
        self.shape_index = 0
        self.shape_label = ""
        self._last_len = 0

    def start_shape(self, index: int, label: str) -> None:
        self.shape_index = index
        self.shape_label = label

    def __call__(self, done: int, total: int, label: str) -> None:
        filled = self.width if total == 0 else self.width * done // total
        bar = "#" * filled + "." * (self.width - filled)
        line = (
            f"[{self.shape_index + 1}/{self.total_shapes}] {self.shape_label} "
            f"[{bar}] {done}/{total} {label}"
        )
        if self.tty:
            pad = " " * max(0, self._last_len - len(line))
            self.stream.write(f"\r{line}{pad}")
            self._last_len = len(line)
            if done == total:
                self.stream.write("\n")
                self._last_len = 0
        else:
            self.stream.write(line + "\n")
        self.stream.flush()


def _cmd_autotune(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    import torch

    from .autotuner import AutoTuner, autotune, load_configs, save_configs

    op, target = _resolve_op(args.op)
    shapes = _parse_shapes(args.shapes, target)
    dtype = getattr(torch, args.dtype)
    if args.device == "cuda" and not torch.cuda.is_available():
        raise UsageError("--device cuda: CUDA is not available on this machine; use --device cpu")
    cache = args.cache
    directory = os.path.dirname(os.path.abspath(cache))
    if not os.path.isdir(directory):
        raise UsageError(f"--cache {cache}: directory {directory} does not exist")

    tuner = AutoTuner.get()
    if not args.force and os.path.exists(cache):
        load_configs(cache)
    progress = _Progress(err, len(shapes))
    rows = [("SHAPE", "BACKEND", "TACTIC", "MEDIAN MS", "SOURCE")]
    with torch.inference_mode():
        for i, dims in enumerate(shapes):
            shape = "x".join(map(str, dims))
            progress.start_shape(i, f"{target.op_name} {shape}")
            with autotune(progress=progress):
                target.call(op, dims, dtype, args.device)
            record = tuner.last_tuning()
            if record is None or record.choice is None:
                rows.append((shape, "-", "-", "-", "nothing could be timed"))
                continue
            choice = record.choice
            rows.append(
                (
                    shape,
                    choice.backend,
                    json.dumps(choice.tactic, sort_keys=True),
                    f"{choice.median_s * 1e3:.4f}",
                    "tuned" if record.timed else "reused (key already tuned)",
                )
            )
    n = save_configs(cache)
    print(_table(rows), file=out)
    print(f"wrote {n} entries to {cache}", file=out)
    return 0


# --------------------------------------------------------------------------------------
# flashinfer experimental
# --------------------------------------------------------------------------------------


def _cmd_experimental(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from .lifecycle import experimental_features, format_listing, load_api_modules

    missing = load_api_modules()
    features = experimental_features(load=False)
    gate = _gate_state()
    if args.json:
        doc = {"gate": gate, "features": [f.as_dict() for f in features]}
        print(json.dumps(doc, indent=2), file=out)
    else:
        print(_gate_line(gate), file=out)
        print(file=out)
        print(format_listing(features), file=out)
    for module in missing:
        print(f"note: API module {module} is missing from this build; not listed", file=err)
    return 0


# --------------------------------------------------------------------------------------
# The parser and main
# --------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    """The ``flashinfer`` argument parser."""
    from . import __version__

    parser = _Parser(
        prog=PROG,
        description="flashinfer: inspect backends, tune kernels, list experimental features.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser(
        "backends",
        help="every API, its backends, whether each runs here, and the experimental gate",
        description="List every API (stable and experimental), its backends, which are "
        "experimental, whether each can run on this machine and why not, and the state of "
        "FLASHINFER_ALLOW_EXPERIMENTAL_AUTO_BACKENDS.",
    )
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=_cmd_backends)

    p = sub.add_parser(
        "autotune",
        help="tune an op for some shapes and write the results to a cache file",
        description="Tune OP's backend='auto' choice for each shape (timing every backend "
        "and tactic the dispatcher offers), write the results to the JSON cache file "
        "(merged with what it already holds) and print the picks.  Load the file with "
        "flashinfer.autotuner.load_configs(path) or autotune(cache=path).",
    )
    p.add_argument("--op", required=True, help="op to tune, e.g. mm")
    p.add_argument(
        "--shapes",
        required=True,
        help="comma-separated shapes; mm: MxNxK (a is MxK, b is KxN), "
        "e.g. 128x4096x4096,64x256x512",
    )
    p.add_argument("--cache", required=True, help="JSON file to write (created or merged)")
    p.add_argument(
        "--dtype", default="float32", choices=DTYPES, help="input dtype (default float32)"
    )
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda"), help="device (default cpu)")
    p.add_argument("--force", action="store_true", help="re-tune shapes already in the cache file")
    p.set_defaults(func=_cmd_autotune)

    p = sub.add_parser(
        "experimental",
        help="experimental APIs and backends with owner, tracking issue and graduation date",
        description="List every experimental API and backend with its lifecycle metadata.",
    )
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=_cmd_experimental)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``flashinfer`` command with ``argv`` (default ``sys.argv[1:]``); return the
    exit code: 0 success, 1 runtime failure, 2 usage error."""
    out, err = sys.stdout, sys.stderr
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except UsageError as exc:
        (exc.parser or parser).print_usage(err)
        print(f"{PROG}: error: {exc}", file=err)
        return 2
    except SystemExit as exc:  # --help, --version
        return exc.code if isinstance(exc.code, int) else 0
    if args.command is None:
        parser.print_help(err)
        return 2
    try:
        return int(args.func(args, out, err))
    except UsageError as exc:
        print(f"{PROG} {args.command}: error: {exc}", file=err)
        return 2
    except KeyboardInterrupt:
        print(f"{PROG} {args.command}: interrupted", file=err)
        return 130
    except Exception as exc:  # a runtime failure: one line, no traceback
        print(f"{PROG} {args.command}: error: {type(exc).__name__}: {exc}", file=err)
        if os.environ.get("FLASHINFER_CLI_TRACEBACK") == "1":
            import traceback

            traceback.print_exc(file=err)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
