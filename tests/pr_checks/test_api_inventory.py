"""scripts/pr_checks/api_inventory.py: passing and failing fake packages (the real repository is
checked by `scripts/check.sh --step checks`).

Each fixture is a small package plus a ``docs/api`` folder under ``tmp_path``; the check runs
in a subprocess, so the fake APIs never enter this process's inventory.
"""

from __future__ import annotations

import subprocess
import textwrap
from pathlib import Path

import pytest

from . import run_script

PACKAGE = '''
    """A fake package with one stable and one experimental API."""
    from flashinfer import flashinfer_api, flashinfer_experimental_api

    __all__ = ["stable_op", "preview_op", "Thing"]


    @flashinfer_api
    def stable_op(x):
        """A stable operator."""
        return x


    @flashinfer_experimental_api(owner="@a", tracking_issue=1)
    def preview_op(x):
        """An experimental operator."""
        return x


    class Thing:
        """A stable public class (listed in __all__, not marked)."""
'''

REFERENCE = """
    API
    ===

    .. autofunction:: {pkg}.stable_op

    .. autoclass:: {pkg}.Thing
"""


def _run(tmp_path: Path, pkg: str, package: str, reference: str) -> subprocess.CompletedProcess:
    (tmp_path / pkg).mkdir()
    (tmp_path / pkg / "__init__.py").write_text(textwrap.dedent(package), encoding="utf-8")
    api = tmp_path / "docs" / "api"
    api.mkdir(parents=True)
    (api / "index.rst").write_text(textwrap.dedent(reference.format(pkg=pkg)), encoding="utf-8")
    return run_script(
        "api_inventory", "--root", str(tmp_path), "--module", pkg, pythonpath=tmp_path
    )


def test_passing_fixture(tmp_path: Path) -> None:
    result = _run(tmp_path, "fi_inv_ok", PACKAGE, REFERENCE)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "api_inventory: OK" in result.stdout


def test_myst_reference_and_automodule_members(tmp_path: Path) -> None:
    package = PACKAGE.replace('"preview_op", ', "")  # automodule lists __all__
    reference = """
        # API

        ```{{automodule}} {pkg}
        :members:
        ```
    """
    result = _run(tmp_path, "fi_inv_myst", package, reference)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize(
    ("case", "package", "reference", "expected"),
    [
        (
            "no_docstring",
            PACKAGE.replace('"""A stable operator."""', "pass"),
            REFERENCE,
            "{pkg}.stable_op: stable API without a docstring",
        ),
        (
            "not_in_reference",
            PACKAGE,
            REFERENCE.replace(".. autofunction:: {pkg}.stable_op", ""),
            "{pkg}.stable_op: stable API missing from the API reference",
        ),
        (
            "public_class_not_in_reference",
            PACKAGE,
            REFERENCE.replace(".. autoclass:: {pkg}.Thing", ""),
            "{pkg}.Thing: stable API missing from the API reference",
        ),
        (
            "experimental_in_reference",
            PACKAGE,
            REFERENCE + "\n    .. autofunction:: {pkg}.preview_op\n",
            "experimental API preview_op is in the stable API reference",
        ),
        (
            "experimental_via_automodule",
            PACKAGE,
            REFERENCE + "\n    .. automodule:: {pkg}\n       :members:\n",
            "experimental API preview_op is in the stable API reference",
        ),
        (
            "experimental_hidden_in_stable_inventory",
            PACKAGE
            + textwrap.indent(
                textwrap.dedent('''
                def _plain_wrapper(func):
                    # A hand-written wrapper that keeps __wrapped__ but not the attributes.
                    def wrapper(*args, **kwargs):
                        return func(*args, **kwargs)

                    wrapper.__wrapped__ = func
                    wrapper.__doc__ = func.__doc__
                    wrapper.__qualname__ = wrapper.__name__ = func.__name__
                    return wrapper


                @flashinfer_api
                @_plain_wrapper
                @flashinfer_experimental_api(owner="@a", tracking_issue=1)
                def hidden_op(x):
                    """Experimental, but @flashinfer_api sees only the outer wrapper."""
                    return x
                '''),
                "    ",
            ),
            REFERENCE,
            "{pkg}.hidden_op: experimental API listed in the stable inventory",
        ),
        (
            "reference_does_not_resolve",
            PACKAGE,
            REFERENCE + "\n    .. autofunction:: {pkg}.gone\n",
            "autofunction {pkg}.gone does not resolve",
        ),
    ],
    ids=lambda value: value if isinstance(value, str) and value.isidentifier() else "",
)
def test_failing_fixtures(
    tmp_path: Path, case: str, package: str, reference: str, expected: str
) -> None:
    pkg = f"fi_inv_{case}"
    result = _run(tmp_path, pkg, package, reference)
    assert result.returncode == 1, result.stdout + result.stderr
    assert expected.format(pkg=pkg) in result.stdout, result.stdout


def test_stable_record_under_experimental_fails(tmp_path: Path) -> None:
    """An API defined under flashinfer.experimental but marked only @flashinfer_api leaks."""
    package = PACKAGE + textwrap.indent(
        textwrap.dedent('''
        def leak(x):
            """Doc."""
            return x


        leak.__module__ = "flashinfer.experimental.fake"  # as if defined there
        from flashinfer.api_logging import APIRecord, _inventory

        _inventory["fi_inv_leak.leak"] = APIRecord("fi_inv_leak.leak", leak)
        '''),
        "    ",
    )
    result = _run(tmp_path, "fi_inv_leak", package, REFERENCE)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "defined under flashinfer.experimental but recorded as a stable API" in result.stdout


def test_missing_reference_folder(tmp_path: Path) -> None:
    result = run_script("api_inventory", "--root", str(tmp_path))
    assert result.returncode == 1
    assert "no API reference folder" in result.stdout
