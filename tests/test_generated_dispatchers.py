"""The generated dispatchers a reader can open: ``docs/generated/dispatchers/<op>.py``.

``scripts/docs/write_dispatchers.py`` writes them from each op's generated source (in a fresh
interpreter, before any call); these tests regenerate them in memory and compare, and check
that the names a file points to (each backend's checker and implementation) are real,
importable objects, so a reader or a static walker can follow from the dispatcher to the
kernels.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
import shutil
from pathlib import Path
from types import ModuleType

import pytest

from flashinfer.api_modules import OPS

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "docs" / "write_dispatchers.py"
OUT_DIR = ROOT / "docs" / "generated" / "dispatchers"


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("write_dispatchers", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def rendered() -> dict[str, str]:
    return _script().rendered_in_fresh_interpreter()


def test_the_files_are_what_the_command_writes(rendered):
    wrong = _script().stale(OUT_DIR, rendered)
    assert not wrong, (
        f"docs/generated/dispatchers/ is stale ({', '.join(wrong)}): "
        "run python scripts/docs/write_dispatchers.py"
    )


def test_every_generated_op_has_a_file(rendered):
    import flashinfer

    generated = {
        f"{name}.py" for name in OPS if hasattr(getattr(flashinfer, name), "__generated_source__")
    }
    assert generated == set(rendered)
    assert {"rmsnorm.py", "mm.py"} <= generated


def test_check_fails_on_a_stale_file_and_names_the_command(tmp_path, capsys):
    copy = tmp_path / "dispatchers"
    shutil.copytree(OUT_DIR, copy)
    target = copy / "rmsnorm.py"
    target.write_text(target.read_text() + "# edited by hand\n")
    (copy / "removed_op.py").write_text("# an op that no longer exists\n")
    assert _script().main(["--check", "--out", str(copy)]) == 1
    err = capsys.readouterr().err
    assert "removed_op.py, rmsnorm.py" in err
    assert "run: python scripts/docs/write_dispatchers.py" in err
    # Writing repairs it: the stale file rewritten, the extra one removed.
    assert _script().main(["--out", str(copy)]) == 0
    assert _script().main(["--check", "--out", str(copy)]) == 0
    assert not (copy / "removed_op.py").exists()


_POINTER = re.compile(r"^#\s+(?:check|run|_\w+) *[:=] +(?:a )?(flashinfer\.[\w.]+?)(?:,|  \(|$)")


def _resolve(dotted: str) -> object:
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: object = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)
        return obj
    raise ModuleNotFoundError(dotted)


def test_the_names_a_file_points_to_are_importable(rendered):
    pointers = [
        m.group(1)
        for text in rendered.values()
        for line in text.splitlines()
        if (m := _POINTER.match(line)) and "<locals>" not in m.group(1)
    ]
    assert "flashinfer.norm._rmsnorm_triton" in pointers  # a backend's run, from rmsnorm.py
    for dotted in pointers:
        _resolve(dotted)


def test_no_address_or_id_in_a_file(rendered):
    for name, text in rendered.items():
        assert not re.search(r"0x[0-9a-f]{6,}", text), name
