"""Declared test cases: an op's tests as values (:func:`declare_cases`), run against every
backend it registers (:func:`conformance_items`) and attacked with overlapping views
(:func:`overlap_items`).  Imports torch only: no pytest, Triton or experimental code."""

from __future__ import annotations

import itertools
import sys
from collections import Counter
from collections.abc import Iterable
from typing import Any

from flashinfer.api_modules import API_MODULES, load_all_apis
from flashinfer.dispatch.overlap import OverlapRule
from flashinfer.testing.conformance import (
    ALLCLOSE_TOLERANCES,
    FROBENIUS_BOUNDS,
    Case,
    ConformanceItem,
    allclose,
    api_name_of,
    call_arguments,
    conformance_devices,
    op_key,
    rel_frobenius,
    run_or_skip,
    support_reason,
)
from flashinfer.testing.conformance import Comparator as Comparator
from flashinfer.testing.conformance import Inputs as Inputs
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
    overlap_attacks,
    run_overlap_items_on,
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

_declared: dict[str, tuple[Any, list[Case], OverlapRule | None]] = {}
# Attacks overlap_items() could not build, by (op key, case, attack): reported, not lost.
_unbuilt: dict[tuple[str, str, str], UnbuiltAttack] = {}


def declare_cases(
    op: Any,
    cases: Iterable[Case],
    *,
    overlap: OverlapRule | None = None,
    examples: ExampleInputs | None = None,
) -> None:
    """Register ``cases`` for ``op``, ``overlap`` (the rule of a plain API; an op with a
    dispatcher declares it to ``backend_requirement``) and ``examples`` (the CLI's inputs).
    An op of the one list calls it in its module's ``declare_test_cases()``.  Case names are
    unique per op; declaring again replaces the op's cases and rule."""
    cases = list(cases)
    names = [c.name for c in cases]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ValueError(f"declare_cases({op_key(op)}): duplicate case names {dupes}")
    dispatcher = getattr(op, "dispatcher", None)
    if dispatcher is not None and overlap is not None and overlap != dispatcher.overlap:
        raise ValueError(
            f"declare_cases({op_key(op)}): overlap={overlap!r} is not the rule the "
            f"dispatcher applies ({dispatcher.overlap!r}); pass it to "
            "backend_requirement(..., overlap=...) instead, which declares it for the cases too"
        )
    _declared[op_key(op)] = (op, cases, dispatcher.overlap if dispatcher is not None else overlap)
    if examples is not None:
        declare_example_inputs(op, examples)


def cases_for(op: Any) -> list[Case]:
    """The cases declared for ``op`` (empty if none)."""
    return list(_declared.get(op_key(op), (None, [], None))[1])


def overlap_rule_for(op: Any) -> OverlapRule | None:
    """The overlap rule declared with ``op``'s cases, or ``None``."""
    return _declared.get(op_key(op), (None, [], None))[2]


def declared_ops() -> list[Any]:
    """Every op with declared cases (all API modules imported), sorted by name."""
    load_all_apis()
    return [_declared[k][0] for k in sorted(_declared)]


def _kept(item: ConformanceItem | OverlapItem, experimental: bool | None) -> bool:
    return experimental is None or item.experimental == experimental


def conformance_items(*, experimental: bool | None = None) -> list[ConformanceItem]:
    """Every (op, backend, case) of the declared ops, backends read from
    ``op.backend_checks``; ``experimental=True`` / ``False``: only those."""
    items = []
    for op in declared_ops():
        for backend in list(getattr(op, "backend_checks", None) or [None]):
            items += [ConformanceItem(op, backend, case) for case in cases_for(op)]
    return [item for item in items if _kept(item, experimental)]


def overlap_items(*, experimental: bool | None = None) -> list[OverlapItem]:
    """Every attack on every (op, backend, case) of the ops with an overlap rule, ``"auto"``
    included; a refused attack also with ``skip_check=True``.  One that cannot be built is
    left out and recorded (:func:`unbuilt_overlap_attacks`)."""
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
                elif any(_kept(OverlapItem(op, b, case, attack), experimental) for b in backends):
                    key = (op_key(op), case.name, str(attack))  # left out: said at the end
                    _unbuilt[key] = UnbuiltAttack(api_name_of(op), case.name, str(attack), built)
            for backend, attack in itertools.product(backends, attacks):
                for skip in (False, True) if checks and not attack.allowed(rule) else (False,):
                    items.append(OverlapItem(op, backend, case, attack, skip, rule))
    return [item for item in items if _kept(item, experimental)]


def unbuilt_overlap_attacks() -> list[UnbuiltAttack]:
    """The attacks :func:`overlap_items` could not build so far, sorted."""
    return sorted(u for (key, _, _), u in _unbuilt.items() if key in _declared)


def unbuilt_overlap_summary() -> str:
    """:func:`unbuilt_overlap_attacks` counted per op and reason (``""``: none)."""
    unbuilt = unbuilt_overlap_attacks()
    if not unbuilt:
        return ""
    counts = Counter((u.op, u.reason) for u in unbuilt)
    return "\n".join(
        [
            f"{len(unbuilt)} overlap attack{'s' if len(unbuilt) != 1 else ''} could not be "
            "built (left out at collection, run for no backend):",
            *(f"  {op}: {reason}: {n}" for (op, reason), n in sorted(counts.items())),
        ]
    )


def assert_runs_in_fresh_interpreter(code: str) -> None:
    """Run ``code`` in a new Python process (``TRITON_INTERPRET=1``); ``AssertionError``
    with its stderr unless it exits 0 (for import checks)."""
    import os
    import subprocess

    env = dict(os.environ, TRITON_INTERPRET="1")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise AssertionError(f"exit status {proc.returncode}:\n{proc.stderr}")


# Touching an op imports no test code: its declare_test_cases() runs here for the op modules
# loaded before the kit, at the end of their module for those loaded after it.
for _module in API_MODULES:
    getattr(sys.modules.get(_module), "declare_test_cases", lambda: None)()
