"""Whether Triton kernels can run on this machine, and if not, why and how to fix it: one
probe for the support checkers and ``flashinfer backends``.  It finds modules without
importing them (an ``"auto"`` call that runs torch must not import Triton).

``TRITON_INTERPRET`` set (or unset) after ``import triton`` leaves Triton's own library in the
other mode, and every launch fails; once Triton is imported the probe compares the variable
with that mode and reports a difference as "cannot run here" (docs/installation.rst).
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from dataclasses import dataclass

from flashinfer.settings import read
from flashinfer.settings.environment import triton_true as triton_true

__all__ = [
    "TRITON_INTERPRET_ENV",
    "TRITON_LIBRARY_MODULE",
    "TritonUnavailable",
    "interpret_mismatch",
    "interpreter_enabled",
    "on_reset",
    "reset_probe",
    "triton_imported_interpreted",
    "triton_unavailable",
]

# What Triton's interpreter imports beyond Triton (triton/runtime/interpreter.py); neither
# torch's CPU build nor triton declares it, so a fresh environment can lack it.
INTERPRETER_IMPORTS: tuple[str, ...] = ("numpy",)


@dataclass(frozen=True)
class TritonUnavailable:
    """Why Triton kernels cannot run (``reason``, short) and what to do (``fix``)."""

    reason: str
    fix: str

    def __str__(self) -> str:
        return f"{self.reason}; {self.fix}"


# (device kind, TRITON_INTERPRET=1) -> the answer, Triton's import mode aside
_probed: dict[tuple[str, bool], TritonUnavailable | None] = {}


TRITON_INTERPRET_ENV = "TRITON_INTERPRET"


def interpreter_enabled() -> bool:
    """Whether ``TRITON_INTERPRET`` turns Triton's interpreter on, read as Triton reads it."""
    return bool(read(TRITON_INTERPRET_ENV))


_reset_listeners: list[Callable[[], None]] = []


def on_reset(listener: Callable[[], None]) -> None:
    """Call ``listener`` after every :func:`reset_probe` (the dispatcher's verdict cache)."""
    _reset_listeners.append(listener)


def reset_probe() -> None:
    """Forget the probe's answers and the verdicts cached from them."""
    global _imported_mode
    _probed.clear()
    _imported_mode = None
    for listener in _reset_listeners:
        listener()


# A function of Triton's own library, decorated with @triton.jit when Triton is imported:
# its class says which mode Triton was imported in.
_TRITON_LIBRARY = ("triton.language.standard", "cdiv")

# Once in sys.modules, TRITON_INTERPRET no longer decides the mode (the verdict cache keys on it).
TRITON_LIBRARY_MODULE = _TRITON_LIBRARY[0]

_imported_mode: bool | None = None  # known for good once Triton is imported


def triton_imported_interpreted() -> bool | None:
    """Whether the imported Triton runs in interpreter mode, or ``None`` while it is not
    imported (never imports it)."""
    global _imported_mode
    if _imported_mode is None:
        module = sys.modules.get(_TRITON_LIBRARY[0])
        if module is not None:
            kinds = {c.__name__ for c in type(getattr(module, _TRITON_LIBRARY[1], None)).__mro__}
            if "InterpretedFunction" in kinds:
                _imported_mode = True
            elif "JITFunction" in kinds:
                _imported_mode = False
    return _imported_mode


def interpret_mismatch() -> TritonUnavailable | None:
    """Why Triton cannot run because ``TRITON_INTERPRET`` changed after its import, or ``None``."""
    imported = triton_imported_interpreted()
    if imported is None:
        return None
    return _mismatch(interpreter_enabled(), imported)


def _mismatch(now: bool, imported: bool) -> TritonUnavailable | None:
    if now == imported:
        return None
    if now:
        return TritonUnavailable(
            "cannot run here: TRITON_INTERPRET was set after triton was imported",
            "restart with it set first (before anything imports triton), or use backend='torch'",
        )
    return TritonUnavailable(
        "cannot run here: TRITON_INTERPRET was unset after triton was imported with it set",
        "set it again, or restart without it",
    )


def _find_problem(module: str) -> str | None:
    """Why the import system cannot find ``module`` (one line; a raising finder counts), or
    ``None``."""
    if module in sys.modules:
        return None
    try:
        spec = importlib.util.find_spec(module)
    except Exception as exc:  # a finder may raise (ModuleNotFoundError, or worse)
        first = str(exc).splitlines()[0] if str(exc) else ""
        return f"{type(exc).__name__}: {first}" if first else type(exc).__name__
    if spec is None:
        return f"ModuleNotFoundError: No module named {module!r}"
    return None


def _missing_module(problem: str) -> str | None:
    prefix = "ModuleNotFoundError: No module named "
    if not problem.startswith(prefix):
        return None
    return problem[len(prefix) :].strip("'\"").split(".")[0] or None


def _probe(device_type: str, interpret: bool) -> TritonUnavailable | None:
    if device_type not in ("cuda", "cpu"):
        return TritonUnavailable(
            f"Triton kernels do not run on {device_type!r} tensors",
            "move the tensors to CUDA (or to CPU with TRITON_INTERPRET=1), or use backend='torch'",
        )
    if device_type == "cpu" and not interpret:
        return TritonUnavailable(
            "on CPU, needs TRITON_INTERPRET=1",
            "set it before triton is imported (it runs Triton kernels through the "
            "interpreter), move the tensors to CUDA, or use backend='torch'",
        )
    # Triton first, then what its interpreter imports (Triton may import those itself when
    # TRITON_INTERPRET=1, so a missing one can surface while importing Triton).
    needed = ("triton", *INTERPRETER_IMPORTS) if device_type == "cpu" else ("triton",)
    for module in needed:
        problem = _find_problem(module)
        if problem is None:
            continue
        missing = _missing_module(problem)
        if missing == "triton":
            return TritonUnavailable("Triton is not installed", "pip install triton")
        if missing in INTERPRETER_IMPORTS:
            return TritonUnavailable(
                f"the Triton interpreter needs {missing}, which is not installed",
                f"pip install {missing}",
            )
        if module == "triton":
            return TritonUnavailable(
                f"Triton cannot be imported ({problem})",
                "reinstall it: pip install --force-reinstall triton",
            )
        return TritonUnavailable(
            f"the Triton interpreter needs {module}, which cannot be imported ({problem})",
            f"reinstall it: pip install --force-reinstall {module}",
        )
    return None


def triton_unavailable(device_type: str) -> TritonUnavailable | None:
    """Why Triton kernels cannot run on ``device_type`` tensors here, or ``None`` if they can
    (probed once per device kind and ``TRITON_INTERPRET`` setting)."""
    now = interpreter_enabled()
    key = (device_type, now)
    try:
        answer = _probed[key]
    except KeyError:
        answer = _probed[key] = _probe(*key)
    if answer is not None:
        return answer
    imported = _imported_mode
    if imported is None:
        if _TRITON_LIBRARY[0] not in sys.modules:
            return None  # Triton is not imported: it will read the variable as it is now
        imported = triton_imported_interpreted()
        if imported is None:
            return None
    return _mismatch(now, imported)
