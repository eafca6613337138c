"""``flashinfer backends``: every API, its backends, what runs here and why not."""

from __future__ import annotations

import argparse
import inspect
import json
from typing import Any, TextIO

from .cli_common import _gate_line, _gate_state, _load_apis, _table


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
