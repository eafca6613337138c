"""The tuning file's format: its schema version, what an entry holds (the types
:class:`TuningFileEntry` and :class:`TuningFileDocument`, which the writer builds and the
reader reads through), how a document is parsed and checked, and how it is written as text.

The rules around the format (merging, environments, what is skipped) are described in
:mod:`flashinfer.autotuner.tuning_file`, the public home of the names defined here.  Never
pickle: loading a tuning file cannot run code.
"""

from __future__ import annotations

import json
import math
import os
import stat
from collections.abc import Mapping
from typing import Any, TypedDict, cast

from flashinfer.autotuner._types import Choice, TunedResults, is_number, is_real_time
from flashinfer.autotuner.fingerprint import (
    FIELDS,
    WILDCARD,
    Fingerprint,
    check_fingerprint,
    schema1_fingerprint,
)
from flashinfer.autotuner.keys import Key, key_from_json, key_to_json
from flashinfer.autotuner.tuning_file.paths import PathProblem, not_regular, path_problem
from flashinfer.gating.exposed import exposed_in

__all__ = [
    "MAX_DEPTH",
    "READABLE_SCHEMAS",
    "SCHEMA_VERSION",
    "TuningFileError",
    "TuningFileWarning",
    "TuningFileDocument",
    "TuningFileEntry",
]

SCHEMA_VERSION = 2

#: The versions this flashinfer reads: its own, and schema 1 (entries without a fingerprint,
#: read as stamped with the versions the file's header records; see :mod:`.fingerprint`).
READABLE_SCHEMAS = (1, SCHEMA_VERSION)

#: Deepest nesting of JSON arrays/objects a tuning file may have (a real one has 6 or 7
#: levels; tactics add a few).  Deeper files are unreadable: never a ``RecursionError``.
MAX_DEPTH = 64


@exposed_in("flashinfer.autotuner.tuning_file")
class TuningFileWarning(UserWarning):
    """A persisted autotune file, or some of its entries, could not be used."""


@exposed_in("flashinfer.autotuner.tuning_file")
class TuningFileError(ValueError):
    """A tuning file cannot be used as asked, found before any work: saving would lose
    results another flashinfer can use (a file of another schema version), or the path
    cannot be a tuning file (it names a directory, a FIFO, a socket or a device, or lies in
    a directory that does not exist).  Nothing was read or written.  ``path`` and
    ``reason`` (what the file holds, or what the path names) are attributes, for callers
    that word their own message."""

    def __init__(self, message: str, *, path: str = "", reason: str = "") -> None:
        super().__init__(message)
        self.path = path
        self.reason = reason


