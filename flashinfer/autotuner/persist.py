"""The tuning file's JSON: its types, parsing, merging on save and validating on load
(public home: :mod:`flashinfer.autotuner.tuning_file`; the disk is :mod:`.disk`)."""

from __future__ import annotations

import json
import math
import os
import warnings
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypedDict, cast

import torch

from flashinfer.autotuner._types import Choice, TunedResults, is_number, is_real_time
from flashinfer.autotuner.disk import (
    TuningFileError,
    TuningFileWarning,
    checked_path,
    held,
    read_bytes,
    resolved,
    write_file,
)
from flashinfer.autotuner.keys import (
    FIELDS,
    WILDCARD,
    Fingerprint,
    Key,
    check_fingerprint,
    differences,
    flashinfer_version,
    key_from_json,
    key_to_json,
    matches,
    process_fingerprint,
    schema1_fingerprint,
    specificity,
)
from flashinfer.gating.exposed import exposed_in
from flashinfer.gating.gate import experimental_auto_backends_allowed
from flashinfer.gating.history import renamed_api, tuning_name
from flashinfer.gating.messages import cached_experimental_skipped
from flashinfer.settings.stacklevel import user_stacklevel

SCHEMA_VERSION = 2
#: The versions this flashinfer reads: its own, and schema 1 (entries without a fingerprint).
READABLE_SCHEMAS = (1, SCHEMA_VERSION)
#: Deepest JSON nesting a tuning file may have (a real one: 6 or 7): deeper is unreadable.
MAX_DEPTH = 64


class TuningFileEntry(TypedDict):
    """One item of a tuning file's ``entries``: a tuning key, the (backend, tactic) chosen
    for it and the environment that measured it.  As written (one entry per line)::

        {"op": "flashinfer.gemm.mm",
         "inputs": [{"shape": [128, 4096], "dtype": "float32"},
                    {"shape": [4096, 4096], "dtype": "float32"}, null, null],
         "device": "cpu", "compute_capability": null,
         "backend": "torch", "tactic": null, "median_ms": 12.5, "iqr_ms": 0.25,
         "experimental": false,
         "fingerprint": {"flashinfer": "0.1.0", "torch": "2.13.0+cpu", "triton": "3.9.0",
                         "device": "cpu", "compute_capability": null,
                         "triton_interpret": true}}

    A save writes every field, in this order (``iqr_ms`` when known).  An entry whose fields
    hold anything else is skipped on load, and written back untouched by a save.
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
    #: JSON integer (not ``true``) or null; a file may leave it out; schemas 1 and 2.
    compute_capability: int | None
    #: The chosen backend's name; one the op no longer has is skipped on load.  JSON
    #: string; required; schemas 1 and 2.
    backend: str
    #: The chosen tactic as JSON holds it (a tuple becomes an array; ``null`` is the
    #: runner's default); on load it must equal one of the backend's ``tactic_space()`` read
    #: the same way.  Any JSON value; required; schemas 1 and 2.
    tactic: Any
    #: The chosen pair's median time in milliseconds (6 significant digits).  JSON number,
    #: finite and ``>= 0`` (anything else is malformed); required; schemas 1 and 2.
    median_ms: float
    #: The interquartile range of the timed calls, in milliseconds: more than
    #: ``NOISY_SPREAD`` (10 %) of ``median_ms`` marks a noisy measurement, which the next
    #: ``autotune()`` block that loads it times again.  JSON number, finite and ``>= 0``, or
    #: null (unknown); a file may leave it out; schema 2.  Older flashinfers ignore it.
    iqr_ms: float | None
    #: Whether ``backend`` was experimental when saved, informative only (the op's own table
    #: decides on load).  JSON boolean; a file may leave it out; schemas 1 and 2.
    experimental: bool
    #: The environment that measured the result, an object of the fields ``flashinfer``,
    #: ``torch``, ``triton``, ``device``, ``compute_capability`` and ``triton_interpret``
    #: (docs/api/autotuner.rst, "One file, many machines"); a field written ``"*"``, or left out,
    #: matches anything.  JSON object; a file may leave it out or write ``null``; schema 2.
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

    What a save writes, in this order.  A reader needs ``schema_version`` and, for a
    version it reads, ``entries``.
    """

    #: The file's schema version, :data:`SCHEMA_VERSION` when written; a reader takes
    #: :data:`READABLE_SCHEMAS`.  JSON integer (not ``true``); required.
    schema_version: int
    #: ``flashinfer.__version__`` of the last writer.  JSON string; in schema 1, the
    #: ``flashinfer`` fingerprint of every entry.
    flashinfer_version: str
    #: ``torch.__version__`` of the last writer.  JSON string; as ``flashinfer_version``.
    torch_version: str
    #: One :class:`TuningFileEntry` per tuning key and environment, sorted.  JSON array;
    #: required.
    entries: list[TuningFileEntry]


