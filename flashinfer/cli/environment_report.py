"""``flashinfer backends``' report below the table (docs/report_schema.rst): the variables
set and what they do, the OS and CPU, CUDA, and how flashinfer was installed.
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

from flashinfer import settings
from flashinfer.gating.gate import ACCEPTED_GATE_VALUES
from flashinfer.settings.environment import ENVIRONMENT, environment_variable

DISTRIBUTION = "flashinfer-gating"  # pip install flashinfer-gating

AUTOTUNER_FILE_NOTE = (
    "no setting names one; a tuning file is named per call, autotune(tuning_file=...) or "
    "flashinfer autotune --tuning-file FILE"
)

_KNOWN = {row.name for row in ENVIRONMENT}
_REFUSED = "warns once (raises under FLASHINFER_STRICT_SETTINGS=1)"
_GATE_OFF = "off: backend='auto' and the autotuner skip experimental backends"

Reading = tuple[bool, Any, str]  # (the value is accepted, its value as JSON, its meaning)


def public_name(api_key: str) -> str:
    """``flashinfer.gemm.mm`` -> ``flashinfer.mm``."""
    from flashinfer.api_modules import API_MODULES

    module, _, name = api_key.rpartition(".")
    return f"flashinfer.{name}" if module in API_MODULES else api_key


def _switch(on: str, off: str, bad: str = "", bad_value: Any = False) -> Callable[[str], Reading]:
    """Only ``'1'`` is on; ``'0'`` or empty is off."""
    bad = bad or f"{off} (not '1', '0' or empty: {_REFUSED} and counts as off)"

    def read(raw: str) -> Reading:
        if raw not in ("", "0", "1"):
            return False, bad_value, bad
        return True, raw == "1", on if raw == "1" else off

    return read


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
    "FLASHINFER_ALLOW_EXPERIMENTAL_AUTO_BACKENDS": _switch(
        "on: backend='auto' and the autotuner may pick experimental backends",
        _GATE_OFF,
        f"{_GATE_OFF} (unrecognised value; accepted: {ACCEPTED_GATE_VALUES})",
    ),
    "FLASHINFER_BACKENDS": _backends,
    "FLASHINFER_EXPERIMENTAL_WARNINGS": _warnings_action,
    "FLASHINFER_LOGLEVEL": _log_level,
    "FLASHINFER_DISPATCH_LOG": _switch(
        "the backend choice log is printed to stderr too",
        "the backend choice log goes to the 'flashinfer.dispatch' logger only",
    ),
    "FLASHINFER_AUTOTUNER_LOG": _switch(
        "the autotuner's log is printed to stderr too",
        "the autotuner's log goes to the 'flashinfer.autotuner' logger only",
    ),
    "FLASHINFER_CLI_TRACEBACK": _switch(
        "the flashinfer command prints the traceback of a runtime failure",
        "the flashinfer command's runtime errors are one line",
    ),
    "FLASHINFER_STRICT_SETTINGS": _switch(
        "a malformed flashinfer variable raises SettingsError at first use",
        "a malformed flashinfer variable warns once and is ignored",
        "unrecognised: raises SettingsError when a malformed variable is read "
        f"(accepted: {settings.STRICT_ACCEPTED})",
        None,
    ),
    "TRITON_INTERPRET": _triton_interpret,
}


def environment_settings(always: tuple[str, ...] = ("TRITON_INTERPRET",)) -> list[dict[str, Any]]:
    """Each ``FLASHINFER_*`` and ``TRITON_*`` variable set (and ``always``), by name."""
    names = sorted(set(settings.variables_set()) | {*always})
    rows = []
    for name in names:
        raw = settings.raw(name)
        read_by = "flashinfer" if name in _KNOWN else "unknown"
        row: dict[str, Any] = dict(name=name, value=raw, read_by=read_by, valid=None, parsed=None)
        row.update(meaning="", suggestion=None)
        if name in _KNOWN and raw is None:
            row["meaning"] = f"unset, so the default holds ({environment_variable(name).default})"
        elif name in _KNOWN:
            row["valid"], row["parsed"], row["meaning"] = INTERPRETERS[name](raw or "")
        elif name.startswith("TRITON_"):
            row["read_by"] = "triton"
            row["meaning"] = "Triton's own setting; flashinfer does not read it"
        else:
            close = difflib.get_close_matches(name, sorted(_KNOWN), n=1, cutoff=0.6)
            row["suggestion"] = close[0] if close else None
            hint = (
                f"likely a typo of {close[0]}"
                if close
                else "no known name is close; `flashinfer backends --json` and "
                "docs/configuration.rst list those it reads"
            )
            row["meaning"] = f"unknown: flashinfer reads no such variable; {hint}"
        rows.append(row)
    return rows


def _cpu_model() -> str | None:
    """The CPU's model name (``platform.processor()`` is often empty on Linux)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                key, sep, value = line.partition(":")
                if sep and key.strip() in ("model name", "Hardware", "cpu model", "Model"):
                    return value.strip() or None
    except OSError:
        pass
    return platform.processor() or None


