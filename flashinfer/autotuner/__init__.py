"""The autotuner: times every (backend, tactic) the dispatcher offers and keeps the best.

``from flashinfer.autotuner import AutoTuner, autotune, save_tuning_file, load_tuning_file``;
the old spellings (upstream's ``save_configs``/``load_configs``, ...) are the same objects
(:data:`~flashinfer.autotuner.tuning_file.OLD_SPELLINGS`).  The guide: docs/api/autotuner.rst.
"""

from __future__ import annotations

from flashinfer.autotuner.block import autotune
from flashinfer.autotuner.block_report import (
    NOISY_SPREAD,
    AutotuneReport,
    AutotuneReportWarning,
    FileReport,
    KeyReport,
)
from flashinfer.autotuner.distributed import (
    AutotuneConsistencyError,
    get_autotune_process_group,
    set_autotune_process_group,
)
from flashinfer.autotuner.keys import EnumValue, bucket_dim, make_key
from flashinfer.autotuner.router import ChoiceView
from flashinfer.autotuner.timing import TuningDuringCaptureError
from flashinfer.autotuner.tuner import (
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
from flashinfer.autotuner.tuning_file import (  # the old spellings: the same objects
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
from flashinfer.dispatch.choice_log import install_tuner_view

# The dispatcher asks the tuner about its choices (op.explain, the choice log) through this
# view; it never imports the autotuner.
install_tuner_view(ChoiceView(AutoTuner.get))

__all__ = [
    "AUTOTUNER_LOG_ENV",
    "MAX_DEPTH",
    "NOISY_SPREAD",
    "OLD_SPELLINGS",
    "AutoTuner",
    "AutotuneConsistencyError",
    "AutotuneReport",
    "AutotuneReportWarning",
    "Choice",
    "EnumValue",
    "FileReport",
    "KeyReport",
    "LoadReport",
    "OpStats",
    "ProgressCallback",
    "READABLE_SCHEMAS",
    "SCHEMA_VERSION",
    "TacticFailure",
    "TunableOp",
    "TunableRunner",
    "TuningDuringCaptureError",
    "TuningFileDocument",
    "TuningFileEntry",
    "TuningFileError",
    "TuningFileWarning",
    "TuningRecord",
    "autotune",
    "bucket_dim",
    "check_mergeable",
    "get_autotune_process_group",
    "is_tuning",
    "load_tuning_file",
    "make_key",
    "save_tuning_file",
    "set_autotune_process_group",
    # old spellings of the tuning file's names (tuning_file.OLD_SPELLINGS): the same objects
    "AutotuneCacheError",
    "AutotuneCacheWarning",
    "CacheDocument",
    "CacheEntry",
    "load_configs",
    "save_configs",
]
