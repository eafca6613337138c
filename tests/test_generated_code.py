"""Generated code reads like written code: tracebacks, pdb and inspect show its source.

Every kind of code the package generates (the dispatcher's fast path and its
``skip_check=True, backend="auto"`` variant, the experimental API wrapper) is compiled by
``flashinfer.codegen.compiler.compile_function``, which
registers the source in ``linecache`` under a filename of its own and names the function
for its API and role.  Each kind here has an exception raised through it; the tests read
the generated frame as a user would meet it.
"""

from __future__ import annotations

import ast
import gc
import inspect
import io
import itertools
import linecache
import pdb
import re
import traceback
import types
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import pytest

import flashinfer
from flashinfer.api_logging import flashinfer_experimental_api
from flashinfer.backend_dispatch import backend_requirement
from flashinfer.codegen.compiler import compile_function

PACKAGE = Path(flashinfer.__file__).parent
GENERATED = "<flashinfer generated "
_ids = itertools.count()


class Raised(NamedTuple):
    """An exception raised through one kind of generated code, and what its frame shows."""

    error: BaseException
    depth: int  # which frame of generated code in the traceback (0: the outermost)
    filename_start: str  # how the frame's filename starts
    function: str  # the name the frame shows
    line: str  # a piece of the generated line the frame stops at


def _unique(func: Callable[..., Any]) -> Callable[..., Any]:
    """Give ``func`` a name no other test's API has."""
    func.__name__ = func.__qualname__ = f"{func.__name__}_{next(_ids)}"
    return func


def _catch(call: Callable[[], Any]) -> BaseException:
    with pytest.raises(RuntimeError) as info:
        call()
    return info.value


def _dispatched_op() -> Any:
    def check(x, backend="auto"):
        return True

    @_unique
    def mm(x, backend="auto"):
        raise RuntimeError("the body failed")

    return backend_requirement({"a": check})(mm)


def through_dispatcher() -> Raised:
    """A named backend: the public function runs its checks and calls the body itself."""
    op = _dispatched_op()
    error = _catch(lambda: op(1, backend="a"))
    filename = f"{GENERATED}dispatcher for {op.api_key}"
    return Raised(error, 0, filename, f"{op.__name__}_dispatcher", "return _func(x, backend)")


def through_auto() -> Raised:
    """An "auto" call (a verdict-cache miss, then a hit): the public function decides
    and calls the body itself."""
    op = _dispatched_op()
    _catch(lambda: op(1))
    error = _catch(lambda: op(1))
    filename = f"{GENERATED}dispatcher for {op.api_key}"
    return Raised(error, 0, filename, f"{op.__name__}_dispatcher", "return _func(x, backend)")


def through_experimental_wrapper() -> Raised:
    @_unique
    def preview(x):
        raise RuntimeError("the body failed")

    marked = flashinfer_experimental_api(preview)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        error = _catch(lambda: marked(1))
    api = f"{__name__}.{preview.__qualname__}"
    filename = f"{GENERATED}experimental API wrapper for {api}"
    return Raised(error, 0, filename, f"{preview.__name__}_experimental_API_wrapper", "_func(x)")


KINDS = {
    "dispatcher": through_dispatcher,
    "auto": through_auto,
    "experimental API wrapper": through_experimental_wrapper,
}


def generated_frame(raised: Raised) -> tuple[traceback.FrameSummary, types.FrameType]:
    """The traceback's frame of the expected generated code (code without a file: its
    filename is ``<...>``), as printed and as a frame."""
    found = []
    tb = raised.error.__traceback__
    while tb is not None:
        filename = tb.tb_frame.f_code.co_filename
        if filename.startswith("<") and filename.endswith(">"):
            found.append(tb)
        tb = tb.tb_next
    tb = found[raised.depth]
    (summary,) = traceback.extract_tb(tb, limit=1)
    return summary, tb.tb_frame


@pytest.fixture(params=list(KINDS))
def raised(request: pytest.FixtureRequest) -> Raised:
    return KINDS[request.param]()


def test_traceback_shows_the_generated_line_and_the_role(raised: Raised):
    summary, frame = generated_frame(raised)
    assert summary.line and raised.line in summary.line
    source = linecache.getlines(frame.f_code.co_filename)
    assert summary.line == source[summary.lineno - 1].strip()
    assert summary.name == raised.function
    assert summary.filename.startswith(raised.filename_start)
    printed = "".join(traceback.format_exception(raised.error))
    assert (
        f'File "{summary.filename}", line {summary.lineno}, in {raised.function}\n'
        f"    {summary.line}\n" in printed
    )
    # Frames of generated code are flashinfer's own when a warning looks for the user's line.
    assert frame.f_globals["__name__"].startswith("flashinfer.")


