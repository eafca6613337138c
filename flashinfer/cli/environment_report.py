"""The details of ``flashinfer backends``' report beyond the backend table: the settings in
effect, the operating system and CPU, the CUDA runtime and driver, and how flashinfer was
installed.

* **Settings.**  Every ``FLASHINFER_*`` and ``TRITON_*`` variable set in the environment,
  with what the package makes of its value: one interpreter per row of the table of variables
  (:data:`flashinfer.settings.ENVIRONMENT`), which parses as the reading module does (the
  parsers are those modules' own where they have one: ``FLASHINFER_BACKENDS`` through
  :func:`~flashinfer.dispatch.backend_names.parse_env_value`).  A set ``FLASHINFER_*`` name
  the table does not know is reported as unknown, with the nearest known name (likely a
  typo); a ``TRITON_*`` one as Triton's own.  Names are listed from the environment's keys;
  only these variables' values are read.
* **System.**  ``platform``'s answers, the CPU model where it is cheap to read
  (``/proc/cpuinfo``), the core count and the cores this process may use.
* **CUDA.**  The runtime torch was built with (``torch.version.cuda``) and the driver's
  version where a CUDA device is usable; absent on a CPU-only machine.
* **Install.**  The ``flashinfer-gating`` distribution's PEP 610 ``direct_url.json``: a wheel
  from an index, a local directory, or an editable checkout, whose git commit is read from
  ``.git`` by hand (no ``git`` process; nothing fails when the tree is not a repository).
* **Tuning file.**  No setting names one: a tuning file is named per call
  (``autotune(tuning_file=...)``, ``flashinfer autotune --tuning-file``), so the report's
  ``autotuner_file`` is ``null`` (:data:`AUTOTUNER_FILE_NOTE`).
"""

from __future__ import annotations

import difflib
import importlib.metadata
import json
import os
import platform
from collections.abc import Callable
from pathlib import Path
from typing import Any

from flashinfer.settings.environment import ENVIRONMENT

__all__ = [
    "AUTOTUNER_FILE_NOTE",
    "DISTRIBUTION",
    "INTERPRETERS",
    "cuda_info",
    "detail_lines",
    "environment_settings",
    "git_commit",
    "install_info",
    "public_name",
    "settings_summary",
    "system_info",
]

DISTRIBUTION = "flashinfer-gating"
"""The name flashinfer is installed under (``pip install flashinfer-gating``)."""

AUTOTUNER_FILE_NOTE = (
    "no setting names one; a tuning file is named per call, autotune(tuning_file=...) or "
    "flashinfer autotune --tuning-file FILE"
)
"""Why the report's ``autotuner_file`` is ``null``: neither the table of environment
variables nor the tuner's settings name a file, so there is none to count entries of."""

_PREFIXES = ("FLASHINFER_", "TRITON_")
_KNOWN = {row.name for row in ENVIRONMENT}

# What one interpreter returns: (whether the value is one the package accepts, the value as
# the package reads it (JSON), what that means in words).
Reading = tuple[bool, Any, str]


def public_name(api_key: str) -> str:
    """The name users call: an API of :data:`~flashinfer.api_modules.API_MODULES` is exported
    as ``flashinfer.<name>`` (``flashinfer.gemm.mm`` -> ``flashinfer.mm``), the rule
    ``use_backends``' names follow; any other keeps its qualified name."""
    from flashinfer.api_modules import API_MODULES

    module, _, name = api_key.rpartition(".")
    return f"flashinfer.{name}" if module in API_MODULES else api_key


# --------------------------------------------------------------------------------------
# Settings: one interpreter per row of the table
# --------------------------------------------------------------------------------------


def _switch(raw: str, on: str, off: str) -> Reading:
    """A variable that only ``'1'`` turns on: values other than '1', '0' and empty are
    refused (the reader warns once, or raises under FLASHINFER_STRICT_SETTINGS=1)."""
    if raw == "1":
        return True, True, on
    if raw in ("", "0"):
        return True, False, off
    return False, False, f"{off} (not '1', '0' or empty: {_REFUSED} and counts as off)"


_REFUSED = "warns once (raises under FLASHINFER_STRICT_SETTINGS=1)"