# ---- the text ------------------------------------------------------------------------------


def shorten(text: str, limit: int = 60) -> str:
    """``text`` cut to ``limit`` characters: a hostile file cannot flood a message."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


def shown_version(version: Any) -> str:
    return shorten(repr(version), 24)


def _too_deep(doc: Any) -> bool:
    stack = [(doc, 1)]  # iterative: no recursion on a hostile file
    while stack:
        value, depth = stack.pop()
        children = value.values() if isinstance(value, dict) else value
        if isinstance(value, (dict, list)):
            if depth > MAX_DEPTH:
                return True
            stack.extend((child, depth + 1) for child in children)
    return False


def parse_document(data: bytes) -> tuple[dict[str, Any], None] | tuple[None, str]:
    """The document in ``data`` (of any schema version), or ``(None, why it is not one)``."""
    deep = f"nested deeper than {MAX_DEPTH} levels: not a tuning file"
    try:
        doc = json.loads(data.decode("utf-8"))
    except RecursionError:
        return None, deep
    except (UnicodeDecodeError, ValueError) as exc:
        return None, f"not valid JSON (corrupt or truncated?): {shorten(str(exc), 120)}"
    if _too_deep(doc):
        return None, deep
    if not isinstance(doc, dict) or "schema_version" not in doc:
        return None, "not a tuning file (no top-level 'schema_version')"
    version = doc["schema_version"]
    if type(version) is not int:  # bool is an int subclass: true is not version 1
        shown = shorten(json.dumps(version))
        return None, f"not a tuning file ('schema_version' must be an integer, not {shown})"
    if version in READABLE_SCHEMAS and not isinstance(doc.get("entries"), list):
        return None, "not a tuning file ('entries' is not a list)"
    return doc, None


def _dump(value: Any) -> str:
    return json.dumps(value, allow_nan=False)  # strict JSON only: never NaN or Infinity


def strict_json(value: Any) -> bool:
    try:
        _dump(value)
    except ValueError:
        return False
    return True


def dump_json(doc: TuningFileDocument) -> str:
    """Pretty JSON with one entry per line: readable and diff-friendly."""
    head = [f"  {_dump(k)}: {_dump(v)}," for k, v in doc.items() if k != "entries"]
    body = ",\n".join(f"    {_dump(e)}" for e in doc["entries"])
    entries = f'  "entries": [\n{body}\n  ]' if body else '  "entries": []'
    return "{\n" + "\n".join(head) + "\n" + entries + "\n}\n"


def normalise_document(value: Any) -> Any:
    """A tactic as it reads back from JSON (tuples become lists)."""
    return json.loads(json.dumps(value))


_KEY_FIELDS = ("op", "inputs", "device", "compute_capability")


def key_identity(obj: Mapping[str, Any]) -> str:
    return json.dumps({k: obj.get(k) for k in _KEY_FIELDS}, sort_keys=True)


def canonical_json(obj: Mapping[str, Any]) -> str:
    """An entry's identity: its key and fingerprint (a field left out is ``"*"``)."""
    identity = {k: obj.get(k) for k in _KEY_FIELDS}
    fingerprint = obj.get("fingerprint")
    if fingerprint is None or isinstance(fingerprint, dict):
        fingerprint = {name: (fingerprint or {}).get(name, WILDCARD) for name in FIELDS}
    identity["fingerprint"] = fingerprint
    return json.dumps(identity, sort_keys=True)


def file_entries(doc: dict[str, Any]) -> list[Any]:
    """A readable document's entries; a schema-1 file's stamped with its header's versions."""
    if doc["schema_version"] != 1:
        return doc["entries"]
    stamp = schema1_fingerprint(doc)
    return [{**e, "fingerprint": dict(stamp)} if isinstance(e, dict) else e for e in doc["entries"]]


def entry_record(
    key: Key, choice: Choice, tuner: TunedResults, fingerprint: Fingerprint
) -> TuningFileEntry:
    """The file entry of one result."""
    iqr_s = tuner.spread(key)
    registered = tuner.registered().get(key[0])
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
        "experimental": bool(registered and choice.backend in registered[0].experimental_backends),
        "fingerprint": fingerprint,
    }
    if iqr_s is None:  # unknown (e.g. loaded from an older file): left out, as it was
        del record["iqr_ms"]
    return cast(TuningFileEntry, record)


