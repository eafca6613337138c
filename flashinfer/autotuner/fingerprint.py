"""The environment a tuned result was measured in, and whether it is this process's (the
rules: docs/api/autotuner.rst, "One file, many machines").  Triton's version is read from
its distribution's metadata (never imported); ``device`` is the GPU's name for a CUDA key,
since an H100 and an H200 share capability 90.
"""

from __future__ import annotations

import functools
import importlib.metadata
import weakref
from typing import Any

import torch

from flashinfer._version import __version__
from flashinfer.autotuner._types import Choice
from flashinfer.autotuner.keys import Key
from flashinfer.kernels.availability import interpreter_enabled

Fingerprint = dict[str, Any]

FIELDS = ("flashinfer", "torch", "triton", "device", "compute_capability", "triton_interpret")
WILDCARD = "*"

# The JSON type each field holds (besides "*"); None: may also be null.
_TYPES: dict[str, tuple[type, ...]] = {
    "flashinfer": (str,),
    "torch": (str,),
    "triton": (str, type(None)),
    "device": (str, type(None)),
    "compute_capability": (int, type(None)),
    "triton_interpret": (bool,),
}

#: Distributions that install the ``triton`` module, in the order they are looked for.
_TRITON_DISTRIBUTIONS = ("triton", "pytorch-triton", "pytorch-triton-rocm", "pytorch-triton-xpu")


@functools.cache
def _triton_version() -> str | None:
    for name in _TRITON_DISTRIBUTIONS:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


@functools.cache
def _gpu_name(capability: int | None) -> str | None:
    """The name of this machine's first CUDA device of ``capability`` (None: there is none)."""
    if capability is None or not torch.cuda.is_available():
        return None
    for index in range(torch.cuda.device_count()):
        major, minor = torch.cuda.get_device_capability(index)
        if major * 10 + minor == capability:
            return torch.cuda.get_device_name(index)
    return None


def flashinfer_version() -> str:
    """``flashinfer.__version__`` (from ``_version``: the root would be an import cycle)."""
    return __version__


def process_fingerprint(key: Key) -> Fingerprint:
    """This process's fingerprint for results of ``key`` (stamped, and matched against)."""
    device_type, capability = key[2], key[3]
    device = _gpu_name(capability) if device_type == "cuda" else device_type
    return {
        "flashinfer": flashinfer_version(),
        "torch": torch.__version__,
        "triton": _triton_version(),
        "device": device,
        "compute_capability": capability,
        "triton_interpret": interpreter_enabled(),
    }


def schema1_fingerprint(header: dict[str, Any]) -> Fingerprint:
    """A schema-1 file's entries' fingerprint: its header's versions (the rest match all)."""
    recorded = {
        "flashinfer": header.get("flashinfer_version"),
        "torch": header.get("torch_version"),
    }
    return {name: value for name, value in recorded.items() if isinstance(value, str)}


def check_fingerprint(value: Any) -> Fingerprint:
    """An entry's ``fingerprint`` (absent: ``{}``); ``ValueError`` naming a bad field."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValueError(f"'fingerprint' is not an object: {_shown(value)}")
    for name, types in _TYPES.items():
        field = value.get(name, WILDCARD)
        # bool is an int subclass: True is not a compute capability.
        if field != WILDCARD and (type(field) not in types):
            raise ValueError(f"fingerprint field {name!r} holds {_shown(field)}")
    return value


def differences(fingerprint: Fingerprint, here: Fingerprint) -> list[str]:
    """How ``fingerprint`` differs from ``here``: ``["torch '2.12.0' vs '2.13.0' here"]``."""
    return [
        f"{name} {_shown(fingerprint[name])} vs {_shown(here[name])} here"
        for name in FIELDS
        if fingerprint.get(name, WILDCARD) != WILDCARD and fingerprint[name] != here[name]
    ]


def specificity(fingerprint: Fingerprint) -> int:
    """How many fields ``fingerprint`` pins (neither ``"*"`` nor left out)."""
    return sum(fingerprint.get(name, WILDCARD) != WILDCARD for name in FIELDS)


# Per tuner (weakly), each loaded result's Choice object and fingerprint: saved again, it
# keeps the environment that measured it, until the key is tuned anew (another Choice).
_LOADED: weakref.WeakKeyDictionary[Any, dict[Key, tuple[Choice, Fingerprint]]] = (
    weakref.WeakKeyDictionary()
)


def remember_loaded(tuner: Any, key: Key, choice: Choice, fingerprint: Fingerprint) -> None:
    """Record that ``tuner`` holds ``choice`` for ``key`` because a file said so."""
    _LOADED.setdefault(tuner, {})[key] = (choice, fingerprint)


def loaded_fingerprint(tuner: Any, key: Key, choice: Choice) -> Fingerprint | None:
    """The fingerprint ``choice`` was loaded with; None when it is this process's result."""
    loaded = _LOADED.get(tuner, {}).get(key)
    return loaded[1] if loaded is not None and loaded[0] is choice else None


def matches(value: Any, here: Fingerprint) -> bool:
    """Whether a file entry's ``fingerprint`` matches ``here`` (a malformed one: never)."""
    try:
        return not differences(check_fingerprint(value), here)
    except ValueError:
        return False


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
