"""The declared lifecycle history and its effects (``flashinfer.gating.history``): a renamed
backend or API is an alias that warns once at the caller's line naming the new name; a
removed one is a tombstone naming its version and replacement; tuning entries follow both;
a graduated backend shows as stable with its version.

Every op here is built for the test under a synthetic history (``declared_history``), so no
test names a backend of the package's own ops.
"""

from __future__ import annotations

import inspect
import json
import re
import warnings

import pytest
import torch
from autotuner_fakes import FakeRunner, clean_tuner
from hypothesis import given
from hypothesis import strategies as st

import flashinfer
from flashinfer.autotuner import AutoTuner, TuningFileWarning, load_tuning_file, save_tuning_file
from flashinfer.autotuner.tuning_file import SCHEMA_VERSION
from flashinfer.backend_dispatch import (
    BackendSupportedError,
    backend_requirement,
    experimental_backend,
    supported_compute_capability,
    use_backends,
)
from flashinfer.dispatch.lifecycle_checks import exit_problems
from flashinfer.dispatch.torch_op import register_api_op, spelled_operator_name
from flashinfer.gating.history import (
    ALIAS_MINOR_RELEASES,
    Graduated,
    Removed,
    Renamed,
    alias_message,
    declared_history,
    deprecated_alias,
    expiry_after,
    parse_version,
    removed_api_message,
    removed_backend_message,
    reset_alias_warnings,
)

HERE = __name__


@pytest.fixture(autouse=True)
def fresh_warnings():
    reset_alias_warnings()
    flashinfer.reset_experimental_warnings()
    with clean_tuner(warmup=0, repeat=1):
        yield
    reset_alias_warnings()


def _ok(x: torch.Tensor, backend: str = "auto") -> bool:
    return True


def build(name: str, backends: dict[str, FakeRunner], experimental=(), history=()):
    """An op ``<this module>.<name>(x, backend="auto")`` over ``backends``, built (and
    registered with the autotuner) under ``history``."""
    checks = {}
    for b in backends:
        check = supported_compute_capability([80, 90], cpu=True)(lambda x, backend="auto": True)
        if b in experimental:
            check = experimental_backend(owner="@tests", tracking_issue=3)(check)
        checks[b] = check

    def fake(x: torch.Tensor, backend: str = "auto"):
        if backend == "auto":
            return AutoTuner.get().run(op, backends, (x,))
        return backends[backend]((x,))

    fake.__name__ = fake.__qualname__ = name
    fake.__module__ = HERE
    with declared_history(history):
        op = backend_requirement(checks)(fake)
    AutoTuner.register(op, backends)
    return op


def caught_deprecations(fn):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = fn()
    return result, [w for w in caught if issubclass(w.category, DeprecationWarning)], caught


# -- versions and lifetimes --------------------------------------------------------------------


def test_versions_and_the_default_alias_lifetime():
    assert parse_version("0.2.1") == (0, 2, 1)
    assert parse_version("1.3") == (1, 3, 0)
    assert parse_version("0.4.0rc1") == (0, 4, 0)
    assert parse_version("0.10.0") > parse_version("0.9.5")  # numbers, not text
    with pytest.raises(ValueError, match="MAJOR.MINOR"):
        parse_version("latest")
    assert ALIAS_MINOR_RELEASES == 2
    assert expiry_after("0.2.1") == "0.4.0"


# -- a renamed backend ---------------------------------------------------------------------------


def test_an_old_backend_name_runs_the_new_one_and_warns_once_at_the_callers_line():
    rename = Renamed(f"{HERE}.renamed_op", "old", "new", "0.1.0", "0.3.0")
    op = build(
        "renamed_op", {"new": FakeRunner("new"), "base": FakeRunner("base")}, history=[rename]
    )
    line = inspect.currentframe().f_lineno + 2
    (first, second), warned, _ = caught_deprecations(
        lambda: (op(torch.zeros(4), backend="old"), op(torch.zeros(4), backend="old"))
    )
    assert first == second == ("new", None)
    assert len(warned) == 1, "the alias warns once per process"
    assert str(warned[0].message) == alias_message(rename)
    assert "'new'" in str(warned[0].message) and "0.3.0" in str(warned[0].message)
    assert warned[0].filename == __file__ and warned[0].lineno == line
    # The reference path (slow, readable) agrees.
    assert op.dispatcher.call_reference(torch.zeros(4), backend="old") == ("new", None)


