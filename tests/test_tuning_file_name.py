"""The tuning file has one name: every old spelling users may type still works and is the
same object (or option) as its new name, and no user-facing text (CLI help, messages,
docstrings, docs) uses an old spelling except beside its new one.

The declared old spellings are ``flashinfer.autotuner.tuning_file.OLD_SPELLINGS``; the
phrases that called the file a "cache" or "configs" have no alias and appear nowhere.
"""

from __future__ import annotations

import ast
import json
import pickle
import re
import warnings
from pathlib import Path

import pytest
import torch
from autotuner_fakes import FakeRunner, clean_tuner, make_op, tune_from_cli

import flashinfer
import flashinfer.autotuner as autotuner
from flashinfer.autotuner import AutoTuner, AutotuneReportWarning, tuning_file
from flashinfer.autotuner.tuning_file import OLD_SPELLINGS
from flashinfer.cli import main

REPO = Path(__file__).resolve().parent.parent

#: The Python names among the old spellings (the rest are a keyword, an option, a module).
OLD_NAMES = {old: new for old, new in OLD_SPELLINGS.items() if old.isidentifier()}


@pytest.fixture(autouse=True)
def fast_tuner():
    with clean_tuner(warmup=0, repeat=1) as tuner:
        yield tuner


# ---- each alias works and is the same object ------------------------------------------


def test_the_declared_names_cover_every_old_python_name():
    assert set(OLD_NAMES) == {
        "AutotuneCacheError",
        "AutotuneCacheWarning",
        "CacheDocument",
        "CacheEntry",
        "save_configs",
        "load_configs",
    }


@pytest.mark.parametrize("old", sorted(OLD_NAMES))
def test_each_old_name_is_the_new_object_at_every_public_path(old):
    import flashinfer.autotuner.cache as old_module

    new = OLD_NAMES[old]
    for module in (autotuner, tuning_file, old_module):
        assert getattr(module, old) is getattr(tuning_file, new), (module.__name__, old)
        assert old in module.__all__ and new in module.__all__, module.__name__


def test_the_old_module_is_the_new_one_name_for_name():
    import flashinfer.autotuner.cache as old_module

    assert old_module.__all__ == tuning_file.__all__
    for name in tuning_file.__all__:
        assert getattr(old_module, name) is getattr(tuning_file, name), name


def test_objects_pickled_under_the_old_names_load_as_the_new_classes():
    """A pickle names a class by module and name: the old ones still resolve."""
    for name, new in (("AutotuneCacheError", "TuningFileError"), ("LoadReport", "LoadReport")):
        loaded = pickle.loads(f"cflashinfer.autotuner.cache\n{name}\n.".encode())
        assert loaded is getattr(tuning_file, new)


def test_the_tuner_methods_keep_upstream_names():
    assert AutoTuner.save_configs is AutoTuner.save_tuning_file
    assert AutoTuner.load_configs is AutoTuner.load_tuning_file


def test_except_with_the_old_class_catches_what_the_api_raises(tmp_path):
    with pytest.raises(autotuner.AutotuneCacheError) as caught:
        autotuner.save_tuning_file(tmp_path)  # a directory: refused before any work
    assert type(caught.value) is autotuner.TuningFileError
    (tmp_path / "bad.json").write_text("{")
    with pytest.warns(autotuner.AutotuneCacheWarning):
        autotuner.load_tuning_file(tmp_path / "bad.json")


def _tune_once(op: object = None, **where: object) -> None:
    op = op or make_op({"a": FakeRunner("a"), "b": FakeRunner("b")})
    with flashinfer.autotune(**where):
        op(torch.zeros(4))  # type: ignore[operator]


def test_old_function_and_method_names_save_and_load_the_same_file(tmp_path, fast_tuner):
    _tune_once()
    path = tmp_path / "t.json"
    assert autotuner.save_configs(path) == fast_tuner.save_configs(path) >= 1
    picks = {k: c.backend for k, c in fast_tuner.choices().items()}
    fast_tuner.clear()
    report = autotuner.load_configs(path)
    assert report.loaded >= 1
    assert {k: c.backend for k, c in fast_tuner.choices().items()} == picks


