"""An API's torch operator under its former names: a program exported (``torch.export``)
before the API was renamed names the old operator, so the old name stays registered, as
an alias of the new operator, for the rename's lifetime (its ``Renamed`` record in
:mod:`flashinfer.gating.history`; the record and the alias go together).

The alias has the old operator's schema and one ``CompositeImplicitAutograd`` kernel that
warns once (the rename's ``DeprecationWarning``) and calls the new operator, so eager
calls, autograd, fake tensors and a loaded program all run the API as it is now.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from flashinfer.gating.history import Renamed, alias_message, history, warn_alias_once
from flashinfer.torch_boundary import operator_defined

__all__ = ["register_former_names"]


def register_former_names(op: Any, spelled: Callable[[str], str]) -> list[str]:
    """Register ``op`` (a :class:`~flashinfer.dispatch.torch_op.TorchOp`) under the
    operator name of each API that was renamed to it (``spelled``: an API key's operator
    name, unnumbered); returns those names.  A name another operator holds is left to it."""
    namespace = op.qualname.partition("::")[0]
    names = []
    for record in history():
        if not (isinstance(record, Renamed) and not record.backend and record.new == op.api_key):
            continue
        name = spelled(record.old)
        if operator_defined(f"{namespace}::{name}"):
            continue
        op.library.define(f"{name}{op.schema.default}")
        forward = _forward(op.default, alias_message(record))
        op.library.impl(name, forward, "CompositeImplicitAutograd")
        names.append(name)
    return names


def _forward(target: Any, message: str) -> Callable[..., Any]:
    def former(*args: Any, **kwargs: Any) -> Any:
        warn_alias_once(message)
        return target(*args, **kwargs)

    return former
