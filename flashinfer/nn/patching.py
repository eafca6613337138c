"""Swap a model instance's modules for flashinfer's, in place, reversibly (Liger Kernel's
``apply_liger_kernel_to_*`` convention, per instance): :func:`apply_flashinfer`.  Only RMSNorm
classes whose formula is known (:data:`KNOWN_RMSNORMS`) are swapped."""

from __future__ import annotations

import warnings
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import torch
from torch import nn

from flashinfer.nn.modules import Linear, RMSNorm

__all__ = ["KNOWN_RMSNORMS", "PatchReport", "apply_flashinfer"]

_HF_LLAMA: Mapping[str, Any] = MappingProxyType({"casting_mode": "llama"})
_GEMMA: Mapping[str, Any] = MappingProxyType({"offset": 1.0})
_HF = "transformers.models"

KNOWN_RMSNORMS: Mapping[str, Mapping[str, Any]] = MappingProxyType(
    {
        "torch.nn.modules.normalization.RMSNorm": MappingProxyType({}),
        **dict.fromkeys(
            (
                f"{_HF}.llama.modeling_llama.LlamaRMSNorm",
                f"{_HF}.mistral.modeling_mistral.MistralRMSNorm",
                f"{_HF}.mixtral.modeling_mixtral.MixtralRMSNorm",
                f"{_HF}.qwen2.modeling_qwen2.Qwen2RMSNorm",
                f"{_HF}.qwen3.modeling_qwen3.Qwen3RMSNorm",
                f"{_HF}.phi3.modeling_phi3.Phi3RMSNorm",
            ),
            _HF_LLAMA,
        ),
        **dict.fromkeys(
            (
                f"{_HF}.gemma.modeling_gemma.GemmaRMSNorm",
                f"{_HF}.gemma2.modeling_gemma2.Gemma2RMSNorm",
                f"{_HF}.gemma3.modeling_gemma3.Gemma3RMSNorm",
            ),
            _GEMMA,
        ),
    }
)
"""Classes (``module.qualname``) whose formula :class:`~flashinfer.nn.RMSNorm` computes,
each with the options that make it so (``offset``, ``casting_mode``): HF's Llama family
rounds as ``casting_mode="llama"``, Gemma's scale is ``1 + weight``.  Pass
``extra_rmsnorms=`` to :func:`apply_flashinfer` for a class of your own."""


def _class_path(module: nn.Module) -> str:
    cls = type(module)
    return f"{cls.__module__}.{cls.__qualname__}"


@dataclass
class PatchReport:
    """What :func:`apply_flashinfer` swapped, and how to undo it.

    ``swapped``: module path -> ``"LlamaRMSNorm -> flashinfer.nn.RMSNorm"`` (every slot of a
    module held in several); ``skipped``: module path -> why it was left; ``counts``: swaps
    per original class name.  ``revert()`` puts every original module back, with the
    parameters and buffers its replacement holds now (also as the ``with`` block it is used
    as ends).
    """

    swapped: dict[str, str] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    _originals: list[tuple[nn.Module, str, nn.Module, nn.Module]] = field(
        default_factory=list, repr=False
    )
    reverted: bool = False

    @property
    def counts(self) -> dict[str, int]:
        return dict(Counter(s.split(" -> ")[0] for s in self.swapped.values()))

    def revert(self) -> None:
        """Put back every module swapped (``RuntimeError`` if already reverted).

        Each original gets its replacement's current parameters and buffers: a
        ``load_state_dict(..., assign=True)``, or ``to_empty()`` after patching on the meta
        device, replaced the Parameter objects the two shared."""
        if self.reverted:
            raise RuntimeError("this patch was already reverted; apply_flashinfer again to redo")
        for parent, name, original, replacement in reversed(self._originals):
            _carry_state(replacement, original)
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


def _carry_state(source: nn.Module, target: nn.Module) -> None:
    """``target``'s own parameters and buffers become ``source``'s of the same name."""
    for own, theirs in (
        (target.named_parameters, source.named_parameters),
        (target.named_buffers, source.named_buffers),
    ):
        names = dict(own(recurse=False))
        for name, tensor in theirs(recurse=False):
            if name in names:
                setattr(target, name, tensor)


