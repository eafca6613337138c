"""The selection's precision rules (``testmap_lib/inert.py``): changed lines that cannot
change what an existing test runs select nothing, or only the tests that could see them,
and every doubt keeps them module-level (every test that imported the module)."""

from __future__ import annotations

from pathlib import Path

import pytest
from testmap_lib.inert import (
    NEVER_READ_MODULE_DOCSTRINGS,
    DocReaders,
    bare_string_lines,
    code_lines,
    docstring_readers,
)
from testmap_lib.mapfile import TestMap, TestRecord

from . import commit, write
from .test_testmap_rules import (
    EXP,
    A,
    B,
    _edit,
    _ids,
    _rules,
    _select,
    repo,  # noqa: F401 - the synthetic repository fixture
)

MODULE_LEVEL = {A, B, EXP}  # every test that imported flashinfer/mod.py


def _at(m: TestMap, sha: str) -> TestMap:
    """The map as if recorded at ``sha`` (a commit that set the scene)."""
    return TestMap(sha, m.tests, m.session_functions)


def _with_test(m: TestMap, sha: str, test: str, files: set[str], functions: set[str]) -> TestMap:
    """The map at ``sha`` with one more stable test that ran ``files`` and ``functions``."""
    record = TestRecord("stable", 1.0, files, functions)
    return TestMap(sha, {**m.tests, test: record}, m.session_functions)


def _reader_test(
    root: Path, m: TestMap, other: str, test: str = "tests/test_b.py::test_reads_doc"
) -> tuple[str, TestMap]:
    """Commit ``flashinfer/other.py`` (``other``, defining ``lonely``) and a map with one
    more test, ``test``, that imported mod.py and other.py and ran ``lonely``."""
    write(root, {"flashinfer/other.py": other})
    head = commit(root)
    files = {"flashinfer/mod.py", "flashinfer/other.py", test.split("::")[0]}
    return head, _with_test(m, head, test, files, {"flashinfer/other.py::lonely"})


def _after_scene(root: Path, m: TestMap, scene: str, old: str, new: str) -> dict:
    """Commit mod.py with ``LIMIT = 3`` replaced by ``scene``, then select the edit of
    ``old`` to ``new`` against it (the map as if recorded at the scene)."""
    _edit(root, "flashinfer/mod.py", "LIMIT = 3\n", scene)
    head = commit(root)
    _edit(root, "flashinfer/mod.py", old, new)
    return _select(root, _at(m, head), head, commit(root))


def _append(root: Path, text: str) -> None:
    path = root / "flashinfer/mod.py"
    write(root, {"flashinfer/mod.py": path.read_text(encoding="utf-8") + text})


# -- comments and blank lines ----------------------------------------------------------------


def test_comment_and_blank_lines_select_nothing(repo) -> None:  # noqa: F811
    root, base, m = repo
    _edit(root, "flashinfer/mod.py", "LIMIT = 3\n", "# the limit, in calls\nLIMIT = 3\n\n")
    _edit(root, "flashinfer/mod.py", "    return x + 1", "    # one more\n\n    return x + 1")
    result = _select(root, m, base, commit(root))
    assert result["mode"] == "none" and _rules(result) == {"comment-only"}


def test_a_trailing_comment_shares_its_line_with_code(repo) -> None:  # noqa: F811
    root, base, m = repo
    _edit(root, "flashinfer/mod.py", "return x + 1", "return x + 1  # one more")
    assert _ids(_select(root, m, base, commit(root))) == {A}


def test_a_hash_inside_a_string_is_code(repo) -> None:  # noqa: F811
    root, _, m = repo
    scene = 'LIMIT = 3\nNOTE = """\n# not a comment\n"""\n'
    result = _after_scene(root, m, scene, "# not a comment", "# changed text")
    assert "module-level" in _rules(result) and _ids(result) == MODULE_LEVEL


def test_code_lines_keep_the_encoding_cookie_and_fail_open() -> None:
    assert code_lines("# -*- coding: latin-1 -*-\nx = 1\n# c\n\n") == {1, 2}
    assert code_lines("#!/usr/bin/env python\n# c\n") == {1}
    assert code_lines("x = (\n") is None  # does not tokenize: every line is code


