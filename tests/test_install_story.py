"""README's install story, tried: the two ways it gives (into an environment that has its
torch, and a fresh CPU-only machine) are the same text in ``docs/installation.rst``;
installing into an environment that has torch plans nothing but this package; and the
editable install it recommends for type checking is one that type checkers can see."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest
from repo_copy import copy_repository

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
INSTALLATION = (ROOT / "docs" / "installation.rst").read_text()
STRICT = "pip install -e . --config-settings editable_mode=strict"


def _install_lines(text: str, quote: str) -> list[str]:
    """The inline ``pip install ...`` commands of a text, in order."""
    return re.findall(rf"{quote}(pip install [^`]+?){quote}", text)


def test_readme_and_the_installation_page_give_the_same_ways_to_install():
    readme = _install_lines(README, "`")
    page = _install_lines(INSTALLATION, "``")
    assert readme == page
    assert "pip install -e ." in readme and STRICT in readme
    # The two ways, word for word on both pages.
    for way in ("Into an environment that already has the PyTorch you want", "A fresh CPU-only"):
        assert way in README and way in INSTALLATION


def test_installing_into_an_environment_with_torch_plans_nothing_but_this_package(tmp_path):
    """README's first way, ``pip install -e .`` where torch is installed: pip's plan (a dry
    run, no build isolation, nothing downloaded) installs this package alone, so the user's
    torch, triton and numpy stay as they are."""
    report = tmp_path / "plan.json"
    argv = [sys.executable, "-m", "pip", "install", "--dry-run", "--quiet", "--no-build-isolation"]
    argv += ["--disable-pip-version-check", "--report", str(report), "-e", str(ROOT)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    planned = [item["metadata"]["name"] for item in json.loads(report.read_text())["install"]]
    assert planned == ["flashinfer-gating"], planned


def _editable_pth(repo: Path, out: Path, mode: str | None) -> str:
    """The ``.pth`` line of the editable wheel setuptools builds for ``repo`` in ``mode``."""
    settings = {"editable_mode": mode} if mode else None
    code = textwrap.dedent(
        f"""
        from setuptools import build_meta
        print(build_meta.build_editable({str(out)!r}, config_settings={settings!r}))
        """
    )
    out.mkdir()
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=repo, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    wheel = out / done.stdout.strip().splitlines()[-1]
    with zipfile.ZipFile(wheel) as archive:
        (pth,) = [n for n in archive.namelist() if n.endswith(".pth")]
        return archive.read(pth).decode().strip()


def test_the_strict_editable_install_is_visible_to_a_type_checker(tmp_path):
    """The default editable install is an import hook (a ``.pth`` line that runs code, which
    type checkers skip); ``editable_mode=strict`` is a path.  With that path in an
    environment's site-packages, mypy finds the package and reads its types."""
    repo = copy_repository(tmp_path / "checkout")
    assert _editable_pth(repo, tmp_path / "default", None).startswith("import ")
    line = _editable_pth(repo, tmp_path / "strict", "strict")
    assert (Path(line) / "flashinfer" / "py.typed").exists(), line

    # An environment whose site-packages holds that .pth, as installing the wheel leaves it.
    env = tmp_path / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True)
    (site,) = env.glob("lib/python*/site-packages")
    (site / "__editable__.flashinfer_gating.pth").write_text(line + "\n")
    app = tmp_path / "app" / "app.py"
    app.parent.mkdir()
    app.write_text("import flashinfer\n\nreveal_type(flashinfer.rmsnorm)\n")
    argv = [sys.executable, "-m", "mypy", "--python-executable", str(env / "bin" / "python")]
    argv += ["--no-incremental", "--follow-imports=silent", str(app)]
    done = subprocess.run(argv, capture_output=True, text=True, cwd=app.parent, timeout=600)
    assert "import-not-found" not in done.stdout, done.stdout
    assert "Revealed type is" in done.stdout and '"Any"' not in done.stdout, done.stdout


def _readme_command(heading: str) -> str:
    """The command of README's ``bash`` block under ``heading``'s paragraph (the first block
    after the line that starts with it)."""
    start = README.index(heading)
    block = README.index("```bash\n", start) + len("```bash\n")
    return README[block : README.index("\n```", block)].strip()


def _new_venv(path: Path) -> dict[str, str]:
    """A brand-new virtual environment and the environment variables that put it first on
    ``PATH`` (as ``source bin/activate`` would), with nothing inherited from this one."""
    subprocess.run([sys.executable, "-m", "venv", str(path)], check=True, timeout=300)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    env["PATH"] = f"{path / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["VIRTUAL_ENV"] = str(path)
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def _torch_files(env: dict[str, str]) -> tuple[str, str]:
    code = "import torch; print(torch.__version__); print(torch.__file__)"
    out = subprocess.run(["python", "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    version, where = out.stdout.split()
    return version, where


@pytest.mark.slow
def test_readmes_two_ways_work_as_written_in_a_new_venv(tmp_path):
    """Both ways README gives, word for word, in one brand-new virtual environment on a copy
    of the checkout.  The fresh CPU-only machine's main command is the torch pin, then
    ``pip install -e .`` (the other way, word for word), then the report; once the pin has
    run, the environment is the other way's (one that already has its torch and nothing
    else), so the command runs step by step, as ``&&`` runs it, and torch's version and files
    are read between the steps: ``pip install -e .`` leaves them as they were and gives a
    working package.  One torch install serves both ways (installing torch is most of the
    time)."""
    repo = copy_repository(tmp_path / "checkout")
    env = _new_venv(tmp_path / "venv")
    command = _readme_command("The main job")
    (way,) = [c for c in _install_lines(README, "`") if c == "pip install -e ."]
    pin, *rest = [step.strip() for step in command.split("&&")]
    assert pin.startswith("pip install torch==") and rest == [way, "flashinfer backends"], command

    def step(text: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            ["bash", "-c", text], cwd=repo, env=env, capture_output=True, text=True, timeout=1200
        )
        assert done.returncode == 0, f"{text}:\n{done.stdout[-2000:]}{done.stderr[-2000:]}"
        return done

    step(pin)
    # The user's environment: its torch and nothing else (here the same pin, as their own).
    before = _torch_files(env)
    done = step(way)
    assert _torch_files(env) == before
    assert not re.search(r"(?m)^Successfully installed .*\btorch-", done.stdout), done.stdout
    check = (
        "import torch, flashinfer; print(flashinfer.rmsnorm(torch.ones(2, 4), torch.ones(4)).shape)"
    )
    out = subprocess.run(["python", "-c", check], env=env, capture_output=True, text=True)
    assert out.returncode == 0 and "torch.Size([2, 4])" in out.stdout, out.stderr[-2000:]

    # The main command's last step: the report.
    done = step(rest[-1])
    assert "flashinfer.rmsnorm" in done.stdout and "RUNS HERE" in done.stdout
