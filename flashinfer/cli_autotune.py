"""``flashinfer autotune``: tune an op for some shapes and write the results to a file."""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TextIO

from .cli_common import DTYPES, UsageError, _load_apis, _table

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


def add_autotune_parser(sub: Any) -> None:
    """Add the ``autotune`` sub-command to the ``flashinfer`` parser's sub-parsers."""
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
