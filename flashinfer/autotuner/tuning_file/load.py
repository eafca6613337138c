"""Reading a persisted autotune file into a tuner, and validating every entry against the
registered ops, their runners and tactic spaces, and the experimental gate.

What is skipped, and why, is described in :mod:`flashinfer.autotuner.tuning_file` (the public
home of :func:`~flashinfer.autotuner.load_tuning_file` and :class:`LoadReport`).  Reads only:
never writes, locks nor creates a file, and never opens a path that is not a regular file
(a FIFO would block the read: :mod:`.paths`).
"""

from __future__ import annotations

import os
import warnings
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from flashinfer.autotuner._types import Choice, TunedResults
from flashinfer.autotuner.fingerprint import (
    Fingerprint,
    differences,
    process_fingerprint,
    remember_loaded,
    specificity,
)
from flashinfer.autotuner.keys import Key
from flashinfer.autotuner.tuning_file.format import (
    READABLE_SCHEMAS,
    TuningFileWarning,
    checked_path,
    file_entries,
    median_seconds,
    normalise_document,
    parse_document,
    read_bytes_nofollow,
    read_entry,
    shorten,
    shown_version,
)
from flashinfer.gating.exposed import exposed_in
from flashinfer.gating.gate import (
    experimental_auto_backends_allowed,
)
from flashinfer.gating.history import renamed_api, tuning_name
from flashinfer.gating.messages import cached_experimental_skipped
from flashinfer.settings.stacklevel import user_stacklevel

__all__ = ["LoadReport", "load_data", "load_into"]

_READS = " or ".join(map(str, READABLE_SCHEMAS))

REASON_MALFORMED = "are malformed"
REASON_UNKNOWN_OP = "name an op that is unknown or not autotunable"
REASON_UNKNOWN_BACKEND = "name a backend that no longer exists"
REASON_REMOVED = "name a removed backend"
REASON_UNKNOWN_TACTIC = "name a tactic that no longer exists"
REASON_OTHER_ENVIRONMENT = "were measured in another environment, kept in the file"
REASON_EXPERIMENTAL = cached_experimental_skipped()


def _reason_schema(version: Any) -> str:
    shown = shown_version(version)
    return f"come from schema version {shown} (this flashinfer reads {_READS})"


@dataclass
@exposed_in("flashinfer.autotuner.tuning_file")
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
        """Entries skipped because another environment measured them (their fingerprint
        does not match this process): kept in the file for the processes they match."""
        return self.skipped.get(REASON_OTHER_ENVIRONMENT, 0)


def _load_op_modules() -> None:
    """Import every op module, so their ops are registered (one missing from this build is
    left out)."""
    from flashinfer.api_modules import load_api_modules

    load_api_modules()


def load_into(tuner: TunedResults, path: str | os.PathLike[str]) -> LoadReport:
    """:meth:`AutoTuner.load_tuning_file` (see :func:`load_tuning_file`)."""
    path = checked_path(path, writing=False)
    return load_data(tuner, path, read_bytes_nofollow(path))


def load_data(tuner: TunedResults, path: str, data: bytes) -> LoadReport:
    """Load the bytes ``data`` of the tuning file ``path`` into ``tuner`` (what
    :func:`load_into` does once the file is read); warns as it does."""
    report = LoadReport(path=path)
    doc, report.error = parse_document(data)
    if doc is not None and doc["schema_version"] not in READABLE_SCHEMAS:
        # Another schema version, laid out its own way: count its entries if it has a list.
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
            skipped[_reason_schema(doc["schema_version"])] = [""] * len(entries)
    else:
        accepted = _accepted_entries(tuner, file_entries(doc), skipped)
        for key, choice, fingerprint, iqr_s in _most_specific(accepted):
            tuner.set_choice(key, choice, iqr_s=iqr_s)  # a noisy one is timed again
            remember_loaded(tuner, key, choice, fingerprint)
        for api_key, count in Counter(item[0][0] for item in accepted).items():
            tuner.stats_book.loaded(api_key, count)
        report.loaded = len(accepted)

    report.skipped = {reason: len(details) for reason, details in skipped.items()}
    if skipped:
        _warn_skipped(report, skipped, len(entries))
    return report