class TuningFileEntry(TypedDict):
    """One item of a tuning file's ``entries``: one tuned result, i.e. a tuning key, the
    (backend, tactic) chosen for it and the environment that measured it.  As written (one
    entry per line)::

        {"op": "flashinfer.gemm.mm",
         "inputs": [{"shape": [128, 4096], "dtype": "float32"},
                    {"shape": [4096, 4096], "dtype": "float32"}, null, null],
         "device": "cpu", "compute_capability": null,
         "backend": "torch", "tactic": null, "median_ms": 12.5, "iqr_ms": 0.25,
         "experimental": false,
         "fingerprint": {"flashinfer": "0.1.0", "torch": "2.13.0+cpu", "triton": "3.9.0",
                         "device": "cpu", "compute_capability": null,
                         "triton_interpret": true}}

    The type is what a save writes: every field, in this order (``iqr_ms`` when it is
    known).  A reader is more lenient
    where a field says so (a field a file may leave out); an entry whose fields hold
    anything else is skipped on load, and written back untouched by a save.  At run time
    an entry is a plain ``dict``, the JSON object itself.
    """

    #: The op's qualified name, its ``api_key`` (``"flashinfer.gemm.mm"``), the first part
    #: of the tuning key.  JSON string; required; schemas 1 and 2.
    op: str
    #: The op's inputs as the key holds them, one item per input (a tensor's shape, every
    #: dimension already rounded up to a power of two, and dtype; ``null``; a scalar
    #: ``{"value": true}``; ``"scalar"`` for a value left out of the key; see
    #: :mod:`flashinfer.autotuner.keys`).  JSON array; required; schemas 1 and 2.
    inputs: list[Any]
    #: The key's device type (``"cuda"``, ``"cpu"``; ``null`` for inputs without a tensor).
    #: JSON string or null; a file may leave it out (read as null); schemas 1 and 2.
    device: str | None
    #: The key's compute capability, ``major * 10 + minor`` (``90``); ``null`` off CUDA.
    #: JSON integer (not ``true``) or null; a file may leave it out (read as null);
    #: schemas 1 and 2.
    compute_capability: int | None
    #: The chosen backend's name; one the op no longer has is skipped on load.  JSON
    #: string; required; schemas 1 and 2.
    backend: str
    #: The chosen tactic as JSON holds it (a tuple becomes an array; ``null`` is the
    #: runner's default); on load it must equal one of the backend's ``tactic_space()`` read
    #: the same way.  Any JSON value; required; schemas 1 and 2.
    tactic: Any
    #: The chosen pair's median time in milliseconds (6 significant digits), loaded as the
    #: choice's ``median_s``.  JSON number, finite and ``>= 0`` (anything else is
    #: malformed); required; schemas 1 and 2.
    median_ms: float
    #: The interquartile range of the timed calls ``median_ms`` is the median of, in
    #: milliseconds (6 significant digits): the spread of the measurement.  One more than
    #: ``NOISY_SPREAD`` (10 %) of ``median_ms`` marks a noisy measurement (a busy machine),
    #: which the next ``autotune()`` block that loads it times again.  JSON number, finite
    #: and ``>= 0``, or null (unknown: never noisy); written when known, so a file may leave
    #: it out (read as null: files written before it existed, whose entries a save writes
    #: back as they were); schema 2.  Older flashinfers ignore it.
    iqr_ms: float | None
    #: Whether ``backend`` was experimental when the result was saved, informative only and
    #: never read (the op's own table decides on load).  JSON boolean; a file may leave it
    #: out; schemas 1 and 2.
    experimental: bool
    #: The environment that measured the result, an object of the fields
    #: ``flashinfer``, ``torch``, ``triton``, ``device``, ``compute_capability`` and
    #: ``triton_interpret`` (see :mod:`flashinfer.autotuner.fingerprint`); a field written
    #: ``"*"``, or left out, matches anything.  JSON object; a file may leave it out or
    #: write ``null`` (matches anything); schema 2 (a schema-1 file's entries read as
    #: stamped with the versions its header records).
    fingerprint: Fingerprint


class TuningFileDocument(TypedDict):
    """A whole tuning file: a header, then the entries::

        {
          "schema_version": 2,
          "flashinfer_version": "0.1.0",
          "torch_version": "2.13.0+cpu",
          "entries": [
            ...
          ]
        }

    What a save writes, in this order.  A reader needs ``schema_version`` (a file of a
    version it cannot read is refused whole) and, for a version it reads, ``entries``.
    """

    #: The file's schema version, :data:`SCHEMA_VERSION` when written; a reader takes
    #: :data:`READABLE_SCHEMAS`.  JSON integer (not ``true``); required.
    schema_version: int
    #: ``flashinfer.__version__`` of the last writer.  JSON string; informative only in
    #: schema 2; in schema 1, the ``flashinfer`` fingerprint of every entry (where the
    #: header leaves it out, or holds no string, that field matches anything).
    flashinfer_version: str
    #: ``torch.__version__`` of the last writer.  JSON string; as ``flashinfer_version``,
    #: for the ``torch`` fingerprint field.
    torch_version: str
    #: One :class:`TuningFileEntry` per tuning key and environment, sorted.  A save writes back
    #: the file's entries it cannot read (another environment's, or malformed ones) as the
    #: file held them.  JSON array; required.
    entries: list[TuningFileEntry]


