"""flashinfer in a model: drop-in modules and a reversible swap of a model's modules.

- :class:`RMSNorm`: ``torch.nn.RMSNorm`` (and HF's ``LlamaRMSNorm``) computed by
  :func:`flashinfer.rmsnorm`, with the same ``state_dict`` keys and ``eps`` handling.
- :class:`Linear`: a ``torch.nn.Linear`` computed by :func:`flashinfer.mm`.
- :func:`apply_flashinfer`: swap a model's RMSNorm (and, if asked, linear) modules in place,
  report what was swapped, and undo it (``revert()``, or leave a ``with`` block).

``import flashinfer`` does not import this package; ``flashinfer.nn`` (its first access)
or ``import flashinfer.nn`` does.  See
``docs/model.rst`` ("Use it in a model").
"""

from __future__ import annotations

from flashinfer.nn.modules import CASTING_MODES, Linear, RMSNorm
from flashinfer.nn.patching import KNOWN_RMSNORMS, PatchReport, apply_flashinfer

__all__ = [
    "CASTING_MODES",
    "KNOWN_RMSNORMS",
    "Linear",
    "PatchReport",
    "RMSNorm",
    "apply_flashinfer",
]
