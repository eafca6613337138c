"""Code generation, a leaf of the package: it imports nothing else of ``flashinfer``."""
