"""A save keeps the tuning file's identity, and a cut file never reads as a tuning file
(issue 34, item 20).

* Owner, group and mode stay across a save; so does every hard link to the file (a save
  with other links, or one that could not give a new file the owner, writes in place).
* An in-place write cut short (the process killed mid-write) leaves a file that reads as
  truncated, never as a tuning file, and a complete copy beside it, which the next save
  merges with: nothing of the file is lost.
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import warnings

import pytest
import torch
from autotuner_fakes import FakeRunner, clean_tuner, make_op
from hypothesis import example, given, settings
from hypothesis import strategies as st

from flashinfer.autotuner import (
    AutoTuner,
    TuningFileWarning,
    autotune,
    load_tuning_file,
    save_tuning_file,
)
from flashinfer.autotuner.tuning_file import write as write_module
from flashinfer.autotuner.tuning_file.format import dump_json, parse_document

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROOT = hasattr(os, "geteuid") and os.geteuid() == 0


@pytest.fixture(autouse=True)
def fresh_tuner():
    with clean_tuner(warmup=0, repeat=1) as tuner:
        yield tuner


#: an entry of another environment, which every save must write back untouched
FOREIGN = {
    "op": "elsewhere.op",
    "inputs": [{"shape": [8], "dtype": "float32"}],
    "device": "cuda",
    "compute_capability": 90,
    "backend": "b",
    "tactic": None,
    "median_ms": 1.0,
    "experimental": False,
    "fingerprint": {"device": "NVIDIA H200"},
}


def _write_tuning_file(path: str) -> None:
    with open(path, "w") as f:
        f.write(json.dumps({"schema_version": 2, "entries": [FOREIGN]}))


def _tune_one() -> None:
    AutoTuner.get().clear()  # one result per save, whatever ran before
    op = make_op({"a": FakeRunner("a", [1, 2])})
    with autotune():
        op(torch.zeros(4))


OWNERS = [0, 1000, 65534] if ROOT else [os.getuid()] if hasattr(os, "getuid") else [0]
GROUPS = [0, 12345, 65534] if ROOT else [os.getgid()] if hasattr(os, "getgid") else [0]


@settings(max_examples=30, deadline=None)
@given(
    uid=st.sampled_from(OWNERS),
    gid=st.sampled_from(GROUPS),
    mode=st.sampled_from([0o600, 0o640, 0o644, 0o660, 0o664, 0o666]),
    links=st.integers(0, 2),
    chown_allowed=st.booleans(),
)
@example(uid=OWNERS[0], gid=GROUPS[-1], mode=0o640, links=0, chown_allowed=True)  # the report
@example(uid=OWNERS[0], gid=GROUPS[0], mode=0o644, links=1, chown_allowed=True)  # a hard link
@example(uid=OWNERS[-1], gid=GROUPS[-1], mode=0o600, links=0, chown_allowed=False)  # not root
def test_a_save_keeps_owner_group_mode_and_hard_links(uid, gid, mode, links, chown_allowed):
    with tempfile.TemporaryDirectory() as directory, pytest.MonkeyPatch.context() as mp:
        path = os.path.join(directory, "tuned.json")
        _write_tuning_file(path)
        os.chmod(path, mode)
        if hasattr(os, "chown"):
            os.chown(path, uid, gid)
        others = [os.path.join(directory, f"link{i}.json") for i in range(links)]
        for other in others:
            os.link(path, other)
        if not chown_allowed:  # a user who may not give a file another owner or group

            def refuse(fd, u, g):
                raise PermissionError(errno.EPERM, "Operation not permitted")

            mp.setattr(os, "fchown", refuse, raising=False)
        before = os.stat(path)
        _tune_one()
        save_tuning_file(path)
        after = os.stat(path)
        assert (after.st_uid, after.st_gid) == (before.st_uid, before.st_gid)
        assert (after.st_mode & 0o7777) == mode
        content = open(path, "rb").read()
        for other in others:  # every link is still the file, and shows the save
            assert os.path.samefile(other, path)
            assert open(other, "rb").read() == content
        saved = json.loads(content)["entries"]
        assert FOREIGN in saved and len(saved) == 2
        assert [n for n in os.listdir(directory) if n.endswith(".tmp")] == []


@pytest.mark.skipif(not ROOT, reason="giving a file another group needs root")
def test_a_root_save_of_another_users_file_keeps_its_owner(tmp_path):
    """The reported case: root saves into a file owned by a user and a shared group."""
    path = tmp_path / "tuned.json"
    _write_tuning_file(str(path))
    os.chown(path, 1000, 12345)
    _tune_one()
    save_tuning_file(path)
    info = os.stat(path)
    assert (info.st_uid, info.st_gid) == (1000, 12345)


# --------------------------------------------------------------------------------------
# A cut in-place write
# --------------------------------------------------------------------------------------

_DOCUMENTS = st.lists(
    st.dictionaries(
        st.text(max_size=6),
        st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=8)),
        max_size=4,
    ),
    max_size=4,
)


@settings(max_examples=60, deadline=None)
@given(entries=_DOCUMENTS, data=st.data())
def test_a_written_file_cut_anywhere_is_never_a_tuning_file(entries, data):
    """Why an in-place write truncates first: any cut is then a prefix of the new text, and
    a prefix of a JSON object without its closing brace is not JSON."""
    text = dump_json({"schema_version": 2, "flashinfer_version": "0", "torch_version": "0",
                      "entries": entries})  # fmt: skip
    whole = text.rstrip()
    cut = data.draw(st.integers(0, len(whole) - 1), label="cut")
    assert parse_document(text[:cut].encode())[0] is None


CUT_SAVE = textwrap.dedent(
    """
    import os, sys
    sys.path.insert(0, {tests!r})
    import torch
    from autotuner_fakes import FakeRunner, make_op
    from flashinfer.autotuner import autotune, save_tuning_file
    from flashinfer.autotuner.tuning_file import write
    op = make_op({{"a": FakeRunner("a", [1, 2])}})
    with autotune():
        op(torch.zeros(4))
    def cut(fd, data):
        os.write(fd, data[: len(data) // 2])
        os._exit(9)  # killed half way through writing the file in place
    write._write_all = cut
    save_tuning_file({path!r})
    """
)


def test_a_cut_in_place_save_is_read_as_truncated_and_the_next_save_recovers(tmp_path):
    path = tmp_path / "tuned.json"
    _write_tuning_file(str(path))
    link = tmp_path / "hard.json"
    os.link(path, link)  # a hard link: the save writes in place
    script = CUT_SAVE.format(tests=os.path.join(REPO, "tests"), path=str(path))
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=300)
    assert proc.returncode == 9, proc.stderr.decode()
    assert parse_document(path.read_bytes())[0] is None  # cut: not a tuning file
    copies = [n for n in os.listdir(tmp_path) if n.endswith(".tmp")]
    assert len(copies) == 1  # the complete copy stays beside it
    with pytest.warns(TuningFileWarning, match="corrupt or truncated"):
        report = load_tuning_file(path)  # never a partial result
    assert report.loaded == 0
    _tune_one()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        save_tuning_file(path)
    said = " ".join(str(w.message) for w in caught if w.category is TuningFileWarning)
    assert "interrupted" in said and copies[0] in said
    saved = json.loads(path.read_text())["entries"]
    assert FOREIGN in saved  # the file's own entries came back from the copy
    assert os.path.samefile(path, link)
    assert [n for n in os.listdir(tmp_path) if n.endswith(".tmp")] == []


def test_a_failed_in_place_write_keeps_the_complete_copy(tmp_path, monkeypatch):
    """A write refused half way (a full disk) in a live process: the error says where the
    complete text is, and that copy stays."""
    path = tmp_path / "tuned.json"
    _write_tuning_file(str(path))
    os.link(path, tmp_path / "hard.json")

    def full(fd, data):
        os.write(fd, data[:10])
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(write_module, "_write_all", full)
    _tune_one()
    with pytest.raises(OSError) as caught:
        save_tuning_file(path)
    copies = [n for n in os.listdir(tmp_path) if n.endswith(".tmp")]
    assert len(copies) == 1
    assert any(copies[0] in note for note in getattr(caught.value, "__notes__", [copies[0]]))
    assert parse_document((tmp_path / copies[0]).read_bytes())[0] is not None  # complete