def test_an_op_built_before_the_history_loads_reads_it_when_a_call_names_an_old_backend(
    monkeypatch,
):
    """Touching an op does not load ``flashinfer.gating.history`` (issue 44 item 3): an op
    built while it is not loaded reads it when a call first names a backend it lacks."""
    import sys

    rename = Renamed(f"{HERE}.late_op", "old", "new", "0.1.0", "0.3.0")
    monkeypatch.delitem(sys.modules, "flashinfer.gating.history")
    op = build("late_op", {"new": FakeRunner("new"), "base": FakeRunner("base")})
    assert op.dispatcher._history is None
    monkeypatch.undo()
    with declared_history([rename]):
        result, warned, _ = caught_deprecations(lambda: op(torch.zeros(4), backend="old"))
    assert result == ("new", None) and len(warned) == 1
    assert op(torch.zeros(4), backend="old", skip_check=True) == ("new", None)
    with pytest.raises(BackendSupportedError, match="does not support backend 'gone'"):
        op(torch.zeros(4), backend="gone")


def test_an_old_backend_name_in_use_backends_means_the_new_one():
    rename = Renamed(f"{HERE}.restricted_op", "old", "new", "0.1.0", "0.3.0")
    op = build(
        "restricted_op", {"base": FakeRunner("base"), "new": FakeRunner("new")}, history=[rename]
    )

    def enter_and_leave() -> None:
        with use_backends({op: ["old"]}) as block:  # left again: no restriction outlives it
            assert block.backends == {op.api_key: ("new",)}

    _, warned, _ = caught_deprecations(enter_and_leave)
    assert len(warned) == 1


def test_without_a_rename_an_unknown_name_is_still_refused():
    op = build("plain_op", {"new": FakeRunner("new")})
    with pytest.raises(BackendSupportedError, match="does not support backend 'old'"):
        op(torch.zeros(4), backend="old")


# -- a removed backend -------------------------------------------------------------------------


def test_a_removed_backend_raises_naming_its_version_and_replacement():
    tomb = Removed(f"{HERE}.tomb_op", "gone", "0.2.0", "base", "0.4.0")
    op = build("tomb_op", {"base": FakeRunner("base")}, history=[tomb])
    with pytest.raises(BackendSupportedError) as info:
        op(torch.zeros(4), backend="gone")
    message = str(info.value)
    assert removed_backend_message(tomb) in message
    assert "0.2.0" in message and "backend='base'" in message
    with pytest.raises(ValueError, match="removed in flashinfer 0.2.0"):
        use_backends({op: ["gone"]})  # refused on the with line, before any entry


@pytest.mark.parametrize("chain", [["old", "gone"], ["first", "second", "gone"]])
def test_every_old_name_of_a_renamed_then_removed_backend_gets_the_tombstone(chain):
    """Issue 43 item 11: renamed (once or more), then removed: each earlier name raises the
    tombstone's message too, not the generic "does not support"; the lifecycle check agrees."""
    key = f"{HERE}.chain_op_{len(chain)}"
    renames = [
        Renamed(key, a, b, "0.2.0", "0.4.0") for a, b in zip(chain[:-1], chain[1:], strict=True)
    ]
    tomb = Removed(key, chain[-1], "0.2.0", "base", "0.4.0")
    op = build(f"chain_op_{len(chain)}", {"base": FakeRunner("base")}, history=[*renames, tomb])
    for name in chain:
        with pytest.raises(BackendSupportedError) as info:
            op(torch.zeros(4), backend=name)
        assert removed_backend_message(tomb) in str(info.value)
    assert exit_problems([op], records=[*renames, tomb], version="0.2.0") == []


# -- tuning files -----------------------------------------------------------------------------


def _entry(op, backend, experimental=False):
    return {
        "op": op.api_key,
        "inputs": [{"shape": [4], "dtype": "float32"}],
        "device": "cpu",
        "compute_capability": None,
        "backend": backend,
        "tactic": None,
        "median_ms": 1.0,
        "experimental": experimental,
    }


def _write(path, entries):
    path.write_text(json.dumps({"schema_version": SCHEMA_VERSION, "entries": entries}))


def test_a_tuning_entry_under_an_old_name_is_read_as_the_new_name(tmp_path):
    rename = Renamed(f"{HERE}.tuned_renamed", "old", "new", "0.1.0", "0.3.0")
    runners = {"base": FakeRunner("base"), "new": FakeRunner("new")}
    op = build("tuned_renamed", runners, history=[rename])
    path = tmp_path / "t.json"
    _write(path, [_entry(op, "old")])
    with declared_history([rename]), warnings.catch_warnings():
        warnings.simplefilter("error", TuningFileWarning)
        assert load_tuning_file(path).loaded == 1
    assert op(torch.zeros(4)) == ("new", None)  # the tuned choice, no timing
    assert runners["new"].tactics_calls == 0
    assert save_tuning_file(path) == 1
    assert json.loads(path.read_text())["entries"][0]["backend"] == "new"


