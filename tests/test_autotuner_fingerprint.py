"""Tuning files stamped with their environment: every saved result carries the fingerprint
of what measured it, loading uses only the results this process matches (``"*"`` matches
anything), the others are counted, warned about once and written back untouched, and a
schema-1 file (written before fingerprints) loads and upgrades without losing an entry."""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

import pytest
import torch
from autotuner_fakes import FakeRunner, clean_tuner, make_op

import flashinfer
from flashinfer.autotuner import (
    AutoTuner,
    Choice,
    TuningFileWarning,
    autotune,
    load_tuning_file,
    make_key,
    save_tuning_file,
)
from flashinfer.autotuner import keys as fp

SCHEMA1 = Path(__file__).parent / "data" / "autotune_schema1.json"
OTHER_ENV = "were measured in another environment"


@pytest.fixture(autouse=True)
def fast_tuner():
    with clean_tuner(warmup=0, repeat=1) as tuner:
        yield tuner


def fake_op():
    runners = {"a": FakeRunner("a", [1, 2], delays={2: 0.002}), "b": FakeRunner("b")}
    return make_op(runners), runners


def key(op, n=4):
    return make_key(op.api_key, (torch.zeros(n),))


def here(op, n=4):
    return fp.process_fingerprint(key(op, n))


def entry(op, backend="a", tactic=1, n=4, **fingerprint):
    """A schema-2 entry of ``op`` for ``zeros(n)``; ``fingerprint`` overrides this
    process's fields."""
    return {
        "op": op.api_key,
        "inputs": [{"shape": [n], "dtype": "float32"}],
        "device": "cpu",
        "compute_capability": None,
        "backend": backend,
        "tactic": tactic,
        "median_ms": 1.0,
        "experimental": False,
        "fingerprint": {**here(op, n), **fingerprint},
    }


def write(path, entries, version=2, **header):
    path.write_text(json.dumps({"schema_version": version, **header, "entries": entries}))


def quiet_load(path):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a file this process matches entirely: no warning
        return load_tuning_file(path)


# --------------------------------------------------------------------------------------
# What a saved result carries
# --------------------------------------------------------------------------------------


def test_a_saved_result_carries_the_fingerprint_of_this_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    op, _ = fake_op()
    with autotune():
        op(torch.zeros(4))
    save_tuning_file(tmp_path / "c.json")
    (saved,) = json.loads((tmp_path / "c.json").read_text())["entries"]
    assert saved["fingerprint"] == {
        "flashinfer": flashinfer.__version__,
        "torch": torch.__version__,
        "triton": fp._triton_version(),
        "device": "cpu",
        "compute_capability": None,
        "triton_interpret": True,
    }
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    assert fp.process_fingerprint(key(op))["triton_interpret"] is False


def test_a_cuda_key_is_stamped_with_the_gpu_name_of_its_capability(monkeypatch):
    monkeypatch.setattr(fp, "_gpu_name", lambda cc: {90: "NVIDIA H200"}.get(cc))
    cuda_key = ("op", (), "cuda", 90)
    assert fp.process_fingerprint(cuda_key)["device"] == "NVIDIA H200"
    assert fp.process_fingerprint(cuda_key)["compute_capability"] == 90
    assert fp.process_fingerprint(("op", (), "cuda", 80))["device"] is None  # no such GPU here
    assert fp.process_fingerprint(("op", (), None, None))["device"] is None  # no tensor


