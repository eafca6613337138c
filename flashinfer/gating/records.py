"""What the markers record: lifecycle metadata (:class:`ExperimentalInfo`) and the API
inventory (:func:`api_inventory`).  Malformed metadata never stops an import: it is recorded
in ``problems``, warned about once and fails the lifecycle check (docs/experimental.rst)."""

from __future__ import annotations

import datetime as _dt
import difflib
import inspect
import re
import warnings
from collections.abc import Mapping
from dataclasses import Field, dataclass, field, fields
from typing import Any

TEAM_HANDLE_PREFIX = "flashinfer-"  # this project's team and bot accounts: not a person
EXPERIMENTAL_PACKAGE = "flashinfer.experimental"
_LOGIN_CHARACTERS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-")
_ISSUE_DIGITS_MAX = 10  # GitHub numbers issues with 32-bit integers
_SHOWN_MAX = 60  # how much of a value a message about it quotes


def shown(value: object) -> str:
    """``repr(value)`` for a message, cut after 60 characters, never raising."""
    if isinstance(value, int) and value.bit_length() > 64:
        # repr() of a very large int raises (Python's digit limit); its size says enough.
        return f"<an int of {value.bit_length()} bits>"
    try:
        text = repr(value)
    except Exception:  # a __repr__ that raises
        text = f"<a {type(value).__name__} whose repr() fails>"
    if not isinstance(text, str):
        text = f"<a {type(value).__name__}>"
    if len(text) > _SHOWN_MAX:
        text = f"{text[:_SHOWN_MAX]}... ({len(text)} characters)"
    return text


def as_text(value: object) -> str:
    """``value`` as the metadata records it (``str()``, or :func:`shown`), never raising."""
    if isinstance(value, str):
        return value
    if isinstance(value, int) and value.bit_length() > 64:
        return shown(value)
    try:
        text = str(value)
    except Exception:  # a __str__ that raises
        return shown(value)
    return text if isinstance(text, str) else shown(value)


class ExperimentalMetadataWarning(UserWarning):
    """An experimental marker was given malformed lifecycle metadata: issued once, at the
    marked definition.  The module still imports, even if a filter escalates it."""


def _blank(value: object) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


def owner_problem(owner: object) -> str | None:
    """What is wrong with ``owner`` as a person's ``@handle``, or ``None`` (also when none)."""
    if _blank(owner):
        return None
    if not isinstance(owner, str):
        return (
            f"owner {shown(owner)} is a {type(owner).__name__}; write a person's handle, "
            "owner='@alice'"
        )
    login = owner.strip()[1:]
    if not owner.strip().startswith("@"):
        return (
            f"owner {shown(owner)} does not start with '@'; write a person's handle, owner='@alice'"
        )
    if "/" in login or login.lower().startswith(TEAM_HANDLE_PREFIX):
        return (
            f"owner {shown(owner)} is a team or bot account, not a person; the policy asks for the "
            "person who answers for the feature, owner='@alice'"
        )
    if not _github_login(login):
        return (
            f"owner {shown(owner)} is not a GitHub handle (letters, digits and single hyphens, "
            "at most 39 characters after '@')"
        )
    return None


def _github_login(login: str) -> bool:
    return (
        0 < len(login) <= 39
        and set(login) <= _LOGIN_CHARACTERS
        and not login.startswith("-")
        and not login.endswith("-")
        and "--" not in login
    )


def _is_issue_url(text: str) -> bool:
    scheme, sep, rest = text.partition("://")
    host, slash, path = rest.partition("/")
    return (
        bool(sep)
        and scheme in ("https", "http")
        and "." in host
        and bool(slash and path.strip("/"))
        and not any(c.isspace() for c in text)
    )