def test_without_the_rename_the_same_entry_is_skipped(tmp_path):
    op = build("tuned_unrenamed", {"base": FakeRunner("base"), "new": FakeRunner("new")})
    path = tmp_path / "t.json"
    _write(path, [_entry(op, "old")])
    with pytest.warns(TuningFileWarning, match="no longer exists"):
        assert load_tuning_file(path).loaded == 0


def test_a_tuning_entry_naming_a_removed_backend_is_skipped_with_one_line(tmp_path):
    tomb = Removed(f"{HERE}.tuned_tomb", "gone", "0.2.0", "base", "0.4.0")
    op = build("tuned_tomb", {"base": FakeRunner("base")}, history=[tomb])
    path = tmp_path / "t.json"
    _write(
        path,
        [_entry(op, "gone"), _entry(op, "gone") | {"inputs": [{"shape": [8], "dtype": "float32"}]}],
    )
    with declared_history([tomb]), pytest.warns(TuningFileWarning) as record:
        report = load_tuning_file(path)
    assert len(record) == 1
    message = str(record[0].message)
    assert "2 name a removed backend ('gone' of tuned_tomb in 0.2.0, use 'base')" in message
    assert report.loaded == 0


def test_an_entry_saved_experimental_for_a_now_stable_backend_is_used_and_saved_stable(tmp_path):
    graduated = Graduated(f"{HERE}.tuned_grad", "0.2.0", backend="fast")
    runners = {"base": FakeRunner("base"), "fast": FakeRunner("fast")}
    op = build("tuned_grad", runners, history=[graduated])  # "fast" is stable now
    path = tmp_path / "t.json"
    _write(path, [_entry(op, "fast", experimental=True)])  # saved while it was experimental
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # gate off: no skip, no warning of any kind
        assert load_tuning_file(path).loaded == 1
        assert op(torch.zeros(4)) == ("fast", None)
    assert runners["fast"].tactics_calls == 0  # not tuned again
    save_tuning_file(path)
    assert json.loads(path.read_text())["entries"][0]["experimental"] is False


# -- a graduated backend in the listings ----------------------------------------------------------


def test_explain_shows_a_graduated_backend_as_stable_with_its_version():
    graduated = Graduated(f"{HERE}.explained_op", "0.2.0", backend="fast")
    op = build("explained_op", {"base": FakeRunner("base"), "fast": FakeRunner("fast")})
    with declared_history([graduated]):
        explanation = op.explain(torch.zeros(4))
    assert explanation.verdict("fast").graduated_in == "0.2.0"
    assert explanation.verdict("base").graduated_in is None
    assert "stable (since 0.2.0)" in str(explanation)


def test_flashinfer_backends_shows_a_graduated_backend_with_its_version():
    from flashinfer.cli.backends import api_rows, backends_report

    op = flashinfer.rmsnorm.dispatcher
    backend = op.stable_backends[0]
    with declared_history([Graduated(op.api_key, "0.2.0", backend=backend)]):
        report = backends_report()
    (api,) = [a for a in report["apis"] if a["qualified_name"] == op.api_key]
    (row,) = [b for b in api["backends"] if b["name"] == backend]
    assert row["graduated_in"] == "0.2.0" and row["experimental"] is False
    rows, _ = api_rows(report)
    assert any(r[1] == backend and r[2] == "stable (since 0.2.0)" for r in rows)


# -- APIs: renamed, promoted, removed ------------------------------------------------------------


def test_a_renamed_api_is_a_deprecated_alias_at_the_package_root():
    rename = Renamed(
        "flashinfer.norm.rmsnorm",
        "flashinfer.norm.rms_norm_old",
        "flashinfer.norm.rmsnorm",
        "0.2.0",
        "0.4.0",
        backend=False,
    )
    with declared_history([rename]):
        alias = flashinfer.rms_norm_old
    assert alias.__deprecated__ == alias_message(rename)  # what type checkers read
    x, w = torch.ones(2, 8), torch.ones(8)
    line = inspect.currentframe().f_lineno + 1
    (a, b), warned, _ = caught_deprecations(lambda: (alias(x, w), alias(x, w)))
    assert torch.equal(a, flashinfer.rmsnorm(x, w)) and torch.equal(a, b)
    assert len(warned) == 1 and warned[0].lineno == line
    assert "flashinfer.norm.rmsnorm" in str(warned[0].message)


