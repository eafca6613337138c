"""``flashinfer.autotuner.cache``: the old name of :mod:`flashinfer.autotuner.tuning_file`.

Kept so that code written against it, and objects pickled under it (``TuningFileError``,
``TuningFileWarning`` and ``LoadReport`` were ``flashinfer.autotuner.cache``'s), keep
working: every name here is the very object of the one in ``flashinfer.autotuner.tuning_file``.
"""

from __future__ import annotations

from flashinfer.autotuner.tuning_file import *  # noqa: F403 - a re-export, by design
from flashinfer.autotuner.tuning_file import __all__ as __all__
