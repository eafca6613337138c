"""The tuning run of ``flashinfer autotune``: the targets (the tunable ops, with the inputs
each declares for a shape) and, once the arguments are checked, the run itself: load the tuning
file, tune each shape, save what was tuned (also on Ctrl-C), print the summary and choose
the exit status."""

from __future__ import annotations

import argparse
import os
import warnings
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TextIO, TypeVar

from flashinfer.cli.autotune_report import (
    ShapeResult,
    TuningProgress,
    print_block_report,
    print_stats,
    print_summary,
)
from flashinfer.cli.common import PROG

if TYPE_CHECKING:  # (the package imports torch: the command imports it on first use)
    from flashinfer.testing.examples import ExampleInputs

_T = TypeVar("_T")

# --------------------------------------------------------------------------------------
# Targets: the tunable ops and how to build their inputs (each op declares its own)
# --------------------------------------------------------------------------------------


def tunable_ops() -> dict[str, tuple[Any, ExampleInputs]]:
    """``api_name -> (op, target)`` of every op registered with the autotuner that declares
    its example inputs (``declare_cases(..., examples=...)``), in the order of the one list
    of ops (``flashinfer.api_modules.OPS``), ops outside it after."""
    from flashinfer.api_modules import OPS, load_api_modules
    from flashinfer.autotuner import AutoTuner
    from flashinfer.testing import example_inputs_for

    load_api_modules()
    found: dict[str, tuple[Any, ExampleInputs]] = {}
    for op, _ in AutoTuner.get().registered().values():
        name = getattr(op, "api_name", None)
        target = example_inputs_for(name) if isinstance(name, str) else None
        if isinstance(name, str) and target is not None:
            found[name] = (op, target)
    order = {name: i for i, name in enumerate(OPS)}
    return dict(sorted(found.items(), key=lambda item: order.get(item[0], len(order))))


# --------------------------------------------------------------------------------------
# The run
# --------------------------------------------------------------------------------------


def _tune_shape(
    target: ExampleInputs, op: Any, dims: tuple[int, ...], args: argparse.Namespace, progress: Any
) -> ShapeResult:
    import torch

    from flashinfer.autotuner import AutoTuner, autotune
    from flashinfer.autotuner.candidate_timing import one_line_reason

    tuner = AutoTuner.get()
    before = tuner.last_tuning()
    error = None
    with autotune(progress=progress):
        try:
            target.call(op, dims, getattr(torch, args.dtype), args.device)
        except Exception as exc:  # all pairs failed and so did the default, say
            error = one_line_reason(exc)
    record = tuner.last_tuning()
    return ShapeResult("x".join(map(str, dims)), None if record is before else record, error)


def _reporting_tuning_file_warnings(err: TextIO, call: Callable[[], _T]) -> _T:
    """``call()``, with the tuning file's warnings it raises printed to ``err`` as the command's
    own warning lines (other warnings are passed on)."""
    from flashinfer.autotuner import TuningFileWarning

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = call()
    for w in caught:
        if issubclass(w.category, TuningFileWarning):
            print(f"{PROG} autotune: warning: {w.message}", file=err)
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return result


def _save(tuning_file: str, results: Sequence[ShapeResult], err: TextIO) -> int | None:
    """Save when a shape was tuned now (a run that only reused keys never writes nor locks
    the file); returns the entry count written, or None."""
    from flashinfer.autotuner import AutoTuner

    if not any(r.tuned_now for r in results):
        return None
    return _reporting_tuning_file_warnings(
        err, lambda: AutoTuner.get().save_tuning_file(tuning_file)
    )


def run_tuning(
    op: Any,
    target: ExampleInputs,
    shapes: list[tuple[int, ...]],
    tuning_file: str,
    args: argparse.Namespace,
    out: TextIO,
    err: TextIO,
) -> int:
    """Tune ``op`` for ``shapes`` and save to ``tuning_file``; returns the exit status."""
    import torch

    from flashinfer.autotuner import AutoTuner, AutotuneReportWarning, autotune

    if not args.force and os.path.exists(tuning_file):
        _reporting_tuning_file_warnings(err, lambda: AutoTuner.get().load_tuning_file(tuning_file))
    progress = TuningProgress(err, len(shapes))
    results: list[ShapeResult] = []
    # One block around every shape: its summary (what was timed, left out and why, noisy
    # picks) is printed below the table, not issued as a warning (the command saves itself).
    block = autotune(progress=progress)
    try:
        with torch.inference_mode(), warnings.catch_warnings():
            warnings.filterwarnings("ignore", category=AutotuneReportWarning)
            with block:
                for i, dims in enumerate(shapes):
                    progress.start_shape(i, f"{target.op_name} {'x'.join(map(str, dims))}")
                    results.append(_tune_shape(target, op, dims, args, progress))
    except KeyboardInterrupt:
        progress.end_line()
        return _interrupted(tuning_file, results, len(shapes), out, err, block.report)

    _mark_retimed(results, block.report)
    print_summary(results, out)
    print_block_report(block.report, out)
    print_stats(AutoTuner.get().stats(), out)
    written = _save(tuning_file, results, err)
    if written is None:
        print(f"nothing new was tuned: {tuning_file} left unchanged", file=out)
    else:
        print(f"wrote {written} entries to {tuning_file}", file=out)
    empty = [r.shape for r in results if r.choice is None]
    if empty:
        print(
            f"{PROG} autotune: error: nothing could be timed for {len(empty)} of "
            f"{len(results)} shapes ({', '.join(empty)}); see the failures listed above",
            file=err,
        )
        return 1
    return 0


def _mark_retimed(results: Sequence[ShapeResult], report: Any) -> None:
    """Mark the shapes whose key the block timed again because its saved timing was noisy."""
    for result in results:
        if result.record is not None and report is not None:
            seen = report.keys.get(result.record.key)
            result.retimed = seen is not None and seen.outcome == "re-timed"


def _interrupted(
    tuning_file: str,
    results: Sequence[ShapeResult],
    total: int,
    out: TextIO,
    err: TextIO,
    report: Any = None,
) -> int:
    """Ctrl-C: keep what was tuned, say so, exit 130."""
    if results:
        _mark_retimed(results, report)
        print_summary(results, out)
        print_block_report(report, out)
    written = _save(tuning_file, results, err)
    kept = sum(r.tuned_now for r in results)
    if written is None:
        saved = f"nothing new was tuned; {tuning_file} left unchanged"
    else:
        saved = f"saved the {kept} shape(s) tuned so far ({written} entries) to {tuning_file}"
    print(
        f"{PROG} autotune: interrupted after {len(results)} of {total} shapes; {saved}",
        file=err,
    )
    return 130
