"""The schema of ``flashinfer backends --json`` as data (:data:`FIELDS`: a dotted path, ``[]``
for an array's items), which renders ``docs/report_schema.rst`` and checks the printed JSON.
"""

from __future__ import annotations

from typing import Any, NamedTuple

__all__ = ["FIELDS", "SCHEMA_VERSION", "Field", "schema_problems", "schema_rst"]

# Grows when a field is removed or changes meaning; 1 (no key) had versions, devices, gate, APIs.
SCHEMA_VERSION = 2


class Field(NamedTuple):
    """A field: its path, its JSON types (``|``-joined; ``any``) and what it holds."""

    path: str
    types: str
    text: str


# ``PATH TYPES TEXT``, an indented line continuing the text; parents first, in printed order.
_TABLE = """\
schema_version integer the version of this schema ({version})
apis array every API, sorted by the name users call
apis[].api string the name users call, e.g. 'flashinfer.mm'
apis[].qualified_name string where it is defined, e.g. 'flashinfer.gemm.mm'
apis[].experimental boolean whether the API itself is experimental
apis[].backends array its backends (empty: an API without backends)
apis[].backends[].name string the backend's name
apis[].backends[].experimental boolean whether the backend is experimental
apis[].backends[].runnable boolean|null whether it can run here; null: unknown (its checker
    declares no family)
apis[].backends[].reason string|null why it cannot run (or is unknown); else null
apis[].backends[].advice string|null what to do about it; else null
apis[].backends[].graduated_in string|null the release it graduated in (a stable backend that was
    experimental); else null
versions object the versions of flashinfer and what it runs on
versions.flashinfer string flashinfer's version
versions.python string Python's version, implementation and platform
versions.torch string torch's version
versions.torch_cuda string|null the CUDA torch was built with; null: no CUDA build
versions.torch_hip string|null the HIP torch was built with; null: no HIP build
versions.triton string|null Triton's installed version; null: not installed
versions.numpy string|null numpy's installed version; null: not installed
cuda object the CUDA runtime and driver
cuda.runtime string|null the CUDA runtime torch was built with; null: none
cuda.driver string|null the CUDA driver's version, e.g. '12.4'; null: no usable driver
devices array every CUDA device torch sees (empty: none)
devices[].index integer the device's index (cuda:N)
devices[].name string the device's name
devices[].compute_capability integer major * 10 + minor, e.g. 90
compute_capability integer|null device 0's compute capability; null: no CUDA device
triton_interpret string|null TRITON_INTERPRET's raw value; null: unset
triton_interpret_at_import boolean|null whether the Triton this process imported runs interpreted;
    null: not imported
gate object the experimental gate, FLASHINFER_ALLOW_EXPERIMENTAL_AUTO_BACKENDS
gate.variable string the variable's name
gate.value string|null its raw value; null: unset
gate.on boolean whether backend='auto' may choose experimental backends
gate.note string|null what is wrong with an unrecognised value; null: nothing
environment array every FLASHINFER_* and TRITON_* variable set here, by name (TRITON_INTERPRET even
    when unset)
environment[].name string the variable's name
environment[].value string|null its raw value; null: unset
environment[].read_by string 'flashinfer' (a variable of the table on the configuration page),
    'triton' (Triton's own, not read by flashinfer) or 'unknown' (a FLASHINFER_* name flashinfer
    does not read: likely a typo)
environment[].valid boolean|null whether flashinfer accepts the value; null: unset, or not
    flashinfer's
environment[].parsed any the value as flashinfer reads it (FLASHINFER_BACKENDS: {api: [backends]};
    a switch: true/false; FLASHINFER_LOGLEVEL: the level); null: unset or unparsable
environment[].meaning string what that value does, in words
environment[].suggestion string|null for an unknown name: the known variable it is closest to; else
    null
system object the operating system and CPU
system.os string platform.platform(), e.g. 'Linux-6.1-x86_64-with-glibc2.36'
system.system string 'Linux', 'Darwin' or 'Windows'
system.release string the kernel's release
system.distribution string|null the OS distribution (os-release); null: unknown
system.machine string the CPU architecture, e.g. 'x86_64'
system.cpu_model string|null the CPU's model name; null: not cheaply readable
system.cpu_count integer|null the machine's logical cores
system.cpus_usable integer|null the cores this process may run on; null: unknown
install object how flashinfer was installed
install.distribution string the distribution's name, 'flashinfer-gating'
install.version string|null its installed version; null: not installed
install.kind string 'editable' (a checkout), 'local directory', 'archive', 'vcs', 'wheel' (from an
    index) or 'not installed' (imported from a tree on sys.path)
install.url string|null the URL it was installed from (PEP 610); null: an index
install.path string the folder the flashinfer package is imported from
install.source_path string|null the checkout or directory it came from; null: none
install.git_commit string|null the checkout's commit; null: not a git checkout
install.git_branch string|null the checkout's branch; null: detached or none
install.note string|null a mismatch worth knowing (imported elsewhere); else null
autotuner_file null reserved for the tuning file a setting names, with its entries per environment;
    always null: no setting names one (a tuning file is named per call, autotune(tuning_file=...)
    or flashinfer autotune --tuning-file)
missing_modules array API modules missing from this build (strings)
"""


def _fields() -> tuple[Field, ...]:
    rows: list[list[str]] = []
    for line in _TABLE.splitlines():
        if line.startswith(" "):
            rows[-1][2] += " " + line.strip()
        else:
            rows.append(line.split(" ", 2))
    version = str(SCHEMA_VERSION)
    return tuple(
        Field(path, types, text.replace("{version}", version)) for path, types, text in rows
    )


FIELDS = _fields()

_JSON_TYPES = {"string": str, "integer": int, "boolean": bool, "null": type(None), "object": dict}


def _type_ok(value: Any, types: str) -> bool:
    ok = (isinstance(value, _JSON_TYPES.get(t, list)) for t in types.split("|"))
    return types == "any" or (any(ok) and not (isinstance(value, bool) and "boolean" not in types))


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
    """What in ``doc`` (a parsed report) the schema lacks, fields it lacks, and values of the
    wrong type; empty: it follows :data:`FIELDS`."""
    documented = {f.path: f for f in FIELDS}
    opaque = [f.path for f in FIELDS if f.types == "any"]
    found: dict[str, list[Any]] = {}
    _walk(doc, "", found)
    found.pop("", None)
    problems = [
        f"{path}: in the report but not in the schema"
        for path in found
        if path not in documented
        and not (path.endswith("[]") and path[:-2] in documented)  # an array's items
        and not any(path.startswith((f"{p}.", f"{p}[]")) for p in opaque)
    ]
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


def _escaped(text: str) -> str:
    """Plain text as reST (``*`` starts emphasis, a name ending in ``_`` is a link)."""
    out = []
    for char, after in zip(text, text[1:] + " ", strict=False):
        if char in "\\*`" or char == "_" and not (after.isalnum() or after == "_"):
            out.append("\\")
        out.append(char)
    return "".join(out)


def schema_rst() -> list[str]:
    lines = [f"``schema_version``: {SCHEMA_VERSION}.", "", ".. list-table::", "   :header-rows: 1"]
    lines += ["   :widths: 30 15 55", "", "   * - Field", "     - Type", "     - What it holds"]
    for f in FIELDS:
        lines += [f"   * - ``{f.path}``", f"     - {f.types}", f"     - {_escaped(f.text)}"]
    return lines
