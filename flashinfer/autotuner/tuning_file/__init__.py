"""The tuning file: the autotuner's results persisted as versioned, human-readable JSON,
written atomically, each result stamped with the environment that measured it.

"Tuning file" is its one name, in code, the CLI, messages and docs.  The old spellings
users may type (upstream FlashInfer's ``save_configs``/``load_configs``, ``autotune(cache=)``,
``flashinfer autotune --cache``, the ``AutotuneCache*`` classes, ``flashinfer.autotuner.cache``)
still work, silently: each is the very object of its new name.  :data:`OLD_SPELLINGS` lists
them; ``tests/test_tuning_file_name.py`` checks that each works and that no other text uses one.

File format (``schema_version`` 2): a header, then one entry per tuned result (one entry
per line in the file)::

    {
      "schema_version": 2,
      "flashinfer_version": "0.1.0",
      "torch_version": "2.13.0+cpu",
      "entries": [
        {"op": "flashinfer.gemm.mm", "inputs": [...], "device": "cpu", ...},
        ...
      ]
    }

The fields are documented once, on the types the writer builds and the reader reads
through: :class:`TuningFileDocument` (the header and the list of entries) and
:class:`TuningFileEntry` (one entry: the tuning key, the choice, its time, the fingerprint of
the environment that measured it), each field with what it holds, its JSON type, whether a
file may leave it out and which schema versions have it.  Never pickle: loading a tuning
file cannot run code.

**One file, many environments.** Loading uses an entry only when every field of its
fingerprint equals this process's (a field written ``"*"``, or left out, matches anything);
the others are counted in the load report and kept in the file: saving writes them back
untouched, so one shared file serves H100 nodes, H200 nodes and CPU runs side by side.  Of
several entries of one key that match, the most specific (fewest ``"*"``) wins, then the
later.  A result loaded from a file is saved again with the fingerprint it came with; a
result tuned (or set) in this process is stamped with this process's.

**Schema 1** (files written before fingerprints) still loads, and saving into one upgrades
it to schema 2 keeping every entry: its entries read as stamped with the flashinfer and torch
versions the file's header records, the fields it lacks matching anything.

**The path** is checked before any work (before tuning, loading or locking), by
:func:`save_tuning_file`, :func:`load_tuning_file`, :func:`check_mergeable`,
``autotune(tuning_file=path)`` (when the block is made) and the CLI's ``--tuning-file``
alike, with one message that names the path, what it is and what to do
(:class:`TuningFileError`, a ``ValueError``):

* a path that exists and is not a regular file (a directory, a FIFO, a socket, a character
  or block device; directly or through symbolic links) is refused, found with ``os.stat``:
  nothing opens it (opening a FIFO would block);
* a path to be written (a save, ``autotune(tuning_file=path)``) whose directory does not exist is
  refused, naming the directory: flashinfer creates no directories.  Loading only reads: a
  missing file, wherever it is missing from, is ``FileNotFoundError``;
* a **symbolic link** is followed: a save writes, locks and merges with the file the link
  names (the link is kept), so every writer of one shared file, through a link or not,
  takes one lock.  A dangling link names the file it would reach: the first save creates
  it there (when its directory exists), as ``open(link, "w")`` would;
* a save keeps the file's mode (a ``0600`` file stays ``0600``), owner and group, and its
  hard links (see "In place" below); a new file gets ``0666`` less the umask, as ``open()``
  gives.

Saving (:func:`save_tuning_file`, or :meth:`AutoTuner.save_tuning_file`) takes an exclusive lock on
``<file>.lock`` (``filelock``: an OS lock, POSIX and Windows alike; held by another process, it
is waited for, with no time limit; one that can never be taken, its file impossible to create
or open, raises ``OSError`` at once, naming the path: :mod:`.lock`), merges with the entries
already in the file (so processes that tuned different keys, or the same key in different
environments, all keep theirs; an entry of this process replaces the file's entry of the
same key *and* fingerprint, and of two such entries in the file the later wins), writes a
temporary file ``.<file>.<pid>@<host>.<random>.tmp`` beside the file, given the file's mode,
owner and group, and ``os.replace``-s it over the file: a reader sees the old file or the new
one, never a partial one, and a crash mid-write leaves the old file intact.  **In place**:
when a rename would change the file's identity (it has other hard links, or this process
cannot give a new file its owner and group), the save writes through the file itself, as an
in-place editor does: it truncates it, writes it from the start and flushes it, keeping the
complete temporary until then.  A save cut short there leaves a file that is empty or a
prefix of the new text, which is never JSON (it reads as truncated: a load warns and uses
nothing of it), and the complete copy beside it, which the next save merges with instead
(:mod:`.write`).  A save killed before the rename leaves its temporary;
the next save of the file, holding the lock, removes those whose writer is gone (written on
this host by a process that no longer exists, or untouched for an hour,
``paths.STALE_TEMPORARY_AGE_S``), and nothing else: another file's temporaries, a live
writer's, anything not named as this file's temporary stay.  What a merge cannot keep is
never dropped silently:

* a file of a schema version this flashinfer cannot read (newer than 2) is refused
  (:class:`TuningFileError`, nothing written): its entries belong to another flashinfer,
  which could use them, and one file cannot hold two schemas.  Save elsewhere, or pass
  ``merge=False`` to replace it;
* an **unreadable** file (corrupt, truncated, not a tuning file) holds nothing any flashinfer
  can load: it is replaced, with a :class:`TuningFileWarning` saying so;
* entries that are not JSON objects, or hold ``NaN``/``Infinity`` (which JSON cannot
  represent), are dropped with a :class:`TuningFileWarning` that counts them.

Only strict JSON is ever written (``allow_nan=False``).  A time that is not finite is a
broken measurement, not a result, so none can get into the tuner: a tactic whose time is
not finite counts as failed, ``AutoTuner.set_choice`` refuses one, and an entry with one is
skipped on load.

An entry's ``iqr_ms`` (optional, written when known) is the spread of its measurement; a
*noisy* one (more than ``AutoTuner.noisy_spread`` of ``median_ms``) is loaded and used, and
the next ``autotune()`` block that calls its key times it again (see
:mod:`flashinfer.autotuner.block_report`).

Loading (:func:`load_tuning_file`, or :meth:`AutoTuner.load_tuning_file`) imports every op module
first, then skips, and reports in **one** warning grouped by reason, entries that

* come from a schema version it cannot read (the whole file then),
* are malformed (including a ``median_ms``, or an ``iqr_ms`` other than null, that is not a
  finite, non-negative number, or a fingerprint field of the wrong type),
* were measured in another environment (their fingerprint does not match; kept in the file),
* name an op that is unknown or not registered with the autotuner,
* name a backend, or a tactic, that no longer exists (checked against the registered
  runners and their ``tactic_space()``),
* name an experimental backend while ``FLASHINFER_ALLOW_EXPERIMENTAL_AUTO_BACKENDS`` is not
  ``1`` (calls with that key then use the stable default).

A corrupt or truncated file, one nested deeper than :data:`MAX_DEPTH` levels, or one whose
``schema_version`` is not an integer (``true`` is not ``1``), warns and loads nothing.  None
of this raises; a missing file passed to :func:`load_tuning_file` explicitly raises
``FileNotFoundError``.  Loading never writes, locks nor creates a file, and neither does an
``autotune(tuning_file=path)`` block that tuned nothing new: a tuned file may sit on a read-only
mount.

This package is the public face of the file; the work is done in its modules ``format``
(the schema, the entry and document types, parsing and writing the text), ``paths`` (the
paths refused, links, the temporaries), ``load`` (reading and validating a file), ``save``
(merging), ``lock`` (the lock, and the refusal of one that can never be taken) and ``write``
(replacing or writing in place, keeping the file's identity), and in
:mod:`flashinfer.autotuner.fingerprint` (the environment of a result).
"""

