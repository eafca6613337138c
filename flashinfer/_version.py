"""The package's version (``pyproject.toml`` and the modules that stamp it read it here)."""

__version__ = "0.1.0"
