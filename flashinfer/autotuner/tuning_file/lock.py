"""The tuning file's inter-process lock, ``<file>.lock`` beside the file a save writes.

A save waits while another process (or thread) holds the lock, for as long as it takes:
no time limit, as any lock of one file between cooperating writers.  A lock that can
*never* be taken is another matter: its file cannot be created (the directory is read-only,
or a pseudo file system such as ``/proc`` that refuses new files), or it exists and cannot be
opened (a directory, a symbolic link, a file this user may not open).  ``filelock`` retries
some of those forever (a create refused with ``ENOENT`` in an existing directory reads to it
as a lock file removed meanwhile), so a save first tries once without waiting and, when that
fails, asks :func:`lock_problem` whether the lock can be taken at all: it raises at once,
naming the path, when it cannot, and waits only when the lock is really held.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
from collections.abc import Iterator
from dataclasses import dataclass

from filelock import FileLock, Timeout

__all__ = ["LOCK_SUFFIX", "LockProblem", "held", "lock_error", "lock_path", "lock_problem"]

LOCK_SUFFIX = ".lock"

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


def lock_path(target: str) -> str:
    """The lock file of the tuning file ``target`` (a resolved path)."""
    return target + LOCK_SUFFIX


def _strerror(exc: OSError) -> str:
    return exc.strerror or os.strerror(exc.errno or 0) or type(exc).__name__


@dataclass(frozen=True)
class LockProblem:
    """Why a lock file can never be taken: the errno of the refusal and, in words that
    follow the lock file's name, what is wrong ("cannot be created in '/proc' (...)")."""

    code: int
    reason: str


def _name_too_long(lock: str) -> LockProblem | None:
    directory, name = os.path.split(lock)
    limit = 255
    with contextlib.suppress(OSError, ValueError, AttributeError):
        limit = os.pathconf(directory or ".", "PC_NAME_MAX")
    size = len(os.fsencode(name))
    if size > limit:
        words = f"has a name {size} bytes long, more than the {limit} this file system allows"
        return LockProblem(errno.ENAMETOOLONG, words)
    return None


def lock_problem(lock: str) -> LockProblem | None:
    """Why the lock file ``lock`` can never be taken by this process; None when it can be,
    or is only held by another process for now.

    Creates nothing that stays: an existing lock file is opened (and closed), and for a
    missing one a uniquely named probe file is created in its directory and removed at once
    (the lock file itself is not created here: a waiting process could lock it meanwhile,
    so it is never removed once it exists).
    """
    too_long = _name_too_long(lock)
    if too_long is not None:
        return too_long
    if os.path.lexists(lock):
        if os.path.islink(lock):
            return LockProblem(errno.ELOOP, "is a symbolic link (a lock file is never followed)")
        if os.path.isdir(lock):
            return LockProblem(errno.EISDIR, "is a directory")
        flags = _NONBLOCK | _NOFOLLOW | _CLOEXEC
        try:
            fd = os.open(lock, os.O_RDWR | flags)
        except PermissionError as exc:
            # filelock's soft lock (a file system without flock) shares a peer's file
            # read-only: that lock is held, not impossible.
            try:
                fd = os.open(lock, os.O_RDONLY | flags)
            except OSError:
                return _refused("exists and cannot be opened", exc)
        except OSError as exc:
            return _refused("exists and cannot be opened", exc)
        os.close(fd)
        return None
    directory = os.path.dirname(lock) or "."
    probe = os.path.join(directory, f".flashinfer-lock-probe.{os.getpid()}.{secrets.token_hex(4)}")
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, 0o600)
    except OSError as exc:
        return _refused(f"cannot be created in {directory!r}", exc)
    os.close(fd)
    with contextlib.suppress(OSError):
        os.unlink(probe)
    return None


def _refused(words: str, exc: OSError) -> LockProblem:
    return LockProblem(exc.errno or errno.EIO, f"{words} ({_strerror(exc)})")


def lock_error(target: str, problem: LockProblem) -> OSError:
    """The one refusal of a save whose lock can never be taken: an ``OSError`` (what a save
    that cannot write raises) of the refusal's errno, so ``FileNotFoundError``,
    ``PermissionError``, ... as the case is, naming the lock file as ``filename``."""
    lock = lock_path(target)
    error = OSError(
        problem.code,
        f"Cannot save the tuning file {target!r}: its lock file {problem.reason}, so the lock "
        "can never be taken. Save to a file in a directory this process can write. Nothing "
        "was written; this process's results are still in memory (AutoTuner.get().choices())",
    )
    error.filename = lock
    return error


@contextlib.contextmanager
def held(target: str) -> Iterator[None]:
    """Hold the exclusive lock of the tuning file ``target`` (a resolved path): wait while
    another process holds it; raise ``OSError`` at once (:func:`lock_error`) when it can
    never be taken.  A new lock object per call, so that threads of one process exclude each
    other too; the lock file stays when the lock is released (harmless, and race-free)."""
    lock = FileLock(lock_path(target), mode=0o666)
    try:
        _acquire(lock, target, timeout=0)
    except Timeout:
        problem = lock_problem(lock_path(target))
        if problem is not None:
            raise lock_error(target, problem) from None
        _acquire(lock, target, timeout=None)  # held by another process or thread: wait
    try:
        yield
    finally:
        lock.release()


def _acquire(lock: FileLock, target: str, *, timeout: float | None) -> None:
    """``lock.acquire(timeout)`` (``None``: wait as long as it takes), a refusal
    ``filelock`` raises at once (EACCES, EROFS, EISDIR, ELOOP, ...) worded as ours."""
    try:
        lock.acquire(timeout=timeout)
    except Timeout:
        raise
    except OSError as exc:
        raise lock_error(target, _why_refused(exc)) from exc


def _why_refused(exc: OSError) -> LockProblem:
    """A refusal ``filelock`` raised at once (EACCES, EROFS, EISDIR, ELOOP, ...)."""
    if exc.errno == errno.ELOOP:
        return LockProblem(exc.errno, "is a symbolic link (a lock file is never followed)")
    if exc.errno == errno.EISDIR:
        return LockProblem(exc.errno, "is a directory")
    return _refused("cannot be created or opened", exc)
