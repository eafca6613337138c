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

This module is the public face of the file; the work is done in ``_cache_format`` (the
schema, an entry, parsing and writing the text), ``_cache_load`` (reading and validating a
file) and ``_cache_save`` (merging, locking, the atomic write).
"""

from __future__ import annotations

import os

from ._cache_format import MAX_DEPTH, SCHEMA_VERSION, AutotuneCacheError, AutotuneCacheWarning
from ._cache_load import LoadReport, load_into
from ._cache_save import check_mergeable, save_into
from .tuner import AutoTuner

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
