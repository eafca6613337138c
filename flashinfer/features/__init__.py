"""Code of graduated features, laid out as it was under ``flashinfer/experimental/``, and
stable now (``flashinfer lifecycle graduate --apply`` moves a feature's folder here; see
docs/lifecycle.rst).  Importing this package imports nothing.
"""
