"""A spy on the stable ops' backends, shared by the tests of compiled calls: which backends
ran on real tensors, in order (``ran``, a fixture)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import torch
from autotuner_fakes import clean_tuner
from torch._subclasses.fake_tensor import is_fake
from torch.utils import _pytree as pytree

import flashinfer

OPS = ("rmsnorm", "mm")
"""The public stable ops the spy watches."""


class BackendSpy:
    """An op's implementation (a function or an autotuner runner) that records its
    backend's name in ``log`` on each run on real tensors (a fake derived from the torch
    backend runs it on fake tensors while tracing); anything else is the implementation's."""

    def __init__(self, name: str, target: Any, log: list[str]) -> None:
        self.name, self.target, self.log = name, target, log

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if torch.compiler.is_compiling():  # traced into a transparent call's graph
            return self.target(*args, **kwargs)
        leaves = pytree.tree_leaves((args, kwargs))
        if not any(isinstance(t, torch.Tensor) and (is_fake(t) or t.is_meta) for t in leaves):
            self.log.append(self.name)
        return self.target(*args, **kwargs)

    def __getattr__(self, attr: str) -> Any:
        return getattr(self.target, attr)


@pytest.fixture
def ran(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The backends that ran, in order: every stable op's implementations spied on, in a
    tuner with no results (so that no memo of the autotuner's router holds an unspied
    runner), timing as little as a test can."""
    log: list[str] = []
    for name in OPS:
        implementations = getattr(flashinfer, name).implementations
        for backend, run in list(implementations.items()):
            monkeypatch.setitem(implementations, backend, BackendSpy(backend, run, log))
    with clean_tuner(warmup=0, repeat=1):
        yield log
