"""Persisted autotune results: format, every skip reason and its single warning, corrupt
files, atomic and concurrent saves, and ``autotune(tuning_file=...)``."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import warnings

import pytest
import torch
from autotuner_fakes import FakeRunner, clean_tuner, make_op

from flashinfer.autotuner import (
    SCHEMA_VERSION,
    AutoTuner,
    Choice,
    LoadReport,
    TuningFileError,
    TuningFileWarning,
    autotune,
    check_mergeable,
    load_tuning_file,
    make_key,
    save_tuning_file,
)
from flashinfer.autotuner import disk as disk_module
from flashinfer.autotuner import persist as file_module
from flashinfer.gating.messages import automatic_selection

GATE = "FLASHINFER_ALLOW_EXPERIMENTAL_AUTO_BACKENDS"
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(autouse=True)
def fast_tuner():
    with clean_tuner(warmup=0, repeat=1) as tuner:
        yield tuner


def tuned_op(monkeypatch=None):
    """An op with stable 'a' (tuple tactics), stable 'b', experimental 'exp'; 'a' wins."""
    runners = {
        "a": FakeRunner("a", [(64, 2), (32, 4)], delays={(32, 4): 0.002}),
        "b": FakeRunner("b", [None], delays={None: 0.004}),
        "exp": FakeRunner("exp", [None], delays={None: 0.004}),
    }
    return make_op(runners, experimental={"exp"}), runners


def entry(target, backend, tactic, shape=(4,), **over):
    e = {
        "op": target.api_key,
        "inputs": [{"shape": list(shape), "dtype": "float32"}],
        "device": "cpu",
        "compute_capability": None,
        "backend": backend,
        "tactic": tactic,
        "median_ms": 1.0,
        "experimental": False,
    }
    e.update(over)
    return e


def write(path, entries, version=SCHEMA_VERSION):
    path.write_text(json.dumps({"schema_version": version, "entries": entries}))


def key(op, n=4):
    return make_key(op.api_key, (torch.zeros(n),))


# --------------------------------------------------------------------------------------
# Round trip and format
# --------------------------------------------------------------------------------------


def test_round_trip_is_readable_versioned_json(tmp_path):
    op, _ = tuned_op()
    with autotune():
        assert op(torch.zeros(3)) == ("a", (64, 2))
    path = tmp_path / "tuned.json"
    assert save_tuning_file(path) == 1
    text = path.read_text()
    doc = json.loads(text)
    assert doc["schema_version"] == 2
    (e,) = doc["entries"]
    assert e["op"] == op.api_key and e["backend"] == "a" and e["tactic"] == [64, 2]
    assert e["inputs"] == [{"shape": [4], "dtype": "float32"}] and e["device"] == "cpu"
    assert e["experimental"] is False and e["median_ms"] > 0
    assert "\n" in text and "pickle" not in text  # human-readable, one entry per line
    AutoTuner.get().clear()
    report = load_tuning_file(path)
    assert report.loaded == 1 and report.skipped == {}
    # The tuple tactic comes back as the runner's own object, not a JSON list.
    assert AutoTuner.get().choice(key(op)).tactic == (64, 2)


def test_loaded_choice_is_used_without_timing(tmp_path):
    op, runners = tuned_op()
    path = tmp_path / "c.json"
    write(path, [entry(op, "a", [32, 4])])
    load_tuning_file(path)
    assert op(torch.zeros(4)) == ("a", (32, 4))
    assert runners["a"].calls == [(32, 4)] and runners["a"].tactics_calls == 0


def test_missing_file_raises_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError):
        load_tuning_file(tmp_path / "nope.json")


# --------------------------------------------------------------------------------------
# Skip reasons, one warning
# --------------------------------------------------------------------------------------


def test_experimental_entry_skipped_with_gate_off_stable_choice_used(tmp_path):
    op, runners = tuned_op()
    path = tmp_path / "c.json"
    write(path, [entry(op, "exp", None, experimental=True)])
    with pytest.warns(TuningFileWarning) as record:
        report = load_tuning_file(path)
    assert len(record) == 1
    message = str(record[0].message)
    assert "Skipped 1 of 1 entries" in message
    assert f"1 name an experimental backend while {GATE} is not 1" in message
    assert report.loaded == 0 and report.total_skipped == 1
    assert op(torch.zeros(4)) == ("a", None)  # the stable default, no timing
    assert runners["exp"].calls == []


def test_experimental_entry_used_with_gate_on(tmp_path, monkeypatch):
    monkeypatch.setenv(GATE, "1")
    op, runners = tuned_op()
    path = tmp_path / "c.json"
    write(path, [entry(op, "exp", None, experimental=True)])
    with warnings.catch_warnings():
        warnings.simplefilter("error", TuningFileWarning)
        assert load_tuning_file(path).loaded == 1
    from flashinfer.api_logging import ExperimentalWarning

    with pytest.warns(ExperimentalWarning, match=re.escape(automatic_selection(op.api_key, "exp"))):
        assert op(torch.zeros(4)) == ("exp", None)


@pytest.mark.parametrize(
    "bad, reason",
    [
        (lambda op: entry(op, "gone", None), "1 name a backend that no longer exists ('gone'"),
        (lambda op: entry(op, "a", [16, 16]), "1 name a tactic that no longer exists ([16, 16]"),
        (
            lambda op: entry(op, "a", [64, 2], op="tests.nowhere.op"),
            "1 name an op that is unknown or not autotunable (tests.nowhere.op)",
        ),
        (lambda op: {"op": op.api_key, "backend": "a"}, "1 are malformed"),
        (
            lambda op: entry(op, "a", [64, 2], inputs=[{"shape": [4], "dtype": "float99"}]),
            "1 are malformed",
        ),
        (lambda op: "not an object", "1 are malformed"),
    ],
)
def test_each_skip_reason(tmp_path, bad, reason):
    op, _ = tuned_op()
    path = tmp_path / "c.json"
    write(path, [entry(op, "a", [64, 2], shape=(8,)), bad(op)])
    with pytest.warns(TuningFileWarning) as record:
        report = load_tuning_file(path)
    assert len(record) == 1
    assert "Skipped 1 of 2 entries" in str(record[0].message)
    assert reason in str(record[0].message)
    assert report.loaded == 1
    assert AutoTuner.get().choice(key(op, 8)).backend == "a"


def test_other_schema_version_skips_everything(tmp_path):
    op, _ = tuned_op()
    path = tmp_path / "c.json"
    write(path, [entry(op, "a", [64, 2]), entry(op, "b", None, shape=(8,))], version=3)
    with pytest.warns(TuningFileWarning) as record:
        report = load_tuning_file(path)
    assert len(record) == 1
    assert "Skipped 2 of 2 entries" in str(record[0].message)
    assert "2 come from schema version 3 (this flashinfer reads 1 or 2)" in str(record[0].message)
    assert report.loaded == 0 and AutoTuner.get().choices() == {}


def test_mixed_file_gives_one_warning_grouped_by_reason(tmp_path):
    op, _ = tuned_op()
    path = tmp_path / "c.json"
    write(
        path,
        [
            entry(op, "a", [64, 2]),
            entry(op, "exp", None, shape=(8,)),
            entry(op, "exp", None, shape=(16,)),
            entry(op, "gone", None, shape=(32,)),
            entry(op, "a", [1, 1], shape=(64,)),
            entry(op, "a", [64, 2], op="x.y"),
        ],
    )
    with pytest.warns(TuningFileWarning) as record:
        report = load_tuning_file(path)
    assert len(record) == 1
    message = str(record[0].message)
    assert message.startswith(f"Skipped 5 of 6 entries of the tuning file {str(path)!r}: ")
    for part in (
        f"2 name an experimental backend while {GATE} is not 1",
        "1 name a backend that no longer exists",
        "1 name a tactic that no longer exists",
        "1 name an op that is unknown or not autotunable",
        "Loaded 1",
    ):
        assert part in message
    assert record[0].filename == __file__  # points at the caller's line
    assert report.loaded == 1 and report.total_skipped == 5


# --------------------------------------------------------------------------------------
# Corrupt and truncated files
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "content",
    [b"{ this is not json", b"\xff\xfe\x00garbage", b"[1, 2, 3]", b'{"entries": []}', b""],
    ids=["garbage", "binary", "list", "no-version", "empty"],
)
def test_corrupt_file_warns_and_loads_nothing(tmp_path, content):
    op, _ = tuned_op()
    with autotune():
        op(torch.zeros(4))
    before = AutoTuner.get().choices()
    path = tmp_path / "c.json"
    path.write_bytes(content)
    with pytest.warns(TuningFileWarning, match="Could not read the tuning file") as rec:
        report = load_tuning_file(path)
    assert len(rec) == 1 and rec[0].filename == __file__
    assert report.loaded == 0 and report.error
    assert AutoTuner.get().choices() == before
    assert op(torch.zeros(4))[0] == "a"  # calls still work


def test_truncated_file_warns_and_loads_nothing(tmp_path):
    op, _ = tuned_op()
    with autotune():
        op(torch.zeros(4))
        op(torch.zeros(40))
    path = tmp_path / "c.json"
    save_tuning_file(path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    AutoTuner.get().clear()
    with pytest.warns(TuningFileWarning, match="corrupt or truncated"):
        assert load_tuning_file(path).loaded == 0
    assert AutoTuner.get().choices() == {}
    assert op(torch.zeros(4)) == ("a", None)


def test_autotune_cache_with_corrupt_file_does_not_crash(tmp_path):
    op, _ = tuned_op()
    path = tmp_path / "c.json"
    path.write_text("{nope")
    with pytest.warns(TuningFileWarning) as rec:
        with autotune(tuning_file=path):
            op(torch.zeros(4))
    assert rec[0].filename == __file__  # the user's with-line, not contextlib's
    assert "Could not read" in str(rec[0].message)
    # Saving over it says so too (the load may have been long ago, or never).
    assert "could not be read" in str(rec[1].message) and "was replaced" in str(rec[1].message)
    assert rec[1].filename == __file__
    assert json.loads(path.read_text())["entries"][0]["backend"] == "a"  # replaced


DEEP = {
    "open-arrays": "[" * 2000,
    "open-objects": '{"a": ' * 2000,
    "closed-arrays": "[" * 2000 + "]" * 2000,
    "deep-entry": '{"schema_version": 1, "entries": [' + "[" * 3000 + "]" * 3000 + "]}",
    "just-too-deep": '{"schema_version": 1, "entries": [' + "[" * 63 + "]" * 63 + "]}",
}


@pytest.mark.parametrize("content", list(DEEP.values()), ids=list(DEEP))
def test_deeply_nested_file_warns_as_corrupt_everywhere(tmp_path, content):
    """load_tuning_file, save_tuning_file and autotune(tuning_file=...) warn; never a
    RecursionError."""
    op, _ = tuned_op()
    path = tmp_path / "c.json"
    path.write_text(content)
    with pytest.warns(TuningFileWarning, match="Could not read") as rec:
        report = load_tuning_file(path)
    assert "nested deeper than 64 levels" in report.error and len(rec) == 1
    with autotune():
        op(torch.zeros(4))
    with pytest.warns(TuningFileWarning, match="was replaced"):
        assert save_tuning_file(path) == 1
    path.write_text(content)
    with pytest.warns(TuningFileWarning) as rec:
        with autotune(tuning_file=path):
            op(torch.zeros(8))
    # Each tuning file warning points here (as does the block's summary, not counted).
    found = [r.filename for r in rec if issubclass(r.category, TuningFileWarning)]
    assert found == [__file__, __file__]
    assert len(json.loads(path.read_text())["entries"]) == 2


def test_nesting_of_a_real_file_is_far_below_the_limit(tmp_path):
    path = tmp_path / "c.json"
    write(path, [entry(tuned_op()[0], "a", [[[[64]]], 2])])  # even a nested tactic
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.warns(TuningFileWarning, match="name a tactic"):
            load_tuning_file(path)  # read as a cache: only the entry is judged


@pytest.mark.parametrize("version", ["true", "1.0", '"1"', "null", "[1]", "false"])
def test_schema_version_must_be_an_integer(tmp_path, version):
    op, _ = tuned_op()
    path = tmp_path / "c.json"
    path.write_text(
        f'{{"schema_version": {version}, "entries": [{json.dumps(entry(op, "a", [64, 2]))}]}}'
    )
    with pytest.warns(TuningFileWarning, match="'schema_version' must be an integer"):
        report = load_tuning_file(path)
    assert report.loaded == 0 and AutoTuner.get().choices() == {}
    assert version in report.error


# --------------------------------------------------------------------------------------
# Only strict JSON, never a non-finite time
# --------------------------------------------------------------------------------------


def strict_loads(text):
    def refuse(token):
        raise AssertionError(f"non-JSON token {token} written")

    return json.loads(text, parse_constant=refuse)


@pytest.mark.parametrize("median", ["NaN", "Infinity", "-Infinity", "1e400", "-1.0", "9" * 400])
def test_entry_whose_median_is_not_a_finite_time_is_skipped_as_malformed(tmp_path, median):
    op, _ = tuned_op()
    path = tmp_path / "c.json"
    good = json.dumps(entry(op, "a", [64, 2], shape=(8,)))
    bad = json.dumps(entry(op, "a", [64, 2])).replace('"median_ms": 1.0', f'"median_ms": {median}')
    path.write_text(f'{{"schema_version": 1, "entries": [{good}, {bad}]}}')
    with pytest.warns(TuningFileWarning, match="1 are malformed") as rec:
        report = load_tuning_file(path)
    assert "is not a finite number >= 0" in str(rec[0].message)
    assert report.loaded == 1 and AutoTuner.get().choice(key(op)) is None


def test_save_drops_non_finite_entries_with_a_warning_and_writes_strict_json(tmp_path):
    op, _ = tuned_op()
    path = tmp_path / "c.json"
    keep = entry(op, "a", [64, 2], op="other.op")
    nan = entry(op, "a", [64, 2], op="nan.op", median_ms=float("nan"))
    inf = entry(op, "a", [float("inf")], op="inf.op")
    path.write_text(json.dumps({"schema_version": 1, "entries": [keep, nan, inf, 7]}))
    with autotune():
        op(torch.zeros(4))
    with pytest.warns(TuningFileWarning) as rec:
        assert save_tuning_file(path) == 2
    (w,) = rec
    message = str(w.message)
    assert "3 of its entries were dropped" in message
    assert "2 hold a number JSON cannot represent (NaN or Infinity)" in message
    assert "1 are not JSON objects" in message and w.filename == __file__
    doc = strict_loads(path.read_text())
    assert sorted(e["op"] for e in doc["entries"]) == sorted(["other.op", op.api_key])


def test_set_choice_refuses_a_time_that_is_not_finite():
    op, _ = tuned_op()
    for bad in (float("nan"), float("inf"), -1.0, 10**400, -(10**400)):  # ints past a float
        with pytest.raises(ValueError, match="finite number of seconds"):
            AutoTuner.get().set_choice(key(op), Choice("a", (64, 2), bad))
    with pytest.raises(TypeError, match="number of seconds"):
        AutoTuner.get().set_choice(key(op), Choice("a", (64, 2), "1"))
    assert AutoTuner.get().choices() == {}


def test_a_measurement_that_is_not_finite_counts_as_failed(tmp_path, monkeypatch):
    op, runners = tuned_op()
    from flashinfer.autotuner import timing as tuner_module

    real = tuner_module.measure

    def nan_for_a(fn, inputs, **kw):
        return float("nan") if fn.func is runners["a"] else real(fn, inputs, **kw)

    monkeypatch.setattr(tuner_module, "measure", nan_for_a)
    with autotune():
        assert op(torch.zeros(4))[0] in ("b",)
    record = AutoTuner.get().last_tuning()
    assert record.tried == 3 and record.choice.backend == "b"
    assert [(f.backend, f.tactic) for f in record.failures] == [("a", (64, 2)), ("a", (32, 4))]
    assert all("not a finite number" in f.reason for f in record.failures)
    save_tuning_file(tmp_path / "c.json")
    strict_loads((tmp_path / "c.json").read_text())


# --------------------------------------------------------------------------------------
# Saving never loses entries silently
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", [3, 0, -1, 10**20])
def test_save_over_another_schema_version_is_refused_and_writes_nothing(tmp_path, version):
    op, _ = tuned_op()
    path = tmp_path / "c.json"
    write(path, [entry(op, "a", [64, 2]), {"anything": "a newer flashinfer wrote"}], version)
    before = path.read_bytes()
    with autotune():
        op(torch.zeros(4))
    with pytest.raises(TuningFileError, match=f"schema version {version}") as exc:
        save_tuning_file(path)
    assert "2 entries" in str(exc.value) and "merge=False" in str(exc.value)
    assert isinstance(exc.value, ValueError)
    with pytest.raises(TuningFileError):
        check_mergeable(path)  # what the command line asks before it tunes
    with pytest.raises(TuningFileError):
        AutoTuner.get().save_tuning_file(path)
    assert path.read_bytes() == before and _leftovers(tmp_path) == []
    assert save_tuning_file(path, merge=False) == 1  # an explicit replacement
    assert json.loads(path.read_text())["schema_version"] == 2


def test_autotune_block_over_another_schema_version_raises_on_exit(tmp_path):
    op, _ = tuned_op()
    path = tmp_path / "c.json"
    write(path, [entry(op, "a", [64, 2])], version=3)
    before = path.read_bytes()
    with pytest.warns(TuningFileWarning, match="schema version 3"):
        with pytest.raises(TuningFileError):
            with autotune(tuning_file=path):
                op(torch.zeros(4))
    assert path.read_bytes() == before
    assert AutoTuner.get().choice(key(op)) is not None  # the results are still in memory


def test_empty_or_whitespace_file_is_replaced_without_a_warning(tmp_path):
    op, _ = tuned_op()
    path = tmp_path / "c.json"
    path.write_text(" \n")
    with autotune():
        op(torch.zeros(4))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert save_tuning_file(path) == 1


# --------------------------------------------------------------------------------------
# Paths that only read never write, lock nor create a file
# --------------------------------------------------------------------------------------


def snapshot(directory):
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


@pytest.fixture
def no_writes(monkeypatch):
    """Any attempt to lock or write a tuning file fails the test."""

    def refuse(*args, **kwargs):
        raise AssertionError("a path that only reads tried to write or lock the tuning file")

    monkeypatch.setattr(file_module, "held", refuse)
    monkeypatch.setattr(file_module, "write_file", refuse)


def test_autotune_disabled_with_a_cache_only_reads(tmp_path, no_writes):
    op, runners = tuned_op()
    path = tmp_path / "c.json"
    write(path, [entry(op, "a", [32, 4])])
    before = snapshot(tmp_path)
    with autotune(False, tuning_file=path):
        assert op(torch.zeros(4)) == ("a", (32, 4))  # loaded
        assert op(torch.zeros(64))[1] is None  # untuned: the default, nothing timed
    assert snapshot(tmp_path) == before  # no p.lock, no rewrite


def test_autotune_block_that_tuned_nothing_new_only_reads(tmp_path, no_writes):
    op, runners = tuned_op()
    path = tmp_path / "c.json"
    write(path, [entry(op, "a", [32, 4])])
    before = snapshot(tmp_path)
    with autotune(tuning_file=path):  # enabled, but every key is in the file
        op(torch.zeros(4))
    with autotune(tuning_file=path):  # enabled, no call at all
        pass
    with autotune(tuning_file=tmp_path / "missing.json"):  # nothing to read, nothing tuned
        pass
    assert snapshot(tmp_path) == before
    assert runners["a"].tactics_calls == 0


def test_nested_block_tuning_is_saved_by_the_enclosing_cache_block(tmp_path):
    op, _ = tuned_op()
    path = tmp_path / "c.json"
    with autotune(False, tuning_file=path):
        with autotune():
            op(torch.zeros(4))  # tuned in the inner block
    assert len(json.loads(path.read_text())["entries"]) == 1


def test_block_saves_when_a_key_was_tuned_again(tmp_path):
    """A loaded choice whose backend is no candidate of the call is re-tuned: new."""
    op, runners = tuned_op()
    path = tmp_path / "c.json"
    write(path, [entry(op, "exp", None)])  # skipped: the gate is off
    with pytest.warns(TuningFileWarning):
        with autotune(tuning_file=path):
            op(torch.zeros(4))
    assert [e["backend"] for e in json.loads(path.read_text())["entries"]] == ["a"]


@pytest.mark.parametrize("call", ["save_tuning_file", "load_tuning_file", "autotune", "method"])
def test_empty_cache_path_is_refused_before_any_file_is_touched(tmp_path, monkeypatch, call):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match="tuning file path is empty"):
        if call == "save_tuning_file":
            save_tuning_file("")
        elif call == "load_tuning_file":
            load_tuning_file("")
        elif call == "autotune":
            autotune(tuning_file="")
        else:
            AutoTuner.get().save_tuning_file("")
    assert list(tmp_path.iterdir()) == []  # no '.lock' in the working directory


# --------------------------------------------------------------------------------------
# Upstream's method names
# --------------------------------------------------------------------------------------


def test_autotuner_methods_are_the_module_functions(tmp_path):
    op, _ = tuned_op()
    with autotune():
        op(torch.zeros(4))
    path = tmp_path / "c.json"
    tuner = AutoTuner.get()
    assert tuner.save_tuning_file(path) == 1
    text = path.read_text()
    tuner.clear()
    report = tuner.load_tuning_file(path)
    assert isinstance(report, LoadReport) and report.loaded == 1
    assert tuner.choice(key(op)).tactic == (64, 2)
    assert save_tuning_file(path) == 1 and path.read_text() == text  # one implementation
    path.write_text("{")
    with pytest.warns(TuningFileWarning) as rec:
        tuner.load_tuning_file(path)
    assert rec[0].filename == __file__  # the warning points at the caller's line


# --------------------------------------------------------------------------------------
# Atomic and concurrent saves
# --------------------------------------------------------------------------------------


def _leftovers(directory):
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".tmp"))


def test_crash_mid_write_leaves_the_old_file_intact(tmp_path, monkeypatch):
    op, _ = tuned_op()
    with autotune():
        op(torch.zeros(4))
    path = tmp_path / "c.json"
    save_tuning_file(path)
    original = path.read_bytes()
    with autotune():
        op(torch.zeros(40))

    real_fdopen = os.fdopen

    class HalfWriter:
        def __init__(self, f):
            self.f = f

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()

        def write(self, text):
            self.f.write(text[: len(text) // 2])
            self.f.flush()
            raise OSError("disk full (simulated)")

    monkeypatch.setattr(disk_module.os, "fdopen", lambda *a, **k: HalfWriter(real_fdopen(*a, **k)))
    with pytest.raises(OSError, match="simulated"):
        save_tuning_file(path)
    assert path.read_bytes() == original
    assert _leftovers(tmp_path) == []  # the partial temporary file was removed


def test_crash_before_rename_leaves_the_old_file_intact(tmp_path, monkeypatch):
    op, _ = tuned_op()
    path = tmp_path / "c.json"
    path.write_text('{"schema_version": 1, "entries": []}')
    with autotune():
        op(torch.zeros(4))

    def boom(src, dst):
        raise KeyboardInterrupt  # even a BaseException leaves no partial file

    monkeypatch.setattr(disk_module.os, "replace", boom)
    with pytest.raises(KeyboardInterrupt):
        save_tuning_file(path)
    assert json.loads(path.read_text()) == {"schema_version": 1, "entries": []}
    assert _leftovers(tmp_path) == []


def test_process_killed_mid_write_never_leaves_a_partial_target(tmp_path):
    path = tmp_path / "c.json"
    path.write_text('{"schema_version": 1, "entries": []}')
    script = textwrap.dedent(
        f"""
        import os, sys
        sys.path.insert(0, {os.path.join(REPO, "tests")!r})
        import torch
        from autotuner_fakes import FakeRunner, make_op
        from flashinfer.autotuner import autotune, save_tuning_file
        from flashinfer.autotuner import tuning_file
        op = make_op({{"a": FakeRunner("a")}})
        with autotune():
            op(torch.zeros(4))
        def die(*a, **k):
            os._exit(3)  # the process dies after writing the temporary file
        tuning_file.os.replace = die
        save_tuning_file({str(path)!r})
        """
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=120)
    assert proc.returncode == 3, proc.stderr.decode()
    assert json.loads(path.read_text()) == {"schema_version": 1, "entries": []}


CONCURRENT = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, {tests!r})
    import torch
    from autotuner_fakes import FakeRunner, make_op
    from flashinfer.autotuner import AutoTuner, autotune, save_tuning_file
    AutoTuner.get().warmup, AutoTuner.get().repeat = 0, 1
    op = make_op({{"a": FakeRunner("a", [1, 2])}})
    start = int(sys.argv[1])
    for i in range(start, start + 12):
        with autotune():
            op(torch.zeros(2 ** i))
        save_tuning_file({path!r})
    """
)


