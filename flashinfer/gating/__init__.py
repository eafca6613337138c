"""The gate and what it rests on, one job per module: the experimental gate (``gate``),
warn-once and ``ExperimentalWarning`` (``warn_once``), the API inventory and experimental
metadata (``records``), the markers (``stable_marker``, ``experimental_marker``), the
user's line for warnings (``stacklevel``) and the lifecycle rules (``lifecycle``).

Import the public names from ``flashinfer.api_logging`` (and ``flashinfer.lifecycle``); the
rest of the package imports these modules directly, never the facades.
"""
