"""Every experimental API and backend with its metadata (docs/api/lifecycle.rst): the
listing ``flashinfer experimental`` prints and the rules the lifecycle check applies.  Strict in
CI, harmless at runtime: neither fails on malformed metadata.  Imports no operator module.
"""

from __future__ import annotations

import calendar
import datetime as _dt
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from flashinfer.api_modules import load_api_modules
from flashinfer.gating.history import THREE_EXITS
from flashinfer.gating.op_registry import registered_ops
from flashinfer.gating.records import (
    ExperimentalInfo,
    api_inventory,
    as_text,
    make_experimental_info,
    metadata_fields,
    metadata_names,
    missing_text,
    record_metadata,
    shown,
)

GRADUATION_HORIZON_MONTHS = 6
"""How far ahead a ``graduate_by`` date may be, in calendar months (the policy's six)."""


def graduation_limit(today: _dt.date) -> _dt.date:
    """The latest ``graduate_by`` allowed on ``today``: :data:`GRADUATION_HORIZON_MONTHS`
    months later (the same day, or the month's last)."""
    months = today.month - 1 + GRADUATION_HORIZON_MONTHS
    year, month = today.year + months // 12, months % 12 + 1
    return today.replace(
        year=year, month=month, day=min(today.day, calendar.monthrange(year, month)[1])
    )


@dataclass(frozen=True)
class ExperimentalFeature:
    """An experimental API (``kind="api"``) or backend (``"backend"``, ``name`` is
    ``"<api>[backend=<name>]"``); ``module`` holds its code."""

    kind: str
    name: str
    module: str
    api: str
    backend: str | None
    info: ExperimentalInfo

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready view: the entry's place, then each metadata field (dates ISO)."""
        info = checked_info(self.info)
        return {
            "kind": as_text(self.kind),
            "name": as_text(self.name),
            "module": as_text(self.module),
            "api": as_text(self.api),
            "backend": None if self.backend is None else as_text(self.backend),
            **{name: _json_value(getattr(info, name)) for name in metadata_names()},
        }


def _json_value(value: object) -> str | None:
    if value is None or isinstance(value, str):
        return value
    return value.isoformat() if isinstance(value, _dt.date) else as_text(value)


def checked_info(info: ExperimentalInfo) -> ExperimentalInfo:
    """``info`` as a marker records it: one built by hand with other types is checked again,
    so the listing and the check never fail on it."""
    problems = info.problems
    given = {name: getattr(info, name) for name in metadata_names()}
    recorded, _ = record_metadata(given)
    # Kept as it is when recording gives back each very object: not re-judged.
    well_formed = (
        all(recorded[name] is value for name, value in given.items())
        and isinstance(problems, tuple)
        and all(isinstance(p, str) for p in problems)
    )
    if well_formed:
        return info
    listed = () if problems is None else problems
    earlier = tuple(map(as_text, listed if isinstance(listed, (tuple, list)) else (listed,)))
    again = make_experimental_info(**given)
    return replace(again, problems=tuple(dict.fromkeys(earlier + again.problems)))


def wrapper_chain(obj: Any) -> list[Any]:
    """``obj`` and what it wraps (``__wrapped__``), outermost first (cycle-safe)."""
    seen: list[Any] = []
    while obj is not None and all(obj is not s for s in seen):
        seen.append(obj)
        obj = getattr(obj, "__wrapped__", None)
    return seen


def experimental_info_of(obj: Any) -> ExperimentalInfo | None:
    """The metadata of ``obj`` or of what it wraps; ``None`` if it is stable."""
    for layer in wrapper_chain(obj):
        # ``is True``: BackendRequirementOp has an is_experimental_backend() *method*.
        if (
            getattr(layer, "is_experimental", None) is True
            or getattr(layer, "is_experimental_backend", None) is True
        ):
            info = getattr(layer, "experimental_info", None)
            if isinstance(info, ExperimentalInfo):
                return info
            feature = getattr(layer, "experimental_feature", None) or getattr(
                layer, "__qualname__", repr(layer)
            )
            return ExperimentalInfo(feature=as_text(feature))
    return None


