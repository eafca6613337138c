"""The tuning file on disk: paths refused before any work, the ``filelock`` on
``<file>.lock`` and the atomic write (``os.replace``); its messages serve the API and CLI."""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Iterator
from dataclasses import dataclass

from filelock import FileLock, Timeout

from flashinfer.gating.exposed import exposed_in

LOCK_SUFFIX = ".lock"


@exposed_in("flashinfer.autotuner.tuning_file")
class TuningFileWarning(UserWarning):
    """A persisted autotune file, or some of its entries, could not be used."""


@exposed_in("flashinfer.autotuner.tuning_file")
class TuningFileError(ValueError):
    """A tuning file cannot be used as asked, found before any work: saving would lose
    results of another schema version, or the path cannot be a tuning file (not a regular
    file, or in a missing directory).  Nothing was read or written.  ``path`` and ``reason``
    are attributes, for callers that word their own message."""

    def __init__(self, message: str, *, path: str = "", reason: str = "") -> None:
        super().__init__(message)
        self.path = path
        self.reason = reason


# ---- the path ------------------------------------------------------------------------------

_NOT_REGULAR_ADVICE = (
    "flashinfer reads the whole file and replaces it on save, so it uses regular files "
    "only. Name a regular file, or a new file in an existing directory (e.g. 'tuned.json')"
)
_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


def _refused(path: str, reason: str, advice: str) -> TuningFileError:
    message = f"Refusing the tuning file {path!r}: {reason}; {advice}. Nothing was read or written."
    return TuningFileError(message, path=path, reason=reason)


def resolved(path: str) -> str:
    """The file a save of ``path`` writes: symbolic links followed to the end."""
    return os.path.realpath(path)


def _not_regular(path: str, mode: int) -> TuningFileError:
    kind = next((words for test, words in _KINDS if test(mode)), "a special file")
    via = f" (a symbolic link to {resolved(path)!r})" if os.path.islink(path) else ""
    return _refused(path, f"it{via} names {kind}, not a regular file", _NOT_REGULAR_ADVICE)


def path_problem(path: str, *, writing: bool) -> TuningFileError | None:
    """Why ``path`` cannot be a tuning file (None: it can), without opening it."""
    if "\0" in path:
        return _refused(path, "it contains a NUL character", "name a file")
    if path.endswith(("/", os.sep)) or (os.altsep is not None and path.endswith(os.altsep)):
        reason = "it ends with a path separator, so it names a directory, not a regular file"
        return _refused(path, reason, _NOT_REGULAR_ADVICE)
    try:
        mode = os.stat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        if not writing:
            return None  # reading: open() says FileNotFoundError
        directory = os.path.dirname(resolved(path))
        if os.path.isdir(directory):
            return None
        what = "is not a directory" if os.path.lexists(directory) else "does not exist"
        where = " (where the symbolic link leads)" if os.path.islink(path) else ""
        return _refused(
            path,
            f"its directory {directory!r}{where} {what}",
            "flashinfer creates no directories. Create it first, or name a file in an "
            "existing directory",
        )
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            reason = "it is a loop of symbolic links, which name no file"
            return _refused(path, reason, "name a regular file")
        return None  # e.g. permission denied: the read or the save reports it
    return None if stat.S_ISREG(mode) else _not_regular(path, mode)


def checked_path(path: str | os.PathLike[str], *, writing: bool = True, local: bool = True) -> str:
    """``path`` as a string, checked (``local=False``: its form only; rank 0 checks the rest)."""
    text = os.fspath(path)
    if not isinstance(text, str):
        raise TypeError(f"tuning file path must be a str or os.PathLike[str], not {path!r}")
    if not text:
        raise ValueError("tuning file path is empty; name a file, e.g. 'tuned.json'")
    problem = path_problem(text, writing=writing) if local else None
    if problem is not None:
        raise problem
    return text