# --------------------------------------------------------------------------------------
# Loading: match, mismatch, wildcard
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "field, value",
    [
        ("flashinfer", "0.0.1"),
        ("torch", "1.0.0"),
        ("triton", "0.1"),
        ("device", "NVIDIA H100 80GB HBM3"),
        ("compute_capability", 90),
        ("triton_interpret", "flip"),
    ],
)
def test_a_result_from_another_environment_is_skipped_counted_and_warned_once(
    tmp_path, field, value
):
    op, runners = fake_op()
    mine = here(op)
    if value == "flip":
        value = not mine["triton_interpret"]
    path = tmp_path / "c.json"
    write(path, [entry(op, "b", None, **{field: value}), entry(op, "a", 2, n=8)])
    with pytest.warns(TuningFileWarning) as caught:
        report = load_tuning_file(path)
    assert len(caught) == 1
    message = str(caught[0].message)
    assert f"1 {OTHER_ENV}, kept in the file ({field} {value!r} vs {mine[field]!r} here)" in message
    assert report.loaded == 1 and report.total_skipped == report.other_environment == 1
    assert AutoTuner.get().choice(key(op)) is None  # the other environment's is not used
    assert op(torch.zeros(4)) == ("a", None)  # the default runs
    assert AutoTuner.get().choice(key(op, 8)) == Choice("a", 2, 1e-3)


def test_a_matching_result_is_used_without_a_warning(tmp_path):
    op, runners = fake_op()
    path = tmp_path / "c.json"
    write(path, [entry(op, "b", None)])
    assert quiet_load(path).loaded == 1
    assert op(torch.zeros(4)) == ("b", None) and runners["a"].tactics_calls == 0


@pytest.mark.parametrize("wildcard", ["star", "left-out"])
def test_a_wildcard_field_matches_anything(tmp_path, wildcard):
    op, _ = fake_op()
    stars = {f: "*" for f in fp.FIELDS} if wildcard == "star" else {}
    path = tmp_path / "c.json"
    write(path, [{**entry(op, "b", None), "fingerprint": stars}])
    assert quiet_load(path).loaded == 1
    assert AutoTuner.get().choice(key(op)).backend == "b"
    # One pinned field that differs still excludes it, whatever the stars.
    AutoTuner.get().clear()
    write(path, [{**entry(op, "b", None), "fingerprint": {**stars, "torch": "1.0.0"}}])
    with pytest.warns(TuningFileWarning, match=OTHER_ENV):
        assert load_tuning_file(path).loaded == 0


def test_of_several_matching_entries_of_a_key_the_most_specific_wins(tmp_path):
    op, _ = fake_op()
    specific = entry(op, "a", 2)
    general = {**entry(op, "b", None), "fingerprint": {"torch": "*"}}
    for entries in ([specific, general], [general, specific]):
        AutoTuner.get().clear()
        write(tmp_path / "c.json", entries)
        assert quiet_load(tmp_path / "c.json").loaded == 2
        assert AutoTuner.get().choice(key(op)).backend == "a"


@pytest.mark.parametrize(
    "bad",
    [[], "2.13", {"torch": 2.13}, {"compute_capability": True}, {"triton_interpret": "yes"}],
)
def test_a_fingerprint_of_the_wrong_shape_is_malformed(tmp_path, bad):
    op, _ = fake_op()
    write(tmp_path / "c.json", [{**entry(op), "fingerprint": bad}])
    with pytest.warns(TuningFileWarning, match="1 are malformed") as caught:
        load_tuning_file(tmp_path / "c.json")
    assert "fingerprint" in str(caught[0].message)


# --------------------------------------------------------------------------------------
# Saving keeps what belongs to other environments
# --------------------------------------------------------------------------------------


def test_an_entry_of_another_environment_survives_a_save_untouched(tmp_path):
    op, _ = fake_op()
    path = tmp_path / "c.json"
    # The same key as this process will tune, measured on a GPU node, with a field a newer
    # flashinfer might add: written back exactly as it was.
    foreign = {**entry(op, "b", None, torch="2.99.0", device="NVIDIA H200"), "note": [1, {}]}
    write(path, [foreign])
    with pytest.warns(TuningFileWarning, match=OTHER_ENV):
        with autotune(tuning_file=path):
            op(torch.zeros(4))  # not loaded: tuned here
    text = path.read_text()
    entries = json.loads(text)["entries"]
    assert foreign in entries and len(entries) == 2
    lines = [line.rstrip(",") for line in text.splitlines()]
    assert f"    {json.dumps(foreign)}" in lines  # its very text
    (ours,) = [e for e in entries if e != foreign]
    assert ours["fingerprint"] == here(op)