def median_seconds(value: Any, name: str = "median_ms") -> float:
    """A time in milliseconds from the file, in seconds; ``ValueError`` unless finite >= 0."""
    if not is_number(value):
        raise ValueError(f"bad {name} {shorten(repr(value))}")
    try:
        ms = float(value)
    except OverflowError:
        ms = math.inf
    if not is_real_time(ms):
        raise ValueError(f"{name} {shorten(repr(value), 24)} is not a finite number >= 0")
    return ms / 1e3


def read_entry(raw: Any) -> Key:
    """The checked key of one item of ``entries``; ``ValueError``/``KeyError``/``TypeError``."""
    key = key_from_json(raw)
    backend, _tactic = raw["backend"], raw["tactic"]
    median_seconds(raw["median_ms"])
    if raw.get("iqr_ms") is not None:
        median_seconds(raw["iqr_ms"], "iqr_ms")
    if not isinstance(backend, str):
        raise ValueError(f"bad backend {shorten(repr(backend))}")
    check_fingerprint(raw.get("fingerprint"))
    return key


# ---- saving --------------------------------------------------------------------------------

DROP_NOT_OBJECT = "are not JSON objects"
DROP_NOT_FINITE = "hold a number JSON cannot represent (NaN or Infinity)"


@dataclass
class _Existing:
    """What a merging save keeps of the file it replaces."""

    entries: list[TuningFileEntry] = field(default_factory=list)  # written back untouched
    dropped: dict[str, int] = field(default_factory=dict)  # reason -> count
    unreadable: str | None = None  # why the previous content could not be read


def _read_existing(path: str, shown: str) -> _Existing:
    """The entries a merge keeps; :class:`TuningFileError` for another schema version, ``OSError``
    for a file that cannot be read (never overwritten blind)."""
    try:
        data = read_bytes(path)
    except FileNotFoundError:
        return _Existing()
    if not data.strip():  # an empty file (touch, mktemp) holds nothing to keep
        return _Existing()
    doc, error = parse_document(data)
    if doc is None:
        return _Existing(unreadable=error)
    if doc["schema_version"] not in READABLE_SCHEMAS:
        entries = doc.get("entries")
        held = f"{len(entries)} entries" if isinstance(entries, list) else "results"
        reason = (
            f"it holds {held} of schema version {shown_version(doc['schema_version'])}, which "
            f"this flashinfer (schema {SCHEMA_VERSION}) can neither use nor write back, so "
            "merging would lose them"
        )
        raise TuningFileError(
            f"Refusing to save autotune results to {shown!r}: {reason}. Save to another path, "
            "or pass merge=False to replace the file. Nothing was written; this process's "
            "results are still in memory (AutoTuner.get().choices()).",
            path=shown,
            reason=reason,
        )
    kept = _Existing()
    for raw in file_entries(doc):
        if not isinstance(raw, dict):
            reason = DROP_NOT_OBJECT
        elif not strict_json(raw):
            reason = DROP_NOT_FINITE
        else:
            kept.entries.append(cast(TuningFileEntry, raw))  # kept whole, readable or not
            continue
        kept.dropped[reason] = kept.dropped.get(reason, 0) + 1
    return kept


def check_mergeable(path: str | os.PathLike[str]) -> None:
    """Raise :class:`TuningFileError` if saving to ``path`` with ``merge=True`` would be
    refused (a file of another schema version, or a path that cannot be a tuning file), so a
    caller learns it before tuning.  Reads only."""
    path = checked_path(path)
    _read_existing(resolved(path), path)


def _merge(
    entries: list[TuningFileEntry], ours: list[tuple[TuningFileEntry, bool]]
) -> dict[str, TuningFileEntry]:
    """Merge by identity: a result measured here replaces every entry of its key this process
    matches, a loaded one only its own; other environments' stay untouched."""
    merged = {canonical_json(raw): raw for raw in entries}
    by_key: dict[str, list[str]] = {}
    for identity, raw in merged.items():
        by_key.setdefault(key_identity(raw), []).append(identity)
    for entry, measured_here in ours:
        if measured_here:
            for identity in by_key.get(key_identity(entry), ()):
                old = merged.get(identity)
                if old is not None and matches(old.get("fingerprint"), entry["fingerprint"]):
                    del merged[identity]
        merged[canonical_json(entry)] = entry
    return merged


