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

Saving (:func:`save_configs`) takes an exclusive ``fcntl.flock`` on ``<path>.lock`` (POSIX;
elsewhere no lock is taken), merges with the entries already in the file (so processes that
tuned different keys all keep theirs; this process wins on equal keys), writes a temporary
file in the same directory and ``os.replace``-s it over the target: a reader sees the old
file or the new one, never a partial one, and a crash mid-write leaves the old file intact.

Loading (:func:`load_configs`) imports every op module first (``flashinfer.load_all_apis``),
then skips, and reports in **one** warning grouped by reason, entries that

* come from another schema version (the whole file then),
* are malformed,
* name an op that is unknown or not registered with the autotuner,
* name a backend, or a tactic, that no longer exists (checked against the registered
  runners and their ``tactic_space()``),
* name an experimental backend while ``FLASHINFER_ALLOW_EXPERIMENTAL_AUTO_BACKENDS`` is not
  ``1`` (calls with that key then use the stable default).

A corrupt or truncated file warns and loads nothing.  None of this raises; a missing file
passed to :func:`load_configs` explicitly raises ``FileNotFoundError``.
"""

from __future__ import annotations

import contextlib
import importlib
import json
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
    "SCHEMA_VERSION",
    "AutotuneCacheWarning",
    "LoadReport",
    "load_configs",
    "save_configs",
]

SCHEMA_VERSION = 1

REASON_MALFORMED = "are malformed"
REASON_UNKNOWN_OP = "name an op that is unknown or not autotunable"
REASON_UNKNOWN_BACKEND = "name a backend that no longer exists"
REASON_UNKNOWN_TACTIC = "name a tactic that no longer exists"
REASON_EXPERIMENTAL = (
    f"name an experimental backend while {ALLOW_EXPERIMENTAL_AUTO_BACKENDS_ENV} is not 1"
)


def _reason_schema(version: Any) -> str:
    return f"come from schema version {version!r} (this flashinfer reads {SCHEMA_VERSION})"


class AutotuneCacheWarning(UserWarning):
    """A persisted autotune file, or some of its entries, could not be used."""


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
# Helpers
# --------------------------------------------------------------------------------------


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


def _dumps(doc: dict[str, Any]) -> str:
    """Pretty JSON with one entry per line: readable and diff-friendly."""
    head = {k: v for k, v in doc.items() if k != "entries"}
    lines = [f"  {json.dumps(k)}: {json.dumps(v)}," for k, v in head.items()]
    body = ",\n".join(f"    {json.dumps(e)}" for e in doc["entries"])
    entries = f'  "entries": [\n{body}\n  ]' if body else '  "entries": []'
    return "{\n" + "\n".join(lines) + "\n" + entries + "\n}\n"


def _read_raw_entries(path: str) -> list[dict[str, Any]]:
    """Entries of an existing file worth keeping on merge ([] if absent or unreadable)."""
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, ValueError):
        return []
    if not isinstance(doc, dict) or doc.get("schema_version") != SCHEMA_VERSION:
        return []
    entries = doc.get("entries")
    if not isinstance(entries, list):
        return []
    return [e for e in entries if isinstance(e, dict)]


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


# --------------------------------------------------------------------------------------
# Public functions
# --------------------------------------------------------------------------------------


def save_configs(path: str | os.PathLike[str], *, merge: bool = True) -> int:
    """Save every tuned result of this process to ``path`` (JSON); returns the entry count.

    With ``merge=True`` (default) entries already in the file for other keys are kept.
    Atomic and safe against concurrent savers (see the module docstring).
    """
    path = os.fspath(path)
    tuner = AutoTuner.get()
    ours = [_entry(k, c, tuner) for k, c in tuner.choices().items()]
    with _file_lock(path):
        merged: dict[str, dict[str, Any]] = {}
        if merge:
            for raw in _read_raw_entries(path):
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
    return len(merged)


def load_configs(path: str | os.PathLike[str]) -> LoadReport:
    """Load persisted results from ``path`` into the process's autotuner.

    Skipped entries and unreadable files are reported in one :class:`AutotuneCacheWarning`
    (pointing at the caller's line) and in the returned :class:`LoadReport`; nothing here
    raises except ``FileNotFoundError``/``OSError`` for a file that cannot be opened.
    """
    path = os.fspath(path)
    report = LoadReport(path=path)
    with open(path, "rb") as f:
        data = f.read()
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        report.error = f"not valid JSON (corrupt or truncated?): {exc}"
    else:
        if not isinstance(doc, dict) or "schema_version" not in doc:
            report.error = "not an autotune cache (no top-level 'schema_version')"
        elif not isinstance(doc.get("entries"), list):
            report.error = "not an autotune cache ('entries' is not a list)"
    if report.error is not None:
        warnings.warn(
            f"Could not read the autotune cache {path!r}: {report.error}. Nothing was "
            "loaded; calls use the default choices until tuned again.",
            AutotuneCacheWarning,
            stacklevel=user_stacklevel(),
        )
        return report

    entries = doc["entries"]
    skipped: dict[str, list[str]] = {}

    def skip(reason: str, detail: str) -> None:
        skipped.setdefault(reason, []).append(detail)

    if doc["schema_version"] != SCHEMA_VERSION:
        for _ in entries:
            skip(_reason_schema(doc["schema_version"]), "")
    else:
        _load_op_modules()
        tuner = AutoTuner.get()
        ops = tuner.registered()
        gate_on = experimental_auto_backends_allowed()
        spaces: dict[tuple[str, str], list[tuple[Any, Any]]] = {}
        accepted: list[tuple[Key, Choice]] = []
        for raw in entries:
            try:
                key = key_from_json(raw)
                backend = raw["backend"]
                tactic = raw["tactic"]
                median_ms = raw["median_ms"]
                if not isinstance(backend, str):
                    raise ValueError(f"bad backend {backend!r}")
                if not isinstance(median_ms, (int, float)) or isinstance(median_ms, bool):
                    raise ValueError(f"bad median_ms {median_ms!r}")
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
                skip(REASON_UNKNOWN_TACTIC, f"{tactic!r} of {backend!r} of {api_key}")
                continue
            if backend in op.experimental_backends and not gate_on:
                skip(REASON_EXPERIMENTAL, f"{backend!r} of {api_key}")
                continue
            accepted.append((key, Choice(backend, match[0], float(median_ms) / 1e3)))
        for key, choice in accepted:
            tuner.set_choice(key, choice)
        report.loaded = len(accepted)

    report.skipped = {reason: len(details) for reason, details in skipped.items()}
    if skipped:
        parts = []
        for reason, details in skipped.items():
            examples = sorted({d for d in details if d})[:3]
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