def experimental_features(
    *, load: bool = True, modules: Iterable[str] | None = None
) -> list[ExperimentalFeature]:
    """Every experimental API and backend, sorted by kind and name (``load``: import the API
    modules first, :func:`load_api_modules`)."""
    if load:
        load_api_modules(modules)
    found: dict[tuple[str, str], ExperimentalFeature] = {}
    for record in api_inventory():
        info = experimental_info_of(record.obj)
        if info is None:
            continue
        module = getattr(record.obj, "__module__", None) or record.name.rpartition(".")[0]
        found[("api", record.name)] = ExperimentalFeature(
            "api", record.name, module, record.name, None, info
        )
    for op in registered_ops():
        api = f"{op.__module__}.{op.__qualname__}"
        info = experimental_info_of(op)
        if info is not None and ("api", api) not in found:
            found[("api", api)] = ExperimentalFeature("api", api, op.__module__, api, None, info)
        for backend in sorted(op.experimental_backends):
            checker = op.backend_checks[backend]
            info = experimental_info_of(checker) or ExperimentalInfo(feature=backend)
            name = f"{api}[backend={backend}]"
            module = getattr(checker, "__module__", "") or ""
            found[("backend", name)] = ExperimentalFeature(
                "backend", name, module, api, backend, info
            )
    return [found[k] for k in sorted(found)]


def lifecycle_problems(
    features: Iterable[ExperimentalFeature], today: _dt.date | None = None
) -> list[str]:
    """What the policy's rules find wrong with ``features`` (empty: all good): malformed or
    missing metadata, a ``graduate_by`` before ``today`` or after :func:`graduation_limit`."""
    today = today or _dt.date.today()
    problems = []
    for f in features:
        info = checked_info(f.info)
        where = (
            f"experimental {as_text(f.kind)} {as_text(f.name)} "
            f"(feature {shown(info.feature)}, module {as_text(f.module)})"
        )
        found = list(info.problems)
        for field in metadata_fields():  # missing (a malformed value is a problem already)
            missing, value = missing_text(field), getattr(info, field.name)
            empty = value is None or (isinstance(value, str) and not value.strip())
            judged = any(p.startswith(f"{field.name} ") for p in info.problems)
            if missing is not None and empty and not judged:
                found.append(missing.format(horizon=GRADUATION_HORIZON_MONTHS))
        date, limit = info.graduate_by, graduation_limit(today)
        if date is not None and date < today:
            found.append(
                f"past its graduation date {date.isoformat()} (today {today.isoformat()}); "
                f"{THREE_EXITS}"
            )
        elif date is not None and date > limit:
            found.append(
                f"graduate_by {date.isoformat()} is more than {GRADUATION_HORIZON_MONTHS} months "
                f"ahead (today {today.isoformat()}, latest allowed {limit.isoformat()}, "
                "flashinfer.gating.lifecycle.GRADUATION_HORIZON_MONTHS); set the date graduation "
                "is planned for within that horizon, and move it later in a reviewed change if "
                "needed"
            )
        problems += [f"{where}: {problem}" for problem in found]
    return problems


_CELL_MAX = 60  # of a metadata value, a line of the listing shows this much (JSON: all)


def _cell(value: str | None, cut: bool = True) -> str:
    if value is None:
        return "-"
    text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in value)
    if cut and len(text) > _CELL_MAX:
        text = text[: _CELL_MAX - 3] + "..."
    return text or "-"


def format_listing(features: Sequence[ExperimentalFeature]) -> str:
    """A plain-text table of ``features``: kind, name, then each metadata field (one line
    each, long values cut)."""
    if not features:
        return "No experimental APIs or backends are defined."
    names = metadata_names()
    header = ("KIND", "NAME", *(name.upper().replace("_", " ") for name in names))
    rows = [header]
    for doc in (f.as_dict() for f in features):
        rows.append(
            (_cell(doc["kind"], False), _cell(doc["name"], False), *map(_cell, map(doc.get, names)))
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    return "\n".join("  ".join(map(str.ljust, r, widths)).rstrip() for r in rows)
