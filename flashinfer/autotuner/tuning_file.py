"""The tuning file: the autotuner's results persisted as versioned, human-readable JSON.

"Tuning file" is its one name, in code, the CLI, messages and docs.  The old spellings
users may type (upstream FlashInfer's ``save_configs``/``load_configs``, ``autotune(cache=)``,
``flashinfer autotune --cache``, the ``AutotuneCache*`` classes, ``flashinfer.autotuner.cache``)
still work, silently: each is the very object of its new name (:data:`OLD_SPELLINGS`).

File format (``schema_version`` 2): a header, then one entry per line::

    {
      "schema_version": 2,
      "flashinfer_version": "0.1.0",
      "torch_version": "2.13.0+cpu",
      "entries": [
        {"op": "flashinfer.gemm.mm", "inputs": [...], "device": "cpu", ...},
        ...
      ]
    }

The fields are documented on :class:`TuningFileDocument` and :class:`TuningFileEntry`.
Never pickle: loading a tuning file cannot run code.

**One file, many environments.** Loading uses an entry only when its fingerprint
(:mod:`flashinfer.autotuner.fingerprint`) matches this process; the others are counted in the
load report and written back untouched by a save.  Of several matching entries of one key,
the most specific (fewest ``"*"``) wins, then the later.  Schema 1 (before fingerprints)
still loads, and saving into one upgrades it keeping every entry.

**The path** is checked before any work by every entry point, with one message
(:class:`TuningFileError`): a path that exists and is not a regular file is refused and never
opened (a FIFO would block); a path to be written whose directory is missing is refused
(flashinfer creates no directories); a symbolic link is followed (its target is written,
locked and merged with; the link stays).

**Saving** takes an exclusive ``filelock`` on ``<file>.lock`` (waited for while another
process holds it; one that can never be taken raises ``OSError`` at once, naming the path),
merges with the file's entries (an entry measured here replaces the file's entries of its key
that this process matches), writes a temporary file beside the file with the file's mode and
``os.replace``-s it over the file: a reader sees the old file or the new one, never a part.
A file of a newer schema is refused (:class:`TuningFileError`, nothing written; ``merge=False``
replaces it); an unreadable one is replaced, and entries that are not objects or hold
``NaN``/``Infinity`` are dropped, each with a :class:`TuningFileWarning`.  Only strict JSON
is written.

**Loading** imports every op module, then skips, and reports in one warning grouped by
reason, entries that are malformed, of another schema or environment, name an unknown op,
backend or tactic, or an experimental backend while the gate is off.  A corrupt, truncated or
too deeply nested file warns and loads nothing.  Loading never writes, locks nor creates a
file, and neither does a block that tuned nothing new (read-only mounts work).
"""

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

    With ``merge=True`` (default) entries already in the file for other keys, or measured
    in other environments, are kept untouched (a schema-1 file is upgraded); a file of a
    schema version this flashinfer cannot read is refused (:class:`TuningFileError`,
    nothing written), an unreadable one is replaced with a :class:`TuningFileWarning`.
    ``merge=False`` replaces whatever the file holds.  Atomic and safe against concurrent
    savers (see the module docstring).  A path that exists and is not a regular file, or
    lies in a missing directory, is refused before any work (:class:`TuningFileError`);
    a symbolic link's target is written and the link kept; the file keeps its mode.  The
    same as ``AutoTuner.get().save_tuning_file(path)``.
    """
    return save_into(AutoTuner.get(), path, merge=merge)


def load_tuning_file(path: str | os.PathLike[str]) -> LoadReport:
    """Load persisted results from ``path`` into the process's autotuner.

    Only entries whose fingerprint matches this process are used (see the module
    docstring).  Skipped entries, those measured in another environment included, and
    unreadable files are reported in one :class:`TuningFileWarning`
    (pointing at the caller's line) and in the returned :class:`LoadReport`; nothing here
    raises except ``FileNotFoundError``/``OSError`` for a file that cannot be opened, and
    ``ValueError`` for an empty path or :class:`TuningFileError` for one that exists and
    is not a regular file (never opened: a FIFO would block).  Reads only: never writes,
    locks nor creates a file.
    The same as ``AutoTuner.get().load_tuning_file(path)``.
    """
    return load_into(AutoTuner.get(), path)


# The old spellings (OLD_SPELLINGS): the same objects.
AutotuneCacheError = TuningFileError
AutotuneCacheWarning = TuningFileWarning
CacheDocument = TuningFileDocument
CacheEntry = TuningFileEntry
save_configs = save_tuning_file
load_configs = load_tuning_file
