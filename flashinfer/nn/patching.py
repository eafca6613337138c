"""Swap a model's modules for flashinfer's, in place, reversibly: :func:`apply_flashinfer`.

The convention users know from Liger Kernel's ``apply_liger_kernel_to_*``, for a model
instance rather than a model class: nothing global changes, two models in one process can
differ, and the swap can be undone.  Only RMSNorm classes whose formula is known to be
``x * rsqrt(mean(x**2) + eps) * weight`` are swapped (:data:`KNOWN_RMSNORMS`); a module
whose class name ends in ``RMSNorm`` but is not listed (Gemma's adds one to the weight) is
left as it is and reported, with why.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from torch import nn

from flashinfer.nn.modules import Linear, RMSNorm

__all__ = ["KNOWN_RMSNORMS", "PatchReport", "apply_flashinfer"]

KNOWN_RMSNORMS = frozenset(
    {
        "torch.nn.modules.normalization.RMSNorm",
        "transformers.models.llama.modeling_llama.LlamaRMSNorm",
        "transformers.models.mistral.modeling_mistral.MistralRMSNorm",
        "transformers.models.mixtral.modeling_mixtral.MixtralRMSNorm",
        "transformers.models.qwen2.modeling_qwen2.Qwen2RMSNorm",
        "transformers.models.qwen3.modeling_qwen3.Qwen3RMSNorm",
        "transformers.models.phi3.modeling_phi3.Phi3RMSNorm",
    }
)
"""Classes (``module.qualname``) whose forward is ``weight * normed(x)`` with fp32
accumulation: what :class:`~flashinfer.nn.RMSNorm` computes.  Pass ``extra_rmsnorms=`` to
:func:`apply_flashinfer` for a class of your own with the same formula."""


def _class_path(module: nn.Module) -> str:
    cls = type(module)
    return f"{cls.__module__}.{cls.__qualname__}"


@dataclass
class PatchReport:
    """What :func:`apply_flashinfer` swapped, and how to undo it.

    ``swapped``: module path -> ``"LlamaRMSNorm -> flashinfer.nn.RMSNorm"``; ``skipped``:
    module path -> why it was left; ``counts``: swaps per original class name.  ``revert()``
    puts every original module back (also as the ``with`` block it is used as ends).
    """

    swapped: dict[str, str] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    _originals: list[tuple[nn.Module, str, nn.Module]] = field(default_factory=list, repr=False)
    reverted: bool = False

    @property
    def counts(self) -> dict[str, int]:
        return dict(Counter(s.split(" -> ")[0] for s in self.swapped.values()))

    def revert(self) -> None:
        """Put back every module swapped (``RuntimeError`` if already reverted)."""
        if self.reverted:
            raise RuntimeError("this patch was already reverted; apply_flashinfer again to redo")
        for parent, name, original in reversed(self._originals):
            setattr(parent, name, original)
        self.reverted = True

    def __enter__(self) -> PatchReport:
        return self

    def __exit__(self, *exc_info: object) -> None:
        if not self.reverted:
            self.revert()

    def __str__(self) -> str:
        lines = [f"swapped {len(self.swapped)} modules: {self.counts}"]
        lines += [f"  skipped {path}: {why}" for path, why in self.skipped.items()]
        return "\n".join(lines)


def apply_flashinfer(
    model: nn.Module,
    *,
    rms_norm: bool = True,
    linear: bool = False,
    extra_rmsnorms: tuple[type, ...] = (),
) -> PatchReport:
    """Swap ``model``'s modules for flashinfer's, in place; return what was swapped.

    - ``rms_norm``: every module of a class in :data:`KNOWN_RMSNORMS` (or
      ``extra_rmsnorms``) becomes a :class:`~flashinfer.nn.RMSNorm` sharing its weight and
      epsilon;
    - ``linear``: every ``torch.nn.Linear`` becomes a :class:`~flashinfer.nn.Linear`
      sharing its weight and bias (off by default: ``flashinfer.mm`` is tuned, so compiled
      it stays an opaque operator, see ``docs/compile.rst``).

    Parameters are shared, not copied: ``state_dict`` keys and values are unchanged, and
    an optimizer built before the swap still trains the same tensors.  ``revert()`` on the
    result (or ``with apply_flashinfer(model):``) restores the original modules.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"apply_flashinfer: model must be a torch.nn.Module, got {type(model)}")
    report = PatchReport()
    extra = tuple(extra_rmsnorms)
    for parent_name, parent in list(model.named_modules()):
        for name, child in list(parent.named_children()):
            path = f"{parent_name}.{name}" if parent_name else name
            replacement = _replacement(child, rms_norm, linear, extra, report, path)
            if replacement is not None:
                report._originals.append((parent, name, child))
                report.swapped[path] = (
                    f"{type(child).__name__} -> flashinfer.nn.{type(replacement).__name__}"
                )
                setattr(parent, name, replacement)
    return report


def _replacement(
    child: nn.Module,
    rms_norm: bool,
    linear: bool,
    extra: tuple[type, ...],
    report: PatchReport,
    path: str,
) -> Any:
    if isinstance(child, (RMSNorm, Linear)):
        return None
    if rms_norm:
        if _class_path(child) in KNOWN_RMSNORMS or (extra and isinstance(child, extra)):
            return RMSNorm.from_module(child)
        if type(child).__name__.endswith("RMSNorm"):
            report.skipped[path] = (
                f"{_class_path(child)} is not a known RMSNorm formula (flashinfer.nn."
                "KNOWN_RMSNORMS); pass extra_rmsnorms=(its class,) if it computes "
                "weight * x * rsqrt(mean(x**2) + eps)"
            )
    if linear and type(child) is nn.Linear:
        return Linear.from_module(child)
    return None
