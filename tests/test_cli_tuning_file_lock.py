"""The lock file beside a tuning file, as the docs (docs/api/autotuner.rst, "The lock file")
and ``flashinfer autotune --help`` describe it: ``<file>.lock``, empty, created by the first
save beside the file a save writes (beside a symbolic link's target, not the link), left there
when the save ends, and safe to delete between runs (the next save creates it again); a run
that only reads never creates it.

Decision (issue 23): the lock stays beside the tuning file rather than moving out of the
user's folder.  Every writer of one file must find the same lock, whichever user, host or
link it writes through; the directory beside the file is the one place all of them can
already write (the atomic replace needs it), and it needs no name derived from the path.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from autotuner_fakes import FakeRunner, clean_tuner, tune_from_cli

from flashinfer.cli import main

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def fresh_tuner():
    with clean_tuner(warmup=0, repeat=1) as tuner:
        yield tuner


@pytest.fixture
def fake_op(monkeypatch, isolated_op_registry) -> str:
    return tune_from_cli(monkeypatch, {"a": FakeRunner("a", [0, 1]), "b": FakeRunner("b")}).api_name


def _tune(op: str, cache: Path, *extra: str) -> int:
    return main(["autotune", op, "--shapes", "4", "--tuning-file", str(cache), *extra])


def _files(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")}


def test_the_lock_is_beside_the_file_empty_and_stays(fake_op, tmp_path, capsys):
    cache = tmp_path / "tuned.json"
    assert _tune(fake_op, cache) == 0
    assert _files(tmp_path) == {"tuned.json", "tuned.json.lock"}
    assert (tmp_path / "tuned.json.lock").read_bytes() == b""  # holds no data


def test_through_a_link_the_lock_is_beside_the_target(fake_op, tmp_path, capsys):
    links, store = tmp_path / "links", tmp_path / "store"
    links.mkdir()
    store.mkdir()
    (links / "tuned.json").symlink_to(store / "real.json")
    assert _tune(fake_op, links / "tuned.json") == 0
    assert _files(links) == {"tuned.json"}  # the user's folder holds the link only
    assert _files(store) == {"real.json", "real.json.lock"}


def test_deleting_the_lock_between_runs_is_safe(fake_op, fresh_tuner, tmp_path, capsys):
    cache = tmp_path / "tuned.json"
    assert _tune(fake_op, cache) == 0
    before = json.loads(cache.read_text())["entries"]
    (tmp_path / "tuned.json.lock").unlink()
    fresh_tuner.clear()
    assert main(["autotune", fake_op, "--shapes", "8", "--tuning-file", str(cache)]) == 0
    after = json.loads(cache.read_text())["entries"]
    assert len(after) == len(before) + 1 and all(e in after for e in before)  # merged
    assert (tmp_path / "tuned.json.lock").exists()  # made again by the save


def test_a_run_that_only_reads_creates_no_lock(fake_op, fresh_tuner, tmp_path, capsys):
    cache = tmp_path / "tuned.json"
    assert _tune(fake_op, cache) == 0
    (tmp_path / "tuned.json.lock").unlink()
    fresh_tuner.clear()
    assert _tune(fake_op, cache) == 0  # every key already in the file: nothing saved
    assert main(["explain", "mm", "--shapes", "4x4x4", "--tuning-file", str(cache)]) == 0
    assert _files(tmp_path) == {"tuned.json"}


def test_the_help_and_the_docs_explain_the_lock(capsys):
    assert main(["autotune", "--help"]) == 0
    help_text = " ".join(capsys.readouterr().out.split())
    assert "--tuning-file FILE" in help_text
    for words in ("FILE.lock", "beside it (beside a symbolic link's target)", "safe to delete"):
        assert words in help_text, words
    docs = " ".join((ROOT / "docs" / "api" / "autotuner.rst").read_text().split())
    for words in (
        "**The lock file.**",
        "``<file>.lock``",
        "beside the link's **target**",
        "It stays when the save ends, on purpose",
        "**safe to delete whenever no tuning runs**",
    ):
        assert words in docs, words
