"""Declared test cases: an op's tests as values, run against every backend it has.

A :class:`Case` is a value known at collection time: a name, a seeded inputs factory, a
reference and a comparator.  Ops declare theirs next to their definition::

    declare_cases(rmsnorm, [Case("f16_2x3x100", inputs=..., reference=..., compare=allclose())])

and one conformance test runs every declared case against every backend the op registers
(read from ``op.backend_checks`` at collection time, so a backend added later is covered
with no new test code)::

    @pytest.mark.parametrize("item", conformance_items(experimental=False), ids=str)
    def test_conformance(item):
        reason = item.run("cpu")          # None when it ran and matched
        if reason is not None:
            pytest.skip(reason)            # the backend's own checker said why not

Comparators: :func:`allclose` (elementwise, tolerances per dtype) and
:func:`rel_frobenius` (``||actual - expected||_F / ||expected||_F`` bounded per dtype), which
is what a matmul wants: accumulation order moves single elements far more than the whole.

Overlap attacks: an op declares its :class:`~flashinfer.dispatch.overlap.OverlapRule` with its cases
(``declare_cases(op, cases, overlap=rule)``), and :func:`overlap_items` turns every
(op, backend, case) triple into attacks on every written argument: a zero-stride view of
it, views of it and of each other argument shifted against each other in one buffer, the
identical tensor passed twice, and read-only arguments aliasing each other.  Each attack
must raise ``ValueError`` before anything is written, or, where the rule allows the
aliasing, match the reference.  An attack that cannot be built for a case's tensors is left
out and counted (:func:`unbuilt_overlap_attacks`, :func:`unbuilt_overlap_summary`).

Helpers for the tests themselves: :func:`conformance_devices` and :func:`run_or_skip` (the
body of each lane's conformance test), and :func:`assert_runs_in_fresh_interpreter` (for
"imported only on first use" checks, which need a process that has imported nothing yet).

This module is the import path for all of it, and its own job is the registry: which ops
declared which cases, and the test items collected from them (:func:`conformance_items`,
:func:`overlap_items`).  The pieces live in ``cases.py`` (:class:`Case`, the
comparators), ``conformance.py`` (running one case on one backend) and ``overlap.py`` (the
attacks).

At import this module loads torch only; no pytest, no Triton, no ``flashinfer.experimental``
(the pytest helpers import pytest when called).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from typing import Any

from flashinfer.api_modules import load_all_apis
from flashinfer.dispatch.overlap import OverlapRule
from flashinfer.testing.cases import (
    ALLCLOSE_TOLERANCES,
    FROBENIUS_BOUNDS,
    Case,
    allclose,
    op_key,
    rel_frobenius,
)
from flashinfer.testing.cases import Comparator as Comparator
from flashinfer.testing.cases import Inputs as Inputs
from flashinfer.testing.conformance import (
    ConformanceItem,
    api_name_of,
    call_arguments,
    conformance_devices,
    run_or_skip,
    support_reason,
)
from flashinfer.testing.examples import (
    EXAMPLE_INPUTS,
    ExampleInputs,
    declare_example_inputs,
    example_inputs_for,
)
from flashinfer.testing.overlap import (
    Attack,
    OverlapItem,
    UnbuiltAttack,
    attack_tensors,
    build_attack,
    declare_overlap_rule,
    overlap_attacks,
    overlap_rule_for,
    run_overlap_items_on,
    unbuilt_summary,
)

__all__ = [
    "ALLCLOSE_TOLERANCES",
    "Attack",
    "Case",
    "ConformanceItem",
    "EXAMPLE_INPUTS",
    "ExampleInputs",
    "FROBENIUS_BOUNDS",
    "OverlapItem",
    "UnbuiltAttack",
    "allclose",
    "assert_runs_in_fresh_interpreter",
    "call_arguments",
    "cases_for",
    "conformance_devices",
    "conformance_items",
    "declare_cases",
    "declare_example_inputs",
    "declared_ops",
    "example_inputs_for",
    "overlap_attacks",
    "overlap_items",
    "overlap_rule_for",
    "rel_frobenius",
    "run_or_skip",
    "run_overlap_items_on",
    "support_reason",
    "unbuilt_overlap_attacks",
    "unbuilt_overlap_summary",
]

# --------------------------------------------------------------------------------------
# The registry of declared cases, and the test items collected from it
# --------------------------------------------------------------------------------------

_declared: dict[str, tuple[Any, list[Case]]] = {}
# Attacks overlap_items() could not build, by (op key, case name, attack): reported, not lost.
_unbuilt: dict[tuple[str, str, str], UnbuiltAttack] = {}


def declare_cases(
    op: Any,
    cases: Iterable[Case],
    *,
    overlap: OverlapRule | None = None,
    examples: ExampleInputs | None = None,
) -> None:
    """Register ``cases`` for ``op`` (a ``backend_requirement`` op or a plain API function),
    ``overlap``, the rule the op checks for the tensors it writes (see
    :func:`overlap_items`; an op with a dispatcher declares it to ``backend_requirement``,
    which applies it, and it is read from there), and ``examples``, the inputs
    ``flashinfer autotune`` and ``flashinfer explain`` build from a shape
    (:class:`ExampleInputs`).

    An op of the one list calls it in its module's ``declare_test_cases()``, which this kit
    runs when both are loaded (touching the op imports no test code); any other op may call
    it at import.  Names must be unique per op; declaring again replaces the op's cases and
    rule (module reloads stay idempotent).
    """
    cases = list(cases)
    names = [c.name for c in cases]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ValueError(f"declare_cases({op_key(op)}): duplicate case names {dupes}")
    # An op with a dispatcher declares its rule once, to backend_requirement(overlap=),
    # which applies it: its cases are attacked with that rule.
    dispatcher = getattr(op, "dispatcher", None)
    if dispatcher is not None and overlap is not None and overlap != dispatcher.overlap:
        raise ValueError(
            f"declare_cases({op_key(op)}): overlap={overlap!r} is not the rule the "
            f"dispatcher applies ({dispatcher.overlap!r}); pass it to "
            "backend_requirement(..., overlap=...) instead, which declares it for the cases too"
        )
    if overlap is None and dispatcher is not None:
        overlap = dispatcher.overlap
    _declared[op_key(op)] = (op, cases)
    declare_overlap_rule(op, overlap)
    if examples is not None:
        declare_example_inputs(op, examples)


def cases_for(op: Any) -> list[Case]:
    """The cases declared for ``op`` (empty if none)."""
    entry = _declared.get(op_key(op))
    return list(entry[1]) if entry else []


def declared_ops() -> list[Any]:
    """Every op with declared cases, after importing all API modules, sorted by name."""
    load_all_apis()
    return [_declared[k][0] for k in sorted(_declared)]


def conformance_items(*, experimental: bool | None = None) -> list[ConformanceItem]:
    """Every (op, backend, case) triple of the declared ops, read from ``op.backend_checks``.

    ``experimental=False`` keeps stable backends of stable APIs, ``True`` keeps experimental
    backends and experimental APIs, ``None`` keeps everything.
    """
    items = []
    for op in declared_ops():
        checks = getattr(op, "backend_checks", None)
        backends: list[str | None] = list(checks) if checks else [None]
        for backend in backends:
            for case in cases_for(op):
                item = ConformanceItem(op, backend, case)
                if experimental is None or item.experimental == experimental:
                    items.append(item)
    return items


def overlap_items(*, experimental: bool | None = None) -> list[OverlapItem]:
    """Every attack (:func:`overlap_attacks`) on every (op, backend, case) of the ops that
    declared an overlap rule, ``backend="auto"`` included; each refused attack also with
    ``skip_check=True`` on ops that have it.  Attacks that cannot be built for a case's
    shapes and dtypes (``"same"`` on tensors of different shapes, say) are left out here, at
    collection, rather than skipped, and recorded with the reason
    (:func:`unbuilt_overlap_attacks`, counted in a test run's summary).  ``experimental``
    filters as in :func:`conformance_items`, the record too."""
    items = []
    for op in declared_ops():
        rule = overlap_rule_for(op)
        if rule is None:
            continue
        checks = getattr(op, "backend_checks", None)
        backends: list[str | None] = [*checks, "auto"] if checks else [None]
        for case in cases_for(op):
            tensors = attack_tensors(rule, case, case.make_inputs("cpu"))
            attacks = []
            for attack in overlap_attacks(rule):
                built = build_attack(attack, tensors)
                if not isinstance(built, str):
                    attacks.append(attack)
                elif any(  # left out for a backend this filter keeps: say so at the end
                    experimental is None or item.experimental == experimental
                    for item in (OverlapItem(op, b, case, attack) for b in backends)
                ):
                    key = (op_key(op), case.name, str(attack))
                    _unbuilt[key] = UnbuiltAttack(api_name_of(op), case.name, str(attack), built)
            for backend, attack in itertools.product(backends, attacks):
                for skip in (False, True) if checks and not attack.allowed(rule) else (False,):
                    item = OverlapItem(op, backend, case, attack, skip)
                    if experimental is None or item.experimental == experimental:
                        items.append(item)
    return items


def unbuilt_overlap_attacks() -> list[UnbuiltAttack]:
    """The attacks :func:`overlap_items` has left out so far because they could not be built
    for a case's tensors, of the ops declared now, sorted."""
    return sorted(u for (key, _, _), u in _unbuilt.items() if key in _declared)


def unbuilt_overlap_summary() -> str:
    """:func:`unbuilt_overlap_attacks` counted per op and reason, for a test run's summary
    (tests/conftest.py prints it): ``""`` when every attack was built."""
    return unbuilt_summary(unbuilt_overlap_attacks())


# --------------------------------------------------------------------------------------
# Helpers for tests
# --------------------------------------------------------------------------------------


def assert_runs_in_fresh_interpreter(code: str) -> None:
    """Run ``code`` in a new Python process (``TRITON_INTERPRET=1``, so Triton kernels run on
    CPU tensors) and raise ``AssertionError`` with its stderr unless it exits 0.

    For import checks: the test process has long since imported everything.
    """
    import os
    import subprocess
    import sys

    env = dict(os.environ, TRITON_INTERPRET="1")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise AssertionError(f"exit status {proc.returncode}:\n{proc.stderr}")


def _declare_loaded_ops() -> None:
    """Op modules declare their cases in ``declare_test_cases()``, which runs when both the
    op's module and this kit are loaded: so touching an op imports no test code.  Those
    imported before the kit declare here; later ones at the end of their module."""
    import sys

    from flashinfer.api_modules import API_MODULES

    for name in API_MODULES:
        declare = getattr(sys.modules.get(name), "declare_test_cases", None)
        if declare is not None:
            declare()


_declare_loaded_ops()