# -- a new private function -------------------------------------------------------------------

HELPER = "\n\ndef _fresh_helper(x, scale=2):\n    # why\n    return x * scale\n"


def test_a_new_private_function_selects_through_its_callers(repo) -> None:  # noqa: F811
    root, base, m = repo
    _append(root, HELPER)
    result = _select(root, m, base, commit(root))
    assert _rules(result) == {"new-private-function"}
    assert result["mode"] == "none"


def test_a_new_private_function_and_its_caller_select_the_callers_tests(repo) -> None:  # noqa: F811
    root, base, m = repo
    _append(root, HELPER)
    _edit(root, "flashinfer/mod.py", "return x + 1", "return _fresh_helper(x)")
    assert _ids(_select(root, m, base, commit(root))) == {A}


@pytest.mark.parametrize(
    "text",
    [
        "\n\ndef fresh_public(x):\n    return x\n",  # public: listed by autodoc, inventories
        "\n\n@functools.cache\ndef _fresh_cached(x):\n    return x\n",  # decorators run
        "\n\ndef _fresh_default(x=print('import')):\n    return x\n",  # defaults run
        "\n\ndef _fresh_annotated(x: Missing) -> None:\n    return x\n",  # evaluated
        "\n\ndef _sunder_(x):\n    return x\n",  # looked up by convention (Enum, IPython)
        "\n\ndef __getattr__(name):\n    return name\n",  # a module hook
        "\n\ndef _used_by_a_twin(x):\n    return x\n\n\n_used_by_a_twin = 1\n",  # rebound
        "\n\ndef used_by_b(x):\n    return x\n",  # rebinds an existing name
        "\n\nclass _Local(Base):\n    pass\n",  # a class body runs at import
    ],
    ids=[
        "public",
        "decorated",
        "default-calls",
        "annotation",
        "sunder",
        "dunder",
        "rebound",
        "rebinds",
        "class",
    ],
)
def test_a_def_that_runs_or_changes_something_at_import_stays_module_level(
    repo,  # noqa: F811
    text: str,
) -> None:
    root, base, m = repo
    _append(root, text)
    result = _select(root, m, base, commit(root))
    assert "module-level" in _rules(result) and _ids(result) == MODULE_LEVEL


def test_a_name_the_tree_already_mentions_stays_module_level(repo) -> None:  # noqa: F811
    """``getattr(x, "_hook", None)``, a base class's method: code was waiting for it."""
    root, base, m = repo
    write(root, {"flashinfer/other.py": 'def lonely():\n    return getattr(0, "_hook", 1)\n'})
    head = commit(root)
    _append(root, "\n\ndef _hook(x):\n    return x\n")
    result = _select(root, _at(m, head), head, commit(root))
    assert "module-level" in _rules(result) and _ids(result) == MODULE_LEVEL


CLASSES = """

class Plain:
    def kept(self):
        return 1


class Child(Plain):
    pass


class Torchy(torch.nn.Module):
    def kept(self):
        return 1
"""


@pytest.mark.parametrize(
    ("cls", "module_level"), [("Plain", False), ("Child", False), ("Torchy", True)]
)
def test_a_new_private_method_needs_a_class_whose_bases_are_known(
    repo,  # noqa: F811
    cls: str,
    module_level: bool,
) -> None:
    """A third-party base (torch.nn.Module) may look up private names of its own."""
    root, base, m = repo
    _append(root, CLASSES)
    head = commit(root)
    anchor = {"Plain": "class Plain:\n", "Child": "class Child(Plain):\n"}.get(
        cls, "class Torchy(torch.nn.Module):\n"
    )
    _edit(
        root,
        "flashinfer/mod.py",
        anchor,
        anchor + "    def _fresh_method(self):\n        return 2\n\n",
    )
    result = _select(root, _at(m, head), head, commit(root))
    assert ("module-level" in _rules(result)) is module_level
    assert ("new-private-function" in _rules(result)) is not module_level


def test_a_new_private_function_selects_the_tests_that_list_names(repo) -> None:  # noqa: F811
    """Code that lists a module's names (``vars()``, ``dir()``) sees the new one."""
    root, _, m = repo
    other = "def lonely():\n    return sorted(vars(object))\n"
    head, listing = _reader_test(root, m, other, "tests/test_a.py::test_lists")
    _append(root, HELPER)
    result = _select(root, listing, head, commit(root))
    assert _rules(result) == {"new-private-function"}
    assert _ids(result) == {"tests/test_a.py::test_lists"}