def system_info() -> dict[str, Any]:
    try:
        usable: int | None = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        usable = None
    try:
        distribution = platform.freedesktop_os_release().get("PRETTY_NAME")
    except (OSError, AttributeError):
        distribution = None
    return {
        "os": platform.platform(),
        "system": platform.system(),
        "release": platform.release(),
        "distribution": distribution,
        "machine": platform.machine(),
        "cpu_model": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "cpus_usable": usable,
    }


def cuda_info() -> dict[str, str | None]:
    """The CUDA runtime torch was built with and the driver's version."""
    import torch

    driver = None
    if torch.version.cuda is not None and torch.cuda.is_available():
        from flashinfer.torch_boundary import cuda_driver_version

        try:
            code = cuda_driver_version()
        except (AttributeError, RuntimeError, TypeError, ValueError):
            code = 0
        driver = f"{code // 1000}.{code % 1000 // 10}" if code > 0 else None
    return {"runtime": torch.version.cuda, "driver": driver}


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return None


def _is_sha(text: str) -> bool:
    return len(text) in (40, 64) and all(c in "0123456789abcdef" for c in text)


def git_commit(tree: Path) -> tuple[str | None, str | None]:
    """``(commit, branch)`` of the checkout at ``tree``, read from ``.git`` (no git process)."""
    dot_git = tree / ".git"
    git_dir: Path | None = dot_git if dot_git.is_dir() else None
    pointer = (_read(dot_git) or "") if dot_git.is_file() else ""
    if pointer.startswith("gitdir:"):
        git_dir = (tree / pointer.removeprefix("gitdir:").strip()).resolve()
    head = _read(git_dir / "HEAD") if git_dir is not None else None
    if git_dir is None or not head:
        return None, None
    if not head.startswith("ref:"):
        return (head if _is_sha(head) else None), None
    ref = head.removeprefix("ref:").strip()
    shared = _read(git_dir / "commondir")
    common = (git_dir / shared).resolve() if shared else git_dir
    for base in dict.fromkeys((git_dir, common)):
        sha = _read(base / ref)
        if sha and _is_sha(sha):
            return sha, ref.removeprefix("refs/heads/")
    for line in (_read(common / "packed-refs") or "").splitlines():
        sha, _, name = line.partition(" ")
        if name.strip() == ref and _is_sha(sha):
            return sha, ref.removeprefix("refs/heads/")
    return None, ref.removeprefix("refs/heads/")  # an unborn branch: no commit yet


def _direct_url() -> dict[str, Any] | None:
    """The installed ``direct_url.json`` (PEP 610): the first dist that has one (an egg-info
    on ``sys.path`` may shadow it)."""
    for dist in importlib.metadata.distributions(name=DISTRIBUTION):
        text = dist.read_text("direct_url.json")
        if text:
            try:
                found = json.loads(text)
            except ValueError:
                continue
            return found if isinstance(found, dict) else None
    return None


def installed_version(distribution: str = DISTRIBUTION) -> str | None:
    """``distribution``'s installed version (nothing is imported)."""
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def install_info() -> dict[str, Any]:
    from urllib.parse import unquote, urlparse

    imported_from = str(Path(__file__).resolve().parents[1])  # the flashinfer package
    version = installed_version()
    direct = _direct_url() if version is not None else None
    url = direct.get("url") if direct else None
    info: dict[str, Any] = dict(distribution=DISTRIBUTION, version=version, kind="wheel", url=url)
    info.update(path=imported_from, source_path=None, git_commit=None, git_branch=None, note=None)
    source: str | None = None
    if version is None:
        info["kind"] = "not installed"
        source = str(Path(imported_from).parent)
    elif direct is not None and isinstance(direct.get("dir_info"), dict):
        info["kind"] = "editable" if direct["dir_info"].get("editable") else "local directory"
        text = str(url or "")
        source = (unquote(urlparse(text).path) or None) if text.startswith("file://") else None
    elif direct is not None:
        info["kind"] = "vcs" if "vcs_info" in direct else "archive"
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


