"""Conformance: running one declared case against one backend of its op.

:func:`support_reason` asks a backend whether it supports a case's inputs (without running
the op); :class:`ConformanceItem` runs an (op, backend, case) triple and compares the result
with the reference; :func:`conformance_devices` and :func:`run_or_skip` are the body of each
lane's conformance test (pytest is imported when they are called).  Re-exported by
:mod:`flashinfer.testing`, the import path to use.
"""

from __future__ import annotations

import inspect
import warnings
from dataclasses import dataclass
from typing import Any

import torch

from flashinfer.gating.warn_once import ExperimentalWarning
from flashinfer.testing.cases import Case, Inputs, expected_output


def support_reason(op: Any, backend: str | None, inputs: Inputs) -> str | None:
    """Why ``backend`` of ``op`` does not support ``inputs``, as ``"<backend>: <reason>"``, or
    ``None`` if it does.

    The dispatcher answers (``op.dispatcher.backend_support_reason``): the backend's
    capability declaration, then its support checker called exactly as a call of ``op``
    calls it (a ``ValueError``'s message is the reason), without running the op; the reason
    is the one ``backend="auto"`` lists for that backend.  ``inputs`` are passed as
    :func:`call_arguments` says.  ``backend=None`` (a plain API without backends) always
    returns ``None``.
    """
    if backend is None:
        return None
    args, kwargs = call_arguments(op, inputs)
    reason = op.dispatcher.backend_support_reason(backend, *args, **kwargs)
    return None if reason is None else f"{backend}: {reason}"


def call_arguments(op: Any, inputs: Inputs) -> tuple[list[Any], dict[str, Any]]:
    """How a case's ``inputs`` (by parameter name) are passed to ``op``: positional-only
    parameters by position (up to the first one left out), ``*args`` spread out (with every
    positional parameter before it by position), the rest by keyword, so names the API does
    not have go to its ``**kwargs``."""
    params = list(inspect.signature(op).parameters.values())
    rest = dict(inputs)
    spread = any(p.kind is p.VAR_POSITIONAL and p.name in rest for p in params)
    args: list[Any] = []
    for p in params:
        if p.kind is p.VAR_POSITIONAL:
            args.extend(rest.pop(p.name, ()))
            break
        by_position = p.kind is p.POSITIONAL_ONLY or (spread and p.kind is p.POSITIONAL_OR_KEYWORD)
        if not by_position or p.name not in rest:
            break
        args.append(rest.pop(p.name))
    return args, rest


@dataclass(frozen=True)
class ConformanceItem:
    """One (op, backend, case) triple; ``backend`` is ``None`` for an API without backends."""

    op: Any
    backend: str | None
    case: Case

    @property
    def experimental(self) -> bool:
        """Whether the op is an experimental API or the backend an experimental backend."""
        return is_experimental_backend_of(self.op, self.backend)

    def __str__(self) -> str:
        return f"{api_name_of(self.op)}-{self.backend or 'api'}-{self.case.name}"

    def run(self, device: torch.device | str = "cpu") -> str | None:
        """Run the case on ``device``: ``None`` if it matched, the reason if unsupported.

        Raises ``AssertionError`` when the result does not match the reference.  Experimental
        warnings are silenced (running an experimental backend here is deliberate).
        """
        inputs = self.case.make_inputs(device)
        reason = support_reason(self.op, self.backend, inputs)
        if reason is not None:
            return reason
        options = {} if self.backend is None else {"backend": self.backend}
        run_and_compare(self.op, self.case, inputs, options)
        return None


def api_name_of(op: Any) -> str:
    """The name an item's id starts with: the API's public name, else the function's."""
    return getattr(op, "api_name", None) or op.__name__


def is_experimental_backend_of(op: Any, backend: str | None) -> bool:
    """Whether ``op`` is an experimental API or ``backend`` (``None`` and ``"auto"`` are
    not) an experimental backend of it."""
    if getattr(op, "is_experimental", False):
        return True
    return backend not in (None, "auto") and op.is_experimental_backend(backend)


def call_quietly(op: Any, inputs: Inputs, options: dict[str, Any]) -> Any:
    """``op`` called with ``inputs`` (as :func:`call_arguments` passes them) and ``options``,
    experimental warnings silenced: a test that runs an experimental backend does so on
    purpose."""
    args, kwargs = call_arguments(op, inputs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ExperimentalWarning)
        return op(*args, **kwargs, **options)


def run_and_compare(op: Any, case: Case, args: Inputs, options: dict[str, Any]) -> None:
    """Run ``op`` on ``args`` and compare what it produced with ``case``'s reference
    (computed first, on copies); ``AssertionError`` on a mismatch."""
    expected = expected_output(case, args)
    returned = call_quietly(op, args, options)
    case.compare(returned if case.result is None else case.result(args, returned), expected)


def conformance_devices() -> list[Any]:
    """The ``device`` parameters of a conformance test: ``"cpu"``, and ``"cuda"`` marked
    ``gpu`` (skipped cleanly without a CUDA device)."""
    import pytest

    return ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]


def run_or_skip(item: ConformanceItem, device: str) -> None:
    """Run ``item`` on ``device`` inside a test; skip with the backend's own reason when it
    does not support the case, fail when the result does not match."""
    import pytest

    reason = item.run(device)
    if reason is not None:
        pytest.skip(reason)
