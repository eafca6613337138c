"""The autotuner: times every (backend, tactic) the dispatcher offers and keeps the best.

``from flashinfer.autotuner import AutoTuner, autotune, save_tuning_file, load_tuning_file``;
the old spellings (upstream's ``save_configs``/``load_configs``, ...) are the same objects
(:data:`~flashinfer.autotuner.tuning_file.OLD_SPELLINGS`).  The guide: docs/api/autotuner.rst.
Names load on first use (PEP 562): an op that registers with the tuner imports the tuner
only, not the tuning file nor the ``autotune()`` block.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the same names, for type checkers and readers
    from flashinfer.autotuner.block import (  # noqa: F401
        NOISY_SPREAD,
        AutotuneReport,
        AutotuneReportWarning,
        FileReport,
        KeyReport,
        autotune,
    )
    from flashinfer.autotuner.distributed import (  # noqa: F401
        AutotuneConsistencyError,
        get_autotune_process_group,
        set_autotune_process_group,
    )
    from flashinfer.autotuner.keys import EnumValue, bucket_dim, make_key  # noqa: F401
    from flashinfer.autotuner.timing import TuningDuringCaptureError  # noqa: F401
    from flashinfer.autotuner.tuner import (  # noqa: F401
        AUTOTUNER_LOG_ENV,
        AutoTuner,
        Choice,
        OpStats,
        ProgressCallback,
        TacticFailure,
        TunableOp,
        TunableRunner,
        TuningRecord,
        is_tuning,
    )
    from flashinfer.autotuner.tuning_file import (  # noqa: F401
        MAX_DEPTH,
        OLD_SPELLINGS,
        READABLE_SCHEMAS,
        SCHEMA_VERSION,
        AutotuneCacheError,
        AutotuneCacheWarning,
        CacheDocument,
        CacheEntry,
        LoadReport,
        TuningFileDocument,
        TuningFileEntry,
        TuningFileError,
        TuningFileWarning,
        check_mergeable,
        load_configs,
        load_tuning_file,
        save_configs,
        save_tuning_file,
    )

_TUNER: tuple[str, ...] = (
    "AUTOTUNER_LOG_ENV",
    "AutoTuner",
    "Choice",
    "OpStats",
    "ProgressCallback",
)
_TUNER += ("TacticFailure", "TunableOp", "TunableRunner", "TuningRecord", "is_tuning")
_FILE: tuple[str, ...] = (
    "MAX_DEPTH",
    "OLD_SPELLINGS",
    "READABLE_SCHEMAS",
    "SCHEMA_VERSION",
    "LoadReport",
)
_FILE += ("TuningFileDocument", "TuningFileEntry", "TuningFileError", "TuningFileWarning")
_FILE += ("check_mergeable", "load_tuning_file", "save_tuning_file")
# the old spellings of the tuning file's names (tuning_file.OLD_SPELLINGS): the same objects
_FILE += ("AutotuneCacheError", "AutotuneCacheWarning", "CacheDocument", "CacheEntry")
_FILE += ("load_configs", "save_configs")
_BLOCK: tuple[str, ...] = (
    "autotune",
    "NOISY_SPREAD",
    "AutotuneReport",
    "AutotuneReportWarning",
    "FileReport",
)
_BLOCK += ("KeyReport",)

#: Public name -> the module that defines it.
_HOME: dict[str, str] = {
    **dict.fromkeys(_TUNER, "tuner"),
    **dict.fromkeys(_FILE, "tuning_file"),
    **dict.fromkeys(_BLOCK, "block"),
    "AutotuneConsistencyError": "distributed",
    "get_autotune_process_group": "distributed",
    "set_autotune_process_group": "distributed",
    "EnumValue": "keys",
    "bucket_dim": "keys",
    "make_key": "keys",
    "TuningDuringCaptureError": "timing",
}

__all__ = sorted(_HOME)


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