from __future__ import annotations

import os

from flashinfer.autotuner.tuner import AutoTuner

# The file's schema types, at the path the API reference gives them (docs/api/autotuner.rst).
from flashinfer.autotuner.tuning_file.format import (
    MAX_DEPTH,
    READABLE_SCHEMAS,
    SCHEMA_VERSION,
    TuningFileDocument,
    TuningFileEntry,
    TuningFileError,
    TuningFileWarning,
)
from flashinfer.autotuner.tuning_file.load import LoadReport, load_into
from flashinfer.autotuner.tuning_file.save import check_mergeable, save_into

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

#: Every old spelling of the tuning file that users may type -> its one name now.  Each
#: still works and is the same object (class, function, method) or the same option; none
#: warns: upstream FlashInfer's users type ``save_configs``, ``load_configs`` and
#: ``autotune(cache=...)``, and a silent, documented alias breaks none of their code.  Text
#: (help, messages, docs) names an old spelling only beside its new one.
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


# The old spellings (OLD_SPELLINGS): the same objects, so ``except AutotuneCacheError`` and
# ``flashinfer.autotuner.load_configs(path)`` keep working.
AutotuneCacheError = TuningFileError
AutotuneCacheWarning = TuningFileWarning
CacheDocument = TuningFileDocument
CacheEntry = TuningFileEntry
save_configs = save_tuning_file
load_configs = load_tuning_file
