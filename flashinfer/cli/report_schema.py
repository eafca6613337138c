"""The schema of ``flashinfer backends --json``: every field, its JSON type and what it holds,
in one table that the documentation is rendered from (``docs/report_schema.rst``) and that a
test holds the printed JSON to (:func:`schema_problems`).

A field's path is dotted; ``[]`` stands for every item of an array (``apis[].backends[].name``).
:data:`SCHEMA_VERSION` is the document's top-level ``schema_version``: it grows when a field
is removed or changes meaning, not when one is added.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["FIELDS", "SCHEMA_VERSION", "Field", "schema_problems", "schema_rst"]

SCHEMA_VERSION = 2
"""Version 1 (no ``schema_version`` key) had the versions, devices, gate and APIs only;
version 2 adds the settings, the system, CUDA, the install and the tuning file."""


@dataclass(frozen=True)
class Field:
    """One field of the report: its path, its JSON types (``|``-joined; ``any`` for any JSON
    value) and what it holds."""

    path: str
    types: str
    text: str


_S, _SN, _IN, _BN = "string", "string|null", "integer|null", "boolean|null"

FIELDS: tuple[Field, ...] = (
    Field("schema_version", "integer", f"the version of this schema ({SCHEMA_VERSION})"),
    Field("apis", "array", "every API, sorted by the name users call"),
    Field("apis[].api", _S, "the name users call, e.g. 'flashinfer.mm'"),
    Field("apis[].qualified_name", _S, "where it is defined, e.g. 'flashinfer.gemm.mm'"),
    Field("apis[].experimental", "boolean", "whether the API itself is experimental"),
    Field("apis[].backends", "array", "its backends (empty: an API without backends)"),
    Field("apis[].backends[].name", _S, "the backend's name"),
    Field("apis[].backends[].experimental", "boolean", "whether the backend is experimental"),
    Field(
        "apis[].backends[].runnable",
        _BN,
        "whether it can run here; null: unknown (its checker declares no family)",
    ),
    Field("apis[].backends[].reason", _SN, "why it cannot run (or is unknown); else null"),
    Field("apis[].backends[].advice", _SN, "what to do about it; else null"),
    Field(
        "apis[].backends[].graduated_in",
        _SN,
        "the release it graduated in (a stable backend that was experimental); else null",
    ),
    Field("versions", "object", "the versions of flashinfer and what it runs on"),
    Field("versions.flashinfer", _S, "flashinfer's version"),
    Field("versions.python", _S, "Python's version, implementation and platform"),
    Field("versions.torch", _S, "torch's version"),
    Field("versions.torch_cuda", _SN, "the CUDA torch was built with; null: no CUDA build"),
    Field("versions.torch_hip", _SN, "the HIP torch was built with; null: no HIP build"),
    Field("versions.triton", _SN, "Triton's installed version; null: not installed"),
    Field("versions.numpy", _SN, "numpy's installed version; null: not installed"),
    Field("cuda", "object", "the CUDA runtime and driver"),
    Field("cuda.runtime", _SN, "the CUDA runtime torch was built with; null: none"),
    Field("cuda.driver", _SN, "the CUDA driver's version, e.g. '12.4'; null: no usable driver"),
    Field("devices", "array", "every CUDA device torch sees (empty: none)"),
    Field("devices[].index", "integer", "the device's index (cuda:N)"),
    Field("devices[].name", _S, "the device's name"),
    Field("devices[].compute_capability", "integer", "major * 10 + minor, e.g. 90"),
    Field("compute_capability", _IN, "device 0's compute capability; null: no CUDA device"),
    Field("triton_interpret", _SN, "TRITON_INTERPRET's raw value; null: unset"),
    Field(
        "triton_interpret_at_import",
        _BN,
        "whether the Triton this process imported runs interpreted; null: not imported",
    ),
    Field("gate", "object", "the experimental gate, FLASHINFER_ALLOW_EXPERIMENTAL_AUTO_BACKENDS"),
    Field("gate.variable", _S, "the variable's name"),
    Field("gate.value", _SN, "its raw value; null: unset"),
    Field("gate.on", "boolean", "whether backend='auto' may choose experimental backends"),
    Field("gate.note", _SN, "what is wrong with an unrecognised value; null: nothing"),
    Field(
        "environment",
        "array",
        "every FLASHINFER_* and TRITON_* variable set here, by name (TRITON_INTERPRET even "
        "when unset)",
    ),
    Field("environment[].name", _S, "the variable's name"),
    Field("environment[].value", _SN, "its raw value; null: unset"),
    Field(
        "environment[].read_by",
        _S,
        "'flashinfer' (a variable of the table on the configuration page), 'triton' "
        "(Triton's own, not read by flashinfer) or 'unknown' (a FLASHINFER_* name flashinfer "
        "does not read: likely a typo)",
    ),
    Field(
        "environment[].valid",
        _BN,
        "whether flashinfer accepts the value; null: unset, or not flashinfer's",
    ),
    Field(
        "environment[].parsed",
        "any",
        "the value as flashinfer reads it (FLASHINFER_BACKENDS: {api: [backends]}; a "
        "switch: true/false; FLASHINFER_LOGLEVEL: the level); null: unset or unparsable",
    ),
    Field("environment[].meaning", _S, "what that value does, in words"),
    Field(
        "environment[].suggestion",
        _SN,
        "for an unknown name: the known variable it is closest to; else null",
    ),
    Field("system", "object", "the operating system and CPU"),
    Field("system.os", _S, "platform.platform(), e.g. 'Linux-6.1-x86_64-with-glibc2.36'"),
    Field("system.system", _S, "'Linux', 'Darwin' or 'Windows'"),
    Field("system.release", _S, "the kernel's release"),
    Field("system.distribution", _SN, "the OS distribution (os-release); null: unknown"),
    Field("system.machine", _S, "the CPU architecture, e.g. 'x86_64'"),
    Field("system.cpu_model", _SN, "the CPU's model name; null: not cheaply readable"),
    Field("system.cpu_count", _IN, "the machine's logical cores"),
    Field("system.cpus_usable", _IN, "the cores this process may run on; null: unknown"),
    Field("install", "object", "how flashinfer was installed"),
    Field("install.distribution", _S, "the distribution's name, 'flashinfer-gating'"),
    Field("install.version", _SN, "its installed version; null: not installed"),
    Field(
        "install.kind",
        _S,
        "'editable' (a checkout), 'local directory', 'archive', 'vcs', 'wheel' (from an "
        "index) or 'not installed' (imported from a tree on sys.path)",
    ),
    Field("install.url", _SN, "the URL it was installed from (PEP 610); null: an index"),
    Field("install.path", _S, "the folder the flashinfer package is imported from"),
    Field("install.source_path", _SN, "the checkout or directory it came from; null: none"),
    Field("install.git_commit", _SN, "the checkout's commit; null: not a git checkout"),
    Field("install.git_branch", _SN, "the checkout's branch; null: detached or none"),
    Field("install.note", _SN, "a mismatch worth knowing (imported elsewhere); else null"),
    Field(
        "autotuner_file",
        "null",
        "reserved for the tuning file a setting names, with its entries per environment; "
        "always null: no setting names one (a tuning file is named per call, "
        "autotune(tuning_file=...) or flashinfer autotune --tuning-file)",
    ),
    Field("missing_modules", "array", "API modules missing from this build (strings)"),
)
"""Every field of the report, parents before their fields, in the order the report prints
them: what a reader of ``flashinfer backends --json | head`` wants first (every API and
whether its backends run here), then the versions and the rest."""

_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "boolean": (bool,),
    "null": (type(None),),
    "object": (dict,),
    "array": (list,),
}


def _type_ok(value: Any, types: str) -> bool:
    if types == "any":
        return True
    for name in types.split("|"):
        if name == "integer" and isinstance(value, bool):
            continue
        if isinstance(value, _JSON_TYPES[name]):
            return True
    return False


def _walk(value: Any, path: str, found: dict[str, list[Any]]) -> None:
    found.setdefault(path, []).append(value)
    if isinstance(value, dict):
        for key, item in value.items():
            _walk(item, f"{path}.{key}" if path else key, found)
    elif isinstance(value, list):
        for item in value:
            if isinstance(item, (dict, list)):
                _walk(item, f"{path}[]", found)


def schema_problems(doc: Any) -> list[str]:
    """What in ``doc`` (a parsed report) the schema does not document, documented fields an
    object of it lacks (each array item is checked), and values of the wrong JSON type.  Empty: the
    document follows :data:`FIELDS`.  A field of ``any`` type is not walked into."""
    documented = {f.path: f for f in FIELDS}
    found: dict[str, list[Any]] = {}
    _walk(doc, "", found)
    found.pop("", None)
    problems = []
    for path in found:
        if path in documented or path.endswith("[]") and path[:-2] in documented:
            continue  # an array's items: their fields are documented
        if any(path.startswith(f"{p}.") or path.startswith(f"{p}[]") for p in _opaque()):
            continue
        problems.append(f"{path}: in the report but not in the schema")
    found[""] = [doc]
    for field in FIELDS:
        parent, _, key = field.path.rpartition(".")
        holders = [v for v in found.get(parent, []) if isinstance(v, dict)]
        if any(key not in holder for holder in holders):  # every object of its parent has it
            problems.append(f"{field.path}: in the schema but not in the report")
        for value in found.get(field.path, []):
            if not _type_ok(value, field.types):
                problems.append(f"{field.path}: {type(value).__name__} is not {field.types}")
    if isinstance(doc, dict) and doc.get("schema_version") != SCHEMA_VERSION:
        problems.append(f"schema_version: {doc.get('schema_version')!r}, not {SCHEMA_VERSION}")
    return problems


def _opaque() -> list[str]:
    return [f.path for f in FIELDS if f.types == "any"]


def schema_rst() -> list[str]:
    """The schema as reST: a table of every field (``docs/report_schema.rst``)."""
    lines = [
        f"``schema_version``: {SCHEMA_VERSION}.",
        "",
        ".. list-table::",
        "   :header-rows: 1",
        "   :widths: 30 15 55",
        "",
        "   * - Field",
        "     - Type",
        "     - What it holds",
    ]
    for field in FIELDS:
        lines += [
            f"   * - ``{field.path}``",
            f"     - {field.types}",
            f"     - {_escaped(field.text)}",
        ]
    return lines


def _escaped(text: str) -> str:
    """Plain text as reST: ``*`` (as in ``FLASHINFER_*``) would start emphasis, and a name
    ending in ``_`` before it would be read as a link."""
    out = []
    for i, char in enumerate(text):
        after = text[i + 1] if i + 1 < len(text) else " "
        if char in "\\*`" or char == "_" and not (after.isalnum() or after == "_"):
            out.append("\\")
        out.append(char)
    return "".join(out)
