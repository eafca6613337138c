"""The autotuner: times every (backend, tactic) the dispatcher offers and keeps the best.

Public surface::

    from flashinfer.autotuner import AutoTuner, autotune, TunableRunner, save_configs, load_configs

See :mod:`flashinfer.autotuner.tuner` (behaviour, threads, logging),
:mod:`flashinfer.autotuner.keys` (what a tuning key is, shape buckets) and
:mod:`flashinfer.autotuner.cache` (the persisted JSON file).
"""

from __future__ import annotations

from .cache import SCHEMA_VERSION, AutotuneCacheWarning, LoadReport, load_configs, save_configs
from .keys import bucket_dim, make_key
from .tuner import (
    AUTOTUNER_LOG_ENV,
    AutoTuner,
    Choice,
    ProgressCallback,
    TunableOp,
    TunableRunner,
    TuningRecord,
    autotune,
    is_tuning,
)

__all__ = [
    "AUTOTUNER_LOG_ENV",
    "AutoTuner",
    "AutotuneCacheWarning",
    "Choice",
    "LoadReport",
    "ProgressCallback",
    "SCHEMA_VERSION",
    "TunableOp",
    "TunableRunner",
    "TuningRecord",
    "autotune",
    "bucket_dim",
    "is_tuning",
    "load_configs",
    "make_key",
    "save_configs",
]
