"""Persisted autotune results: versioned, human-readable JSON, written atomically.

File format (``schema_version`` 1)::

    {
      "schema_version": 1,
      "flashinfer_version": "0.1.0",
      "torch_version": "2.13.0+cpu",
      "entries": [
        {
          "op": "flashinfer.gemm.mm",
          "inputs": [{"shape": [128, 4096], "dtype": "float32"},
                     {"shape": [4096, 4096], "dtype": "float32"}, null],
          "device": "cpu",
          "compute_capability": null,
          "backend": "torch",
          "tactic": null,
          "median_ms": 12.5,
          "experimental": false
        }
      ]
    }

``inputs``/``device``/``compute_capability`` are the tuning key (shapes already bucketed,
see :mod:`flashinfer.autotuner.keys`); ``experimental`` is informative only (the op's own
table decides on load).  Never pickle: loading a cache cannot run code.

Saving (:func:`save_configs`, or :meth:`AutoTuner.save_configs`) takes an exclusive
``fcntl.flock`` on ``<path>.lock`` (POSIX; elsewhere no lock is taken), merges with the
entries already in the file (so processes that tuned different keys all keep theirs; this
process wins on equal keys, and of two equal keys in the file the later wins), writes a
temporary file in the same directory and ``os.replace``-s it over the target: a reader sees
the old file or the new one, never a partial one, and a crash mid-write leaves the old file
intact.  What a merge cannot keep is never dropped silently:

* a file of **another schema version** is refused (:class:`AutotuneCacheError`, nothing
  written): its entries belong to another flashinfer, which could use them, and one file
  cannot hold two schemas.  Save elsewhere, or pass ``merge=False`` to replace it;
* an **unreadable** file (corrupt, truncated, not a cache) holds nothing any flashinfer
  can load: it is replaced, with an :class:`AutotuneCacheWarning` saying so;
* entries that are not JSON objects, or hold ``NaN``/``Infinity`` (which JSON cannot
  represent), are dropped with an :class:`AutotuneCacheWarning` that counts them.

Only strict JSON is ever written (``allow_nan=False``).  A time that is not finite is a
broken measurement, not a result, so none can get into the tuner: a tactic whose time is
not finite counts as failed, ``AutoTuner.set_choice`` refuses one, and an entry with one is
skipped on load.

Loading (:func:`load_configs`, or :meth:`AutoTuner.load_configs`) imports every op module
first (``flashinfer.load_all_apis``), then skips, and reports in **one** warning grouped by
reason, entries that

* come from another schema version (the whole file then),
* are malformed (including a ``median_ms`` that is not a finite, non-negative number),
* name an op that is unknown or not registered with the autotuner,
* name a backend, or a tactic, that no longer exists (checked against the registered
  runners and their ``tactic_space()``),
* name an experimental backend while ``FLASHINFER_ALLOW_EXPERIMENTAL_AUTO_BACKENDS`` is not
  ``1`` (calls with that key then use the stable default).

A corrupt or truncated file, one nested deeper than :data:`MAX_DEPTH` levels, or one whose
``schema_version`` is not an integer (``true`` is not ``1``), warns and loads nothing.  None
of this raises; a missing file passed to :func:`load_configs` explicitly raises
``FileNotFoundError``.  Loading never writes, locks nor creates a file.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import math
import os
import tempfile
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from ..api_logging import (
    ALLOW_EXPERIMENTAL_AUTO_BACKENDS_ENV,
    experimental_auto_backends_allowed,
    user_stacklevel,
)
from .keys import Key, key_from_json, key_to_json
from .tuner import AutoTuner, Choice

try:  # POSIX
    import fcntl
except ImportError:  # pragma: no cover - Windows: no inter-process lock
    fcntl = None  # type: ignore[assignment]

__all__ = [
    "MAX_DEPTH",
    "SCHEMA_VERSION",
    "AutotuneCacheError",
    "AutotuneCacheWarning",
    "LoadReport",
    "check_mergeable",
    "load_configs",
    "save_configs",
]

SCHEMA_VERSION = 1

#: Deepest nesting of JSON arrays/objects a cache file may have (a real one has 6 or 7
#: levels; tactics add a few).  Deeper files are unreadable: never a ``RecursionError``.
MAX_DEPTH = 64

REASON_MALFORMED = "are malformed"
REASON_UNKNOWN_OP = "name an op that is unknown or not autotunable"
REASON_UNKNOWN_BACKEND = "name a backend that no longer exists"
REASON_UNKNOWN_TACTIC = "name a tactic that no longer exists"
REASON_EXPERIMENTAL = (
    f"name an experimental backend while {ALLOW_EXPERIMENTAL_AUTO_BACKENDS_ENV} is not 1"
)
DROP_NOT_OBJECT = "are not JSON objects"
DROP_NOT_FINITE = "hold a number JSON cannot represent (NaN or Infinity)"


def _reason_schema(version: Any) -> str:
    shown = _short(repr(version), 24)
    return f"come from schema version {shown} (this flashinfer reads {SCHEMA_VERSION})"


class AutotuneCacheWarning(UserWarning):
    """A persisted autotune file, or some of its entries, could not be used."""


class AutotuneCacheError(ValueError):
    """Saving would lose results another flashinfer can use (a file of another schema
    version): nothing was written.  ``path`` and ``reason`` (what the file holds) are
    attributes, for callers that word their own message."""

    def __init__(self, message: str, *, path: str = "", reason: str = "") -> None:
        super().__init__(message)
        self.path = path
        self.reason = reason


@dataclass
class LoadReport:
    """What :func:`load_configs` did."""

    path: str
    loaded: int = 0
    #: reason -> number of entries skipped for it
    skipped: dict[str, int] = field(default_factory=dict)
    #: set when the whole file was unreadable (corrupt, truncated, not a cache)
    error: str | None = None

    @property
    def total_skipped(self) -> int:
        return sum(self.skipped.values())


# --------------------------------------------------------------------------------------
# Reading a file
# --------------------------------------------------------------------------------------


def _short(text: str, limit: int = 60) -> str:
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


def _parse(data: bytes) -> tuple[dict[str, Any], None] | tuple[None, str]:
    """The cache document in ``data``, or ``(None, why it is not one)``.

    A document of another schema version is returned whatever else it holds (its layout
    is that version's business).  ``NaN``/``Infinity`` tokens are accepted here (older
    versions wrote them): an entry holding one is skipped on load and dropped, with a
    warning, on save.
    """
    try:
        doc = json.loads(data.decode("utf-8"))
    except RecursionError:
        return None, f"nested deeper than {MAX_DEPTH} levels: not an autotune cache"
    except (UnicodeDecodeError, ValueError) as exc:
        return None, f"not valid JSON (corrupt or truncated?): {_short(str(exc), 120)}"
    if _nested_deeper_than(doc, MAX_DEPTH):
        return None, f"nested deeper than {MAX_DEPTH} levels: not an autotune cache"
    if not isinstance(doc, dict) or "schema_version" not in doc:
        return None, "not an autotune cache (no top-level 'schema_version')"
    version = doc["schema_version"]
    if type(version) is not int:  # bool is an int subclass: true is not version 1
        shown = _short(json.dumps(version))
        return None, f"not an autotune cache ('schema_version' must be an integer, not {shown})"
    if version == SCHEMA_VERSION and not isinstance(doc.get("entries"), list):
        return None, "not an autotune cache ('entries' is not a list)"
    return doc, None


@dataclass
class _Existing:
    """What a merging save keeps of the file it replaces."""

    entries: list[dict[str, Any]] = field(default_factory=list)
    #: reason -> number of entries dropped for it
    dropped: dict[str, int] = field(default_factory=dict)
    #: why the previous content could not be read (it is then replaced)
    unreadable: str | None = None


def _refusal(path: str, doc: dict[str, Any]) -> AutotuneCacheError:
    entries = doc.get("entries")
    held = f"{len(entries)} entries" if isinstance(entries, list) else "results"
    reason = (
        f"it holds {held} of schema version {_short(repr(doc['schema_version']), 24)}, which "
        f"this flashinfer (schema {SCHEMA_VERSION}) can neither use nor write back, so "
        "merging would lose them"
    )
    return AutotuneCacheError(
        f"Refusing to save autotune results to {path!r}: {reason}. Save to another path, or "
        "pass merge=False to replace the file. Nothing was written; this process's results "
        "are still in memory (AutoTuner.get().choices()).",
        path=path,
        reason=reason,
    )


def _read_existing(path: str) -> _Existing:
    """The entries of the file at ``path`` a merge keeps; raises :class:`AutotuneCacheError`
    for a file of another schema version, and ``OSError`` for one that exists but cannot
    be read (never overwritten blind)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return _Existing()
    if not data.strip():  # an empty file (touch, mktemp) holds nothing to keep
        return _Existing()
    doc, error = _parse(data)
    if doc is None:
        return _Existing(unreadable=error)
    if doc["schema_version"] != SCHEMA_VERSION:
        raise _refusal(path, doc)
    kept = _Existing()
    for raw in doc["entries"]:
        if not isinstance(raw, dict):
            reason = DROP_NOT_OBJECT
        elif not _strict_json(raw):
            reason = DROP_NOT_FINITE
        else:
            kept.entries.append(raw)
            continue
        kept.dropped[reason] = kept.dropped.get(reason, 0) + 1
    return kept


