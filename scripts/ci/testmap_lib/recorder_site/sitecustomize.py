"""Started in every Python process of a recording run (its folder leads ``PYTHONPATH``):
coverage.py with the current test as its context, and an audit hook that notes the
repository files the process reads as data or lists.  Inert unless ``TESTMAP_RC`` is set.

A subprocess inherits the test it runs for through ``TESTMAP_TEST`` (the plugin sets it per
test), so what it runs is credited to that test.  A test that starts a child with a
hand-made environment (no ``PYTHONPATH``, no ``TESTMAP_TEST``) is not followed: what that
child ran is not in the map.
"""

from __future__ import annotations

import atexit
import json
import os
import sys

CURRENT = os.environ.get("TESTMAP_TEST", "")  # the plugin moves it test by test
COV = None
_READS: set[tuple[str, str]] = set()
_RC = os.environ.get("TESTMAP_RC")
_REPO = os.environ.get("TESTMAP_REPO", "")
_OUT = os.environ.get("TESTMAP_DIR", "")
_WRITE = frozenset("wax+")
# Tools' state, not the repository's content (Hypothesis' example database, caches).
_STATE = (".git/", ".hypothesis/", ".pytest_cache/", ".mypy_cache/", ".ruff_cache/", "build/")


def _save() -> None:
    if COV is not None:
        try:
            COV.stop()
            COV.save()
        except Exception:  # noqa: BLE001 - a child's exit must not fail because of us
            pass
    if _READS and _OUT:
        try:
            path = os.path.join(_OUT, f"reads-{os.getpid()}.json")
            with open(path, "w", encoding="utf-8") as out:
                json.dump(sorted(_READS), out)
        except OSError:
            pass


def _by_import() -> bool:
    frame = sys._getframe(2)
    for _ in range(8):
        if frame is None:
            return False
        if frame.f_code.co_filename.startswith("<frozen importlib"):
            return True
        frame = frame.f_back
    return False


def _note(path: object, folder: bool) -> None:
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    if not isinstance(path, str):
        return  # a file descriptor
    full = os.path.abspath(path)
    if not full.startswith(_REPO + os.sep) and full != _REPO:
        return
    rel = full[len(_REPO) + 1 :].replace(os.sep, "/")
    if "__pycache__" in rel or rel.endswith(".pyc") or rel.startswith(_STATE):
        return
    if (folder or rel.endswith(".py")) and _by_import():
        return  # the import system's own reads: coverage credits what was imported
    if folder:
        _READS.add((CURRENT, (rel + "/") if rel else "./"))
    else:
        _READS.add((CURRENT, rel))


def _hook(event: str, args: tuple) -> None:
    if event == "open":
        mode = args[1] if len(args) > 1 else "r"
        if isinstance(mode, str) and _WRITE.intersection(mode):
            return
        _note(args[0], False)
    elif event in ("os.listdir", "os.scandir"):
        _note(args[0] if args and args[0] is not None else ".", True)


if _RC and _REPO:
    try:
        import coverage
    except ImportError:
        coverage = None  # type: ignore[assignment]
    if coverage is not None:
        COV = coverage.Coverage(config_file=_RC, data_suffix=True, context=CURRENT or None)
        COV.start()
    sys.addaudithook(_hook)
    atexit.register(_save)
    _exit = os._exit

    def _saving_exit(status: int) -> None:
        # os._exit skips atexit: a child that leaves this way (a forked multiprocessing
        # worker, tests/autotune_dist_worker.py) would take what it ran with it.
        _save()
        _exit(status)

    os._exit = _saving_exit
