"""One selection (issue 44, item 1): the eager call, ``op.explain`` and the compiled route
choose the same backend, whatever the state the choice reads.

The ops (``choice_ops``) compute a different multiple of their input per backend, so a
result says which backend ran.  Each state below (the experimental gate off and on, a
``use_backends`` restriction, a checker refusing, a size that changes the checker's answer)
is asked three ways: the eager call, ``op.explain`` and ``torch.compile(fullgraph=False)``
of a function calling the op; all three must name the same backend.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, nullcontext

import choice_ops
import pytest
import torch

import flashinfer
from flashinfer.api_logging import ALLOW_EXPERIMENTAL_AUTO_BACKENDS_ENV as GATE


@pytest.fixture(autouse=True)
def _fresh(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    choice_ops.fresh_state(monkeypatch)
    yield
    torch._dynamo.reset()


def _three_ways(
    op: Callable[..., torch.Tensor],
    x: torch.Tensor,
    block: Callable[[], AbstractContextManager[object]] = nullcontext,
) -> tuple[str, str | None, str]:
    """(eager, explain, compiled): the backend each way chooses for ``op(x)`` in ``block``."""
    with block():
        eager = choice_ops.ran(op(x))
        explained = op.explain(x).chosen  # type: ignore[attr-defined]

    def caller(t: torch.Tensor) -> torch.Tensor:
        with block():
            return op(t) + 0

    compiled = torch.compile(caller, backend="eager", fullgraph=False)
    with block():
        ran = choice_ops.ran(compiled(x))
    return eager, explained, ran


STATES: dict[str, tuple[Callable[..., torch.Tensor], dict[str, str], Callable[[], object], int]] = {
    # op, environment, block, rows
    "plain: the checker of fast refuses (variable unset)": (choice_ops.plain, {}, nullcontext, 4),
    "plain: fast accepted, the heuristic puts it first": (
        choice_ops.plain,
        {choice_ops.FAST_ENV: "1"},
        nullcontext,
        4,
    ),
    "experimental, gate off": (choice_ops.with_experimental, {}, nullcontext, 4),
    "experimental, gate on": (choice_ops.with_experimental, {GATE: "1"}, nullcontext, 4),
    "use_backends restricts to ref": (
        choice_ops.plain,
        {choice_ops.FAST_ENV: "1"},
        lambda: flashinfer.use_backends({choice_ops.plain: ["ref"]}),
        4,
    ),
    "sized: too few rows for fast": (choice_ops.sized, {}, nullcontext, 4),
    "sized: enough rows for fast": (choice_ops.sized, {}, nullcontext, 64),
    "upstream-style declaration": (choice_ops.upstream_style, {}, nullcontext, 4),
}


@pytest.mark.parametrize("state", list(STATES))
def test_eager_explain_and_compiled_choose_the_same_backend(
    state: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    op, env, block, rows = STATES[state]
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.warns() if GATE in env else nullcontext():
        eager, explained, compiled = _three_ways(op, torch.ones(rows, 8), block)  # type: ignore[arg-type]
    assert eager == explained == compiled, (eager, explained, compiled)


def test_the_states_choose_differently() -> None:
    """The states above are not all one answer: the test could tell them apart."""
    assert choice_ops.ran(choice_ops.sized(torch.ones(4, 8))) == "ref"
    assert choice_ops.ran(choice_ops.sized(torch.ones(64, 8))) == "fast"
