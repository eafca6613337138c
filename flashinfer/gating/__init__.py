"""The gate and what it rests on, one job per module: the experimental gate (``gate``),
warn-once and ``ExperimentalWarning`` (``warn_once``), every text about the opt-in
(``messages``), the API inventory and experimental metadata (``records``), the markers
(``stable_marker``, ``experimental_marker``), the lifecycle rules (``lifecycle``) and a
class's public module (``exposed``).  Of the dispatcher it uses only the code compiler (the
experimental API's generated wrapper) and, for the listing, the registry of ops; it never
imports the autotuner.  It reads the environment through :mod:`flashinfer.settings`.

Import the public names from ``flashinfer.api_logging`` (and ``flashinfer.lifecycle``); the
rest of the package imports these modules directly, never the facades.
"""