def tracking_issue_problem(issue: object) -> str | None:
    """What is wrong with ``issue`` as a tracking issue (a number, ``"#12"`` or a URL), or
    ``None`` (also when none)."""
    how = "pass the issue's number (tracking_issue=123) or its URL"
    if _blank(issue):
        return None
    if isinstance(issue, bool) or not isinstance(issue, (int, str)):
        return f"tracking_issue {shown(issue)} is a {type(issue).__name__}; {how}"
    if isinstance(issue, int):
        if issue <= 0:
            what = "not a positive number" if issue == 0 else "neither an issue number nor a URL"
            return f"tracking_issue {shown(issue)} is {what}; {how}"
        if issue.bit_length() > 64 or len(str(issue)) > _ISSUE_DIGITS_MAX:
            return f"tracking_issue {shown(issue)} is too long for an issue number; {how}"
        return None
    text = issue.strip()
    number = text.removeprefix("#")
    if number.isascii() and number.isdigit():
        if not number.lstrip("0"):
            return f"tracking_issue {shown(issue)} is not a positive number; {how}"
        if len(number.lstrip("0")) > _ISSUE_DIGITS_MAX:
            return (
                f"tracking_issue {shown(issue)} is too long for an issue number "
                f"({len(number)} digits, an issue number has at most {_ISSUE_DIGITS_MAX}); {how}"
            )
        return None
    if _is_issue_url(text):
        return None
    return f"tracking_issue {shown(issue)} is neither an issue number nor a URL; {how}"


def given_name(feature: object) -> bool:
    return not (feature is None or (isinstance(feature, str) and not feature))


