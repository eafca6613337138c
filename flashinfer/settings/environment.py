"""The table of environment variables the package reads (``docs/configuration.rst`` is
rendered from it): what a user reads, and how :func:`flashinfer.settings.read` reads it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class EnvironmentVariable:
    """One environment variable: what a user sets, and what the package does with it."""

    name: str
    summary: str  # what it is for, in one sentence
    values: str  # the values it accepts and what each means
    default: str  # what holds when it is unset
    read_when: str  # when the package reads it, so when a change takes effect
    bad_value: str  # what a value outside ``values`` does
    read_by: tuple[str, ...]  # the modules that use it, the first naming it
    topic: str = ""  # the documentation page that says more (a Sphinx document name)
    parse: Callable[[str], Any] = str  # set (possibly empty) -> value; ValueError: bad
    unset: Any = None  # the value when unset
    accepted: str = ""  # the accepted values, as the warning about a bad one says them
    effect: str = ""  # what a bad value counts as, in the warning's words
    fallback: Any = None  # ... and as a value


def _switch(raw: str) -> bool:
    if raw in ("", "0", "1"):
        return raw == "1"
    raise ValueError


WARNING_ACTIONS = ("default", "error", "ignore", "always", "module", "once")  # full names only


def _action(raw: str) -> str | None:
    if raw and raw not in WARNING_ACTIONS:
        raise ValueError
    return raw or None


def _level(raw: str) -> int:
    try:
        return int(raw or 0)
    except ValueError:
        raise ValueError from None  # the row's words say what is wrong


# Triton's reading of its booleans (triton.knobs.getenv_bool), which TRITON_INTERPRET's must match.
_TRITON_TRUE = frozenset({"1", "true", "on", "yes", "y"})


def triton_true(raw: str | None) -> bool:
    return raw is not None and raw.lower() in _TRITON_TRUE


SWITCH_ACCEPTED = "'1', '0' or unset"
GATE_ACCEPTED = "'1' (on), '0' or empty/unset (off)"
STRICT_ACCEPTED = "'1' (strict), '0', empty or unset (warn once and carry on)"
BACKENDS_ACCEPTED = (
    "API=BACKEND[,BACKEND...] for each API, joined by ';', e.g. 'mm=triton,torch;rmsnorm=torch'"
)
_SWITCH: dict[str, Any] = {
    "parse": _switch,
    "unset": False,
    "accepted": SWITCH_ACCEPTED,
    "fallback": False,
}

_STRICT = (
    "  With FLASHINFER_STRICT_SETTINGS=1 it raises SettingsError instead (a ValueError naming "
    "the variable, its value, the accepted values and the fix), at the first use of the value"
)

ENVIRONMENT: tuple[EnvironmentVariable, ...] = (
    EnvironmentVariable(
        name="FLASHINFER_ALLOW_EXPERIMENTAL_AUTO_BACKENDS",
        summary="Lets backend='auto' and the autotuner choose experimental backends.",
        values="exactly '1': on.  '0', empty or unset: off.  No other spelling: 'yes', "
        "'true', 'on' and '1 ' (a space) are not accepted (unlike TRITON_INTERPRET), since "
        "this is the opt-in to code that may change, and upstream FlashInfer reads '1' only",
        default="off: automatic selection uses stable backends only",
        read_when="at every backend='auto' call of an API that has experimental backends, "
        "and by the autotuner when it lists candidates; a change takes effect on the next call",
        bad_value="warns once per distinct value (RuntimeWarning naming the variable and the "
        "accepted values) and counts as off." + _STRICT,
        read_by=(
            "flashinfer.gating.messages",
            "flashinfer.gating.gate",
            "flashinfer.autotuner.distributed",
            "flashinfer.cli.common",
        ),
        topic="experimental",
        **{**_SWITCH, "accepted": GATE_ACCEPTED, "effect": "treating it as off"},
    ),
    EnvironmentVariable(
        name="FLASHINFER_BACKENDS",
        summary="Restricts backend='auto' to listed backends, per API, for the whole process.",
        values="API=BACKEND[,BACKEND...] for each API, joined by ';' (e.g. "
        "'mm=triton,torch;rmsnorm=torch'); the order is the priority",
        default="no restriction",
        read_when="once per process, at the first automatic selection; a use_backends "
        "block overrides it for the APIs the block names",
        bad_value="a value that does not parse, or names an unknown API or backend, warns once "
        "and is ignored as a whole (nothing is restricted)." + _STRICT,
        read_by=("flashinfer.dispatch.restrictions",),
        topic="backend_control",
        # The grammar is the reader's (flashinfer.dispatch.backend_names.parse_env_value),
        # which passes it to read(); its error says what is wrong.
        unset={},
        accepted=BACKENDS_ACCEPTED,
        effect="the whole value is ignored, so automatic selection is not restricted",
        fallback={},
    ),
    EnvironmentVariable(
        name="FLASHINFER_EXPERIMENTAL_WARNINGS",
        summary="The warning filter action for ExperimentalWarning, from the command line.",
        values="'default', 'error', 'ignore', 'always', 'module' or 'once' (Python's filter "
        "actions); empty or unset: Python's own filters decide",
        default="unset: each experimental API and backend warns once per process",
        read_when="each time an ExperimentalWarning is issued",
        bad_value="warns once (RuntimeWarning naming the variable and the accepted values) and "
        "is ignored." + _STRICT,
        read_by=("flashinfer.gating.warn_once",),
        topic="experimental",
        parse=_action,
        accepted=", ".join(repr(a) for a in WARNING_ACTIONS) + ", or empty/unset",
        effect="ignoring it",
    ),
    EnvironmentVariable(
        name="FLASHINFER_LOGLEVEL",
        summary="Logs calls of the stable APIs to the 'flashinfer.api' logger.",
        values="an integer as Python's int() reads it ('2', ' 3', '-1'): 0 or less off; 1 to 2 "
        "each call's name; 3 or more also its arguments (tensors as shape, dtype and device); "
        "empty or unset: 0",
        default="0: the APIs are not wrapped, so logging costs nothing per call",
        read_when="when each API is defined, i.e. when its module is first imported; set it "
        "before the first use of flashinfer's operators",
        bad_value="a value that is not an integer warns once (when the APIs are defined) and "
        "counts as 0." + _STRICT,
        read_by=("flashinfer.gating.stable_marker",),
        parse=_level,
        unset=0,
        accepted="an integer (0 off, 1 or 2 each call's name, 3 or more its arguments too), "
        "or empty/unset",
        effect="treating it as 0 (no logging)",
        fallback=0,
    ),
    EnvironmentVariable(
        name="FLASHINFER_DISPATCH_LOG",
        summary="Also prints the backend choice log ('flashinfer.dispatch' logger) to stderr.",
        values="'1': print each change of an API's chosen backend to stderr.  '0', empty or "
        "unset: only the logger",
        default="off",
        read_when="once, when flashinfer's dispatcher is imported",
        bad_value="warns once (RuntimeWarning) and counts as '0'." + _STRICT,
        read_by=("flashinfer.dispatch.choice_log",),
        topic="backend_control",
        **_SWITCH,
        effect="treated as 0 (off)",
    ),
    EnvironmentVariable(
        name="FLASHINFER_AUTOTUNER_LOG",
        summary="Also prints the autotuner's log (every timing, failure and pick) to stderr.",
        values="exactly '1': print to stderr as well as to the 'flashinfer.autotuner' logger.  "
        "'0', empty or unset: the logger only",
        default="off: the 'flashinfer.autotuner' logger only (DEBUG level)",
        read_when="at each line the autotuner logs",
        bad_value="warns once (RuntimeWarning, at the first line logged) and counts as off."
        + _STRICT,
        read_by=("flashinfer.autotuner.candidate_timing",),
        **_SWITCH,
        effect="treating it as off",
    ),
    EnvironmentVariable(
        name="FLASHINFER_CLI_TRACEBACK",
        summary="Adds the Python traceback to the flashinfer command's one-line runtime errors.",
        values="exactly '1': print the traceback after the error line.  '0', empty or unset: "
        "the error line only",
        default="off: one line on stderr",
        read_when="when a sub-command fails at run time (exit status 1)",
        bad_value="a warning line on stderr, and counts as off; with "
        "FLASHINFER_STRICT_SETTINGS=1 an error line instead (the exit status stays the "
        "failure's)",
        read_by=("flashinfer.cli",),
        **_SWITCH,
        effect="treating it as off",
    ),
    EnvironmentVariable(
        name="FLASHINFER_STRICT_SETTINGS",
        summary="Makes a malformed value of any flashinfer variable above an error instead of "
        "a warning.",
        values="exactly '1': strict.  '0', empty or unset: a malformed value warns once and "
        "fails open (the variable counts as unset or off)",
        default="off: bad values warn once and are ignored, so a deployment keeps running",
        read_when="each time a malformed value of another variable is read, at that "
        "variable's first use (not at import: `flashinfer backends` still reports the bad "
        "values, and never raises for them)",
        bad_value="raises SettingsError (a ValueError naming the variable, its value, the "
        "accepted values and the fix) when a malformed value of another variable is read: "
        "whoever set it asked for strictness in some spelling",
        read_by=("flashinfer.settings",),
        **{**_SWITCH, "accepted": STRICT_ACCEPTED},
    ),
    EnvironmentVariable(
        name="TRITON_INTERPRET",
        summary="Triton's own switch: run Triton kernels through its interpreter, on CPU "
        "tensors (slowly).",
        values="'1', 'true', 'on', 'yes' or 'y', in any case: interpret (read as Triton "
        "reads it); anything else: compile for the GPU",
        default="off: Triton kernels need a CUDA device",
        read_when="by Triton when it is imported: set it before anything imports triton.  "
        "flashinfer's Triton support checks read it at each check and compare it with the "
        "mode Triton was imported in",
        bad_value="set (or unset) after triton was imported, Triton keeps the mode it was "
        "imported in: flashinfer's Triton backends then report 'cannot run here: "
        "TRITON_INTERPRET was set after triton was imported; restart with it set first', and "
        "backend='auto' skips them",
        read_by=(
            "flashinfer.kernels.availability",
            "flashinfer.cli.backends",
        ),
        topic="installation",
        parse=triton_true,
        unset=False,
    ),
)


def environment_variable(name: str) -> EnvironmentVariable:
    """The row of ``name``; ``KeyError`` naming the listed variables when there is none."""
    for row in ENVIRONMENT:
        if row.name == name:
            return row
    listed = ", ".join(row.name for row in ENVIRONMENT)
    raise KeyError(f"{name!r} is not a variable flashinfer reads; it reads: {listed}")
