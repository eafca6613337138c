"""Saving a tuner's results to a persisted autotune file: merged with the entries the
file already holds, under an inter-process lock, written atomically.

What a merge keeps, refuses and drops is described in :mod:`flashinfer.autotuner.tuning_file`
(the public home of :func:`~flashinfer.autotuner.save_tuning_file` and
:func:`~flashinfer.autotuner.check_mergeable`).
"""

from __future__ import annotations

import contextlib
import os
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, cast

import torch

from flashinfer.autotuner._types import TunedResults
from flashinfer.autotuner.fingerprint import (
    flashinfer_version,
    loaded_fingerprint,
    matches,
    process_fingerprint,
)
from flashinfer.autotuner.tuning_file.format import (
    READABLE_SCHEMAS,
    SCHEMA_VERSION,
    TuningFileDocument,
    TuningFileEntry,
    TuningFileError,
    TuningFileWarning,
    canonical_json,
    checked_path,
    dump_json,
    entry_record,
    file_entries,
    key_identity,
    parse_document,
    read_bytes_nofollow,
    shown_version,
    strict_json,
)
from flashinfer.autotuner.tuning_file.lock import held
from flashinfer.autotuner.tuning_file.paths import remove_stale_temporaries, resolved
from flashinfer.autotuner.tuning_file.write import interrupted_copy, write_file
from flashinfer.settings.stacklevel import user_stacklevel

__all__ = ["check_mergeable", "save_into"]

DROP_NOT_OBJECT = "are not JSON objects"
DROP_NOT_FINITE = "hold a number JSON cannot represent (NaN or Infinity)"


@dataclass
class _Existing:
    """What a merging save keeps of the file it replaces."""

    #: as the file holds them (only checked to be strict-JSON objects): written back
    #: untouched, also those this flashinfer cannot read
    entries: list[TuningFileEntry] = field(default_factory=list)
    #: reason -> number of entries dropped for it
    dropped: dict[str, int] = field(default_factory=dict)
    #: why the previous content could not be read (it is then replaced)
    unreadable: str | None = None
    #: the complete copy an interrupted in-place save left, merged with instead of the file
    recovered: str | None = None


def _refusal(path: str, doc: dict[str, Any]) -> TuningFileError:
    entries = doc.get("entries")
    held = f"{len(entries)} entries" if isinstance(entries, list) else "results"
    reason = (
        f"it holds {held} of schema version {shown_version(doc['schema_version'])}, which "
        f"this flashinfer (schema {SCHEMA_VERSION}) can neither use nor write back, so "
        "merging would lose them"
    )
    return TuningFileError(
        f"Refusing to save autotune results to {path!r}: {reason}. Save to another path, or "
        "pass merge=False to replace the file. Nothing was written; this process's results "
        "are still in memory (AutoTuner.get().choices()).",
        path=path,
        reason=reason,
    )


