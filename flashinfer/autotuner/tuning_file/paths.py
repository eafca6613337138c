"""Where a tuning file lives on disk: which paths are refused before any work, which file a
save really writes, and the temporary files a save writes beside it.

* **Refused paths.**  A path that exists and is not a regular file (a directory, a FIFO, a
  socket, a character or block device), one ending with a separator, one holding a NUL, a
  symbolic-link loop, and (for a path that will be written) one whose directory does not
  exist.  Each is found with ``os.stat`` and friends: nothing here opens the path (opening a
  FIFO blocks, opening a tape device rewinds it) nor creates a directory.
* **Links.**  A save writes the file a symbolic link names (links followed to the end, as
  ``os.path.realpath`` does): the link is kept and its target updated.  A dangling link
  names the file it would reach: the first save creates it there, when its directory exists.
* **Temporaries.**  A save writes ``.<file>.<pid>@<host>.<random>.tmp`` beside the file, then
  renames it over the file.  A save killed before the rename leaves that temporary behind;
  the next save (holding the file's lock) removes those of the same file whose writer is
  gone: written on this host by a process that no longer exists, or untouched for
  :data:`STALE_TEMPORARY_AGE_S` (also those of older flashinfers, named
  ``.<file>.<random>.tmp``).  Nothing else is ever removed.

The messages are built here, once, for the API and the ``flashinfer autotune`` command
alike; :func:`flashinfer.autotuner.tuning_file.format.checked_path` raises them as
:class:`~flashinfer.autotuner.TuningFileError`.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import socket
import stat
import string
import tempfile
import time
from dataclasses import dataclass

__all__ = [
    "STALE_TEMPORARY_AGE_S",
    "PathProblem",
    "create_temporary",
    "path_problem",
    "remove_stale_temporaries",
    "resolved",
    "stale_temporaries",
]

#: A temporary untouched for this long is stale whoever wrote it (another host's, or one
#: whose writer cannot be told from its name).  A save holds its temporary open for the
#: time it takes to write and flush one JSON file, so this is far beyond any live save.
STALE_TEMPORARY_AGE_S = 3600.0

_TEMPORARY_SUFFIX = ".tmp"
# What follows ".<file>." in a temporary's name: "<pid>@<host>.<random>", or, from
# flashinfers before the writer was named, mkstemp's bare eight random characters.
_HOST_CHARACTERS = frozenset(string.ascii_letters + string.digits + "-")
_RANDOM_CHARACTERS = frozenset(string.ascii_letters + string.digits + "_")
_UNNAMED_CHARACTERS = frozenset(string.ascii_lowercase + string.digits + "_")


def _writer(name: str) -> tuple[int, str] | None:
    """``(pid, host)`` of a temporary's writer part ``"<pid>@<host>.<random>"``; None when
    it is not one (parsed by hand: a name in the folder is anyone's text)."""
    pid, at, rest = name.partition("@")
    host, dot, random = rest.partition(".")
    if not (at and dot and pid.isascii() and pid.isdigit() and host and random):
        return None
    if set(host) <= _HOST_CHARACTERS and set(random) <= _RANDOM_CHARACTERS:
        return int(pid), host
    return None


def _unnamed(name: str) -> bool:
    """Whether ``name`` is mkstemp's eight random characters (temporaries before writers
    were named)."""
    return len(name) == 8 and set(name) <= _UNNAMED_CHARACTERS


_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)

_NOT_REGULAR_ADVICE = (
    "flashinfer reads the whole file and replaces it on save, so it uses regular files "
    "only. Name a regular file, or a new file in an existing directory (e.g. 'tuned.json')"
)
_DIRECTORY_ADVICE = (
    "flashinfer creates no directories. Create it first, or name a file in an existing directory"
)


@dataclass(frozen=True)
class PathProblem:
    """Why a tuning-file path is refused: ``reason`` says what the path is, ``message`` the
    whole text (the path, what it is, what to do), the same for the API and the CLI."""

    path: str
    reason: str
    advice: str

    @property
    def message(self) -> str:
        return (
            f"Refusing the tuning file {self.path!r}: {self.reason}; {self.advice}. "
            "Nothing was read or written."
        )


def kind(mode: int) -> str:
    """What a file of ``st_mode`` ``mode`` is, in words (``"a regular file"``, ...)."""
    if stat.S_ISREG(mode):
        return "a regular file"
    for test, words in _KINDS:
        if test(mode):
            return words
    return "a special file"


def resolved(path: str) -> str:
    """The file a save of ``path`` writes: symbolic links followed to the end (a dangling
    link's target included), as an absolute path."""
    return os.path.realpath(path)


