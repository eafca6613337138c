"""Sphinx configuration of the flashinfer-gating documentation.

Builds offline (no intersphinx) and on CPU: the doctest builder runs every example.
Both builds run with warnings as errors: ``scripts/docs/build_docs.sh``.

The examples run in the environment they are given, as a user's would: this file does not
set ``TRITON_INTERPRET``.  ``build_docs.sh`` runs the doctests twice, with the variable unset
and with ``TRITON_INTERPRET=1``; an example that needs the interpreter (a Triton kernel on CPU
tensors) says so on its page and carries ``:skipif: not TRITON_INTERPRETED``, so the first run
skips it (``tests/test_doc_interpreter.py`` checks both).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # document the checkout, also without `pip install -e .`
sys.path.insert(0, str(ROOT / "docs" / "_ext"))  # directives that render pages from the code

# The examples show the default behaviour: the gate is off unless an example turns it on.
os.environ.pop("FLASHINFER_ALLOW_EXPERIMENTAL_AUTO_BACKENDS", None)

import flashinfer  # noqa: E402

project = "flashinfer-gating"
author = "flashinfer developers"
copyright = "flashinfer developers"
release = flashinfer.__version__
version = release

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.doctest",
    "sphinx.ext.napoleon",  # the operators' docstrings use Google style (Args:, Returns:)
    "myst_parser",
    "flashinfer_reference",  # docs/_ext: the settings and CLI pages, rendered from the code
    "flashinfer_messages",  # docs/_ext: sample warnings and errors, from gating/messages.py
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "_ext", "Thumbs.db", ".DS_Store", "requirements.txt"]

# No network: intersphinx is deliberately not enabled.

html_theme = "furo"
html_title = f"flashinfer-gating {release}"

autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_default_options = {"undoc-members": False}

myst_enable_extensions = ["colon_fence"]
myst_heading_anchors = 3

# Every doctest group starts from the default state: gate unset, no "already warned" record.
doctest_global_setup = """
__name__ = "example"  # the module name that functions defined in examples report
import os
import warnings

import torch

import flashinfer

os.environ.pop("FLASHINFER_ALLOW_EXPERIMENTAL_AUTO_BACKENDS", None)
flashinfer.reset_experimental_warnings()

# An example that runs a Triton kernel on CPU tensors: ``:skipif: not TRITON_INTERPRETED``.
from flashinfer.kernels.availability import interpreter_enabled

TRITON_INTERPRETED = interpreter_enabled()
"""
doctest_global_cleanup = """
os.environ.pop("FLASHINFER_ALLOW_EXPERIMENTAL_AUTO_BACKENDS", None)
flashinfer.reset_experimental_warnings()
"""


# A facade (``flashinfer.backend_families``, ``flashinfer.lifecycle``, ...) only re-exports:
# the documentation comment of a constant sits beside its assignment in the module that
# defines it, which Sphinx does not look in, so it would fall back to the docstring of the
# value's class.  Read the comment where the facade imports the name from.
def _defining_module(facade: str, name: str) -> tuple[str, str] | None:
    import ast
    import importlib.util

    try:
        spec = importlib.util.find_spec(facade)
    except ImportError:  # a class's attribute: its parent is a class, not a module
        return None
    if spec is None or spec.origin is None:
        return None
    with open(spec.origin, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                if (alias.asname or alias.name) == name:
                    return node.module, alias.name
    return None


def _facade_attribute_docs(app, what, name, obj, options, lines):
    if what not in ("data", "attribute"):
        return
    facade, _, attr = name.rpartition(".")
    found = _defining_module(facade, attr)
    if found is None:
        return
    from sphinx.pycode import ModuleAnalyzer

    module, real = found
    docs = ModuleAnalyzer.for_module(module).find_attr_docs().get(("", real))
    if docs:
        lines[:] = list(docs)


def setup(app):
    app.connect("autodoc-process-docstring", _facade_attribute_docs)