def test_a_result_tuned_here_replaces_the_entries_of_its_key_this_process_matches(tmp_path):
    op, _ = fake_op()
    path = tmp_path / "c.json"
    old = entry(op, "b", None)
    star = {**entry(op, "b", None), "fingerprint": {"torch": "*"}}
    other = entry(op, "b", None, torch="2.99.0")
    write(path, [old, star, other])
    with autotune():
        op(torch.zeros(4))  # tuned without loading the file
    save_tuning_file(path)
    entries = json.loads(path.read_text())["entries"]
    assert other in entries and old not in entries and star not in entries
    assert len(entries) == 2


def test_a_loaded_result_is_saved_again_with_the_fingerprint_it_came_with(tmp_path):
    op, _ = fake_op()
    path = tmp_path / "c.json"
    star = {**entry(op, "b", None), "fingerprint": {"device": "*", "torch": "*"}}
    other = entry(op, "b", None, n=8, torch="2.99.0")
    write(path, [star, other])
    with pytest.warns(TuningFileWarning, match=OTHER_ENV):
        load_tuning_file(path)
    with autotune():
        op(torch.zeros(16))  # a new key: the file is saved with it
    save_tuning_file(path)
    entries = json.loads(path.read_text())["entries"]
    assert star in entries and other in entries and len(entries) == 3
    # Tuned anew, the key's result is this process's: stamped with its environment.
    AutoTuner.get().set_choice(key(op), Choice("a", 2, 1e-3))
    save_tuning_file(path)
    entries = json.loads(path.read_text())["entries"]
    assert star not in entries and entry(op, "a", 2) in entries


# --------------------------------------------------------------------------------------
# Schema 1: the files written before fingerprints
# --------------------------------------------------------------------------------------


def _schema1_copy(tmp_path, **header):
    """The schema-1 file of tests/data (written by flashinfer's ``autotune`` command before
    fingerprints existed), its header's versions replaced where given."""
    doc = json.loads(SCHEMA1.read_text())
    assert doc["schema_version"] == 1 and all("fingerprint" not in e for e in doc["entries"])
    path = tmp_path / "schema1.json"
    if header:
        path.write_text(json.dumps({**doc, **header}))
    else:
        shutil.copyfile(SCHEMA1, path)
    return path, doc


def test_a_schema1_file_loads_as_stamped_with_the_versions_its_header_records(tmp_path):
    path, doc = _schema1_copy(
        tmp_path, flashinfer_version=flashinfer.__version__, torch_version=torch.__version__
    )
    report = quiet_load(path)
    assert report.loaded == len(doc["entries"]) == 2
    for e in doc["entries"]:
        inputs = tuple(
            torch.zeros(i["shape"], dtype=getattr(torch, i["dtype"])) if i else i
            for i in e["inputs"]
        )
        choice = AutoTuner.get().choice(make_key(e["op"], inputs))
        assert (choice.backend, choice.median_s * 1e3) == (e["backend"], e["median_ms"])
    # Recorded under another torch: kept for it, not used here.
    AutoTuner.get().clear()
    path, _ = _schema1_copy(tmp_path, torch_version="1.0.0")
    with pytest.warns(TuningFileWarning, match=f"2 {OTHER_ENV}.*torch '1.0.0' vs"):
        assert load_tuning_file(path).loaded == 0


def test_saving_into_a_schema1_file_upgrades_it_and_keeps_every_entry(tmp_path):
    path, doc = _schema1_copy(tmp_path)
    op, _ = fake_op()
    with autotune():
        op(torch.zeros(4))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing dropped, nothing to say
        assert save_tuning_file(path) == 3
    saved = json.loads(path.read_text())
    assert saved["schema_version"] == 2
    stamp = {"flashinfer": doc["flashinfer_version"], "torch": doc["torch_version"]}
    upgraded = [e for e in saved["entries"] if e["op"] != op.api_key]
    assert sorted(map(json.dumps, upgraded)) == sorted(
        json.dumps({**e, "fingerprint": stamp}) for e in doc["entries"]
    )