def _strict(raw: str) -> Reading:
    from flashinfer.settings import STRICT_ACCEPTED

    if raw == "1":
        return True, True, "a malformed flashinfer variable raises SettingsError at first use"
    if raw in ("", "0"):
        return True, False, "a malformed flashinfer variable warns once and is ignored"
    return (
        False,
        None,
        "unrecognised: raises SettingsError when a malformed variable is read "
        f"(accepted: {STRICT_ACCEPTED})",
    )


def _gate(raw: str) -> Reading:
    from flashinfer.gating.gate import ACCEPTED_GATE_VALUES, GATE_OFF_VALUES

    if raw == "1":
        return True, True, "on: backend='auto' and the autotuner may pick experimental backends"
    off = "off: backend='auto' and the autotuner skip experimental backends"
    if raw in GATE_OFF_VALUES:
        return True, False, off
    return False, False, f"{off} (unrecognised value; accepted: {ACCEPTED_GATE_VALUES})"


def _backends(raw: str) -> Reading:
    from flashinfer.dispatch.backend_names import ENV_FORMAT, parse_env_value

    if not raw.strip():
        return True, {}, "empty: backend='auto' is not restricted"
    try:
        parsed = parse_env_value(raw, "FLASHINFER_BACKENDS")
    except ValueError as exc:
        return (
            False,
            None,
            f"ignored as a whole, backend='auto' is not restricted: {exc} (format: {ENV_FORMAT})",
        )
    named = {public_name(key): list(backends) for key, backends in parsed.items()}
    listed = "; ".join(f"{api} -> {', '.join(b)}" for api, b in named.items())
    return (
        True,
        named,
        f"backend='auto' restricted for the whole process to {listed}, in that order (a "
        "use_backends block overrides it for the APIs it names)",
    )


def _warnings_action(raw: str) -> Reading:
    from flashinfer.settings.environment import WARNING_ACTIONS

    if not raw:
        return True, None, "empty: Python's own warning filters decide"
    if raw in WARNING_ACTIONS:
        return True, raw, f"ExperimentalWarning is filtered with the action {raw!r}"
    accepted = ", ".join(repr(a) for a in WARNING_ACTIONS)
    return False, None, f"ignored (warns once; accepted: {accepted}, or empty)"


def _log_level(raw: str) -> Reading:
    try:
        level = int(raw or 0)
    except ValueError:
        return False, 0, f"not an integer: {_REFUSED} and counts as 0 (the APIs are not logged)"
    if level <= 0:
        return True, level, "the APIs are not logged"
    if level < 3:
        return True, level, "each stable API call's name is logged ('flashinfer.api')"
    return True, level, "each stable API call is logged with its arguments ('flashinfer.api')"


def _triton_interpret(raw: str) -> Reading:
    from flashinfer.kernels.availability import triton_true

    if triton_true(raw):
        return True, True, "Triton kernels run on CPU tensors through the interpreter"
    valid = raw.lower() in ("", "0", "false", "off", "no", "n")
    return valid, False, "Triton kernels need CUDA tensors"


INTERPRETERS: dict[str, Callable[[str], Reading]] = {
    "FLASHINFER_ALLOW_EXPERIMENTAL_AUTO_BACKENDS": _gate,
    "FLASHINFER_BACKENDS": _backends,
    "FLASHINFER_EXPERIMENTAL_WARNINGS": _warnings_action,
    "FLASHINFER_LOGLEVEL": _log_level,
    "FLASHINFER_DISPATCH_LOG": lambda raw: _switch(
        raw,
        "the backend choice log is printed to stderr too",
        "the backend choice log goes to the 'flashinfer.dispatch' logger only",
    ),
    "FLASHINFER_AUTOTUNER_LOG": lambda raw: _switch(
        raw,
        "the autotuner's log is printed to stderr too",
        "the autotuner's log goes to the 'flashinfer.autotuner' logger only",
    ),
    "FLASHINFER_CLI_TRACEBACK": lambda raw: _switch(
        raw,
        "the flashinfer command prints the traceback of a runtime failure",
        "the flashinfer command's runtime errors are one line",
    ),
    "FLASHINFER_STRICT_SETTINGS": _strict,
    "TRITON_INTERPRET": _triton_interpret,
}
"""How the report reads each variable of :data:`flashinfer.settings.ENVIRONMENT` (a test
holds the two to the same names)."""


def _nearest(name: str) -> str | None:
    """The known variable ``name`` is most likely a typo of, if any is close."""
    close = difflib.get_close_matches(name, sorted(_KNOWN), n=1, cutoff=0.6)
    return close[0] if close else None


