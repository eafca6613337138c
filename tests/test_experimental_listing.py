"""One listing of experimental work: ``python -m flashinfer.experimental`` is an alias of
``flashinfer experimental``, with the same text, the same JSON and the same exit status; and
one loader of the API modules behind it (:func:`flashinfer.lifecycle.load_api_modules`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from throwaway_experimental import shipped_experimental

import flashinfer
import flashinfer.api_modules
from flashinfer.lifecycle import load_api_modules

GATE = "FLASHINFER_ALLOW_EXPERIMENTAL_AUTO_BACKENDS"
COMMAND = ("-m", "flashinfer", "experimental")
ALIAS = ("-m", "flashinfer.experimental")


def _run(entry: tuple[str, ...], *args: str, gate: str | None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != GATE}
    if gate is not None:
        env[GATE] = gate
    return subprocess.run(
        [sys.executable, *entry, *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )


@pytest.mark.parametrize(
    ("args", "gate"),
    [((), None), (("--json",), None), (("--json",), "yes"), (("--bogus",), None)],
    ids=["text", "json", "json-unrecognised-gate", "usage-error"],
)
def test_the_alias_prints_what_the_command_prints(args, gate):
    command = _run(COMMAND, *args, gate=gate)
    alias = _run(ALIAS, *args, gate=gate)
    assert (alias.returncode, alias.stdout, alias.stderr) == (
        command.returncode,
        command.stdout,
        command.stderr,
    )
    if args == ("--bogus",):
        assert command.returncode == 2 and "unrecognized arguments: --bogus" in command.stderr
        return
    assert command.returncode == 0, command.stderr
    backends, apis = shipped_experimental()  # what the package ships, read from the ops
    if args == ("--json",):
        doc = json.loads(command.stdout)
        assert set(doc) == {"gate", "features"}
        assert doc["gate"]["value"] == gate and doc["gate"]["on"] is False
        names = {f["name"] for f in doc["features"]}
        assert names == backends | apis
        for entry in doc["features"]:  # every entry with its metadata fields
            assert set(entry) >= {"kind", "feature", "owner", "tracking_issue", "graduate_by"}
            assert entry["kind"] in ("api", "backend")
    else:
        assert command.stdout.startswith(f"experimental gate: {GATE}=unset -> off")
        for name in backends | apis:
            assert name in command.stdout


def test_one_loader_reports_a_missing_module_and_load_all_apis_raises_for_it(tmp_path, monkeypatch):
    """Both load every module that exists; the listing's loader names the missing one,
    ``flashinfer.load_all_apis`` raises for it (after loading the others)."""
    (tmp_path / "fi_listing_after_missing.py").write_text("LOADED = True\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    modules = ("flashinfer.norm", "flashinfer.fi_not_in_this_build", "fi_listing_after_missing")
    monkeypatch.setattr(flashinfer.api_modules, "API_MODULES", modules)
    monkeypatch.delitem(sys.modules, "fi_listing_after_missing", raising=False)

    assert load_api_modules() == ["flashinfer.fi_not_in_this_build"]
    assert "fi_listing_after_missing" in sys.modules
    del sys.modules["fi_listing_after_missing"]
    with pytest.raises(ModuleNotFoundError, match="fi_not_in_this_build") as raised:
        flashinfer.load_all_apis()
    assert raised.value.name == "flashinfer.fi_not_in_this_build"
    assert "fi_listing_after_missing" in sys.modules  # the others were loaded first


def test_a_broken_api_module_is_an_error_not_a_missing_one(tmp_path, monkeypatch):
    """Only a module whose own file is missing is reported; an import error inside one
    propagates."""
    (tmp_path / "fi_listing_broken.py").write_text("import fi_listing_no_such_dependency\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ModuleNotFoundError, match="fi_listing_no_such_dependency"):
        load_api_modules(["fi_listing_broken"])
