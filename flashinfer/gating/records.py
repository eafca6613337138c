"""What the markers record: lifecycle metadata and the API inventory.

:class:`ExperimentalInfo` is the metadata of an experimental API or backend, checked when the
marker is applied (:func:`make_experimental_info`); :func:`record_api` adds a marked API to
the inventory that :func:`api_inventory` lists.  Public names are re-exported by
``flashinfer.api_logging``.

Metadata that is malformed (an owner that is not a person's ``@handle``, a tracking issue
that is not a positive number or a URL, a ``graduate_by`` that is not a ``YYYY-MM-DD`` date)
never stops a module from importing: the marker records the problem on the metadata
(``ExperimentalInfo.problems``), warns once at the marked definition
(:class:`ExperimentalMetadataWarning`), and ``scripts/pr_checks/experimental_lifecycle.py``
fails in CI naming it.
"""

from __future__ import annotations

import datetime as _dt
import inspect
import warnings
from dataclasses import dataclass
from typing import Any

__all__ = [
    "APIRecord",
    "ExperimentalInfo",
    "ExperimentalMetadataWarning",
    "TEAM_HANDLE_PREFIX",
    "api_inventory",
    "feature_of_module",
    "in_experimental_package",
    "graduate_by_problem",
    "inventory",
    "make_experimental_info",
    "owner_problem",
    "qualified_name",
    "record_api",
    "tracking_issue_problem",
]

TEAM_HANDLE_PREFIX = "flashinfer-"
"""This project's team and bot accounts are named ``flashinfer-...`` (``@flashinfer-gemm``,
``@flashinfer-bot``): a handle that starts so, or ``@org/team``, is not a person."""

_GITHUB_LOGIN_MAX = 39
_LOGIN_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-")
_DIGITS = frozenset("0123456789")
EXPERIMENTAL_PACKAGE = "flashinfer.experimental"


class ExperimentalMetadataWarning(UserWarning):
    """An experimental marker was given malformed lifecycle metadata.

    Issued once, when the marker is applied (at import), pointing at the marked definition.
    The module still imports; the lifecycle check (``experimental_lifecycle.py``) fails in
    CI with the same reason.  If a warning filter escalates it to an error, the import is
    still not stopped (the record stays and CI still fails): a stable API must stay
    importable whatever its experimental backends declare.
    """


@dataclass(frozen=True)
class ExperimentalInfo:
    """Lifecycle metadata of an experimental API or backend.

    ``owner`` and ``tracking_issue`` are kept as given (as text); ``graduate_by`` is the
    date, or ``None`` when none was given or it was malformed.  ``problems`` lists what was
    malformed when the marker was applied, one phrase each (empty when all is well); what
    is *missing*, or a date too far ahead or past, is the lifecycle check's to say.
    """

    feature: str
    owner: str | None = None
    tracking_issue: str | None = None
    graduate_by: _dt.date | None = None
    problems: tuple[str, ...] = ()


def owner_problem(owner: object) -> str | None:
    """What is wrong with ``owner`` as a person's ``@handle``, or ``None`` (also for none
    given: a missing owner is the lifecycle check's to report).

    A person is a GitHub login after ``@``: letters, digits and single hyphens, at most 39
    characters.  ``@org/team`` and this project's accounts (:data:`TEAM_HANDLE_PREFIX`) are
    teams or bots, not people.
    """
    if owner is None or (isinstance(owner, str) and not owner.strip()):
        return None
    if not isinstance(owner, str):
        return (
            f"owner {owner!r} is a {type(owner).__name__}; write a person's handle, owner='@alice'"
        )
    handle = owner.strip()
    if not handle.startswith("@"):
        return f"owner {owner!r} does not start with '@'; write a person's handle, owner='@alice'"
    login = handle[1:]
    if "/" in login or login.lower().startswith(TEAM_HANDLE_PREFIX):
        return (
            f"owner {owner!r} is a team or bot account, not a person; the policy asks for the "
            "person who answers for the feature, owner='@alice'"
        )
    if (
        not login
        or len(login) > _GITHUB_LOGIN_MAX
        or not set(login) <= _LOGIN_CHARS
        or login.startswith("-")
        or login.endswith("-")
        or "--" in login
    ):
        return (
            f"owner {owner!r} is not a GitHub handle (letters, digits and single hyphens, "
            f"at most {_GITHUB_LOGIN_MAX} characters after '@')"
        )
    return None


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
    """What is wrong with ``issue`` as a tracking issue, or ``None`` (also for none given).

    A tracking issue is a positive issue number (``12``, ``"12"``, ``"#12"``) or the URL of
    the issue (``"https://github.com/org/repo/issues/12"``).
    """
    how = "pass the issue's number (tracking_issue=123) or its URL"
    if issue is None or (isinstance(issue, str) and not issue.strip()):
        return None
    if isinstance(issue, bool) or not isinstance(issue, (int, str)):
        return f"tracking_issue {issue!r} is a {type(issue).__name__}; {how}"
    text = str(issue).strip()
    number = text[1:] if text.startswith("#") else text
    if number and set(number) <= _DIGITS:
        return (
            None if int(number) > 0 else f"tracking_issue {issue!r} is not a positive number; {how}"
        )
    if isinstance(issue, str) and _is_issue_url(text):
        return None
    return f"tracking_issue {issue!r} is neither an issue number nor a URL; {how}"