def test_autotune_accepts_cache_as_the_old_spelling_of_tuning_file(tmp_path):
    old, new = tmp_path / "old.json", tmp_path / "new.json"
    # "b" slower, so both blocks pick "a" and write the same entry
    op = make_op({"a": FakeRunner("a"), "b": FakeRunner("b", [None], delays={None: 0.004})})
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a silent alias (the block's summary aside)
        warnings.filterwarnings("ignore", category=AutotuneReportWarning)
        _tune_once(op, cache=old)
    AutoTuner.get().clear()
    _tune_once(op, tuning_file=new)
    strip = lambda p: [  # noqa: E731 - the timings differ
        {**e, "median_ms": 0, "iqr_ms": 0} for e in json.loads(p.read_text())["entries"]
    ]
    assert strip(old) == strip(new) != []
    block = flashinfer.autotune(cache=old)
    assert block.tuning_file == str(old)


def test_autotune_refuses_both_spellings_at_once(tmp_path):
    with pytest.raises(TypeError, match="both tuning_file= and cache="):
        flashinfer.autotune(tuning_file=tmp_path / "a.json", cache=tmp_path / "b.json")


@pytest.mark.parametrize("option", ["--tuning-file", "--cache"])
def test_the_cli_accepts_the_old_option_spelling(option, tmp_path, monkeypatch, capsys):
    op = tune_from_cli(monkeypatch, {"a": FakeRunner("a")})
    path = tmp_path / "t.json"
    assert main(["autotune", "--op", op.api_name, "--shapes", "4", option, str(path)]) == 0
    assert len(json.loads(path.read_text())["entries"]) == 1
    capsys.readouterr()
    assert main(["explain", "mm", "--shapes", "4x4x4", option, str(path)]) == 0
    assert "flashinfer explain: error" not in capsys.readouterr().err


def test_an_empty_path_names_the_new_option_whichever_spelling_was_typed(capsys):
    assert main(["autotune", "--op", "mm", "--shapes", "4x4x4", "--cache", ""]) == 2
    assert "--tuning-file: the path is empty" in capsys.readouterr().err


# ---- no text uses an old spelling -----------------------------------------------------

#: An old spelling as it appears in text (the option not to be confused with ``--cache-dir``).
OLD_PATTERNS = {
    old: re.compile(
        r"(?<![\w-])--cache(?![\w-])"
        if old == "--cache"
        else r"\b" + re.escape(old) + (r"(?!\w)" if old[-1].isalnum() else "")
    )
    for old in OLD_SPELLINGS
}
#: Words that called the tuning file something else; they have no alias.
RETIRED_PHRASES = re.compile(
    r"[Aa]utotune[ds]? cache|[Cc]ache[- ]files?\b|[Tt]uning cache|[Pp]ersisted cache"
    r"|JSON cache|[Cc]onfigs? files?\b|[Aa]utotuner file"
)
#: An old spelling is allowed this many lines from its new one (a table row, a wrapped line).
NEAR = 2

#: The declarations themselves: the table of old spellings and the old module's shim.
DECLARATIONS = {"flashinfer/autotuner/tuning_file.py", "flashinfer/autotuner/cache.py"}


def problems(text: str, where: str, around: str = "") -> list[str]:
    """What in ``text`` uses an old spelling; ``around``: more text near it (the source
    lines about a string, e.g. the option's other spelling beside its help)."""
    lines = text.splitlines()
    found = []
    for i, line in enumerate(lines):
        for old, pattern in OLD_PATTERNS.items():
            if pattern.search(line):
                near = "\n".join(lines[max(0, i - NEAR) : i + NEAR + 1]) + around
                if OLD_SPELLINGS[old] not in near:
                    found.append(f"{where}:{i + 1}: {old!r} without {OLD_SPELLINGS[old]!r}: {line}")
        found += [f"{where}:{i + 1}: {m.group()!r}: {line}" for m in RETIRED_PHRASES.finditer(line)]
    return found


def test_the_scan_finds_an_old_spelling_and_allows_a_declared_alias():
    assert problems("write it with --cache FILE", "t")
    assert problems("the autotune cache is corrupt", "t")
    assert problems("see save_configs", "t")
    assert problems("autotune(cache=path)", "t")
    assert problems("import flashinfer.autotuner.cache", "t")
    assert problems("AutotuneCacheError", "t")
    assert problems("CacheEntry", "t") and problems("TuningFileEntry", "t") == []
    assert problems("mypy --cache-dir d", "t") == []
    assert problems("--tuning-file FILE, --cache FILE", "t") == []
    assert problems("``save_configs``\n  is ``save_tuning_file``", "t") == []
    assert problems("``save_configs``\n\n\n\n  is ``save_tuning_file``", "t")


def _strings_of(path: Path) -> list[tuple[int, str, str]]:
    """Every string of a module that can reach a user: docstrings, messages, help texts
    (identifier-like strings, e.g. ``__all__``'s names, are names, not text), each with
    its line and the source lines about it."""
    source = path.read_text()
    lines = source.splitlines()
    tree = ast.parse(source, str(path))
    return [
        (
            node.lineno,
            node.value,
            "\n".join(lines[max(0, node.lineno - 1 - NEAR) : (node.end_lineno or 0) + NEAR]),
        )
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and not node.value.isidentifier()
    ]


def test_no_message_docstring_or_help_text_of_the_package_uses_an_old_spelling():
    found = []
    for path in sorted((REPO / "flashinfer").rglob("*.py")):
        rel = path.relative_to(REPO).as_posix()
        if rel in DECLARATIONS:
            continue
        for lineno, text, around in _strings_of(path):
            found += problems(text, f"{rel}:{lineno}", around)
    assert not found, "\n".join(found)


def test_no_doc_uses_an_old_spelling():
    docs = [REPO / "README.md", REPO / "CONTRIBUTING.md", REPO / "CLAUDE.md"]
    docs += sorted((REPO / "flashinfer").rglob("*.md"))
    docs += [p for p in sorted((REPO / "docs").rglob("*")) if p.suffix in {".rst", ".md"}]
    docs = [p for p in docs if "_build" not in p.parts]
    assert len(docs) > 10  # really read
    found = []
    for path in docs:
        found += problems(path.read_text(), path.relative_to(REPO).as_posix())
    assert not found, "\n".join(found)


@pytest.mark.parametrize("argv", [["--help"], ["autotune", "--help"], ["explain", "--help"]])
def test_no_help_text_uses_an_old_spelling(argv, capsys):
    try:
        main(argv)
    except SystemExit:
        pass
    shown = capsys.readouterr().out
    assert "usage:" in shown
    assert not problems(shown, " ".join(argv))
    if argv != ["--help"]:
        assert "--tuning-file" in shown