def test_two_processes_saving_concurrently_leave_valid_json_with_both(tmp_path):
    path = tmp_path / "shared.json"
    script = CONCURRENT.format(tests=os.path.join(REPO, "tests"), path=str(path))
    procs = [
        subprocess.Popen([sys.executable, "-c", script, str(start)], stderr=subprocess.PIPE)
        for start in (0, 12)
    ]
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err.decode()
    doc = json.loads(path.read_text())  # valid JSON
    assert doc["schema_version"] == 2
    shapes = sorted(e["inputs"][0]["shape"][0] for e in doc["entries"])
    assert shapes == [2**i for i in range(24)]  # merged: nobody's entries were lost
    assert _leftovers(tmp_path) == []


def test_save_merges_and_keeps_entries_this_process_cannot_use(tmp_path):
    op, _ = tuned_op()
    path = tmp_path / "c.json"
    foreign = entry(op, "a", [64, 2], op="other.package.op")
    write(path, [foreign])
    with autotune():
        op(torch.zeros(4))
    assert save_tuning_file(path) == 2
    ops = sorted(e["op"] for e in json.loads(path.read_text())["entries"])
    assert ops == sorted([op.api_key, "other.package.op"])
    assert save_tuning_file(path, merge=False) == 1


# --------------------------------------------------------------------------------------
# autotune(tuning_file=...)
# --------------------------------------------------------------------------------------


def test_autotune_cache_loads_on_entry_and_saves_on_exit(tmp_path):
    op, runners = tuned_op()
    path = tmp_path / "c.json"
    with autotune(tuning_file=path):  # missing file: nothing to load, created on exit
        op(torch.zeros(4))
    assert path.exists()
    AutoTuner.get().clear()
    timed = len(runners["a"].calls)
    with autotune(tuning_file=path):
        op(torch.zeros(4))  # loaded on entry: no timing
    assert len(runners["a"].calls) == timed + 1


def test_autotune_cache_saves_when_the_block_raises(tmp_path):
    op, _ = tuned_op()
    path = tmp_path / "c.json"
    with pytest.raises(ZeroDivisionError):
        with autotune(tuning_file=path):
            op(torch.zeros(4))
            1 / 0  # noqa: B018
    assert len(json.loads(path.read_text())["entries"]) == 1