def check_mergeable(path: str | os.PathLike[str]) -> None:
    """Raise :class:`AutotuneCacheError` if saving to ``path`` with ``merge=True`` would be
    refused (a file of another schema version), so a caller can learn it before tuning.
    Reads only."""
    _read_existing(_cache_path(path))


# --------------------------------------------------------------------------------------
# Writing a file
# --------------------------------------------------------------------------------------


def _cache_path(path: str | os.PathLike[str]) -> str:
    """``path`` as a string; ``ValueError`` for an empty one (it would name the working
    directory, and its lock ``.lock`` there)."""
    text = os.fspath(path)
    if not isinstance(text, str):
        raise TypeError(f"autotune cache path must be a str or os.PathLike[str], not {path!r}")
    if not text:
        raise ValueError("autotune cache path is empty; name a file, e.g. 'tuned.json'")
    return text


def _strict_json(value: Any) -> bool:
    try:
        json.dumps(value, allow_nan=False)
    except ValueError:
        return False
    return True


def _normalise(value: Any) -> Any:
    """A tactic as it reads back from JSON (tuples become lists)."""
    return json.loads(json.dumps(value))


def _canonical(obj: dict[str, Any]) -> str:
    """Identity of an entry's key, for merging files."""
    return json.dumps(
        {k: obj.get(k) for k in ("op", "inputs", "device", "compute_capability")},
        sort_keys=True,
    )