def environment_settings(always: tuple[str, ...] = ("TRITON_INTERPRET",)) -> list[dict[str, Any]]:
    """Every ``FLASHINFER_*`` and ``TRITON_*`` variable set here, sorted by name, with what
    the package makes of it; the names in ``always`` are listed even when unset (value
    ``None``: what holds by default)."""
    names = sorted({k for k in os.environ if k.startswith(_PREFIXES)} | set(always))
    rows = []
    for name in names:
        raw = os.environ.get(name)
        row: dict[str, Any] = {
            "name": name,
            "value": raw,
            "read_by": "flashinfer" if name in _KNOWN else "unknown",
            "valid": None,
            "parsed": None,
            "meaning": "",
            "suggestion": None,
        }
        if name in _KNOWN:
            if raw is None:
                row["meaning"] = f"unset, so the default holds ({_default(name)})"
            else:
                row["valid"], row["parsed"], row["meaning"] = INTERPRETERS[name](raw)
        elif name.startswith("TRITON_"):
            row["read_by"] = "triton"
            row["meaning"] = "Triton's own setting; flashinfer does not read it"
        else:
            row["suggestion"] = suggestion = _nearest(name)
            hint = (
                f"likely a typo of {suggestion}"
                if suggestion
                else "no known name is close; `flashinfer backends --json` and "
                "docs/configuration.rst list those it reads"
            )
            row["meaning"] = f"unknown: flashinfer reads no such variable; {hint}"
        rows.append(row)
    return rows


def _default(name: str) -> str:
    return next(row.default for row in ENVIRONMENT if row.name == name)


# --------------------------------------------------------------------------------------
# System, CUDA
# --------------------------------------------------------------------------------------


def _cpu_model() -> str | None:
    """The CPU's model name where it is cheap to read (Linux's ``/proc/cpuinfo``; else what
    ``platform.processor()`` says, which is often empty on Linux)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                key, sep, value = line.partition(":")
                if sep and key.strip() in ("model name", "Hardware", "cpu model", "Model"):
                    return value.strip() or None
    except OSError:
        pass
    return platform.processor() or None


def _distribution_name() -> str | None:
    try:
        return platform.freedesktop_os_release().get("PRETTY_NAME")
    except (OSError, AttributeError):
        return None


def system_info() -> dict[str, Any]:
    """The operating system and CPU."""
    try:
        usable: int | None = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        usable = None
    return {
        "os": platform.platform(),
        "system": platform.system(),
        "release": platform.release(),
        "distribution": _distribution_name(),
        "machine": platform.machine(),
        "cpu_model": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "cpus_usable": usable,
    }


def _driver_version(torch: Any) -> str | None:
    """The CUDA driver's version (``"12.4"``) where CUDA is usable, else ``None``."""
    if torch.version.cuda is None or not torch.cuda.is_available():
        return None
    try:
        code = int(torch._C._cuda_getDriverVersion())
    except (AttributeError, RuntimeError, TypeError, ValueError):
        return None
    if code <= 0:
        return None
    return f"{code // 1000}.{code % 1000 // 10}"


def cuda_info() -> dict[str, str | None]:
    """The CUDA runtime torch was built with and the driver's version; ``None`` where absent
    (a CPU-only or HIP build, no driver, no device)."""
    import torch

    return {"runtime": torch.version.cuda, "driver": _driver_version(torch)}


# --------------------------------------------------------------------------------------
# Install
# --------------------------------------------------------------------------------------


