"""What stable tests of general behaviour use instead of naming shipped experimental code.

The policy (flashinfer/experimental/README.md, "Testing"): stable tests read their backend
lists from the API and import nothing from ``flashinfer.experimental``, so that adding,
removing or graduating an experimental backend or API changes no stable test.  Two helpers:

- :func:`shipped_experimental` names the package's experimental backends and APIs as the
  listings print them, read from the ops and the API inventory (empty is a valid answer);
- :func:`throwaway` builds an op with a stable and an experimental backend and an
  experimental API, visible to the registry and the inventory for one test only, so that
  a listing or a gate can be asserted on something that is always there.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from typing import Any

import pytest

import flashinfer
import flashinfer.gating.op_registry as registry
import flashinfer.gating.records as api_records
from flashinfer.api_logging import api_inventory, flashinfer_experimental_api
from flashinfer.api_modules import API_MODULES
from flashinfer.backend_dispatch import backend_requirement, experimental_backend, registered_ops
from flashinfer.backend_families import TORCH, backend_family

SOON = (datetime.date.today() + datetime.timedelta(days=60)).isoformat()  # within the horizon
OWNER = "@throwaway-owner"


def shipped_experimental() -> tuple[set[str], set[str]]:
    """(backends as ``'<api key>[backend=<name>]'``, experimental APIs by qualified name) of
    the package's API modules, whatever ops the tests have built in this process."""
    flashinfer.load_all_apis()
    ops = [op for op in registered_ops() if op.__module__ in API_MODULES]
    backends = {f"{op.api_key}[backend={b}]" for op in ops for b in op.experimental_backends}
    apis = {
        record.name
        for record in api_inventory(experimental=True)
        if getattr(record.obj, "__module__", None) in API_MODULES
    }
    return backends, apis


@dataclass(frozen=True)
class Throwaway:
    op: Any  # backends "plain" (stable, runs) and "trial" (experimental, runs)
    api: Any  # an experimental API

    @property
    def backend_feature(self) -> str:
        return f"{self.op.api_key}[backend=trial]"

    @property
    def api_feature(self) -> str:
        return f"{self.api.__module__}.{self.api.__qualname__}"


def throwaway(monkeypatch: pytest.MonkeyPatch) -> Throwaway:
    """Build the throwaway op and API; ``monkeypatch`` takes them out of the registry and
    the inventory again when the test ends."""
    # Load the package's APIs first: one that registered into the copies would vanish with them.
    flashinfer.load_all_apis()
    monkeypatch.setattr(registry, "_registry", dict(registry._registry))
    monkeypatch.setattr(api_records, "inventory", dict(api_records.inventory))

    @backend_family(TORCH)
    def plain(x):
        return True

    @experimental_backend(owner=OWNER, tracking_issue=1, graduate_by=SOON)
    @backend_family(TORCH)
    def trial(x):
        return True

    @backend_requirement({"plain": plain, "trial": trial})
    def throwaway_op(x, backend="auto"):
        return x

    @flashinfer_experimental_api(owner=OWNER, tracking_issue=1, graduate_by=SOON)
    def throwaway_api(x):
        return x

    return Throwaway(throwaway_op, throwaway_api)
