"""What the markers record: lifecycle metadata and the API inventory.

:class:`ExperimentalInfo` is the validated metadata of an experimental API or backend;
:func:`record_api` adds a marked API to the inventory that :func:`api_inventory` lists.
Public names are re-exported by ``flashinfer.api_logging``.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass
from typing import Any

__all__ = [
    "APIRecord",
    "ExperimentalInfo",
    "api_inventory",
    "inventory",
    "make_experimental_info",
    "qualified_name",
    "record_api",
]


@dataclass(frozen=True)
class ExperimentalInfo:
    """Lifecycle metadata of an experimental API or backend."""

    feature: str
    owner: str | None = None
    tracking_issue: str | None = None
    graduate_by: _dt.date | None = None


def _parse_graduate_by(value: str | _dt.date | None) -> _dt.date | None:
    if value is None or isinstance(value, _dt.date):
        return value
    try:
        return _dt.date.fromisoformat(value)
    except (TypeError, ValueError):
        raise ValueError(f"graduate_by must be a date written YYYY-MM-DD, got {value!r}") from None


def make_experimental_info(
    feature: str,
    owner: str | None,
    tracking_issue: str | int | None,
    graduate_by: str | _dt.date | None,
) -> ExperimentalInfo:
    """Validate lifecycle metadata given to a marker (shared by API and backend markers)."""
    return ExperimentalInfo(
        feature=feature,
        owner=owner,
        tracking_issue=None if tracking_issue is None else str(tracking_issue),
        graduate_by=_parse_graduate_by(graduate_by),
    )


@dataclass(frozen=True)
class APIRecord:
    """One entry of the API inventory."""

    name: str
    obj: Any

    @property
    def experimental(self) -> bool:
        # Read at listing time, so the two markers compose in either order.
        return bool(getattr(self.obj, "is_experimental", False))

    @property
    def info(self) -> ExperimentalInfo | None:
        return getattr(self.obj, "experimental_info", None)


inventory: dict[str, APIRecord] = {}


def qualified_name(obj: Any) -> str:
    return f"{obj.__module__}.{obj.__qualname__}"


def record_api(obj: Any) -> None:
    name = qualified_name(obj)
    inventory[name] = APIRecord(name, obj)


def api_inventory(*, experimental: bool | None = None) -> list[APIRecord]:
    """Every API recorded by the markers, sorted by name.

    ``experimental=True`` / ``False`` keeps only experimental / stable APIs.  Only the
    modules imported so far have recorded theirs; ``flashinfer.load_all_apis()`` imports
    every module of the package that defines APIs.
    """
    records = sorted(inventory.values(), key=lambda r: r.name)
    if experimental is None:
        return records
    return [r for r in records if r.experimental == experimental]
