"""The tuning file: the autotuner's results persisted as versioned, human-readable JSON.

"Tuning file" is its one name; every old spelling users may type is the very object of its
new name, silently (:data:`OLD_SPELLINGS`).  Never pickle: loading cannot run code.  The
format, merging, locking, paths and environments: docs/api/autotuner.rst ("The tuning file")."""

from __future__ import annotations

import os

from flashinfer.autotuner.disk import TuningFileError, TuningFileWarning
from flashinfer.autotuner.persist import (
    MAX_DEPTH,
    READABLE_SCHEMAS,
    SCHEMA_VERSION,
    LoadReport,
    TuningFileDocument,
    TuningFileEntry,
    check_mergeable,
    load_into,
    save_into,
)
from flashinfer.autotuner.tuner import AutoTuner

__all__ = [
    "MAX_DEPTH",
    "OLD_SPELLINGS",
    "READABLE_SCHEMAS",
    "SCHEMA_VERSION",
    "TuningFileError",
    "TuningFileWarning",
    "TuningFileDocument",
    "TuningFileEntry",
    "LoadReport",
    "check_mergeable",
    "load_tuning_file",
    "save_tuning_file",
    # old spellings (OLD_SPELLINGS), the same objects
    "AutotuneCacheError",
    "AutotuneCacheWarning",
    "CacheDocument",
    "CacheEntry",
    "load_configs",
    "save_configs",
]

#: Every old spelling of the tuning file users may type -> its one name now; each is the same
#: object (or option) and none warns: upstream's users type ``save_configs``.
OLD_SPELLINGS: dict[str, str] = {
    "AutotuneCacheError": "TuningFileError",
    "AutotuneCacheWarning": "TuningFileWarning",
    "CacheDocument": "TuningFileDocument",
    "CacheEntry": "TuningFileEntry",
    "save_configs": "save_tuning_file",
    "load_configs": "load_tuning_file",
    "flashinfer.autotuner.cache": "flashinfer.autotuner.tuning_file",
    "cache=": "tuning_file=",
    "--cache": "--tuning-file",
}


# ---- the public functions ------------------------------------------------------------------


def save_tuning_file(path: str | os.PathLike[str], *, merge: bool = True) -> int:
    """Save every tuned result of this process to ``path`` (JSON); returns the entry count.

    ``merge=True`` keeps the file's other keys and environments (a schema-1 file is upgraded);
    a newer schema is refused (:class:`TuningFileError`, nothing written), an unreadable file
    replaced with a :class:`TuningFileWarning`; ``merge=False`` replaces the file.  Atomic, under
    a lock; a path that is not a regular file or lies in a missing directory is refused first.
    The same as ``AutoTuner.get().save_tuning_file(path)``."""
    return save_into(AutoTuner.get(), path, merge=merge)


def load_tuning_file(path: str | os.PathLike[str]) -> LoadReport:
    """Load persisted results from ``path`` into the process's autotuner.

    Only entries whose fingerprint matches this process are used; skipped entries and an
    unreadable file are reported in one :class:`TuningFileWarning` (at the caller's line) and in
    the returned :class:`LoadReport`.  Raises only for a path it cannot open (``OSError``),
    an empty one (``ValueError``) or one that is not a regular file (:class:`TuningFileError`).
    Never writes, locks nor creates a file.  The same as
    ``AutoTuner.get().load_tuning_file(path)``."""
    return load_into(AutoTuner.get(), path)


# The old spellings (OLD_SPELLINGS): the same objects.
AutotuneCacheError = TuningFileError
AutotuneCacheWarning = TuningFileWarning
CacheDocument = TuningFileDocument
CacheEntry = TuningFileEntry
save_configs = save_tuning_file
load_configs = load_tuning_file
