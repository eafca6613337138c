"""The old name of :mod:`flashinfer.autotuner.tuning_file` (objects pickled under it load)."""

from flashinfer.autotuner.tuning_file import *  # noqa: F403
from flashinfer.autotuner.tuning_file import __all__ as __all__