def test_a_promoted_apis_experimental_spelling_warns_deprecation_not_experimental():
    @flashinfer.flashinfer_experimental_api(
        feature="twice", owner="@tests", tracking_issue=3, graduate_by="2099-01-01"
    )
    def twice_experimental(x):
        return 2 * x

    def twice(x):  # the stable API it became
        return 2 * x

    message = "twice_experimental is now twice (stable since 0.2.0)"
    alias = deprecated_alias(twice, message)
    result, warned, caught = caught_deprecations(lambda: (alias(3), alias(3)))
    assert result == (6, 6)
    assert [str(w.message) for w in caught] == [message]  # no ExperimentalWarning
    assert alias.__deprecated__ == message and alias.__wrapped__ is twice


def test_a_removed_api_raises_attribute_error_naming_version_and_replacement():
    tomb = Removed(
        "flashinfer.fused_norm.gone_norm",
        "gone_norm",
        "0.2.0",
        "flashinfer.rmsnorm",
        "0.4.0",
        backend=False,
    )
    with declared_history([tomb]), pytest.raises(AttributeError) as info:
        flashinfer.gone_norm  # noqa: B018
    assert str(info.value) == removed_api_message(tomb)
    assert "0.2.0" in str(info.value) and "flashinfer.rmsnorm" in str(info.value)
    with pytest.raises(AttributeError, match="has no attribute 'gone_norm'"):
        flashinfer.gone_norm  # noqa: B018  (outside the history: the plain error)


def test_a_tuning_entry_of_a_renamed_op_is_read_as_the_new_ops(tmp_path):
    runners = {"base": FakeRunner("base"), "fast": FakeRunner("fast")}
    op = build("tuned_new_name", runners)
    rename = Renamed(
        op.api_key, f"{HERE}.tuned_old_name", op.api_key, "0.1.0", "0.3.0", backend=False
    )
    path = tmp_path / "t.json"
    _write(path, [_entry(op, "fast") | {"op": f"{HERE}.tuned_old_name"}])
    with pytest.warns(TuningFileWarning, match="unknown or not autotunable"):
        assert load_tuning_file(path).loaded == 0  # without the record: an unknown op
    with declared_history([rename]), warnings.catch_warnings():
        warnings.simplefilter("error", TuningFileWarning)
        assert load_tuning_file(path).loaded == 1
    assert op(torch.zeros(4)) == ("fast", None)
    assert runners["fast"].tactics_calls == 0


# -- an API's torch operator after a rename ---------------------------------------------------


def _api(name: str):
    def api(x: torch.Tensor, factor: float = 2.0) -> torch.Tensor:
        return x * factor

    api.__name__ = api.__qualname__ = name
    api.__module__ = HERE
    return api


@pytest.mark.parametrize("factor", [0.5, 3.0])
def test_a_program_exported_before_an_api_rename_loads_and_runs_after_it(factor, tmp_path):
    """Issue 43 item 12: ``torch.export.load`` of a program naming the old operator finds it
    (an alias of the new one, warning once with the rename's message) for the rename's
    lifetime; the same result as before."""
    old_name, new_name = f"scaled_{int(factor * 10)}", f"rescaled_{int(factor * 10)}"
    fake = lambda values: torch.empty_like(values["x"])  # noqa: E731
    before = register_api_op(_api(old_name), validate=lambda values: None, fake=fake)

    class Program(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return before.default(x, factor)

    x = torch.randn(4, 3)
    path = tmp_path / "program.pt2"
    torch.export.save(torch.export.export(Program(), (x,)), path)
    before.library._destroy()  # what a new process, after the rename, does not have

    rename = Renamed(
        f"{HERE}.{new_name}",
        f"{HERE}.{old_name}",
        f"{HERE}.{new_name}",
        "0.2.0",
        "0.4.0",
        backend=False,
    )
    with declared_history([rename]):
        after = register_api_op(_api(new_name), validate=lambda values: None, fake=fake)
    assert after.former_names == [spelled_operator_name(f"{HERE}.{old_name}")]
    program = torch.export.load(path).module()
    result, deprecations, _ = caught_deprecations(lambda: program(x))
    assert torch.equal(result, x * factor)
    assert [str(w.message) for w in deprecations] == [alias_message(rename)]


@given(st.text(alphabet="0123456789.abrc- \n", max_size=12))
def test_parse_version_reads_major_minor_and_an_optional_patch(text):
    """MAJOR.MINOR[.PATCH] then anything not a digit (a suffix such as ``rc1``); the same
    answer as the regular expression it replaced, without its quadratic worst case."""
    found = re.fullmatch(r"(\d+)\.(\d+)(?:\.(\d+)(?:\D.*)?|[^\d.].*)?", text.strip(), re.S)
    if found is None:
        with pytest.raises(ValueError, match="is not a version written MAJOR.MINOR"):
            parse_version(text)
    else:
        assert parse_version(text) == (int(found[1]), int(found[2]), int(found[3] or 0))