def save_into(tuner: TunedResults, path: str | os.PathLike[str], *, merge: bool = True) -> int:
    """:meth:`AutoTuner.save_tuning_file` (see :func:`save_tuning_file`)."""
    path = checked_path(path)
    target = resolved(path)
    ours = []
    for key, choice in tuner.choices().items():
        loaded = tuner.loaded_fingerprint(key, choice)
        fingerprint = process_fingerprint(key) if loaded is None else loaded
        ours.append((entry_record(key, choice, tuner, fingerprint), loaded is None))
    with held(target):
        checked_path(path)  # it may have changed kind meanwhile
        existing = _read_existing(target, path) if merge else _Existing()
        merged = _merge(existing.entries, ours)
        doc: TuningFileDocument = {
            "schema_version": SCHEMA_VERSION,
            "flashinfer_version": flashinfer_version(),
            "torch_version": torch.__version__,
            "entries": sorted(merged.values(), key=canonical_json),
        }
        write_file(target, dump_json(doc))
    parts = []
    if existing.unreadable is not None:
        parts.append(
            f"its previous content could not be read ({existing.unreadable}) and was replaced"
        )
    if existing.dropped:
        reasons = "; ".join(f"{n} {reason}" for reason, n in existing.dropped.items())
        parts.append(
            f"{sum(existing.dropped.values())} of its entries were dropped ({reasons}): no "
            "flashinfer could use them"
        )
    if parts:
        warnings.warn(
            f"Saved {len(merged)} entries to the tuning file {path!r}; {'; '.join(parts)}.",
            TuningFileWarning,
            stacklevel=user_stacklevel(),
        )
    return len(merged)


# ---- loading -------------------------------------------------------------------------------

_READS = " or ".join(map(str, READABLE_SCHEMAS))
REASON_MALFORMED = "are malformed"
REASON_UNKNOWN_OP = "name an op that is unknown or not autotunable"
REASON_UNKNOWN_BACKEND = "name a backend that no longer exists"
REASON_REMOVED = "name a removed backend"
REASON_UNKNOWN_TACTIC = "name a tactic that no longer exists"
REASON_OTHER_ENVIRONMENT = "were measured in another environment, kept in the file"
REASON_EXPERIMENTAL = cached_experimental_skipped()


@exposed_in("flashinfer.autotuner.tuning_file")  # after @dataclass: its module is loaded
@dataclass
class LoadReport:
    """What :func:`load_tuning_file` did."""

    path: str
    loaded: int = 0
    #: reason -> number of entries skipped for it
    skipped: dict[str, int] = field(default_factory=dict)
    #: set when the whole file was unreadable (corrupt, truncated, not a tuning file)
    error: str | None = None

    @property
    def total_skipped(self) -> int:
        return sum(self.skipped.values())

    @property
    def other_environment(self) -> int:
        """Entries measured in another environment (kept in the file for it)."""
        return self.skipped.get(REASON_OTHER_ENVIRONMENT, 0)


def load_into(tuner: TunedResults, path: str | os.PathLike[str]) -> LoadReport:
    """:meth:`AutoTuner.load_tuning_file` (see :func:`load_tuning_file`)."""
    path = checked_path(path, writing=False)
    return load_data(tuner, path, read_bytes(path))


def load_data(tuner: TunedResults, path: str, data: bytes) -> LoadReport:
    """Load the bytes ``data`` of the tuning file ``path`` into ``tuner``; warns once."""
    report = LoadReport(path=path)
    doc, report.error = parse_document(data)
    if doc is not None and doc["schema_version"] not in READABLE_SCHEMAS:
        if not isinstance(doc.get("entries"), list):
            shown = shown_version(doc["schema_version"])
            report.error = f"written in schema version {shown} (this flashinfer reads {_READS})"
            doc = None
    if doc is None:
        warnings.warn(
            f"Could not read the tuning file {path!r}: {report.error}. Nothing was "
            "loaded; calls use the default choices until tuned again.",
            TuningFileWarning,
            stacklevel=user_stacklevel(),
        )
        return report
    entries = doc["entries"]
    skipped: dict[str, list[str]] = {}
    if doc["schema_version"] not in READABLE_SCHEMAS:
        if entries:
            shown = shown_version(doc["schema_version"])
            why = f"come from schema version {shown} (this flashinfer reads {_READS})"
            skipped[why] = [""] * len(entries)
    else:
        accepted = _accepted_entries(tuner, file_entries(doc), skipped)
        best: dict[Key, _Accepted] = {}  # per key: the most specific, then the later
        for item in accepted:
            old = best.get(item[0])
            if old is None or specificity(item[2]) >= specificity(old[2]):
                best[item[0]] = item
        for key, choice, fingerprint, iqr_s in best.values():
            tuner.set_choice(key, choice, iqr_s=iqr_s)  # a noisy one is timed again
            tuner.loaded_from[key] = (choice, fingerprint)
        for api_key, count in Counter(item[0][0] for item in accepted).items():
            tuner.stats_book.add(api_key, loaded=count)
        report.loaded = len(accepted)
    report.skipped = {reason: len(details) for reason, details in skipped.items()}
    if skipped:
        parts = []
        for reason, details in skipped.items():
            examples = sorted({shorten(d, 80) for d in details if d})[:3]
            parts.append(
                f"{len(details)} {reason}" + (f" ({', '.join(examples)})" if examples else "")
            )
        warnings.warn(
            f"Skipped {report.total_skipped} of {len(entries)} entries of the tuning file "
            f"{report.path!r}: {'; '.join(parts)}. Loaded {report.loaded}; calls with a skipped "
            "key use the default choice until tuned again.",
            TuningFileWarning,
            stacklevel=user_stacklevel(),
        )
    return report


