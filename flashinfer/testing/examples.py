"""An op's example inputs from a shape (``flashinfer autotune`` / ``explain --shapes``),
declared with ``declare_cases(..., examples=...)``: no table in ``flashinfer.cli`` names an op."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from flashinfer.api_modules import load_api_modules

__all__ = ["EXAMPLE_INPUTS", "ExampleInputs", "declare_example_inputs", "example_inputs_for"]

Dims = tuple[int, ...]


@dataclasses.dataclass(frozen=True)
class ExampleInputs:
    """How the ``flashinfer`` command builds one op's inputs from a shape ``AxBxC``:
    ``shape_help`` (``"MxNxK (a is MxK, b is KxN)"``), the accepted ``ndims``, ``make(dims,
    dtype, device)`` -> the arguments by name (also run under ``FakeTensorMode``), an
    ``example`` that tunes in seconds on a CPU, and ``tensors(dims)`` -> each tensor's shape
    by role (a shape no tensor can have is refused first; ``None``: dimensions only)."""

    shape_help: str
    ndims: tuple[int, ...]
    make: Callable[[Dims, Any, Any], dict[str, Any]]
    example: str
    tensors: Callable[[Dims], dict[str, Dims]] | None = None
    op_name: str = ""

    def call(self, op: Callable[..., Any], dims: Dims, dtype: Any, device: Any) -> Any:
        return op(**self.make(dims, dtype, device))


EXAMPLE_INPUTS: dict[str, ExampleInputs] = {}  # by the op's public name


def declare_example_inputs(op: Any, examples: ExampleInputs) -> None:
    """Register ``examples`` for ``op`` (declaring again replaces them)."""
    name = str(getattr(op, "api_name", None) or op.__name__)
    if not isinstance(examples, ExampleInputs):
        raise TypeError(
            f"declare_example_inputs({name}): expected an ExampleInputs, got "
            f"{type(examples).__name__}"
        )
    bad = [n for n in examples.ndims if not isinstance(n, int) or isinstance(n, bool) or n < 1]
    if not examples.ndims or bad:
        raise ValueError(
            f"declare_example_inputs({name}): ndims must list positive numbers of "
            f"dimensions, got {examples.ndims!r}"
        )
    EXAMPLE_INPUTS[name] = dataclasses.replace(examples, op_name=name)


def example_inputs_for(name: str) -> ExampleInputs | None:
    """The example inputs declared for the op named ``name`` (API modules loaded), or None."""
    if name not in EXAMPLE_INPUTS:
        load_api_modules()
    return EXAMPLE_INPUTS.get(name)