def _parse_date(text: str) -> _dt.date | None:
    """``YYYY-MM-DD`` exactly (``date.fromisoformat`` alone also takes ``20270531``)."""
    shape_ok = (
        len(text) == 10
        and text[4] == "-"
        and text[7] == "-"
        and set(text[:4] + text[5:7] + text[8:]) <= _DIGITS
    )
    if not shape_ok:
        return None
    try:
        return _dt.date.fromisoformat(text)
    except ValueError:  # e.g. 2027-02-30
        return None


def graduate_by_problem(value: object) -> tuple[_dt.date | None, str | None]:
    """``(date, None)`` for a valid ``graduate_by`` (``None`` given: ``(None, None)``), or
    ``(None, problem)`` for a malformed one."""
    if value is None:
        return None, None
    if isinstance(value, _dt.datetime):
        value = value.date()
    if isinstance(value, _dt.date):
        return value, None
    if isinstance(value, str):
        parsed = _parse_date(value.strip())
        if parsed is not None:
            return parsed, None
    return None, (
        f"graduate_by {value!r} is not a date written YYYY-MM-DD (e.g. graduate_by='2027-05-31')"
    )


def in_experimental_package(module: str) -> bool:
    """Whether ``module`` is ``flashinfer.experimental`` or a module under it."""
    return module == EXPERIMENTAL_PACKAGE or module.startswith(EXPERIMENTAL_PACKAGE + ".")


def feature_of_module(module: str) -> str | None:
    """``<feature>`` of a module under ``flashinfer/experimental/<feature>/``, or ``None``."""
    if not in_experimental_package(module):
        return None
    return module[len(EXPERIMENTAL_PACKAGE) + 1 :].split(".", 1)[0] or None


def make_experimental_info(
    feature: str,
    owner: str | None,
    tracking_issue: str | int | None,
    graduate_by: str | _dt.date | None,
    marked: Any = None,
) -> ExperimentalInfo:
    """The metadata given to a marker (shared by API and backend markers), checked.

    Never raises for malformed values: each is recorded in ``problems`` and, when
    ``marked`` (the decorated object) is given, reported by one
    :class:`ExperimentalMetadataWarning` at its definition.
    """
    date, date_problem = graduate_by_problem(graduate_by)
    found = (owner_problem(owner), tracking_issue_problem(tracking_issue), date_problem)
    problems = tuple(p for p in found if p is not None)
    info = ExperimentalInfo(
        feature=feature,
        owner=owner if owner is None else str(owner),
        tracking_issue=None if tracking_issue is None else str(tracking_issue),
        graduate_by=date,
        problems=problems,
    )
    if problems and marked is not None:
        _warn_at_definition(marked, info)
    return info


def _definition_site(obj: Any) -> tuple[str, int, str]:
    """``(filename, line, module)`` of a function's or class's definition (best effort)."""
    target = inspect.unwrap(obj) if callable(obj) else obj
    module = getattr(target, "__module__", None) or "?"
    code = getattr(target, "__code__", None)
    if code is not None:
        return code.co_filename, code.co_firstlineno, module
    try:
        return inspect.getsourcefile(target) or "?", inspect.getsourcelines(target)[1], module
    except (OSError, TypeError):
        return "?", 0, module


def _warn_at_definition(marked: Any, info: ExperimentalInfo) -> None:
    filename, line, module = _definition_site(marked)
    name = getattr(marked, "__qualname__", repr(marked))
    message = (
        f"experimental {name} (feature {info.feature!r}, module {module}) has malformed "
        f"lifecycle metadata: {'; '.join(info.problems)}. It still imports; the lifecycle "
        "check (scripts/pr_checks/experimental_lifecycle.py) fails until it is fixed."
    )
    try:
        warnings.warn_explicit(message, ExperimentalMetadataWarning, filename, line, module=module)
    except ExperimentalMetadataWarning:
        pass  # escalated by a filter: the import must not fail (see the class's docstring)


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
