"""Ops declared through the public API for the compiled-choice tests (an importable module:
a transparent call needs its API's globals in ``sys.modules``).  Each backend computes a
different multiple of its input, so a result says which backend ran."""

from __future__ import annotations

import os
import sys
from typing import Any

import torch

from flashinfer import Backend, backend_requirement, flashinfer_api
from flashinfer.backend_dispatch import experimental_backend, reads_environment, reads_tensor_data
from flashinfer.backend_families import TORCH, backend_family
from flashinfer.utils import supported_compute_capability

FACTORS = {"ref": 3.0, "fast": 2.0, "exp": 5.0}
FAST_ENV = "FLASHINFER_TEST_CHOICE_FAST"
PREFERRED: list[str] = ["fast", "ref"]
"""What the data-reading heuristic ranks first: global state no guard can see."""


@backend_family(TORCH)
def check_ref(x: torch.Tensor, backend: str = "auto") -> bool:
    return True


@reads_environment(FAST_ENV)
@backend_family(TORCH)
def check_fast(x: torch.Tensor, backend: str = "auto") -> bool:
    if os.environ.get(FAST_ENV) != "1":
        raise ValueError(f"fast runs only with {FAST_ENV}=1")
    return True


@experimental_backend(owner="@tester", tracking_issue=1, graduate_by="2027-01-31")
@backend_family(TORCH)
def check_exp(x: torch.Tensor, backend: str = "auto") -> bool:
    return True


def run_ref(x: torch.Tensor) -> torch.Tensor:
    return x * FACTORS["ref"]


def run_fast(x: torch.Tensor) -> torch.Tensor:
    return x * FACTORS["fast"]


def run_exp(x: torch.Tensor) -> torch.Tensor:
    return x * FACTORS["exp"]


def exp_first(suitable: list[str], x: torch.Tensor, backend: str = "auto") -> list[str]:
    order = ("exp", "fast", "ref")
    return sorted(suitable, key=order.index)


@reads_tensor_data
def global_order(suitable: list[str], x: torch.Tensor, backend: str = "auto") -> list[str]:
    return sorted(suitable, key=PREFERRED.index)


STABLE = [
    Backend("fast", check=check_fast, run=run_fast),
    Backend("ref", check=check_ref, run=run_ref),
]
EXPERIMENTAL = Backend("exp", check=check_exp, run=run_exp)
ALWAYS = [
    Backend("fast", check=check_ref, run=run_fast),
    Backend("ref", check=check_ref, run=run_ref),
]


@backend_requirement(STABLE, heuristic_func=exp_first)
def plain(x: torch.Tensor, *, backend: str = "auto") -> torch.Tensor:
    """Two stable torch-family backends."""
    if backend == "auto":
        backend = plain.suitable_auto_backends[0]
    return plain.implementations[backend](x)


@backend_requirement([*STABLE, EXPERIMENTAL], heuristic_func=exp_first)
def with_experimental(x: torch.Tensor, *, backend: str = "auto") -> torch.Tensor:
    """``plain`` and an experimental backend that the heuristic ranks first."""
    if backend == "auto":
        backend = with_experimental.suitable_auto_backends[0]
    return with_experimental.implementations[backend](x)


@backend_requirement(ALWAYS, heuristic_func=global_order)
def data_ranked(x: torch.Tensor, *, backend: str = "auto") -> torch.Tensor:
    """Ranked by a heuristic that reads global state (marked ``reads_tensor_data``)."""
    if backend == "auto":
        backend = data_ranked.suitable_auto_backends[0]
    return data_ranked.implementations[backend](x)


@supported_compute_capability([80, 90, 100], cpu=True)
def upstream_fast(x: torch.Tensor, backend: str = "auto") -> bool:
    return True


@supported_compute_capability([80, 90, 100], cpu=True)
def upstream_ref(x: torch.Tensor, backend: str = "auto") -> bool:
    return True


@backend_requirement({"fast": upstream_fast, "ref": upstream_ref})
@flashinfer_api
def upstream_style(x: torch.Tensor, backend: str = "auto") -> torch.Tensor:
    """Declared as upstream declares: a dict of checkers of no family, no fake, and the
    body picks its backend itself."""
    if backend == "auto":
        backend = upstream_style.suitable_auto_backends[0]
    return x * FACTORS[backend]


@backend_family(TORCH)
def check_fast_if_tall(x: torch.Tensor, backend: str = "auto") -> bool:
    if x.shape[0] < 32:
        raise ValueError("fast needs at least 32 rows")
    return True


@backend_requirement(
    [
        Backend("fast", check=check_fast_if_tall, run=run_fast),
        Backend("ref", check=check_ref, run=run_ref),
    ]
)
def sized(x: torch.Tensor, *, backend: str = "auto") -> torch.Tensor:
    """Its choice depends on a size: "fast" from 32 rows, "ref" below."""
    if backend == "auto":
        backend = sized.suitable_auto_backends[0]
    return sized.implementations[backend](x)


def fresh_state(monkeypatch: Any) -> None:
    """Each test starts with no compiled graphs, the gate off, ``fast`` allowed and
    preferred, and no warning given yet."""
    import flashinfer

    torch._dynamo.reset()
    monkeypatch.delenv("FLASHINFER_ALLOW_EXPERIMENTAL_AUTO_BACKENDS", raising=False)
    monkeypatch.delenv(FAST_ENV, raising=False)
    monkeypatch.setattr(sys.modules[__name__], "PREFERRED", ["fast", "ref"])
    flashinfer.reset_experimental_warnings()


def ran(result: torch.Tensor) -> str:
    """Which backend computed ``result`` from ones."""
    (value,) = set(result.flatten().tolist())
    return {v: k for k, v in FACTORS.items()}[value]