# -- bare strings -----------------------------------------------------------------------------


def test_bare_string_lines_tell_docstrings_from_attribute_docstrings() -> None:
    source = (
        '"""Mod."""\nX = 1\n"""X\'s doc."""\n\n\nclass C:\n    """C."""\n    y = 2\n    """y."""\n'
    )
    module, classes, inert = bare_string_lines(source)
    assert module == {1} and classes == {7} and inert == {3, 9}


def test_an_attribute_docstring_selects_nothing(repo) -> None:  # noqa: F811
    root, _, m = repo
    scene = 'LIMIT = 3\n"""How many calls."""\n'
    result = _after_scene(root, m, scene, "How many calls.", "How many calls at most.")
    assert result["mode"] == "none" and _rules(result) == {"attribute-docstring"}


def test_a_module_docstring_selects_the_importers_that_read_docstrings(repo) -> None:  # noqa: F811
    root, _, m = repo
    head, reader = _reader_test(root, m, "def lonely():\n    return lonely.__doc__\n")
    _edit(root, "flashinfer/mod.py", '"""A module."""', '"""A module, documented."""')
    result = _select(root, reader, head, commit(root))
    assert _rules(result) == {"docstring"}
    assert _ids(result) == {"tests/test_b.py::test_reads_doc"}


def test_a_docstring_word_in_a_comment_reads_no_docstring(repo) -> None:  # noqa: F811
    root, _, m = repo
    head, reader = _reader_test(root, m, "def lonely():\n    # not __doc__, nor help()\n")
    _edit(root, "flashinfer/mod.py", '"""A module."""', '"""A module, documented."""')
    result = _select(root, reader, head, commit(root))
    assert result["mode"] == "none" and _rules(result) == {"docstring"}


def test_a_bare_doc_reads_its_own_modules_docstring_only(repo) -> None:  # noqa: F811
    root, _, m = repo
    other = '"""Other."""\n\n\ndef lonely():\n    return __doc__\n'
    head, reader = _reader_test(root, m, other)
    _edit(root, "flashinfer/mod.py", '"""A module."""', '"""A module, documented."""')
    result = _select(root, reader, head, commit(root))
    assert result["mode"] == "none" and _rules(result) == {"docstring"}
    _edit(root, "flashinfer/other.py", '"""Other."""', '"""Other, documented."""')
    result = _select(root, reader, head, commit(root))
    assert _ids(result) == {"tests/test_b.py::test_reads_doc"}


def test_module_docstrings_leave_proven_readers_out_class_docstrings_keep_them() -> None:
    """A module docstring's readers leave out those proven never to see one; a class's
    docstring keeps every reader (a callable object's ``__doc__`` is its class's)."""
    readers = DocReaders(
        anyone=frozenset({*NEVER_READ_MODULE_DOCSTRINGS, "a.py::f"}),
        own=frozenset({"b.py::<module>"}),
    )
    assert readers.of_module("c.py") == {"a.py::f"}
    assert readers.of_module("b.py") == {"a.py::f", "b.py::<module>"}
    assert readers.of_class("c.py") == {*NEVER_READ_MODULE_DOCSTRINGS, "a.py::f"}


def test_every_reader_that_never_reads_a_module_docstring_is_proven() -> None:
    """Each entry still names code that reads docstrings (a stale entry fails), and the
    decorators that reach it reject a module, so no module's ``__doc__`` gets there."""
    import types

    from flashinfer import backend_requirement, flashinfer_experimental_api

    readers = docstring_readers(Path(__file__).resolve().parents[2], "HEAD")
    assert readers is not None
    assert set(NEVER_READ_MODULE_DOCSTRINGS) <= readers.anyone
    module = types.ModuleType("m", "A module.")
    with pytest.raises(TypeError, match="not a module"):
        backend_requirement({"a": lambda x, backend="auto": True})(module)
    with pytest.raises(TypeError, match="not module"):
        flashinfer_experimental_api(module)
