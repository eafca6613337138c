"""Where the tuning file lives (issue 21, items 1, 2, 3 and 18's leftover temporaries).

* A path that exists and is not a regular file (a directory, a FIFO, a socket, a device),
  reached directly or through links, is refused before any work, by every API entry that
  takes the path and by ``flashinfer autotune``, with one message naming the path and what
  it is.  Nothing opens it (a FIFO would block), locks it or tunes.
* A save through a symbolic link (to a file, to a link, relative) updates the target and
  keeps the link; a save keeps the file's mode, and a new file gets ``0666`` less the umask.
* A path in a missing directory is refused by the API and the CLI alike, naming the
  directory, before any tuning; nothing creates the directory.
* The temporaries a killed save left beside the file are removed by the next save when
  their writer is gone; a live writer's, another file's, and anything not named as a
  temporary of this file are never touched.
"""

from __future__ import annotations

import contextlib
import os
import socket
import stat
import threading

import pytest
import torch
from autotuner_fakes import FakeRunner, clean_tuner, make_op, tune_from_cli

from flashinfer.autotuner import (
    AutoTuner,
    Choice,
    TuningFileError,
    autotune,
    check_mergeable,
    load_tuning_file,
    make_key,
    save_tuning_file,
)
from flashinfer.autotuner import disk as paths
from flashinfer.autotuner import persist as save_module
from flashinfer.cli import main

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(autouse=True)
def fresh_tuner():
    with clean_tuner(warmup=0, repeat=1) as tuner:
        yield tuner


def tuned_op():
    runners = {"a": FakeRunner("a", [1, 2])}
    return make_op(runners), runners


def tune_once(op, n=4):
    with autotune():
        op(torch.zeros(n))


def cli_target(monkeypatch, runners):
    """A fake op the command can tune: ``--op <its name> --shapes N``."""
    return tune_from_cli(monkeypatch, runners)


def cli_tune(op, cache, shapes="4"):
    return main(["autotune", "--op", op.api_name, "--shapes", shapes, "--tuning-file", str(cache)])


def snapshot(directory):
    """Every entry under ``directory``: its kind, and a regular file's bytes and mode."""
    seen = {}
    for root, dirs, files in os.walk(directory):
        for name in dirs + files:
            full = os.path.join(root, name)
            info = os.lstat(full)
            content = None
            if stat.S_ISREG(info.st_mode):
                with open(full, "rb") as f:
                    content = f.read()
            elif stat.S_ISLNK(info.st_mode):
                content = os.readlink(full)
            seen[os.path.relpath(full, directory)] = (
                stat.S_IFMT(info.st_mode),
                content,
                stat.S_IMODE(info.st_mode),
            )
    return seen


# --------------------------------------------------------------------------------------
# Item 1: a path that exists and is not a regular file
# --------------------------------------------------------------------------------------

KINDS = ["directory", "fifo", "socket", "char-device"]


@contextlib.contextmanager
def special_file(kind, directory):
    """A ``kind`` file (the device is ``/dev/null``, never written) and its words."""
    if kind == "directory":
        path = os.path.join(directory, "d.json")
        os.mkdir(path)
        yield path, "a directory"
    elif kind == "fifo":
        path = os.path.join(directory, "f.json")
        os.mkfifo(path)
        yield path, "a FIFO (named pipe)"
    elif kind == "socket":
        path = os.path.join(directory, "s.json")
        here = os.getcwd()
        os.chdir(directory)  # a relative name: a socket's path is limited to ~100 bytes
        try:
            with socket.socket(socket.AF_UNIX) as server:
                server.bind("s.json")
                yield path, "a socket"
        finally:
            os.chdir(here)
    else:
        if not os.path.exists("/dev/null") or not stat.S_ISCHR(os.stat("/dev/null").st_mode):
            pytest.skip("no /dev/null character device here")
        yield "/dev/null", "a character device"
        assert stat.S_ISCHR(os.lstat("/dev/null").st_mode)  # still the device


def reach(path, how, directory):
    """``path`` itself, or a link to it, or a link to a link to it (in ``directory``)."""
    if how == "direct":
        return path
    link = os.path.join(directory, "link.json")
    os.symlink(path, link)
    if how == "link":
        return link
    outer = os.path.join(directory, "outer.json")
    os.symlink("link.json", outer)  # relative, to the first link
    return outer


