"""The package's version, in a module of its own: the package root re-exports it, and the
modules that stamp it (the tuning file, the CLI's report) import it from here rather than
from the root, which imports them (imports flow one way).  pyproject.toml reads it too."""

__version__ = "0.1.0"