#: An entry this process can use: its key, choice, fingerprint and spread (seconds or None).
_Accepted = tuple[Key, Choice, Fingerprint, float | None]


def _accepted_entries(
    tuner: TunedResults, entries: list[Any], skipped: dict[str, list[str]]
) -> list[_Accepted]:
    """The entries this process can use; the rest go to ``skipped`` (reason -> details)."""
    from flashinfer.api_modules import load_api_modules

    load_api_modules()  # every op registered (one missing from this build is left out)
    ops = tuner.registered()
    gate_on = experimental_auto_backends_allowed()
    spaces: dict[tuple[str, str], list[tuple[Any, Any]]] = {}
    accepted: list[_Accepted] = []
    for raw in entries:
        try:
            key = read_entry(raw)
        except (KeyError, ValueError, TypeError) as exc:
            skipped.setdefault(REASON_MALFORMED, []).append(str(exc))
            continue
        reason, detail = _why_skipped(raw, key, ops, gate_on, spaces)
        if reason is not None:
            skipped.setdefault(reason, []).append(detail)
            continue
        backend, tactic, key = detail
        iqr = raw.get("iqr_ms")  # left out (an older file) or null: unknown
        iqr_s = None if iqr is None else median_seconds(iqr, "iqr_ms")
        choice = Choice(backend, tactic, median_seconds(raw["median_ms"]))
        accepted.append((key, choice, raw.get("fingerprint") or {}, iqr_s))
    return accepted


def _why_skipped(raw: Any, key: Key, ops: Any, gate_on: bool, spaces: dict) -> tuple[Any, Any]:
    """``(reason, detail)`` for an entry this process cannot use, else ``(None, (backend, tactic,
    key))`` with renamed ops and backends followed."""
    differ = differences(raw.get("fingerprint") or {}, process_fingerprint(key))
    if differ:
        return REASON_OTHER_ENVIRONMENT, " and ".join(differ)
    api_key = key[0]
    registered = ops.get(api_key)
    renamed = renamed_api(api_key) if registered is None else None
    if renamed is not None:  # an op renamed since: its entries are the new name's
        api_key, key = renamed.new, (renamed.new, *key[1:])
        registered = ops.get(api_key)
    if registered is None:
        return REASON_UNKNOWN_OP, api_key
    op, runners = registered
    backend, tomb = tuning_name(api_key, raw["backend"])  # a renamed backend's new name
    if tomb is not None:
        where = f"{tomb.name!r} of {api_key.rpartition('.')[2]}"
        return REASON_REMOVED, f"{where} in {tomb.version}, use {tomb.use_instead!r}"
    if backend not in op.backend_checks or backend not in runners:
        return REASON_UNKNOWN_BACKEND, f"{backend!r} of {api_key}"
    space = spaces.get((api_key, backend))
    if space is None:
        space = spaces[(api_key, backend)] = [
            (normalise_document(t), t) for t in runners[backend].tactic_space()
        ]
    match = [t for norm, t in space if norm == raw["tactic"]]
    if not match:
        return REASON_UNKNOWN_TACTIC, f"{shorten(repr(raw['tactic']))} of {backend!r} of {api_key}"
    if backend in op.experimental_backends and not gate_on:
        return REASON_EXPERIMENTAL, f"{backend!r} of {api_key}"
    return None, (backend, match[0], key)