@pytest.fixture
def no_writes(monkeypatch):
    """Fail the test if anything would lock, create a temporary, replace or write a file,
    or open anything but a regular file (even for reading: a FIFO blocks, a device may act)."""

    def refuse(*args, **kwargs):
        raise AssertionError(f"the path was to be refused before this: {args}")

    monkeypatch.setattr(save_module, "held", refuse)
    monkeypatch.setattr(paths.os, "replace", refuse)
    real_open = os.open

    def open_regular_for_reading_only(path, flags, *args, **kwargs):
        if flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC):
            refuse(path, flags)
        with contextlib.suppress(OSError):
            if not stat.S_ISREG(os.stat(path).st_mode):
                refuse(path, "opened")
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", open_regular_for_reading_only)


def guarded(call, seconds=60):
    """``call()`` in a thread: a test that opened a FIFO would hang, so it fails instead."""
    outcome = {}

    def run():
        try:
            outcome["value"] = call()
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            outcome["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), "the call blocked: it opened the path"
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("value")


def _entries():
    """Every API entry that takes the path: name -> call(path, op)."""

    def block(path, op):
        with autotune(tuning_file=path):
            op(torch.zeros(4))

    def block_untuned(path, op):
        with autotune(False, tuning_file=path):
            op(torch.zeros(4))

    return {
        "save_tuning_file": lambda path, op: save_tuning_file(path),
        "save_tuning_file-no-merge": lambda path, op: save_tuning_file(path, merge=False),
        "AutoTuner.save_tuning_file": lambda path, op: AutoTuner.get().save_tuning_file(path),
        "load_tuning_file": lambda path, op: load_tuning_file(path),
        "AutoTuner.load_tuning_file": lambda path, op: AutoTuner.get().load_tuning_file(path),
        "check_mergeable": lambda path, op: check_mergeable(path),
        "autotune(tuning_file=)": block,
        "autotune(False, tuning_file=)": block_untuned,
    }


ENTRIES = _entries()


@pytest.mark.parametrize("how", ["direct", "link", "link-to-link"])
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("entry", sorted(ENTRIES))
def test_a_path_that_is_not_a_regular_file_is_refused_by_every_api_entry_before_any_work(
    tmp_path, no_writes, entry, kind, how
):
    op, runners = tuned_op()
    # something to save: a refusal is not "nothing to do"
    AutoTuner.get().set_choice(make_key(op.api_key, (torch.zeros(64),)), Choice("a", 1, 1e-6))
    with special_file(kind, str(tmp_path)) as (target, words):
        path = reach(target, how, str(tmp_path))
        before = snapshot(tmp_path)
        with pytest.raises(TuningFileError) as caught:
            guarded(lambda: ENTRIES[entry](path, op))
        message = str(caught.value)
        assert message == str(paths.path_problem(path, writing=True))  # one message
        assert repr(path) in message and f"names {words}, not a regular file" in message
        assert "Name a regular file" in message and "Nothing was read or written" in message
        if how != "direct":
            assert f"a symbolic link to {os.path.realpath(path)!r}" in message
        assert caught.value.path == path and words in caught.value.reason
        assert runners["a"].calls == []  # nothing tuned
        assert snapshot(tmp_path) == before  # no lock, no temporary, nothing replaced


@pytest.mark.parametrize("how", ["direct", "link", "link-to-link"])
@pytest.mark.parametrize("kind", KINDS)
def test_the_cli_refuses_the_same_paths_with_the_same_message(
    tmp_path, capsys, monkeypatch, no_writes, kind, how
):
    runners = {"a": FakeRunner("a", [1, 2])}
    op = cli_target(monkeypatch, runners)
    with special_file(kind, str(tmp_path)) as (target, words):
        path = reach(target, how, str(tmp_path))
        before = snapshot(tmp_path)
        assert guarded(lambda: cli_tune(op, path)) == 2
        err = capsys.readouterr().err
        expected = str(paths.path_problem(path, writing=True))
        assert err.startswith(f"flashinfer autotune: error: --tuning-file: {expected}")
        assert words in err
        assert runners["a"].calls == [] and AutoTuner.get().choices() == {}
        assert snapshot(tmp_path) == before


def test_a_path_that_turns_into_a_fifo_after_the_check_is_still_never_read(tmp_path, monkeypatch):
    """The read itself never blocks: the file is opened without waiting and checked open."""
    path = tmp_path / "c.json"
    os.mkfifo(path)
    monkeypatch.setattr(paths, "path_problem", lambda path, writing: None)  # missed
    with pytest.raises(TuningFileError, match="names a FIFO"):
        guarded(lambda: load_tuning_file(path))


def test_a_link_loop_and_a_path_ending_with_a_separator_are_refused(tmp_path):
    loop = tmp_path / "loop.json"
    os.symlink("loop.json", loop)
    for path, words in (
        (loop, "loop of symbolic links"),
        (f"{tmp_path}/new/", "names a directory"),
    ):
        for call in (
            save_tuning_file,
            load_tuning_file,
            check_mergeable,
            lambda p: autotune(tuning_file=p),
        ):
            with pytest.raises(TuningFileError, match=words):
                call(path)
    assert sorted(os.listdir(tmp_path)) == ["loop.json"]


# --------------------------------------------------------------------------------------
# Item 2: links are followed, modes kept
# --------------------------------------------------------------------------------------

LINKS = ["plain", "to-file", "to-link", "relative", "other-directory", "directory-link"]


def make_link(tmp_path, shape):
    """(the path a user names, the file it reaches, the links that must survive)."""
    shared = tmp_path / "shared"
    shared.mkdir()
    target = shared / "tuned.json"
    work = tmp_path / "work"
    work.mkdir()
    if shape == "plain":  # no link: the mode is kept all the same
        return target, target, []
    if shape == "to-file":
        os.symlink(target, work / "c.json")
        return work / "c.json", target, [work / "c.json"]
    if shape == "to-link":
        os.symlink(target, shared / "middle.json")
        os.symlink(shared / "middle.json", work / "c.json")
        return work / "c.json", target, [work / "c.json", shared / "middle.json"]
    if shape == "relative":
        os.symlink(os.path.join("..", "shared", "tuned.json"), work / "c.json")
        return work / "c.json", target, [work / "c.json"]
    if shape == "other-directory":
        os.symlink(target, shared / "alias.json")
        return shared / "alias.json", target, [shared / "alias.json"]
    os.symlink(shared, work / "dir")  # the directory is the link; the file is not
    return work / "dir" / "tuned.json", target, [work / "dir"]


def check_saved_through(link, target, links, mode, before_links):
    assert {str(p): os.readlink(p) for p in links} == before_links  # every link kept
    assert stat.S_ISREG(os.lstat(target).st_mode)
    assert stat.S_IMODE(os.stat(target).st_mode) == mode
    doc = target.read_text()
    assert '"schema_version": 2' in doc and '"backend": "a"' in doc
    for directory in {target.parent, link.parent}:
        assert not [n for n in os.listdir(directory) if n.endswith(".tmp")]
    assert os.path.exists(f"{target}.lock")  # one lock for every way to the file


@pytest.mark.parametrize("mode", [0o600, 0o640, 0o644, 0o660, 0o664])
@pytest.mark.parametrize("shape", LINKS)
@pytest.mark.parametrize("via", ["api", "autotune", "cli"])
def test_a_save_through_links_updates_the_target_keeps_every_link_and_the_mode(
    tmp_path, capsys, monkeypatch, via, shape, mode
):
    link, target, links = make_link(tmp_path, shape)
    target.write_text('{"schema_version": 2, "entries": []}')
    os.chmod(target, mode)
    before_links = {str(p): os.readlink(p) for p in links}
    if via == "cli":
        op = cli_target(monkeypatch, {"a": FakeRunner("a", [1, 2])})
        assert cli_tune(op, link) == 0, capsys.readouterr().err
    else:
        op, _ = tuned_op()
        if via == "api":
            tune_once(op)
            assert save_tuning_file(link) == 1
        else:
            with autotune(tuning_file=link):
                op(torch.zeros(4))
    check_saved_through(link, target, links, mode, before_links)
    AutoTuner.get().clear()
    assert load_tuning_file(link).loaded == 1  # and it reads back through the link


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o002, 0o027])
@pytest.mark.parametrize("via", ["api", "cli"])
def test_a_new_file_gets_the_usual_mode_honouring_the_umask(
    tmp_path, capsys, monkeypatch, via, umask
):
    path = tmp_path / "c.json"
    old = os.umask(umask)
    try:
        if via == "cli":
            op = cli_target(monkeypatch, {"a": FakeRunner("a", [1, 2])})
            assert cli_tune(op, path) == 0, capsys.readouterr().err
        else:
            op, _ = tuned_op()
            tune_once(op)
            save_tuning_file(path)
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o666 & ~umask
        assert save_tuning_file(path) >= 1 and stat.S_IMODE(os.stat(path).st_mode) == 0o666 & ~umask
    finally:
        os.umask(old)


