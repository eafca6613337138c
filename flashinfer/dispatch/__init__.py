"""The dispatcher's internals, one job per module; import from ``flashinfer.backend_dispatch``
(``flashinfer.backend_families`` and ``flashinfer.aliasing`` for the families and the overlap
rules)."""
