"""Lifecycle of experimental work: list every experimental API and backend with its metadata.

After :func:`flashinfer.load_all_apis` every module that defines public APIs has been
imported, so the API inventory (:func:`flashinfer.api_inventory`) holds every experimental API
and the op registry (:func:`flashinfer.gating.op_registry.registered_ops`) holds every API
with backends, experimental ones included.  :func:`experimental_features` joins the two into one
list of :class:`ExperimentalFeature` entries, each with its
:class:`~flashinfer.api_logging.ExperimentalInfo` (feature, owner, tracking issue,
graduation date).

``flashinfer experimental`` (and its alias ``python -m flashinfer.experimental``) prints
:func:`format_listing` of that list, or its :meth:`ExperimentalFeature.as_dict` entries as
JSON; ``scripts/pr_checks/experimental_lifecycle.py`` applies :func:`lifecycle_problems` to
the same list and fails CI on a problem.

The lifecycle rules are strict in CI and harmless at runtime: a marker never raises for its
metadata, whatever the values (it records what is malformed and warns once,
:class:`ExperimentalMetadataWarning`); the listing never fails on them
(:func:`checked_info`), and :func:`lifecycle_problems` reports them, with what is missing,
a date past due and a date further ahead than :data:`GRADUATION_HORIZON_MONTHS`.

:func:`load_api_modules` (defined in :mod:`flashinfer.api_modules`, re-exported here) is the
package's one way of importing its API modules.  Importing this module does not import
``flashinfer.experimental`` (nor any operator module); :func:`load_api_modules` does the
importing when asked.
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
    ExperimentalMetadataWarning,
    api_inventory,
    as_text,
    make_experimental_info,
    metadata_fields,
    metadata_names,
    missing_text,
    record_metadata,
    shown,
)

__all__ = [
    "GRADUATION_HORIZON_MONTHS",
    "ExperimentalFeature",
    "ExperimentalMetadataWarning",
    "checked_info",
    "graduation_limit",
    "experimental_features",
    "format_listing",
    "lifecycle_problems",
    "load_api_modules",
]


GRADUATION_HORIZON_MONTHS = 6
"""How far ahead a ``graduate_by`` date may be, in calendar months from the day the check
runs: the policy's "at most about six months away".  The one place this number is set; the
policy and the docs cite it by name."""


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
    """One experimental API or experimental backend, as found in the loaded modules.

    ``kind`` is ``"api"`` or ``"backend"``.  ``name`` is the API's qualified name, or for a
    backend ``"<api qualified name>[backend=<name>]"``.  ``module`` is where the code lives
    (the API's module, or the backend checker's module).  ``api`` and ``backend`` name the
    stable API and the backend for a backend entry (``backend`` is ``None`` for an API).
    """

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
    if isinstance(value, _dt.date):
        return value.isoformat()
    return as_text(value)


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
    if problems is None:
        earlier: tuple[str, ...] = ()
    elif isinstance(problems, (tuple, list)):
        earlier = tuple(as_text(p) for p in problems)
    else:
        earlier = (as_text(problems),)
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
    """Every experimental API and backend of the loaded modules, sorted by kind and name.

    ``load=True`` first imports the API modules (:func:`load_api_modules` with ``modules``).
    An API counts as experimental when it, or anything it wraps, carries
    ``is_experimental``; so ``@flashinfer_api`` stacked on ``@backend_requirement`` on an
    ``@flashinfer_experimental_api`` function is still found.
    """
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
    """What the policy's lifecycle rules say is wrong with ``features`` (empty: all good).

    Each feature needs an owner who is a person (``owner="@handle"``), a tracking issue (a
    positive number or a URL) and a ``graduate_by`` date (``YYYY-MM-DD``) that is neither
    before ``today`` (overdue: it names the three exits,
    :data:`~flashinfer.gating.history.THREE_EXITS`) nor after :func:`graduation_limit` of
    ``today``.  Malformed metadata the marker recorded (``ExperimentalInfo.problems``) is
    reported with its reason.
    """
    today = today or _dt.date.today()
    problems = []
    for f in features:
        info = checked_info(f.info)
        where = (
            f"experimental {as_text(f.kind)} {as_text(f.name)} "
            f"(feature {shown(info.feature)}, module {as_text(f.module)})"
        )
        problems += [f"{where}: {problem}" for problem in info.problems]
        problems += [f"{where}: {problem}" for problem in _missing(info)]
        late = _date_problem(info, today)
        if late is not None:
            problems.append(f"{where}: {late}")
    return problems


def _missing(info: ExperimentalInfo) -> list[str]:
    """What ``info`` lacks of the fields :class:`ExperimentalInfo` declares required (a
    malformed value was recorded as a problem, not as missing)."""
    found = []
    for f in metadata_fields():
        missing = missing_text(f)
        value = getattr(info, f.name)
        empty = value is None or (isinstance(value, str) and not value.strip())
        judged = any(p.startswith(f"{f.name} ") for p in info.problems)
        if missing is not None and empty and not judged:
            found.append(missing.format(horizon=GRADUATION_HORIZON_MONTHS))
    return found


def _date_problem(info: ExperimentalInfo, today: _dt.date) -> str | None:
    date = info.graduate_by
    if date is None:
        return None
    if date < today:
        return (
            f"past its graduation date {date.isoformat()} (today {today.isoformat()}); "
            f"{THREE_EXITS}"
        )
    limit = graduation_limit(today)
    if date > limit:
        return (
            f"graduate_by {date.isoformat()} is more than {GRADUATION_HORIZON_MONTHS} months "
            f"ahead (today {today.isoformat()}, latest allowed {limit.isoformat()}, "
            "flashinfer.gating.lifecycle.GRADUATION_HORIZON_MONTHS); set the date graduation is "
            "planned for within that horizon, and move it later in a reviewed change if needed"
        )
    return None


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
    """A plain-text table of ``features``: kind, name, feature, owner, issue, graduate by.

    Never fails on metadata: each cell is one line, and a long value is cut (the JSON
    view, :meth:`ExperimentalFeature.as_dict`, has it whole)."""
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
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    return "\n".join(lines)
