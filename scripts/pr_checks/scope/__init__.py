"""The test-scope tools' parts, one job per module (standard library only).

``experimental_test_scope.py`` and ``bot_command.py`` beside this folder are the commands CI
runs; they are built from these modules and keep their names importable:

- ``errors``: invalid input (:class:`ScopeError`), the exit codes, reading an input file;
- ``targets``: what a safe pytest target is, and validating a list of them;
- ``markdown``: the Markdown structure (fences, HTML comments) both commands read through;
- ``block``: the ``experimental-tests`` block of a PR description;
- ``comment``: a ``@flashinfer-bot run`` comment and the decision it asks for;
- ``statuses``: a scope published as ``ci/test-scope-N`` commit statuses, and read back;
- ``verdict``: the final verdict of pr-test.yml over its lanes' results;
- ``selftest``: the built-in cases of ``experimental_test_scope.py --selftest``.
"""