def shorten(text: str, limit: int = 60) -> str:
    """``text`` cut to ``limit`` characters: a hostile file cannot flood a message."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _nested_deeper_than(doc: Any, limit: int) -> bool:
    """Whether arrays/objects nest more than ``limit`` levels (iterative: no recursion)."""
    stack = [(doc, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict):
            children: Any = value.values()
        elif isinstance(value, list):
            children = value
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


def parse_document(data: bytes) -> tuple[dict[str, Any], None] | tuple[None, str]:
    """The tuning file's document in ``data``, or ``(None, why it is not one)``.

    A document of another schema version is returned whatever else it holds (its layout
    is that version's business).  ``NaN``/``Infinity`` tokens are accepted here (older
    versions wrote them): an entry holding one is skipped on load and dropped, with a
    warning, on save.
    """
    try:
        doc = json.loads(data.decode("utf-8"))
    except RecursionError:
        return None, f"nested deeper than {MAX_DEPTH} levels: not a tuning file"
    except (UnicodeDecodeError, ValueError) as exc:
        return None, f"not valid JSON (corrupt or truncated?): {shorten(str(exc), 120)}"
    if _nested_deeper_than(doc, MAX_DEPTH):
        return None, f"nested deeper than {MAX_DEPTH} levels: not a tuning file"
    if not isinstance(doc, dict) or "schema_version" not in doc:
        return None, "not a tuning file (no top-level 'schema_version')"
    version = doc["schema_version"]
    if type(version) is not int:  # bool is an int subclass: true is not version 1
        shown = shorten(json.dumps(version))
        return None, f"not a tuning file ('schema_version' must be an integer, not {shown})"
    if version in READABLE_SCHEMAS and not isinstance(doc.get("entries"), list):
        return None, "not a tuning file ('entries' is not a list)"
    return doc, None


def shown_version(version: Any) -> str:
    """A file's ``schema_version`` as messages show it (whatever the file holds)."""
    return shorten(repr(version), 24)


def checked_path(path: str | os.PathLike[str], *, writing: bool = True, local: bool = True) -> str:
    """``path`` as a string, checked before any work: ``ValueError`` for an empty one (it
    would name the working directory, and its lock ``.lock`` there), and
    :class:`TuningFileError` for one that cannot be a tuning file (one message, from
    :func:`.paths.path_problem`): it exists and is not a regular file, or (``writing``: it
    will be saved to, as by ``autotune(tuning_file=path)``) its directory does not exist.
    ``local=False``: another process (rank 0 of a process group) uses the file, so only the
    path's form is checked here.  Opens nothing, creates nothing."""
    text = os.fspath(path)
    if not isinstance(text, str):
        raise TypeError(f"tuning file path must be a str or os.PathLike[str], not {path!r}")
    if not text:
        raise ValueError("tuning file path is empty; name a file, e.g. 'tuned.json'")
    problem = path_problem(text, writing=writing) if local else None
    if problem is not None:
        raise _path_error(problem)
    return text


def _path_error(problem: PathProblem) -> TuningFileError:
    return TuningFileError(problem.message, path=problem.path, reason=problem.reason)


def read_bytes_nofollow(path: str) -> bytes:
    """The bytes of the tuning file ``path`` (``FileNotFoundError`` if there is none).  Opened
    without blocking and checked once open, so a path that became a FIFO or a device after
    :func:`checked_path` looked is refused (:class:`TuningFileError`), never read."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    with open(fd, "rb", closefd=True) as f:
        mode = os.fstat(f.fileno()).st_mode
        if not stat.S_ISREG(mode):
            raise _path_error(not_regular(path, mode))
        return f.read()


def strict_json(value: Any) -> bool:
    try:
        _dump(value)
    except ValueError:
        return False
    return True


def normalise_document(value: Any) -> Any:
    """A tactic as it reads back from JSON (tuples become lists)."""
    return json.loads(json.dumps(value))


_KEY_FIELDS = ("op", "inputs", "device", "compute_capability")


def key_identity(obj: Mapping[str, Any]) -> str:
    """Identity of an entry's tuning key."""
    return json.dumps({k: obj.get(k) for k in _KEY_FIELDS}, sort_keys=True)


def canonical_json(obj: Mapping[str, Any]) -> str:
    """Identity of an entry, for merging files: its key and its fingerprint (a field left
    out is the same as ``"*"``).  Entries of one key measured in different environments
    (an H100 and an H200 node, say) are different entries: a shared file keeps both."""
    identity = {k: obj.get(k) for k in _KEY_FIELDS}
    fingerprint = obj.get("fingerprint")
    if fingerprint is None or isinstance(fingerprint, dict):
        fingerprint = {name: (fingerprint or {}).get(name, WILDCARD) for name in FIELDS}
    identity["fingerprint"] = fingerprint
    return json.dumps(identity, sort_keys=True)


