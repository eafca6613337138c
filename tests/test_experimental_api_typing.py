"""A type checker sees through ``@flashinfer_experimental_api`` (``mypy --strict``).

The marker returns what it was given, in type as at run time: a function keeps its
parameters, return type and overloads, a class stays the class, a staticmethod or
classmethod stays one, and anything else is refused.  mypy runs once, in a subprocess, on small
user scripts in a temporary folder and finds ``flashinfer`` as an installed package
(``PYTHONPATH`` at the repository root; ``py.typed`` makes it checkable), as in
tests/test_typing.py.
"""

from __future__ import annotations

import textwrap

import pytest
from mypy_runner import run_mypy_on

# Definitions shared by both scripts: a user's own experimental APIs of every kind.
USER_APIS = """
    import asyncio
    from typing import overload

    import torch
    import flashinfer
    from flashinfer import experimental_api, flashinfer_experimental_api


    @flashinfer_experimental_api(feature="scale", owner="@me", tracking_issue=1)
    def scale(x: torch.Tensor, factor: float = 2.0) -> torch.Tensor:
        return x * factor


    @experimental_api
    class Widget:
        def __init__(self, size: int) -> None:
            self.size = size


    @overload
    def pick(x: int) -> int: ...
    @overload
    def pick(x: str) -> str: ...
    def pick(x: int | str) -> int | str:
        return x


    picked = flashinfer_experimental_api(pick)


    class Thing:
        @flashinfer_experimental_api
        @staticmethod
        def static(x: int) -> int:
            return x

        @flashinfer_experimental_api
        @classmethod
        def make(cls, x: int) -> str:
            return cls.__name__ * x

        @flashinfer_experimental_api
        async def fetch(self, x: int) -> int:
            return x
"""

RIGHT = (
    USER_APIS
    + """

    def use() -> None:
        x, r, w = torch.randn(4, 64), torch.randn(4, 64), torch.ones(64)
        flashinfer.fused_add_rmsnorm(x, r, w)
        flashinfer.fused_add_rmsnorm(x, r, w, eps=1e-5)
        y: torch.Tensor = scale(x, 3.0)
        widget: Widget = Widget(3)
        n: int = picked(1)
        s: str = picked("a")
        k: int = Thing.static(1) + Thing().static(2)
        name: str = Thing.make(2)
        got: int = asyncio.run(Thing().fetch(1))
        print(y, widget.size, n, s, k, name, got)
"""
)

WRONG_CALLS = """

    def use() -> None:
        x, r, w = torch.randn(4, 64), torch.randn(4, 64), torch.ones(64)
        flashinfer.fused_add_rmsnorm(x, "not a tensor", w)
        out: torch.Tensor = flashinfer.fused_add_rmsnorm(x, r, w)
        flashinfer.fused_add_rmsnorm(x, r, w, epsilon=1e-5)
        scale(x, "3")
        Widget("big")
        n: str = picked(1)
        Thing.static("a")
        asyncio.run(Thing().fetch("a"))
    flashinfer_experimental_api(42)
"""

# (lines after "def use" in WRONG_CALLS, error code, words the message must contain)
EXPECTED = [
    (2, "arg-type", ('Argument 2 to "fused_add_rmsnorm"', '"str"', '"Tensor"')),
    (3, "assignment", ('(expression has type "None", variable has type "Tensor")',)),
    (4, "call-arg", ('Unexpected keyword argument "epsilon" for "fused_add_rmsnorm"',)),
    (5, "arg-type", ('Argument 2 to "scale"', '"str"', '"float"')),
    (6, "arg-type", ('Argument 1 to "Widget"', '"str"', '"int"')),
    (7, "assignment", ('(expression has type "int", variable has type "str")',)),
    (8, "arg-type", ('Argument 1 to "static" of "Thing"', '"str"', '"int"')),
    (9, "arg-type", ('Argument 1 to "fetch" of "Thing"', '"str"', '"int"')),
    (10, "call-overload", ('No overload variant of "flashinfer_experimental_api"', '"int"')),
]


REVEAL = (
    USER_APIS
    + """
    reveal_type(flashinfer.fused_add_rmsnorm)
    reveal_type(Widget)
    reveal_type(picked)
    reveal_type(Thing.fetch)
"""
)


@pytest.fixture(scope="module")
def checked(tmp_path_factory, mypy_cache) -> dict[str, list[str]]:
    """mypy's lines for each script: the three checked in one run, each a module of its own."""
    wrong = textwrap.dedent(USER_APIS).lstrip() + textwrap.dedent(WRONG_CALLS)
    sources = {"right": RIGHT, "wrong": wrong, "user": REVEAL}
    return run_mypy_on(sources, tmp_path_factory.mktemp("typing"), mypy_cache)


def test_correct_uses_of_experimental_apis_are_clean(checked):
    assert checked["right"] == []


def test_wrong_calls_of_experimental_apis_are_reported(checked):
    source = textwrap.dedent(USER_APIS).lstrip() + textwrap.dedent(WRONG_CALLS)
    first = source.splitlines().index("def use() -> None:") + 1  # its line number
    lines = checked["wrong"]
    errors = [line for line in lines if ": error: " in line]
    remaining = list(errors)
    for offset, code, words in EXPECTED:
        prefix = f"wrong.py:{first + offset}: error: "
        match = [
            e
            for e in remaining
            if e.startswith(prefix) and e.endswith(f"[{code}]") and all(w in e for w in words)
        ]
        assert match, f"no {code} error at {prefix!r} with {words}; mypy said:\n" + "\n".join(lines)
        remaining.remove(match[0])
    assert remaining == [], "unexpected errors:\n" + "\n".join(remaining)


def test_marked_objects_keep_their_exact_types(checked):
    notes = [line.split("Revealed type is ")[1] for line in checked["user"]]
    assert notes == [
        '"def (input: torch._tensor.Tensor, residual: torch._tensor.Tensor, '
        'weight: torch._tensor.Tensor, eps: float =)"',
        '"def (size: int) -> user.Widget"',
        '"Overload(def (x: int) -> int, def (x: str) -> str)"',
        '"def (self: user.Thing, x: int) -> typing.Coroutine[Any, Any, int]"',
    ]