def _read_existing(
    path: str, shown: str | None = None, copy: tuple[str, bytes] | None = None
) -> _Existing:
    """The entries of the file at ``path`` a merge keeps; raises :class:`TuningFileError`
    for a file of another schema version (naming it ``shown``, the path the caller gave),
    and ``OSError`` for one that exists but cannot be read (never overwritten blind).
    ``copy``: the complete copy an interrupted in-place save left (:func:`.interrupted_copy`),
    read instead of a file that is empty or cut short."""
    try:
        data = read_bytes_nofollow(path)
    except FileNotFoundError:  # (removed: a copy left beside it is not brought back)
        return _Existing()
    doc, error = parse_document(data) if data.strip() else (None, None)
    recovered = None
    if doc is None and copy is not None:  # empty or cut short by that save: use its copy
        recovered, data = copy
        doc, error = parse_document(data)
    if doc is None:  # an empty file (touch, mktemp) holds nothing to keep
        return _Existing() if error is None else _Existing(unreadable=error)
    if doc["schema_version"] not in READABLE_SCHEMAS:
        raise _refusal(path if shown is None else shown, doc)
    kept = _Existing(recovered=recovered)
    for raw in file_entries(doc):  # a schema-1 file's stamped with its header's versions
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
    refused, so a caller can learn it before tuning: a file of another schema version, or
    a path that cannot be a tuning file (it exists and is not a regular file, or its
    directory does not exist).  Reads only."""
    path = checked_path(path)
    _read_existing(resolved(path), path)


@contextlib.contextmanager
def _file_lock(path: str) -> Iterator[None]:
    """Exclusive inter-process lock on ``path + '.lock'`` (:func:`.lock.held`: waits while
    another process holds it, raises :class:`TuningFileError` at once when it can never be
    taken)."""
    with held(path):
        yield


def _atomic_write(path: str, text: str) -> None:
    """Write ``text`` to ``path`` (a resolved path: no link), keeping the file's owner,
    group, mode and hard links, never leaving a part that reads as a tuning file
    (:func:`.write.write_file`)."""
    write_file(path, text)


def _warn_replaced(path: str, existing: _Existing, total: int) -> None:
    """One warning for what a save did not keep of the file it replaced (if anything)."""
    parts = []
    if existing.recovered is not None:
        parts.append(
            "an earlier save was interrupted while writing it in place, so its content was "
            f"merged from the complete copy that save left ({existing.recovered!r}, now "
            "removed)"
        )
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
            f"Saved {total} entries to the tuning file {path!r}; {'; '.join(parts)}.",
            TuningFileWarning,
            stacklevel=user_stacklevel(),
        )


def _merge(
    entries: list[TuningFileEntry], ours: list[tuple[TuningFileEntry, bool]]
) -> dict[str, TuningFileEntry]:
    """The file's ``entries`` merged with ``ours`` (entry, measured in this process), by
    identity (:func:`~flashinfer.autotuner.tuning_file.format.canonical_json`; of two equal
    entries of the file, the later wins).

    A result measured here replaces every entry of its key that this process matches
    (its own earlier result, or a ``"*"`` entry it would have used): the new measurement
    is what holds for this environment.  A result that was loaded replaces only its own
    entry.  Entries of other environments are never replaced: written back untouched.
    """
    merged = {canonical_json(raw): raw for raw in entries}
    by_key: dict[str, list[str]] = {}
    for identity, raw in merged.items():
        by_key.setdefault(key_identity(raw), []).append(identity)
    for entry, measured_here in ours:
        if measured_here:
            for identity in by_key.get(key_identity(entry), ()):
                held = merged.get(identity)
                if held is not None and matches(held.get("fingerprint"), entry["fingerprint"]):
                    del merged[identity]
        merged[canonical_json(entry)] = entry
    return merged


def save_into(tuner: TunedResults, path: str | os.PathLike[str], *, merge: bool = True) -> int:
    """:meth:`AutoTuner.save_tuning_file` (see :func:`save_tuning_file`).

    The path is checked before any work (:func:`.checked_path`); the file written, locked
    (``<file>.lock``) and merged with is the one a symbolic link names (:func:`.resolved`),
    so the link stays and every writer of one file, through a link or not, takes one lock.
    Holding the lock, the save removes the temporaries killed saves of the file left
    (:func:`.remove_stale_temporaries`), and checks the path again: it may have changed
    kind since.
    """
    path = checked_path(path)
    target = resolved(path)
    ours = []
    for key, choice in tuner.choices().items():
        loaded = loaded_fingerprint(tuner, key, choice)
        fingerprint = process_fingerprint(key) if loaded is None else loaded
        ours.append((entry_record(key, choice, tuner, fingerprint), loaded is None))
    with _file_lock(target):
        checked_path(path)
        copy = interrupted_copy(target)  # before the stale temporaries go
        remove_stale_temporaries(target)
        existing = _read_existing(target, path, copy) if merge else _Existing()
        merged = _merge(existing.entries, ours)
        doc: TuningFileDocument = {
            "schema_version": SCHEMA_VERSION,
            "flashinfer_version": flashinfer_version(),
            "torch_version": torch.__version__,
            "entries": sorted(merged.values(), key=canonical_json),
        }
        _atomic_write(target, dump_json(doc))
    _warn_replaced(path, existing, len(merged))
    return len(merged)
