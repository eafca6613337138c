"""Lifecycle of experimental work: every experimental API and backend with its metadata.

:func:`experimental_features` joins the API inventory and the op registry (after
:func:`load_api_modules`) into one list of :class:`ExperimentalFeature`.  ``flashinfer
experimental`` prints :func:`format_listing` of it (or the :meth:`ExperimentalFeature.as_dict`
entries as JSON); the lifecycle check fails CI on :func:`lifecycle_problems`.  The rules are
strict in CI and harmless at runtime: a marker never raises for its metadata, and the listing
never fails on it (:func:`checked_info`).  Importing this module imports no operator module.
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
"""How far ahead a ``graduate_by`` date may be, in calendar months from the day the check
runs (the policy's "at most about six months away"; the docs cite it by name)."""


def graduation_limit(today: _dt.date) -> _dt.date:
    """The latest ``graduate_by`` allowed on ``today``: :data:`GRADUATION_HORIZON_MONTHS`
    calendar months later (the same day of the month, or the month's last day)."""
    months = today.month - 1 + GRADUATION_HORIZON_MONTHS
    year, month = today.year + months // 12, months % 12 + 1
    return today.replace(
        year=year, month=month, day=min(today.day, calendar.monthrange(year, month)[1])
    )


@dataclass(frozen=True)
class ExperimentalFeature:
    """One experimental API (``kind="api"``, ``backend=None``) or backend (``"backend"``):
    ``name`` is the API's qualified name, or ``"<api>[backend=<name>]"``; ``module`` where
    its code lives (the API's module, or the backend checker's)."""

    kind: str
    name: str
    module: str
    api: str
    backend: str | None
    info: ExperimentalInfo

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready view (texts, and dates as ``YYYY-MM-DD``), whatever the metadata:
        the entry's place, then each metadata field of :class:`ExperimentalInfo`."""
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
    """A recorded metadata value as JSON text: a date as ``YYYY-MM-DD``."""
    if value is None or isinstance(value, str):
        return value
    return value.isoformat() if isinstance(value, _dt.date) else as_text(value)


def checked_info(info: ExperimentalInfo) -> ExperimentalInfo:
    """``info`` as the markers record metadata: texts, a ``datetime.date`` or ``None``, and
    the problems as phrases.  An :class:`ExperimentalInfo` built by hand with values of
    other types is checked again as a marker would check them (what is malformed joins its
    problems), so that the listing and the lifecycle check never fail on it."""
    problems = info.problems
    given = {name: getattr(info, name) for name in metadata_names()}
    recorded, _ = record_metadata(given)
    # Recorded as a marker records (each value what recording it gives back, the very
    # object): kept as it is, so a hand-built info of well-typed values is not re-judged.
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
    """``obj`` and everything it wraps (``__wrapped__``), outermost first (cycle-safe)."""
    seen: list[Any] = []
    while obj is not None and all(obj is not s for s in seen):
        seen.append(obj)
        obj = getattr(obj, "__wrapped__", None)
    return seen


def experimental_info_of(obj: Any) -> ExperimentalInfo | None:
    """The lifecycle metadata of ``obj`` or of anything it wraps; ``None`` if it is stable."""
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
    """Every experimental API and backend of the loaded modules, sorted by kind and name
    (``load=True`` first imports the API modules, :func:`load_api_modules`).  An API counts
    as experimental when it, or anything it wraps, carries ``is_experimental``."""
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
    """What the policy's lifecycle rules say is wrong with ``features`` (empty: all good):
    malformed metadata the marker recorded, and a missing owner (a person's ``@handle``),
    tracking issue or ``graduate_by``; a date before ``today`` (naming the three exits) or
    after :func:`graduation_limit` of ``today``."""
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


# How much of a metadata value a line of the listing shows (the JSON view has it all).
_CELL_MAX = 60


def _cell(value: str | None, cut: bool = True) -> str:
    """One cell of the listing: one line (control characters escaped), cut when long."""
    if value is None:
        return "-"
    text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in value)
    if cut and len(text) > _CELL_MAX:
        text = text[: _CELL_MAX - 3] + "..."
    return text or "-"


def format_listing(features: Sequence[ExperimentalFeature]) -> str:
    """A plain-text table of ``features``: kind, name, then each metadata field.  Never fails
    on metadata: each cell is one line, a long value cut (the JSON view has it whole)."""
    if not features:
        return "No experimental APIs or backends are defined."
    names = metadata_names()
    header = ("KIND", "NAME", *(name.upper().replace("_", " ") for name in names))
    rows = [header]
    for f in features:
        info = checked_info(f.info)
        rows.append(
            (
                _cell(as_text(f.kind), cut=False),
                _cell(as_text(f.name), cut=False),
                *(_cell(_json_value(getattr(info, name))) for name in names),
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    return "\n".join("  ".join(map(str.ljust, r, widths)).rstrip() for r in rows)
