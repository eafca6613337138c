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


# Each run ``python -m ENTRY ARGS`` with the gate set or unset, as runpy runs ``-m``, in a child
# forked from one interpreter that imported torch (one torch import for all the runs); each
# child starts with nothing of flashinfer loaded, its stdout and stderr in files.
_DRIVER = """
import json, os, runpy, sys, tempfile
import torch
import gc; gc.freeze()  # children leave the shared heap unwritten by the collector
results = []
name = sys.argv[2]  # the gate variable
for entry, args, gate in json.loads(sys.argv[1]):
    out, err = tempfile.TemporaryFile(), tempfile.TemporaryFile()
    sys.stdout.flush(); sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        os.dup2(out.fileno(), 1); os.dup2(err.fileno(), 2)
        os.environ.pop(name, None)
        if gate is not None:
            os.environ[name] = gate
        sys.argv = [entry, *args]
        try:
            runpy.run_module(entry, run_name="__main__", alter_sys=True)
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        sys.stdout.flush(); sys.stderr.flush()
        os._exit(code)
    code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    texts = []
    for f in (out, err):
        f.seek(0); texts.append(f.read().decode()); f.close()
    results.append([code, *texts])
print(json.dumps(results))
"""

CASES = {
    "text": ((), None),
    "json": (("--json",), None),
    "json-unrecognised-gate": (("--json",), "yes"),
    "usage-error": (("--bogus",), None),
}


@pytest.fixture(scope="module")
def runs() -> dict[tuple[str, str], subprocess.CompletedProcess]:
    """``(case, "command" | "alias")``: the run of ``python -m flashinfer experimental`` or
    ``python -m flashinfer.experimental`` with the case's arguments and gate."""
    keys, todo = [], []
    for case, (args, gate) in CASES.items():
        for which, entry in (("command", COMMAND), ("alias", ALIAS)):
            keys.append((case, which))
            todo.append([entry[1], [*entry[2:], *args], gate])
    ran = subprocess.run(
        [sys.executable, "-c", _DRIVER, json.dumps(todo), GATE],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    results = json.loads(ran.stdout.strip().splitlines()[-1])
    return {
        key: subprocess.CompletedProcess(key, code, out, err)
        for key, (code, out, err) in zip(keys, results, strict=True)
    }


def test_the_alias_as_a_program_prints_what_the_forked_command_printed(runs):
    """The ``-m`` command line itself (the forked runs above use runpy, as ``-m`` does)."""
    env = {k: v for k, v in os.environ.items() if k != GATE}
    alias = subprocess.run(
        [sys.executable, *ALIAS, "--json"], capture_output=True, text=True, timeout=300, env=env
    )
    command = runs["json", "command"]
    assert (alias.returncode, alias.stdout, alias.stderr) == (
        command.returncode,
        command.stdout,
        command.stderr,
    )


@pytest.mark.parametrize("case", CASES)
def test_the_alias_prints_what_the_command_prints(case, runs):
    args, gate = CASES[case]
    command, alias = runs[case, "command"], runs[case, "alias"]
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