def graduate_by_problem(value: object) -> tuple[_dt.date | None, str | None]:
    """``(date, None)``, or ``(None, problem)``; text must be ``YYYY-MM-DD`` exactly."""
    if value is None:
        return None, None
    if isinstance(value, _dt.datetime):
        value = value.date()
    if isinstance(value, _dt.date):
        return value, None
    if isinstance(value, str) and re.fullmatch(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", value.strip()):
        try:
            return _dt.date.fromisoformat(value.strip()), None
        except ValueError:  # e.g. 2027-02-30
            pass
    return None, (
        f"graduate_by {shown(value)} is not a date written YYYY-MM-DD "
        "(e.g. graduate_by='2027-05-31')"
    )


def in_experimental_package(module: str) -> bool:
    return module == EXPERIMENTAL_PACKAGE or module.startswith(EXPERIMENTAL_PACKAGE + ".")


def feature_of_module(module: str) -> str | None:
    if not in_experimental_package(module):
        return None
    return module[len(EXPERIMENTAL_PACKAGE) + 1 :].split(".", 1)[0] or None


# -- the one type of experimental metadata -----------------------------------------------------

MetadataValue = str | int | _dt.date | None  # a malformed value is recorded, not refused


def field_rule(*, missing: str | None = None) -> dict[str, Any]:
    """A field's ``metadata=``: what the lifecycle check says when it is missing."""
    return {"missing": missing}


@dataclass(frozen=True)
class ExperimentalInfo:
    """Lifecycle metadata of an experimental API or backend.

    Each field but ``problems`` is a keyword of both markers and a column of the listing
    (required by the lifecycle check when declared with ``field_rule(missing=...)``).
    ``graduate_by`` is ``None`` when missing or malformed; ``problems`` lists what was
    malformed.
    """

    feature: str
    owner: str | None = field(
        default=None,
        metadata=field_rule(
            missing="no owner; pass owner='@handle' (the person who answers for it)"
        ),
    )
    tracking_issue: str | None = field(
        default=None,
        metadata=field_rule(missing="no tracking issue; pass tracking_issue=<issue number or URL>"),
    )
    graduate_by: _dt.date | None = field(
        default=None,
        # The horizon is the lifecycle check's: it fills in {horizon}.
        metadata=field_rule(
            missing="no graduate_by date; pass graduate_by='YYYY-MM-DD', at most {horizon} "
            "months ahead"
        ),
    )
    problems: tuple[str, ...] = ()


def metadata_fields() -> tuple[Field[Any], ...]:
    return tuple(f for f in fields(ExperimentalInfo) if f.name != "problems")


def missing_text(f: Field[Any]) -> str | None:
    return f.metadata.get("missing")


def metadata_names() -> tuple[str, ...]:
    return tuple(f.name for f in metadata_fields())


def check_metadata_names(marker: str, metadata: Mapping[str, object]) -> None:
    """``TypeError`` for a keyword that is not a field (a typo must not vanish)."""
    names = metadata_names()
    for name in metadata:
        if name not in names:
            close = difflib.get_close_matches(name, names, n=1)
            hint = f" (did you mean {close[0]}=?)" if close else ""
            raise TypeError(
                f"{marker}() got an unexpected keyword argument {name!r}{hint}; its metadata "
                f"keywords are the fields of ExperimentalInfo: {', '.join(names)}"
            )


def _feature_problem(feature: object) -> str | None:
    if isinstance(feature, str):
        return None
    return (
        f"feature {shown(feature)} is a {type(feature).__name__}; name the feature with a "
        "str (feature='fused_norm')"
    )


# How a field's value is judged (any other field: text, never a problem).
_JUDGES = {
    "feature": _feature_problem,
    "owner": owner_problem,
    "tracking_issue": tracking_issue_problem,
}


def record_metadata(metadata: Mapping[str, object]) -> tuple[dict[str, object], tuple[str, ...]]:
    values: dict[str, object] = {}
    problems = []
    for name in metadata_names():
        value, problem = metadata.get(name), None
        if name == "graduate_by":
            values[name], problem = graduate_by_problem(value)
        else:
            values[name] = None if value is None and name != "feature" else as_text(value)
            problem = _JUDGES[name](value) if name in _JUDGES else None
        if problem is not None:
            problems.append(problem)
    return values, tuple(problems)


def make_experimental_info(
    *values: object, marked: Any = None, **metadata: object
) -> ExperimentalInfo:
    """The metadata given to a marker, by keyword or in field order: a malformed value is
    recorded (and warned about at ``marked``); an unknown keyword is a ``TypeError``."""
    names = metadata_names()
    if len(values) > len(names):
        raise TypeError(
            f"make_experimental_info() takes at most {len(names)} values ({', '.join(names)}), "
            f"got {len(values)}"
        )
    for name, value in zip(names, values, strict=False):
        if name in metadata:
            raise TypeError(f"make_experimental_info() got {name!r} twice")
        metadata[name] = value
    check_metadata_names("make_experimental_info", metadata)
    recorded, problems = record_metadata(metadata)
    info = ExperimentalInfo(**recorded, problems=problems)  # type: ignore[arg-type]
    if problems and marked is not None:
        _warn_at_definition(marked, info)
    return info


def _warn_at_definition(marked: Any, info: ExperimentalInfo) -> None:
    try:
        target = inspect.unwrap(marked) if callable(marked) else marked
    except ValueError:  # a __wrapped__ cycle
        target = marked
    module = getattr(target, "__module__", None)
    module = module if isinstance(module, str) else "?"
    code = getattr(target, "__code__", None)
    if code is not None:
        filename, line = code.co_filename, code.co_firstlineno
    else:
        try:
            filename, line = inspect.getsourcefile(target) or "?", inspect.getsourcelines(target)[1]
        except (OSError, TypeError):
            filename, line = "?", 0
    name = getattr(marked, "__qualname__", None)
    name = name if isinstance(name, str) else shown(marked)
    message = (
        f"experimental {name} (feature {shown(info.feature)}, module {module}) has malformed "
        f"lifecycle metadata: {'; '.join(info.problems)}. It still imports; the lifecycle "
        "check (scripts/pr_checks/experimental_lifecycle.py) fails until it is fixed."
    )
    try:
        warnings.warn_explicit(message, ExperimentalMetadataWarning, filename, line, module=module)
    except ExperimentalMetadataWarning:
        pass  # escalated by a filter: the import must not fail (see the class's docstring)


# -- the inventory -------------------------------------------------------------------------------


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
    """Every API recorded by the markers so far, sorted by name (``experimental=True`` /
    ``False``: only those); ``flashinfer.load_all_apis()`` imports every API module first."""
    records = sorted(inventory.values(), key=lambda r: r.name)
    if experimental is None:
        return records
    return [r for r in records if r.experimental == experimental]
