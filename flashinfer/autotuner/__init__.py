"""The autotuner: times every (backend, tactic) the dispatcher offers and keeps the best.

Public surface::

    from flashinfer.autotuner import AutoTuner, autotune, TunableRunner, save_configs, load_configs

``AutoTuner.get().save_configs(path)`` / ``.load_configs(path)`` are the same (upstream's
names).

See :mod:`flashinfer.autotuner.tuner` (behaviour, threads, logging),
:mod:`flashinfer.autotuner.keys` (what a tuning key is, shape buckets) and
:mod:`flashinfer.autotuner.cache` (the persisted JSON file).
"""

from __future__ import annotations

from .cache import (
    MAX_DEPTH,
    READABLE_SCHEMAS,
    SCHEMA_VERSION,
    AutotuneCacheError,
    AutotuneCacheWarning,
    LoadReport,
    check_mergeable,
    load_configs,
    save_configs,
)
from .keys import bucket_dim, make_key
from .tuner import (
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

__all__ = [
    "AUTOTUNER_LOG_ENV",
    "MAX_DEPTH",
    "AutoTuner",
    "AutotuneCacheError",
    "AutotuneCacheWarning",
    "Choice",
    "LoadReport",
    "OpStats",
    "ProgressCallback",
    "READABLE_SCHEMAS",
    "SCHEMA_VERSION",
    "TacticFailure",
    "TunableOp",
    "TunableRunner",
    "TuningRecord",
    "autotune",
    "bucket_dim",
    "check_mergeable",
    "is_tuning",
    "load_configs",
    "make_key",
    "save_configs",
]