def _install_line(info: dict[str, Any]) -> str:
    kind, dist = info["kind"], f"{info['distribution']} {info['version']}"
    text = {
        "not installed": f"not installed: imported from {info['path']}",
        "wheel": f"{dist}, a wheel from an index",
        "editable": f"{dist}, editable checkout {info['source_path']}",
    }.get(kind, f"{dist}, from {kind} {info['url']}")
    if info["git_commit"]:
        branch = f" on {info['git_branch']}" if info["git_branch"] else ""
        text += f" (git {info['git_commit'][:12]}{branch})"
    elif info["source_path"] and kind in ("editable", "not installed"):
        text += " (not a git checkout)"
    return text + (f"; {info['note']}" if info["note"] else "")


def torch_build(v: dict[str, Any]) -> str:
    if v["torch_cuda"]:
        return f"CUDA {v['torch_cuda']}"
    return f"HIP {v['torch_hip']}" if v["torch_hip"] else "CPU-only build"


def detail_lines(report: dict[str, Any]) -> list[str]:
    """Everything below the table."""
    from flashinfer.cli.common import gate_line
    from flashinfer.kernels.availability import interpret_mismatch

    v = report["versions"]
    lines = [
        f"flashinfer        {v['flashinfer']}",
        f"python            {v['python']}",
        f"torch             {v['torch']} ({torch_build(v)})",
        f"triton            {v['triton'] or 'not installed'}",
        f"numpy             {v['numpy'] or 'not installed'}",
    ]
    for d in report["devices"]:
        cc = d["compute_capability"]
        lines.append(f"device cuda:{d['index']}     {d['name']} (compute capability {cc})")
    if not report["devices"]:
        lines.append("devices           cpu only (no CUDA device)")
    lines += gate_line(report["gate"]).splitlines()
    lines.append("settings (FLASHINFER_* and TRITON_* variables set here):")
    for row in report["environment"]:
        shown = "" if row["value"] is None else f"={row['value']!r}"  # meaning says unset
        lines.append(f"  {row['name']}{shown}: {row['meaning']}")
        is_set = row["name"] == "TRITON_INTERPRET" and row["value"] is not None
        mismatch = interpret_mismatch() if is_set else None
        if mismatch is not None:  # changed after `import triton`: the other mode
            reason = mismatch.reason.removeprefix("cannot run here: ")
            lines.append(f"    but {reason}: {mismatch.fix}")
    system, cuda, tuned = report["system"], report["cuda"], report["autotuner_file"]
    distro = f", {system['distribution']}" if system["distribution"] else ""
    cpus, usable = system["cpu_count"], system["cpus_usable"]
    count = f"{cpus} cores" if cpus is not None else "core count unknown"
    if usable is not None and usable != cpus:
        count += f", {usable} usable here"
    return [
        *lines,
        f"os                {system['os']}{distro}",
        f"cpu               {system['cpu_model'] or system['machine']} ({count})",
        f"CUDA runtime      {cuda['runtime'] or 'none (torch has no CUDA build)'}",
        f"CUDA driver       {cuda['driver'] or 'none found'}",
        f"install           {_install_line(report['install'])}",
        f"tuning file       {tuned['path'] if tuned else f'none: {AUTOTUNER_FILE_NOTE}'}",
    ]


# Named first in the header: they change which backend backend='auto' picks.
_DECIDE_WHAT_RUNS = ("FLASHINFER_BACKENDS", "FLASHINFER_ALLOW_EXPERIMENTAL_AUTO_BACKENDS")


def settings_summary(report: dict[str, Any], width: int = 100) -> str | None:
    """The header's settings line within ``width`` (rejected, unknown, then set: named while
    they fit, then counted); ``None`` when none is set."""
    present = [r for r in report["environment"] if r["value"] is not None]
    unknown = [r["name"] for r in present if r["read_by"] == "unknown"]
    rejected = [r["name"] for r in present if r["read_by"] == "flashinfer" and r["valid"] is False]
    others = [r["name"] for r in present if r["name"] not in unknown and r["name"] not in rejected]
    for names in (rejected, others):
        names.sort(key=lambda n: (n not in _DECIDE_WHAT_RUNS, n.startswith("TRITON_"), n))
    groups = [(rejected, "rejected"), (unknown, "unknown (a typo?)"), (others, "set")]
    lines = [_summary(groups, shown) for shown in range(len(present), -1, -1)]
    return next((line for line in lines if len(line) <= width), lines[-1]) if present else None


def _summary(groups: list[tuple[list[str], str]], shown: int) -> str:
    parts: list[str] = []
    for names, what in groups:
        if not names:
            continue
        named, shown = names[:shown], max(0, shown - len(names))
        more = len(names) - len(named)
        if named:
            listed = ", ".join(named) + (f" and {more} more" if more else "")
        elif parts:  # short, so that the names before fit: "... rejected; 3 more set"
            listed = f"{more} more"
        else:
            listed = f"{more} variable{'s' if more > 1 else ''}"
        parts.append(f"{listed} {what}")
    return "settings (see below): " + "; ".join(parts)
