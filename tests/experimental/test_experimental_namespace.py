"""The flashinfer.experimental namespace: re-exports only, and no side effects."""

from __future__ import annotations

import subprocess
import sys

import flashinfer
import flashinfer.api_logging as api_logging
import flashinfer.backend_dispatch as dispatch

EXPORTS = {
    "ExperimentalWarning": api_logging.ExperimentalWarning,
    "experimental_auto_backends_allowed": api_logging.experimental_auto_backends_allowed,
    "experimental_backend": dispatch.experimental_backend,
    "flashinfer_experimental_api": api_logging.flashinfer_experimental_api,
    "require_experimental_auto_backends": api_logging.require_experimental_auto_backends,
    "warn_experimental_backend_once": api_logging.warn_experimental_backend_once,
}


def test_namespace_reexports_the_primitives():
    import flashinfer.experimental as experimental

    for name, obj in EXPORTS.items():
        assert getattr(experimental, name) is obj
    assert set(EXPORTS) <= set(experimental.__all__)
    assert "FLASHINFER_ALLOW_EXPERIMENTAL_AUTO_BACKENDS" in experimental.__doc__


def test_importing_the_namespace_has_no_side_effects():
    code = """
import sys, warnings
warnings.simplefilter("error")
import flashinfer
from flashinfer.api_logging import api_inventory
from flashinfer.backend_dispatch import registered_ops
before = (len(api_inventory()), len(registered_ops()), sorted(sys.modules))
import flashinfer.experimental
after = (len(api_inventory()), len(registered_ops()))
new = sorted(set(sys.modules) - set(before[2]))
assert before[:2] == after, (before[:2], after)
assert new == ["flashinfer.experimental"], new
print("ok")
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_import_flashinfer_never_imports_the_namespace():
    code = (
        "import sys, flashinfer, flashinfer.utils, flashinfer.api_logging; "
        "print(sorted(m for m in sys.modules if m.startswith('flashinfer.experimental')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
    assert "experimental" not in {m.split(".")[-1] for m in flashinfer.API_MODULES}
