"""The parts of ``scripts/ci/testmap.py``, one job per module. Standard library only, except
the recorder, which needs coverage.py (the ``test`` extra).

- :mod:`.mapfile`: the map's format (commit, version, tests and what each ran) and its file.
- :mod:`.scopes`: which function each line of a Python file belongs to, and its imports.
- :mod:`.gitdiff`: a diff between two commits, as files and changed lines on both sides.
- :mod:`.rules`: the selection rules, from a diff and a map to what to run and why.
- :mod:`.shards`: a selection dealt over K shards by recorded durations.
- :mod:`.record`: the recording run (coverage.py contexts per test, subprocesses, data reads).
- :mod:`.replay`: the selection over the repository's own history, and mutants.
"""