def _load_op_modules() -> None:
    import flashinfer

    try:
        flashinfer.load_all_apis()
    except ModuleNotFoundError:
        # An op module of the list is missing from this build: load the others.
        for module in flashinfer.API_MODULES:
            try:
                importlib.import_module(module)
            except ModuleNotFoundError as exc:
                if exc.name != module:
                    raise


@contextlib.contextmanager
def _file_lock(path: str) -> Iterator[None]:
    """Exclusive inter-process lock on ``path + '.lock'`` (no-op without ``fcntl``)."""
    if fcntl is None:  # pragma: no cover
        yield
        return
    fd = os.open(path + ".lock", os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _atomic_write(path: str, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file in the same directory."""
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{os.path.basename(path)}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o666 & ~_current_umask())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _dump(value: Any) -> str:
    return json.dumps(value, allow_nan=False)  # strict JSON only: never NaN or Infinity


def _dumps(doc: dict[str, Any]) -> str:
    """Pretty JSON with one entry per line: readable and diff-friendly."""
    head = {k: v for k, v in doc.items() if k != "entries"}
    lines = [f"  {_dump(k)}: {_dump(v)}," for k, v in head.items()]
    body = ",\n".join(f"    {_dump(e)}" for e in doc["entries"])
    entries = f'  "entries": [\n{body}\n  ]' if body else '  "entries": []'
    return "{\n" + "\n".join(lines) + "\n" + entries + "\n}\n"


def _entry(key: Key, choice: Choice, tuner: AutoTuner) -> dict[str, Any]:
    registered = tuner.registered().get(key[0])
    experimental = bool(registered and choice.backend in registered[0].experimental_backends)
    return {
        **key_to_json(key),
        "backend": choice.backend,
        "tactic": _normalise(choice.tactic),
        "median_ms": float(f"{choice.median_s * 1e3:.6g}"),
        "experimental": experimental,
    }


def _warn_replaced(path: str, existing: _Existing, total: int) -> None:
    """One warning for what a save did not keep of the file it replaced (if anything)."""
    parts = []
    if existing.unreadable is not None:
        parts.append(
            f"its previous content could not be read ({existing.unreadable}) and was replaced"
        )
    if existing.dropped:
        dropped = sum(existing.dropped.values())
        reasons = "; ".join(f"{n} {reason}" for reason, n in existing.dropped.items())
        parts.append(
            f"{dropped} of its entries were dropped ({reasons}): no flashinfer could use them"
        )
    if parts:
        warnings.warn(
            f"Saved {total} entries to the autotune cache {path!r}; {'; '.join(parts)}.",
            AutotuneCacheWarning,
            stacklevel=user_stacklevel(),
        )


# --------------------------------------------------------------------------------------
# The implementations behind the public functions and AutoTuner's methods
# --------------------------------------------------------------------------------------


def save_into(tuner: AutoTuner, path: str | os.PathLike[str], *, merge: bool = True) -> int:
    """:meth:`AutoTuner.save_configs` (see :func:`save_configs`)."""
    path = _cache_path(path)
    ours = [_entry(k, c, tuner) for k, c in tuner.choices().items()]
    with _file_lock(path):
        existing = _read_existing(path) if merge else _Existing()
        merged: dict[str, dict[str, Any]] = {}
        for raw in existing.entries:
            merged[_canonical(raw)] = raw
        for entry in ours:
            merged[_canonical(entry)] = entry
        import torch

        import flashinfer

        doc = {
            "schema_version": SCHEMA_VERSION,
            "flashinfer_version": flashinfer.__version__,
            "torch_version": torch.__version__,
            "entries": sorted(merged.values(), key=_canonical),
        }
        _atomic_write(path, _dumps(doc))
    _warn_replaced(path, existing, len(merged))
    return len(merged)


def _median_seconds(value: Any) -> float:
    """A file's ``median_ms`` in seconds; ``ValueError`` unless a finite number >= 0."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"bad median_ms {_short(repr(value))}")
    try:
        ms = float(value)
    except OverflowError:
        ms = math.inf
    if not math.isfinite(ms) or ms < 0:
        raise ValueError(f"median_ms {_short(repr(value), 24)} is not a finite number >= 0")
    return ms / 1e3


def load_into(tuner: AutoTuner, path: str | os.PathLike[str]) -> LoadReport:
    """:meth:`AutoTuner.load_configs` (see :func:`load_configs`)."""
    path = _cache_path(path)
    report = LoadReport(path=path)
    with open(path, "rb") as f:
        data = f.read()
    doc, report.error = _parse(data)
    if doc is not None and not isinstance(doc.get("entries"), list):
        # Another schema version, laid out its own way: nothing here can be counted.
        shown = _short(repr(doc["schema_version"]), 24)
        report.error = f"written in schema version {shown} (this flashinfer reads {SCHEMA_VERSION})"
        doc = None
    if doc is None:
        warnings.warn(
            f"Could not read the autotune cache {path!r}: {report.error}. Nothing was "
            "loaded; calls use the default choices until tuned again.",
            AutotuneCacheWarning,
            stacklevel=user_stacklevel(),
        )
        return report

    entries = doc["entries"]
    skipped: dict[str, list[str]] = {}
    if doc["schema_version"] != SCHEMA_VERSION:
        if entries:
            skipped[_reason_schema(doc["schema_version"])] = [""] * len(entries)
    else:
        accepted = _accepted_entries(tuner, entries, skipped)
        for key, choice in accepted:
            tuner.set_choice(key, choice)
        report.loaded = len(accepted)

    report.skipped = {reason: len(details) for reason, details in skipped.items()}
    if skipped:
        parts = []
        for reason, details in skipped.items():
            examples = sorted({_short(d, 80) for d in details if d})[:3]
            example = f" ({', '.join(examples)})" if examples else ""
            parts.append(f"{len(details)} {reason}{example}")
        warnings.warn(
            f"Skipped {report.total_skipped} of {len(entries)} entries of the autotune cache "
            f"{path!r}: {'; '.join(parts)}. Loaded {report.loaded}; calls with a skipped key "
            "use the default choice until tuned again.",
            AutotuneCacheWarning,
            stacklevel=user_stacklevel(),
        )
    return report


def _accepted_entries(
    tuner: AutoTuner, entries: list[Any], skipped: dict[str, list[str]]
) -> list[tuple[Key, Choice]]:
    """The entries of a schema-1 file this process can use; the rest go to ``skipped``
    (reason -> details)."""

    def skip(reason: str, detail: str) -> None:
        skipped.setdefault(reason, []).append(detail)

    _load_op_modules()
    ops = tuner.registered()
    gate_on = experimental_auto_backends_allowed()
    spaces: dict[tuple[str, str], list[tuple[Any, Any]]] = {}
    accepted: list[tuple[Key, Choice]] = []
    for raw in entries:
        try:
            key = key_from_json(raw)
            backend = raw["backend"]
            tactic = raw["tactic"]
            median_s = _median_seconds(raw["median_ms"])
            if not isinstance(backend, str):
                raise ValueError(f"bad backend {_short(repr(backend))}")
        except (KeyError, ValueError, TypeError) as exc:
            skip(REASON_MALFORMED, str(exc))
            continue
        api_key = key[0]
        registered = ops.get(api_key)
        if registered is None:
            skip(REASON_UNKNOWN_OP, api_key)
            continue
        op, runners = registered
        if backend not in op.backend_checks or backend not in runners:
            skip(REASON_UNKNOWN_BACKEND, f"{backend!r} of {api_key}")
            continue
        space = spaces.get((api_key, backend))
        if space is None:
            space = spaces[(api_key, backend)] = [
                (_normalise(t), t) for t in runners[backend].tactic_space()
            ]
        match = [t for norm, t in space if norm == tactic]
        if not match:
            skip(REASON_UNKNOWN_TACTIC, f"{_short(repr(tactic))} of {backend!r} of {api_key}")
            continue
        if backend in op.experimental_backends and not gate_on:
            skip(REASON_EXPERIMENTAL, f"{backend!r} of {api_key}")
            continue
        accepted.append((key, Choice(backend, match[0], median_s)))
    return accepted


# --------------------------------------------------------------------------------------
# Public functions
# --------------------------------------------------------------------------------------


def save_configs(path: str | os.PathLike[str], *, merge: bool = True) -> int:
    """Save every tuned result of this process to ``path`` (JSON); returns the entry count.

    With ``merge=True`` (default) entries already in the file for other keys are kept; a
    file of another schema version is refused (:class:`AutotuneCacheError`, nothing
    written), an unreadable one is replaced with an :class:`AutotuneCacheWarning`.
    ``merge=False`` replaces whatever the file holds.  Atomic and safe against concurrent
    savers (see the module docstring).  The same as ``AutoTuner.get().save_configs(path)``.
    """
    return save_into(AutoTuner.get(), path, merge=merge)


def load_configs(path: str | os.PathLike[str]) -> LoadReport:
    """Load persisted results from ``path`` into the process's autotuner.

    Skipped entries and unreadable files are reported in one :class:`AutotuneCacheWarning`
    (pointing at the caller's line) and in the returned :class:`LoadReport`; nothing here
    raises except ``FileNotFoundError``/``OSError`` for a file that cannot be opened (and
    ``ValueError`` for an empty path).  Reads only: never writes, locks nor creates a file.
    The same as ``AutoTuner.get().load_configs(path)``.
    """
    return load_into(AutoTuner.get(), path)
