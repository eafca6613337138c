"""How a save's text reaches the tuning file: the file keeps its identity (owner, group, mode,
hard links), and a half-written file never reads as a tuning file.

A save (holding the file's lock) writes the whole text to a temporary beside the file
(``.<file>.<pid>@<host>.<random>.tmp``, :func:`.paths.create_temporary`) and flushes it to
disk, then takes one of two ways:

* **Replace** (the usual way): the temporary gets the file's mode, owner and group and is
  renamed over the file.  A reader sees the old file or the new one, never a part; a crash
  leaves the old file whole.  A new file gets ``0666`` less the umask and the saver's owner.
* **In place**, when a rename would change which file the path is: the file has other hard
  links (they would keep the old content), or this process cannot give a new file the
  file's owner and group (a file of another user, a group this user is not in; root always
  can).  As an in-place editor does (vim's ``backupcopy=auto``), the file is then truncated,
  written from its start and flushed, through its own inode, so owner, group, mode, ACLs and
  every hard link stay; the temporary, a complete copy, is removed only after that.  A
  crash in between leaves the file empty or holding a prefix of the new text.  A JSON
  document cut anywhere before its closing brace is not JSON, so that file reads as
  truncated (a load warns and uses nothing of it), never as a tuning file, and the
  complete copy stays beside it: the next save, holding the lock, merges with that copy
  instead of the cut file (:func:`interrupted_copy`).  A reader loading while an in-place
  save writes may likewise see a truncated file, and then loads nothing from it.

Extended attributes and ACLs are kept by the in-place way only (a replaced file has the
temporary's).
"""

from __future__ import annotations

import contextlib
import os
import stat

from flashinfer.autotuner.tuning_file.format import parse_document
from flashinfer.autotuner.tuning_file.paths import create_temporary, stale_temporaries

__all__ = ["interrupted_copy", "write_file"]

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_BINARY = getattr(os, "O_BINARY", 0)


def _current_umask() -> int:
    """The process's umask; read from ``/proc`` where it can be, since setting it to read it
    back would give a file another thread creates meanwhile the wrong mode."""
    with contextlib.suppress(OSError, ValueError):
        with open("/proc/self/status", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _owner_given(fd: int, info: os.stat_result) -> bool:
    """Give the open temporary ``fd`` the owner and group of the file ``info`` describes;
    False when this process may not (then only an in-place write keeps them)."""
    mine = os.fstat(fd)
    if (mine.st_uid, mine.st_gid) == (info.st_uid, info.st_gid):
        return True
    fchown = getattr(os, "fchown", None)
    if fchown is None:  # Windows: no owner and group to keep
        return True
    try:
        fchown(fd, info.st_uid, info.st_gid)
    except OSError:  # EPERM: another user's file, a group this user is not in
        return False
    return True


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        if written <= 0:
            raise OSError("the tuning file took no bytes")
        view = view[written:]


def write_file(path: str, text: str) -> None:
    """Write ``text`` to the tuning file ``path`` (a resolved path: no link), holding its
    lock, by replacing it or in place (see the module docstring)."""
    data = text.encode("utf-8")
    try:
        info: os.stat_result | None = os.stat(path)
    except FileNotFoundError:
        info = None
    fd, tmp = create_temporary(path)
    cut = [False]  # set once the file is truncated: the temporary is then the one whole copy
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            in_place = info is not None and (
                info.st_nlink > 1 or not _owner_given(f.fileno(), info)
            )
            os.fsync(f.fileno())
        # after the owner: a chown may clear set-id bits
        os.chmod(tmp, 0o666 & ~_current_umask() if info is None else stat.S_IMODE(info.st_mode))
        if in_place:
            _write_in_place(path, data, tmp, cut)
        else:
            os.replace(tmp, path)
    except BaseException:
        if not cut[0]:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        raise
    if in_place:
        os.unlink(tmp)


def _write_in_place(path: str, data: bytes, tmp: str, cut: list[bool]) -> None:
    """Truncate the file and write ``data`` into it, through its own inode (the temporary
    ``tmp`` holds the complete text meanwhile); ``cut[0]`` is set once it is truncated."""
    fd = os.open(path, os.O_WRONLY | _NOFOLLOW | _NONBLOCK | _CLOEXEC | _BINARY)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):  # it changed kind: write nothing
            raise OSError(f"the tuning file {path!r} is no longer a regular file")
        cut[0] = True
        os.ftruncate(fd, 0)  # first: any cut from here on is a prefix of data, never JSON
        _write_all(fd, data)
        os.fsync(fd)
    except BaseException as exc:
        if cut[0] and hasattr(exc, "add_note"):
            exc.add_note(
                f"The complete text is in {tmp!r}; the next save of the file restores from it."
            )
        raise
    finally:
        os.close(fd)


def interrupted_copy(target: str) -> tuple[str, bytes] | None:
    """The complete copy an interrupted in-place save of ``target`` left (the newest of its
    stale temporaries that holds a whole document), as ``(path, bytes)``; None when there is
    none.  Call it holding ``target``'s lock, before the stale temporaries are removed."""
    found: list[tuple[float, str, bytes]] = []
    for path in stale_temporaries(target):
        try:
            fd = os.open(path, os.O_RDONLY | _NOFOLLOW | _NONBLOCK | _BINARY)
            with open(fd, "rb", closefd=True) as f:
                if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                    continue
                mtime = os.fstat(f.fileno()).st_mtime
                data = f.read()
        except OSError:
            continue
        if parse_document(data)[0] is not None:
            found.append((mtime, path, data))
    if not found:
        return None
    _, path, data = max(found)
    return path, data