def test_a_dangling_link_creates_its_target_and_stays_a_link(tmp_path):
    """Decided: a save follows a dangling link as ``open(link, 'w')`` would, creating the
    file it names (when that file's directory exists), so a link set up before the shared
    file exists starts filling it."""
    op, _ = tuned_op()
    target = tmp_path / "shared" / "tuned.json"
    target.parent.mkdir()
    link = tmp_path / "c.json"
    os.symlink(target, link)
    tune_once(op)
    assert save_tuning_file(link) == 1
    assert os.path.islink(link) and os.readlink(link) == str(target)
    assert stat.S_ISREG(os.lstat(target).st_mode)
    AutoTuner.get().clear()
    os.symlink(target.parent / "none.json", tmp_path / "other.json")
    with pytest.raises(FileNotFoundError):  # reading a dangling link: no file yet
        load_tuning_file(tmp_path / "other.json")
    assert load_tuning_file(link).loaded == 1


# --------------------------------------------------------------------------------------
# Item 3: a path in a missing directory
# --------------------------------------------------------------------------------------

MISSING = ["missing", "missing-nested", "file-as-directory", "dangling-link-to-missing"]


def missing_directory(tmp_path, shape):
    """(path, the directory the refusal must name, what is wrong with it)."""
    tmp_path = type(tmp_path)(os.path.realpath(tmp_path))  # as the message names it
    if shape == "missing":
        return tmp_path / "nope" / "c.json", tmp_path / "nope", "does not exist"
    if shape == "missing-nested":
        return tmp_path / "a" / "b" / "c" / "c.json", tmp_path / "a" / "b" / "c", "does not exist"
    if shape == "file-as-directory":
        (tmp_path / "plain").write_text("x")
        return tmp_path / "plain" / "c.json", tmp_path / "plain", "is not a directory"
    link = tmp_path / "c.json"
    os.symlink(tmp_path / "gone" / "tuned.json", link)
    return link, tmp_path / "gone", "does not exist"