def _via(path: str) -> str:
    """`` (a symbolic link to '...')`` when ``path`` is a link, for the messages."""
    if os.path.islink(path):
        return f" (a symbolic link to {resolved(path)!r})"
    return ""


def not_regular(path: str, mode: int) -> PathProblem:
    """The one refusal of a path that exists and is not a regular file, whatever it is."""
    reason = f"it{_via(path)} names {kind(mode)}, not a regular file"
    return PathProblem(path, reason, _NOT_REGULAR_ADVICE)


def path_problem(path: str, *, writing: bool) -> PathProblem | None:
    """Why ``path`` cannot be a tuning file (None when it can), found without opening it.

    ``writing``: the path will be saved to, so its directory must exist (a path that is
    only read may name a missing file: reading it raises ``FileNotFoundError``).
    """
    if "\0" in path:
        return PathProblem(path, "it contains a NUL character", "name a file")
    if path.endswith(("/", os.sep)) or (os.altsep is not None and path.endswith(os.altsep)):
        reason = "it ends with a path separator, so it names a directory, not a regular file"
        return PathProblem(path, reason, _NOT_REGULAR_ADVICE)
    try:
        mode = os.stat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):  # NotADirectory: a component is a file
        return _directory_problem(path) if writing else None  # reading: open() says so
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            reason = "it is a loop of symbolic links, which name no file"
            return PathProblem(path, reason, "name a regular file")
        return None  # e.g. permission denied: the read or the save reports it
    if stat.S_ISREG(mode):
        return None
    return not_regular(path, mode)


def _directory_problem(path: str) -> PathProblem | None:
    """The refusal of a path whose (resolved) directory does not exist, or is not one."""
    directory = os.path.dirname(resolved(path))
    if os.path.isdir(directory):
        return None
    what = "is not a directory" if os.path.lexists(directory) else "does not exist"
    where = " (where the symbolic link leads)" if os.path.islink(path) else ""
    reason = f"its directory {directory!r}{where} {what}"
    return PathProblem(path, reason, _DIRECTORY_ADVICE)


# ---- temporaries ---------------------------------------------------------------------------


def _host() -> str:
    """This host's name as a temporary's name holds it (letters, digits and ``-``)."""
    return re.sub(r"[^A-Za-z0-9-]", "-", socket.gethostname())[:64] or "host"


def create_temporary(target: str) -> tuple[int, str]:
    """A new temporary file beside ``target``, named for its writer: ``(fd, path)``, the file
    created ``0600`` (``tempfile.mkstemp``)."""
    directory, name = os.path.split(target)
    prefix = f".{name}.{os.getpid()}@{_host()}."
    return tempfile.mkstemp(dir=directory, prefix=prefix, suffix=_TEMPORARY_SUFFIX)


def _alive(pid: int) -> bool:
    """Whether process ``pid`` of this host may still exist (True when it cannot be told)."""
    if os.name == "nt" or pid <= 0:  # Windows' os.kill terminates; 0 is a process group
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (OSError, OverflowError):  # EPERM: it exists, owned by someone else
        return True
    return True


def stale_temporaries(target: str, *, now: float | None = None) -> list[str]:
    """The temporaries beside ``target`` that a killed save of ``target`` left: regular files
    named as its temporaries are, whose writer is gone (see the module docstring)."""
    directory, name = os.path.split(target)
    prefix = f".{name}."
    now = time.time() if now is None else now
    host = _host()
    stale = []
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    for entry in names:
        if not (entry.startswith(prefix) and entry.endswith(_TEMPORARY_SUFFIX)):
            continue
        writer = entry[len(prefix) : -len(_TEMPORARY_SUFFIX)]
        named = _writer(writer)
        if named is None and not _unnamed(writer):
            continue
        full = os.path.join(directory, entry)
        try:
            info = os.lstat(full)
        except OSError:
            continue
        if not stat.S_ISREG(info.st_mode):
            continue
        gone = named is not None and named[1] == host and not _alive(named[0])
        if gone or now - info.st_mtime > STALE_TEMPORARY_AGE_S:
            stale.append(full)
    return sorted(stale)


def remove_stale_temporaries(target: str) -> list[str]:
    """Remove :func:`stale_temporaries` of ``target`` (best effort: one that cannot be
    removed stays); returns those removed.  Call it holding ``target``'s lock, so that no
    save of ``target`` is writing its temporary meanwhile."""
    removed = []
    for path in stale_temporaries(target):
        with contextlib.suppress(OSError):
            os.unlink(path)
            removed.append(path)
    return removed