def _read_git_file(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return None


def git_commit(tree: Path) -> tuple[str | None, str | None]:
    """``(commit, branch)`` of the checkout at ``tree``, read from its ``.git`` by hand (a
    directory, or a worktree's ``gitdir:`` file; loose refs, then ``packed-refs``).
    ``(None, None)`` when ``tree`` is not a repository or its files cannot be read; the
    branch is ``None`` on a detached head."""
    dot_git = tree / ".git"
    git_dir: Path | None = dot_git if dot_git.is_dir() else None
    if git_dir is None and dot_git.is_file():
        pointer = _read_git_file(dot_git) or ""
        if pointer.startswith("gitdir:"):
            git_dir = (tree / pointer.removeprefix("gitdir:").strip()).resolve()
    if git_dir is None:
        return None, None
    head = _read_git_file(git_dir / "HEAD")
    if not head:
        return None, None
    if not head.startswith("ref:"):
        return (head if _is_sha(head) else None), None
    ref = head.removeprefix("ref:").strip()
    branch = ref.removeprefix("refs/heads/")
    common = git_dir
    shared = _read_git_file(git_dir / "commondir")
    if shared:
        common = (git_dir / shared).resolve()
    for base in dict.fromkeys((git_dir, common)):
        sha = _read_git_file(base / ref)
        if sha and _is_sha(sha):
            return sha, branch
    packed = _read_git_file(common / "packed-refs") or ""
    for line in packed.splitlines():
        sha, _, name = line.partition(" ")
        if name.strip() == ref and _is_sha(sha):
            return sha, branch
    return None, branch  # an unborn branch: no commit yet


def _is_sha(text: str) -> bool:
    return len(text) in (40, 64) and all(c in "0123456789abcdef" for c in text)


def _direct_url() -> dict[str, Any] | None:
    """The ``direct_url.json`` (PEP 610) of the installed distribution, or ``None`` (installed
    from an index, or not installed).  A build's ``*.egg-info`` in a checkout on ``sys.path``
    shadows the installed metadata; a distribution that has the file is preferred."""
    found = None
    for dist in importlib.metadata.distributions(name=DISTRIBUTION):
        text = dist.read_text("direct_url.json")
        if text:
            try:
                found = json.loads(text)
            except ValueError:
                continue
            break
    return found if isinstance(found, dict) else None


def _installed_version() -> str | None:
    try:
        return importlib.metadata.version(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return None


def _file_path(url: str) -> str | None:
    if not url.startswith("file://"):
        return None
    from urllib.parse import unquote, urlparse

    return unquote(urlparse(url).path) or None


def install_info() -> dict[str, Any]:
    """How flashinfer was installed: ``kind`` is ``"editable"`` (a checkout, with its path
    and git commit), ``"local directory"`` (built from a directory, not editable),
    ``"archive"`` or ``"vcs"`` (a URL), ``"wheel"`` (from an index), or ``"not installed"``
    (imported from a tree on ``sys.path``)."""
    imported_from = str(Path(__file__).resolve().parents[1])  # the flashinfer package
    version = _installed_version()
    direct = _direct_url() if version is not None else None
    url = direct.get("url") if direct else None
    info: dict[str, Any] = {
        "distribution": DISTRIBUTION,
        "version": version,
        "kind": "wheel",
        "url": url,
        "path": imported_from,
        "source_path": None,
        "git_commit": None,
        "git_branch": None,
        "note": None,
    }
    if version is None:
        info["kind"] = "not installed"
        source: str | None = str(Path(imported_from).parent)
    elif direct is None:
        source = None
    elif isinstance(direct.get("dir_info"), dict):
        editable = bool(direct["dir_info"].get("editable"))
        info["kind"] = "editable" if editable else "local directory"
        source = _file_path(str(url or ""))
    else:
        info["kind"] = "vcs" if "vcs_info" in direct else "archive"
        source = None
        vcs = direct.get("vcs_info")
        if isinstance(vcs, dict) and isinstance(vcs.get("commit_id"), str):
            info["git_commit"] = vcs["commit_id"]
    if source is not None:
        info["source_path"] = source
        if info["kind"] != "local directory":  # a copy was built: the tree may have moved on
            info["git_commit"], info["git_branch"] = git_commit(Path(source))
        if info["kind"] == "editable" and not Path(imported_from).is_relative_to(
            Path(source).resolve()
        ):
            info["note"] = f"imported from {imported_from}, not from the editable checkout"
    return info


# --------------------------------------------------------------------------------------
# The text
# --------------------------------------------------------------------------------------


def _install_line(info: dict[str, Any]) -> str:
    kind = info["kind"]
    if kind == "not installed":
        text = f"not installed: imported from {info['path']}"
    elif kind == "wheel":
        text = f"{info['distribution']} {info['version']}, a wheel from an index"
    elif kind == "editable":
        text = f"{info['distribution']} {info['version']}, editable checkout {info['source_path']}"
    else:
        text = f"{info['distribution']} {info['version']}, from {kind} {info['url']}"
    if info["git_commit"]:
        branch = f" on {info['git_branch']}" if info["git_branch"] else ""
        text += f" (git {info['git_commit'][:12]}{branch})"
    elif info["source_path"] and kind in ("editable", "not installed"):
        text += " (not a git checkout)"
    if info["note"]:
        text += f"; {info['note']}"
    return text


def detail_lines(report: dict[str, Any]) -> list[str]:
    """The details printed below the table: settings, system, CUDA, install, tuning file."""
    lines = ["settings (FLASHINFER_* and TRITON_* variables set here):"]
    for row in report["environment"]:
        shown = "" if row["value"] is None else f"={row['value']!r}"  # meaning says unset
        lines.append(f"  {row['name']}{shown}: {row['meaning']}")
    system = report["system"]
    distro = f", {system['distribution']}" if system["distribution"] else ""
    lines.append(f"os                {system['os']}{distro}")
    cpus = system["cpu_count"]
    usable = system["cpus_usable"]
    count = f"{cpus} cores" if cpus is not None else "core count unknown"
    if usable is not None and usable != cpus:
        count += f", {usable} usable here"
    lines.append(f"cpu               {system['cpu_model'] or system['machine']} ({count})")
    cuda = report["cuda"]
    lines.append(f"CUDA runtime      {cuda['runtime'] or 'none (torch has no CUDA build)'}")
    lines.append(f"CUDA driver       {cuda['driver'] or 'none found'}")
    lines.append(f"install           {_install_line(report['install'])}")
    tuned = report["autotuner_file"]
    lines.append(f"tuning file       {tuned['path'] if tuned else f'none: {AUTOTUNER_FILE_NOTE}'}")
    return lines


# Named first in the header: they change which backend backend='auto' picks.
_DECIDE_WHAT_RUNS = ("FLASHINFER_BACKENDS", "FLASHINFER_ALLOW_EXPERIMENTAL_AUTO_BACKENDS")


def settings_summary(report: dict[str, Any], width: int = 100) -> str | None:
    """One line for the header, within ``width``: the variables whose value flashinfer
    rejected (a rejected ``FLASHINFER_BACKENDS`` restricts nothing), then unknown
    ``FLASHINFER_*`` names (likely typos), then the others that are set (flashinfer's,
    those that change what ``backend='auto'`` picks first, and Triton's own), as many as
    fit, the others counted: every variable the details list as set is named or counted
    once.  ``None`` when none is set."""
    groups = settings_groups(report["environment"])
    if not any(names for names, _ in groups):
        return None
    total = sum(len(names) for names, _ in groups)
    line = ""
    for shown in range(total, -1, -1):
        line = _summary(groups, shown)
        if len(line) <= width:
            break
    return line


def settings_groups(rows: list[dict[str, Any]]) -> list[tuple[list[str], str]]:
    """The set variables of ``rows`` (the report's ``environment``) in the header's groups,
    each with its label: rejected values, unknown names, the others set."""
    present = [r for r in rows if r["value"] is not None]
    unknown = [r["name"] for r in present if r["read_by"] == "unknown"]
    rejected = [r["name"] for r in present if r["read_by"] == "flashinfer" and r["valid"] is False]
    others = [r["name"] for r in present if r["name"] not in unknown and r["name"] not in rejected]
    for names in (rejected, others):
        names.sort(
            key=lambda name: (name not in _DECIDE_WHAT_RUNS, name.startswith("TRITON_"), name)
        )
    return [  # a rejected value first: it changes what runs (FLASHINFER_BACKENDS restricts nothing)
        (rejected, "rejected"),
        (unknown, "unknown (a typo?)"),
        (others, "set"),
    ]


def _summary(groups: list[tuple[list[str], str]], shown: int) -> str:
    """The header's settings line naming the first ``shown`` names of the groups in turn;
    the rest of each group is counted."""
    parts: list[str] = []
    for names, what in groups:
        if not names:
            continue
        named, shown = names[:shown], max(0, shown - len(names))
        more = len(names) - len(named)
        if named:
            listed = ", ".join(named) + (f" and {more} more" if more else "")
        elif (
            parts
        ):  # short, so that the names before fit: "FLASHINFER_BACKENDS rejected; 3 more set"
            listed = f"{more} more"
        else:
            listed = f"{more} variable{'s' if more > 1 else ''}"
        parts.append(f"{listed} {what}")
    return "settings (see below): " + "; ".join(parts)