WRITING_ENTRIES = sorted(e for e in ENTRIES if "load" not in e)


@pytest.mark.parametrize("shape", MISSING)
@pytest.mark.parametrize("entry", WRITING_ENTRIES)
def test_a_path_in_a_missing_directory_is_refused_naming_it_before_any_tuning(
    tmp_path, entry, shape
):
    op, runners = tuned_op()
    tune_once(op, n=64)  # something to save
    runners["a"].calls.clear()
    path, directory, what = missing_directory(tmp_path, shape)
    before = snapshot(tmp_path)
    with pytest.raises(TuningFileError) as caught:
        ENTRIES[entry](str(path), op)
    message = str(caught.value)
    assert message == str(paths.path_problem(str(path), writing=True))
    assert f"its directory {str(directory)!r}" in message and what in message
    assert "creates no directories" in message
    assert runners["a"].calls == []  # refused before any tuning
    assert snapshot(tmp_path) == before  # no directory, no lock created


@pytest.mark.parametrize("shape", MISSING)
def test_the_cli_refuses_a_missing_directory_with_the_api_message(
    tmp_path, capsys, monkeypatch, shape
):
    runners = {"a": FakeRunner("a", [1, 2])}
    op = cli_target(monkeypatch, runners)
    path, directory, what = missing_directory(tmp_path, shape)
    before = snapshot(tmp_path)
    assert cli_tune(op, path) == 2
    err = capsys.readouterr().err
    expected = str(paths.path_problem(str(path), writing=True))
    assert err.startswith(f"flashinfer autotune: error: --tuning-file: {expected}")
    assert str(directory) in err and what in err
    assert runners["a"].calls == [] and snapshot(tmp_path) == before


def test_reading_from_a_missing_directory_is_the_usual_file_not_found(tmp_path):
    """Loading only reads: a missing file is ``FileNotFoundError``, as documented, wherever
    it is missing from (code that treats it as "no tuning file yet" keeps working)."""
    (tmp_path / "plain").write_text("x")
    for call in (load_tuning_file, AutoTuner.get().load_tuning_file):
        with pytest.raises(FileNotFoundError):
            call(tmp_path / "nope" / "c.json")
        with pytest.raises(NotADirectoryError):  # an OSError, as open() raises it
            call(tmp_path / "plain" / "c.json")
    assert os.listdir(tmp_path) == ["plain"]