def read_bytes(path: str) -> bytes:
    """The file's bytes, opened without blocking: one that became a FIFO meanwhile is refused."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    with open(fd, "rb", closefd=True) as f:
        mode = os.fstat(f.fileno()).st_mode
        if not stat.S_ISREG(mode):
            raise _not_regular(path, mode)
        return f.read()


# ---- the lock ------------------------------------------------------------------------------


def lock_path(target: str) -> str:
    return target + LOCK_SUFFIX


@dataclass(frozen=True)
class LockProblem:
    """Why a lock file can never be taken: the errno, and words following its name."""

    code: int
    reason: str


def _os_refusal(words: str, exc: OSError) -> LockProblem:
    why = exc.strerror or os.strerror(exc.errno or 0) or type(exc).__name__
    return LockProblem(exc.errno or errno.EIO, f"{words} ({why})")


def lock_problem(lock: str) -> LockProblem | None:
    """Why ``lock`` can never be taken (None: it can, or is only held now)."""
    directory, name = os.path.split(lock)
    limit = 255
    with contextlib.suppress(OSError, ValueError, AttributeError):
        limit = os.pathconf(directory or ".", "PC_NAME_MAX")
    if (size := len(os.fsencode(name))) > limit:
        words = f"has a name {size} bytes long, more than the {limit} this file system allows"
        return LockProblem(errno.ENAMETOOLONG, words)
    flags = (
        getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    )
    if os.path.islink(lock):
        return LockProblem(errno.ELOOP, "is a symbolic link (a lock file is never followed)")
    if os.path.isdir(lock):
        return LockProblem(errno.EISDIR, "is a directory")
    if os.path.lexists(lock):
        try:
            fd = os.open(lock, os.O_RDWR | flags)
        except PermissionError as exc:
            try:  # filelock's soft lock shares a peer's file read-only: held, not impossible
                fd = os.open(lock, os.O_RDONLY | flags)
            except OSError:
                return _os_refusal("exists and cannot be opened", exc)
        except OSError as exc:
            return _os_refusal("exists and cannot be opened", exc)
        os.close(fd)
        return None
    probe = os.path.join(
        directory or ".", f".flashinfer-lock-probe.{os.getpid()}.{secrets.token_hex(4)}"
    )
    try:
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL | flags, 0o600))
    except OSError as exc:
        return _os_refusal(f"cannot be created in {directory or '.'!r}", exc)
    with contextlib.suppress(OSError):
        os.unlink(probe)
    return None


def lock_error(target: str, problem: LockProblem) -> OSError:
    """The one refusal of a save whose lock can never be taken, of the refusal's errno."""
    error = OSError(
        problem.code,
        f"Cannot save the tuning file {target!r}: its lock file {problem.reason}, so the lock "
        "can never be taken. Save to a file in a directory this process can write. Nothing "
        "was written; this process's results are still in memory (AutoTuner.get().choices())",
    )
    error.filename = lock_path(target)
    return error


@contextlib.contextmanager
def held(target: str) -> Iterator[None]:
    """Hold ``target``'s lock: wait while held, raise at once when it can never be taken."""
    lock = FileLock(lock_path(target), mode=0o666)
    for timeout in (0, None):
        try:
            lock.acquire(timeout=timeout)
            break
        except Timeout:
            if (problem := lock_problem(lock_path(target))) is not None:
                raise lock_error(target, problem) from None
        except OSError as exc:  # EACCES, EROFS, EISDIR, ELOOP, ... at once
            if exc.errno == errno.ELOOP:
                why = LockProblem(exc.errno, "is a symbolic link (a lock file is never followed)")
            elif exc.errno == errno.EISDIR:
                why = LockProblem(exc.errno, "is a directory")
            else:
                why = _os_refusal("cannot be created or opened", exc)
            raise lock_error(target, why) from exc
    try:
        yield
    finally:
        lock.release()


def write_file(path: str, text: str) -> None:
    """Write ``text`` over ``path`` atomically, keeping its mode (new: ``0666`` & ~umask, which
    the kernel applies when the temporary file is created)."""
    try:
        mode: int | None = stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        mode = None
    directory, name = os.path.split(path)
    tmp = os.path.join(directory, f".{name}.{secrets.token_hex(4)}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL  # never follows nor reuses a name
    fd = os.open(tmp, flags | getattr(os, "O_BINARY", 0) | getattr(os, "O_CLOEXEC", 0), 0o666)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(text.encode("utf-8"))
            f.flush()
            os.fsync(f.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