def apply_flashinfer(
    model: nn.Module,
    *,
    rms_norm: bool = True,
    linear: bool = False,
    extra_rmsnorms: tuple[type, ...] | Mapping[type, Mapping[str, Any]] = (),
    casting_mode: str | None = None,
) -> PatchReport:
    """Swap ``model``'s modules for flashinfer's, in place; return what was swapped.

    - ``rms_norm``: every module of a class in :data:`KNOWN_RMSNORMS` (or
      ``extra_rmsnorms``) becomes a :class:`~flashinfer.nn.RMSNorm` sharing its weight and
      epsilon, with its class's formula (``offset``, ``casting_mode``);
    - ``extra_rmsnorms``: classes of your own computing ``weight * x * rsqrt(mean(x**2) +
      eps)``, or a mapping class -> options of :class:`~flashinfer.nn.RMSNorm` (e.g.
      ``{MyGemmaNorm: {"offset": 1.0}}`` for a ``(1 + weight)`` norm).  Each such module is
      run once on a probe input (unless on the meta device) against its replacement: one
      whose output differs is left, with why;
    - ``casting_mode``: ``"gemma"`` or ``"llama"`` for every swapped norm (see
      :data:`flashinfer.nn.CASTING_MODES`); ``None`` (default): each class's own,
      so that HF models keep HF's rounding and result dtype;
    - ``linear``: every ``torch.nn.Linear`` becomes a :class:`~flashinfer.nn.Linear`
      sharing its weight and bias (off by default: ``flashinfer.mm`` is tuned, so compiled
      it stays an opaque operator, see ``docs/compile.rst``).

    Parameters are shared, not copied: ``state_dict`` keys and values are unchanged, and
    an optimizer built before the swap still trains the same tensors.  A module held in
    several slots becomes one replacement in all of them.  Every replacement is built before
    any is put in: on an error the model is as it was.  Norms left as they are (``skipped``)
    get one ``UserWarning``.  ``revert()`` on the result (or ``with
    apply_flashinfer(model):``) restores the original modules.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"apply_flashinfer: model must be a torch.nn.Module, got {type(model)}")
    extra = _extra_options(extra_rmsnorms, casting_mode)
    report = PatchReport()
    built: dict[int, nn.Module | None] = {}  # id(module) -> its one replacement
    plan: list[tuple[nn.Module, str, nn.Module, nn.Module, str]] = []
    for parent_name, parent in model.named_modules():
        # _modules, not named_children(): that one lists a module held twice only once
        for name, child in parent._modules.items():
            if child is None:
                continue
            path = f"{parent_name}.{name}" if parent_name else name
            if id(child) not in built:
                built[id(child)] = _replacement(
                    child, rms_norm, linear, extra, casting_mode, report, path
                )
            replacement = built[id(child)]
            if replacement is not None:
                plan.append((parent, name, child, replacement, path))
    # Nothing above changed the model: swap every slot now.
    for parent, name, child, replacement, path in plan:
        setattr(parent, name, replacement)
        report._originals.append((parent, name, child, replacement))
        report.swapped[path] = (
            f"{type(child).__name__} -> flashinfer.nn.{type(replacement).__name__}"
        )
    if report.skipped:
        reasons = Counter(report.skipped.values())
        warnings.warn(
            f"apply_flashinfer left {len(report.skipped)} RMSNorm-like module(s) as they were "
            "(report.skipped lists them): "
            + "; ".join(f"{n} x {why}" for why, n in reasons.items()),
            UserWarning,
            stacklevel=2,
        )
    return report


def _extra_options(extra_rmsnorms: Any, casting_mode: str | None) -> dict[type, dict[str, Any]]:
    """``extra_rmsnorms`` as class -> RMSNorm options, checked before anything is swapped."""
    if isinstance(extra_rmsnorms, Mapping):
        extra = {cls: dict(options) for cls, options in extra_rmsnorms.items()}
    else:
        extra = {cls: {} for cls in extra_rmsnorms}
    for cls, options in extra.items():
        if not (isinstance(cls, type) and issubclass(cls, nn.Module)):
            raise TypeError(
                f"apply_flashinfer: extra_rmsnorms takes torch.nn.Module classes, got {cls!r}"
            )
        unknown = set(options) - {"offset", "casting_mode"}
        if unknown:
            raise TypeError(
                f"apply_flashinfer: extra_rmsnorms[{cls.__name__}] has unknown options "
                f"{sorted(unknown)}; use 'offset' and 'casting_mode'"
            )
    if casting_mode is not None:
        RMSNorm(1, casting_mode=casting_mode, device="meta")  # its ValueError if not a mode
    return extra


def _replacement(
    child: nn.Module,
    rms_norm: bool,
    linear: bool,
    extra: dict[type, dict[str, Any]],
    casting_mode: str | None,
    report: PatchReport,
    path: str,
) -> Any:
    if isinstance(child, (RMSNorm, Linear)):
        return None
    if rms_norm:
        known = KNOWN_RMSNORMS.get(_class_path(child))
        ours = next((o for cls, o in extra.items() if isinstance(child, cls)), None)
        if known is not None or ours is not None:
            options = dict(known if known is not None else ours or {})
            if casting_mode is not None:
                options["casting_mode"] = casting_mode
            return _norm_replacement(child, options, known is None, report, path)
        if type(child).__name__.endswith("RMSNorm"):
            report.skipped[path] = (
                f"{_class_path(child)} is not a known RMSNorm formula (flashinfer.nn."
                "KNOWN_RMSNORMS); pass extra_rmsnorms=(its class,) if it computes "
                "weight * x * rsqrt(mean(x**2) + eps), {its class: {'offset': 1.0}} for "
                "(1 + weight)"
            )
    if linear and type(child) is nn.Linear:
        return Linear.from_module(child)
    return None


def _norm_replacement(
    child: nn.Module, options: dict[str, Any], probe: bool, report: PatchReport, path: str
) -> RMSNorm | None:
    weight = getattr(child, "weight", None)
    shape = tuple(getattr(child, "normalized_shape", ())) if weight is None else weight.shape
    if len(shape) != 1:
        report.skipped[path] = (
            f"{type(child).__name__} normalises over the last {len(shape)} dimensions "
            f"{tuple(shape)}; flashinfer.nn.RMSNorm normalises over the last one only"
        )
        return None
    norm = RMSNorm.from_module(child, **options)
    why = _probe_mismatch(child, norm) if probe else None
    if why is not None:
        report.skipped[path] = why
        return None
    return norm


def _probe_mismatch(child: nn.Module, norm: RMSNorm) -> str | None:
    """Why ``norm`` does not compute what ``child`` (an ``extra_rmsnorms`` class) does on a
    float32 probe, or None (not on the meta device)."""
    weight = getattr(child, "weight", None)
    device = weight.device if isinstance(weight, torch.Tensor) else torch.device("cpu")
    if device.type == "meta":
        return None
    probe = torch.randn(2, norm.normalized_shape[0], generator=torch.Generator().manual_seed(0))
    probe = probe.to(device)
    name = type(child).__name__
    try:
        with torch.no_grad():
            expected, got = child(probe).float(), norm(probe).float()
    except Exception as error:  # its forward, or ours, cannot run on the probe
        return f"{name} could not be compared with its replacement on a probe input: {error!r}"
    if not torch.allclose(got, expected, rtol=2e-2, atol=2e-2):
        diff = (got - expected).abs().max().item()
        return (
            f"{name} computes another formula than flashinfer.nn.RMSNorm with "
            f"{dict(offset=norm.offset, casting_mode=norm.casting_mode)} (off by {diff:.3g} "
            "on a probe input); for a (1 + weight) norm pass extra_rmsnorms={its class: "
            "{'offset': 1.0}}"
        )
    return None