def test_pdb_lists_and_inspect_reads_the_generated_source(raised: Raised):
    summary, frame = generated_frame(raised)
    code = frame.f_code
    source = inspect.getsource(code)
    assert source.startswith(("def ", "async def "))
    assert f" {code.co_name}(" in source.splitlines()[0]
    assert "".join(linecache.getlines(code.co_filename)) == source

    # pdb post mortem, moved up to the generated frame: `list` shows its lines.  (The
    # commands run one by one: `quit` would also remove the test run's trace function.)
    tb = raised.error.__traceback__
    frames = [f for f, _ in traceback.walk_tb(tb)]
    out = io.StringIO()
    debugger = pdb.Pdb(stdin=io.StringIO(), stdout=out, readrc=False)
    debugger.setup(None, tb)
    try:
        for _ in range(len(frames) - 1 - frames.index(frame)):
            debugger.onecmd("up")
        debugger.onecmd("list")
    finally:
        debugger.forget()
    listing = out.getvalue()
    current = linecache.getline(code.co_filename, summary.lineno).rstrip()
    # pdb names the traceback's line and lists the source around it (not only "[EOF]"),
    # marking that line: "->", or ">>" (the exception's line) where a ``finally`` run on the
    # way out (which gives a nested call's caller its candidates back) moved the frame on.
    assert f"({summary.lineno}){code.co_name}()" in listing
    assert re.search(rf"^ *{summary.lineno}  (->|>>)\t{re.escape(current)}$", listing, re.M)


def test_the_source_outlives_linecache_checkcache(raised: Raised):
    _, frame = generated_frame(raised)
    filename = frame.f_code.co_filename
    before = linecache.getlines(filename)
    linecache.checkcache()
    linecache.checkcache(filename)
    assert before and linecache.getlines(filename) == before


def test_user_facing_functions_look_like_the_api_and_keep_the_role_on_the_code():
    op = _dispatched_op()
    assert op.__name__.startswith("mm_") and op.__qualname__ == op.__wrapped__.__qualname__
    assert op.__code__.co_name == f"{op.__name__}_dispatcher"
    assert "".join(linecache.getlines(op.__code__.co_filename)) == op.__generated_source__

    @_unique
    def preview(x):
        return x

    marked = flashinfer_experimental_api(preview)
    assert (marked.__name__, marked.__qualname__) == (preview.__name__, preview.__qualname__)
    assert marked.__code__.co_name == f"{preview.__name__}_experimental_API_wrapper"
    assert inspect.getsource(marked.__code__) == marked.__generated_source__
    assert inspect.getsource(marked) == inspect.getsource(preview)  # follows __wrapped__


def test_apis_of_the_same_name_get_files_of_their_own():
    """Two ops of one qualified name (a redefinition): each traceback must show its own
    source, so neither may take the other's linecache entry."""

    def check(x, backend="auto"):
        return True

    def first(x, backend="auto"):
        return x

    def second(x, y, backend="auto"):
        return x

    second.__name__ = second.__qualname__ = first.__qualname__
    ops = [backend_requirement({"a": check})(f) for f in (first, second)]
    names = [op.__code__.co_filename for op in ops]
    assert names[0] != names[1]
    assert names[1] == names[0][:-1] + " #2>"
    for op in ops:
        assert "".join(linecache.getlines(op.__code__.co_filename)) == op.__generated_source__


def test_the_source_lives_as_long_as_the_code():
    """A regenerated router or a redefined op leaves no source behind in linecache, but a
    traceback that still shows the code keeps it."""
    api = f"{__name__}.lifetime_{next(_ids)}"
    fn = compile_function("", ["    return 1"], {}, role="test", api=api)
    filename = fn.__code__.co_filename
    name = f"{api.rpartition('.')[2]}_test"
    assert linecache.getlines(filename) == [f"def {name}():\n", "    return 1\n"]
    del fn
    gc.collect()
    assert filename not in linecache.cache

    failing = compile_function("", ["    raise RuntimeError"], {}, role="test", api=api)
    error = _catch(failing)
    filename = failing.__code__.co_filename
    del failing
    gc.collect()
    assert "raise RuntimeError" in "".join(traceback.format_exception(error))
    del error
    gc.collect()
    assert filename not in linecache.cache


def test_names_the_generated_code_uses_are_never_taken():
    """The function is defined under a name the namespace does not hold already (its code
    may use that name), and the namespace does not keep it."""
    ns: dict[str, Any] = {"mm_test": "taken"}
    fn = compile_function("", ["    return mm_test"], ns, role="test", api="pkg.mm")
    assert fn() == "taken" and fn.__name__ == "mm_test_2"
    assert ns["mm_test"] == "taken" and "mm_test_2" not in ns


def test_compile_function_is_the_only_exec_in_the_package():
    """Every generated function goes through codegen.compiler.compile_function, so all of them
    get their source registered and their role named."""
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == PACKAGE / "codegen" / "compiler.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in ("exec", "eval", "compile")
            ):
                offenders.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {node.func.id}(")
    assert offenders == []