#: An entry this process can use: its key, choice, fingerprint and spread (seconds or None).
_Accepted = tuple[Key, Choice, Fingerprint, float | None]


def _warn_skipped(report: LoadReport, skipped: dict[str, list[str]], total: int) -> None:
    """One warning for every entry skipped, grouped by reason, with up to three examples."""
    parts = []
    for reason, details in skipped.items():
        examples = sorted({shorten(d, 80) for d in details if d})[:3]
        example = f" ({', '.join(examples)})" if examples else ""
        parts.append(f"{len(details)} {reason}{example}")
    warnings.warn(
        f"Skipped {report.total_skipped} of {total} entries of the tuning file "
        f"{report.path!r}: {'; '.join(parts)}. Loaded {report.loaded}; calls with a skipped "
        "key use the default choice until tuned again.",
        TuningFileWarning,
        stacklevel=user_stacklevel(),
    )


def _most_specific(accepted: list[_Accepted]) -> list[_Accepted]:
    """One result per key: of the entries that match this process, the one whose
    fingerprint pins the most fields; of equally specific ones, the later in the file."""
    best: dict[Key, _Accepted] = {}
    for item in accepted:
        held = best.get(item[0])
        if held is None or specificity(item[2]) >= specificity(held[2]):
            best[item[0]] = item
    return list(best.values())


def _accepted_entries(
    tuner: TunedResults, entries: list[Any], skipped: dict[str, list[str]]
) -> list[_Accepted]:
    """The entries this process can use, with their fingerprints and spreads; the rest go
    to ``skipped`` (reason -> details)."""

    def skip(reason: str, detail: str) -> None:
        skipped.setdefault(reason, []).append(detail)

    _load_op_modules()
    ops = tuner.registered()
    gate_on = experimental_auto_backends_allowed()
    spaces: dict[tuple[str, str], list[tuple[Any, Any]]] = {}
    accepted: list[_Accepted] = []
    for raw in entries:
        try:
            key, entry = read_entry(raw)
        except (KeyError, ValueError, TypeError) as exc:
            skip(REASON_MALFORMED, str(exc))
            continue
        # The reader's one line per field of TuningFileEntry it uses (the key's are in `key`).
        backend, tactic = entry["backend"], entry["tactic"]
        median_s = median_seconds(entry["median_ms"])
        fingerprint = entry.get("fingerprint") or {}  # left out or null: matches anything
        api_key = key[0]
        differ = differences(fingerprint, process_fingerprint(key))
        if differ:
            skip(REASON_OTHER_ENVIRONMENT, " and ".join(differ))
            continue
        registered = ops.get(api_key)
        renamed = renamed_api(api_key) if registered is None else None
        if renamed is not None:  # an op renamed since: its entries are the new name's
            api_key, key = renamed.new, (renamed.new, *key[1:])
            registered = ops.get(api_key)
        if registered is None:
            skip(REASON_UNKNOWN_OP, api_key)
            continue
        op, runners = registered
        # A renamed backend's entry is read under its new name; a removed one's is skipped.
        backend, tomb = tuning_name(api_key, backend)
        if tomb is not None:
            where = f"{tomb.name!r} of {api_key.rpartition('.')[2]}"
            skip(REASON_REMOVED, f"{where} in {tomb.version}, use {tomb.use_instead!r}")
            continue
        if backend not in op.backend_checks or backend not in runners:
            skip(REASON_UNKNOWN_BACKEND, f"{backend!r} of {api_key}")
            continue
        space = spaces.get((api_key, backend))
        if space is None:
            space = spaces[(api_key, backend)] = [
                (normalise_document(t), t) for t in runners[backend].tactic_space()
            ]
        match = [t for norm, t in space if norm == tactic]
        if not match:
            skip(REASON_UNKNOWN_TACTIC, f"{shorten(repr(tactic))} of {backend!r} of {api_key}")
            continue
        if backend in op.experimental_backends and not gate_on:
            skip(REASON_EXPERIMENTAL, f"{backend!r} of {api_key}")
            continue
        iqr = entry.get("iqr_ms")  # left out (an older file) or null: unknown
        iqr_s = None if iqr is None else median_seconds(iqr, "iqr_ms")
        accepted.append((key, Choice(backend, match[0], median_s), fingerprint, iqr_s))
    return accepted
