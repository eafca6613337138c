"""The autotuner: times every (backend, tactic) the dispatcher offers and keeps the best.

Public surface::

    from flashinfer.autotuner import AutoTuner, autotune, TunableRunner, save_configs, load_configs

``AutoTuner.get().save_configs(path)`` / ``.load_configs(path)`` are the same (upstream's
names).

See :mod:`flashinfer.autotuner.tuner` (behaviour, threads, logging),
:mod:`flashinfer.autotuner.keys` (what a tuning key is, shape buckets),
:mod:`flashinfer.autotuner.cache` (the persisted JSON file) and
:mod:`flashinfer.autotuner.distributed` (one choice on every rank of a process group).
"""

from __future__ import annotations

from flashinfer.autotuner._choice_note import ChoiceView
from flashinfer.autotuner.cache import (
    MAX_DEPTH,
    READABLE_SCHEMAS,
    SCHEMA_VERSION,
    AutotuneCacheError,
    AutotuneCacheWarning,
    CacheDocument,
    CacheEntry,
    LoadReport,
    check_mergeable,
    load_configs,
    save_configs,
)
from flashinfer.autotuner.distributed import (
    AutotuneConsistencyError,
    get_autotune_process_group,
    set_autotune_process_group,
)
from flashinfer.autotuner.keys import EnumValue, bucket_dim, make_key
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
    autotune,
    is_tuning,
)
from flashinfer.dispatch.tuner_view import install_tuner_view

# The dispatcher asks the tuner about its choices (op.explain, the choice log) through this
# view; it never imports the autotuner.
install_tuner_view(ChoiceView(AutoTuner.get))

__all__ = [
    "AUTOTUNER_LOG_ENV",
    "MAX_DEPTH",
    "AutoTuner",
    "AutotuneCacheError",
    "AutotuneCacheWarning",
    "AutotuneConsistencyError",
    "CacheDocument",
    "CacheEntry",
    "Choice",
    "EnumValue",
    "LoadReport",
    "OpStats",
    "ProgressCallback",
    "READABLE_SCHEMAS",
    "SCHEMA_VERSION",
    "TacticFailure",
    "TunableOp",
    "TunableRunner",
    "TuningDuringCaptureError",
    "TuningRecord",
    "autotune",
    "bucket_dim",
    "check_mergeable",
    "get_autotune_process_group",
    "is_tuning",
    "load_configs",
    "make_key",
    "save_configs",
    "set_autotune_process_group",
]