def file_entries(doc: dict[str, Any]) -> list[Any]:
    """The entries of a readable document as this schema holds them: a schema-1 file's are
    stamped with the fingerprint its header records (:func:`.schema1_fingerprint`), so that
    nothing saved before fingerprints existed is lost, nor taken for another environment's."""
    entries = doc["entries"]
    if doc["schema_version"] != 1:
        return entries
    stamp = schema1_fingerprint(doc)
    return [{**e, "fingerprint": dict(stamp)} if isinstance(e, dict) else e for e in entries]


def _dump(value: Any) -> str:
    return json.dumps(value, allow_nan=False)  # strict JSON only: never NaN or Infinity


def dump_json(doc: TuningFileDocument) -> str:
    """Pretty JSON with one entry per line: readable and diff-friendly."""
    head = {k: v for k, v in doc.items() if k != "entries"}
    lines = [f"  {_dump(k)}: {_dump(v)}," for k, v in head.items()]
    body = ",\n".join(f"    {_dump(e)}" for e in doc["entries"])
    entries = f'  "entries": [\n{body}\n  ]' if body else '  "entries": []'
    return "{\n" + "\n".join(lines) + "\n" + entries + "\n}\n"


def entry_record(
    key: Key, choice: Choice, tuner: TunedResults, fingerprint: Fingerprint
) -> TuningFileEntry:
    """The file entry of one result, stamped with the environment that measured it: the
    writer's one line per field of :class:`TuningFileEntry`, in its order."""
    iqr_s = tuner.spread(key)
    registered = tuner.registered().get(key[0])
    experimental = bool(registered and choice.backend in registered[0].experimental_backends)
    tuning_key = key_to_json(key)
    record: dict[str, Any] = {
        "op": tuning_key["op"],
        "inputs": tuning_key["inputs"],
        "device": tuning_key["device"],
        "compute_capability": tuning_key["compute_capability"],
        "backend": choice.backend,
        "tactic": normalise_document(choice.tactic),
        "median_ms": float(f"{choice.median_s * 1e3:.6g}"),
        "iqr_ms": None if iqr_s is None else float(f"{iqr_s * 1e3:.6g}"),
        "experimental": experimental,
        "fingerprint": fingerprint,
    }
    if iqr_s is None:  # unknown (e.g. loaded from an older file): left out, as it was
        del record["iqr_ms"]
    return cast(TuningFileEntry, record)


def read_entry(raw: Any) -> tuple[Key, TuningFileEntry]:
    """One item of a file's ``entries``, checked: its tuning key, and the item itself as a
    :class:`TuningFileEntry` whose fields the reader uses hold their declared types (the fields
    a file may leave out may still be missing: read those with ``.get``).  A malformed item
    raises ``ValueError``, ``KeyError`` (a required field is missing: the message is its
    name) or ``TypeError`` saying what is wrong; of several problems, the first in this
    order: the key's fields, a missing ``backend``, ``tactic`` or ``median_ms``, then the
    values of ``median_ms``, ``iqr_ms``, ``backend`` and ``fingerprint``."""
    key = key_from_json(raw)  # op, inputs, device, compute_capability; raw is a dict
    backend, _tactic = raw["backend"], raw["tactic"]
    median_seconds(raw["median_ms"])
    if raw.get("iqr_ms") is not None:
        median_seconds(raw["iqr_ms"], "iqr_ms")
    if not isinstance(backend, str):
        raise ValueError(f"bad backend {shorten(repr(backend))}")
    check_fingerprint(raw.get("fingerprint"))
    entry: TuningFileEntry = raw
    return key, entry


def median_seconds(value: Any, name: str = "median_ms") -> float:
    """A file's ``median_ms`` (or ``name``, another time in milliseconds) in seconds;
    ``ValueError`` unless a finite number >= 0."""
    if not is_number(value):
        raise ValueError(f"bad {name} {shorten(repr(value))}")
    try:
        ms = float(value)
    except OverflowError:
        ms = math.inf
    if not is_real_time(ms):
        raise ValueError(f"{name} {shorten(repr(value), 24)} is not a finite number >= 0")
    return ms / 1e3
