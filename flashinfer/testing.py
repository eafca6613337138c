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

Overlap attacks: an op declares its :class:`~flashinfer.aliasing.OverlapRule` with its cases
(``declare_cases(op, cases, overlap=rule)``), and :func:`overlap_items` turns every
(op, backend, case) triple into attacks on every written argument: a zero-stride view of
it, views of it and of each other argument shifted against each other in one buffer, the
identical tensor passed twice, and read-only arguments aliasing each other.  Each attack
must raise ``ValueError`` before anything is written, or, where the rule allows the
aliasing, match the reference.

Helpers for the tests themselves: :func:`conformance_devices` and :func:`run_or_skip` (the
body of each lane's conformance test), and :func:`assert_runs_in_fresh_interpreter` (for
"imported only on first use" checks, which need a process that has imported nothing yet).

At import this module loads torch only; no pytest, no Triton, no ``flashinfer.experimental``
(the pytest helpers import pytest when called).
"""

from __future__ import annotations

import inspect
import itertools
import warnings
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from .aliasing import OverlapRule
from .api_logging import ExperimentalWarning
from .backend_dispatch import find_compute_capability

__all__ = [
    "ALLCLOSE_TOLERANCES",
    "Attack",
    "Case",
    "ConformanceItem",
    "FROBENIUS_BOUNDS",
    "OverlapItem",
    "allclose",
    "assert_runs_in_fresh_interpreter",
    "cases_for",
    "conformance_devices",
    "conformance_items",
    "declare_cases",
    "declared_ops",
    "overlap_attacks",
    "overlap_items",
    "overlap_rule_for",
    "rel_frobenius",
    "run_or_skip",
    "support_reason",
]

Inputs = dict[str, Any]
Comparator = Callable[[Any, Any], None]

ALLCLOSE_TOLERANCES: dict[torch.dtype, tuple[float, float]] = {
    torch.float32: (1e-5, 1e-5),
    torch.float16: (2e-3, 2e-3),
    torch.bfloat16: (1e-2, 1e-2),
}
"""Default ``(rtol, atol)`` per result dtype: about two units in the last place."""

FROBENIUS_BOUNDS: dict[torch.dtype, float] = {
    torch.float32: 1e-5,
    torch.float16: 2e-3,
    torch.bfloat16: 1e-2,
}
"""Default relative Frobenius-error bound per result dtype."""


# --------------------------------------------------------------------------------------
# Comparators
# --------------------------------------------------------------------------------------


def _pairs(actual: Any, expected: Any, path: str = "result") -> Iterable[tuple[str, Any, Any]]:
    if isinstance(expected, (tuple, list)):
        if not isinstance(actual, (tuple, list)) or len(actual) != len(expected):
            raise AssertionError(f"{path}: expected {len(expected)} outputs, got {actual!r}")
        for i, (a, e) in enumerate(zip(actual, expected, strict=True)):
            yield from _pairs(a, e, f"{path}[{i}]")
        return
    if not isinstance(actual, torch.Tensor):
        raise AssertionError(f"{path}: expected a tensor, got {type(actual).__name__}")
    if actual.shape != expected.shape:
        raise AssertionError(
            f"{path}: shape {tuple(actual.shape)}, expected {tuple(expected.shape)}"
        )
    if actual.dtype != expected.dtype:
        raise AssertionError(f"{path}: dtype {actual.dtype}, expected {expected.dtype}")
    yield path, actual, expected


def allclose(
    tolerances: Mapping[torch.dtype, tuple[float, float]] | None = None,
) -> Comparator:
    """Elementwise ``|actual - expected| <= atol + rtol * |expected|``, tolerances per dtype.

    ``tolerances`` overrides entries of :data:`ALLCLOSE_TOLERANCES`.  Shapes and dtypes must
    match exactly; tuples of outputs are compared element by element.
    """
    table = {**ALLCLOSE_TOLERANCES, **(tolerances or {})}

    def compare(actual: Any, expected: Any) -> None:
        for path, a, e in _pairs(actual, expected):
            rtol, atol = table[e.dtype]
            a64, e64 = a.detach().cpu().double(), e.detach().cpu().double()
            bad = ~torch.isclose(a64, e64, rtol=rtol, atol=atol)
            if bad.any():
                err = (a64 - e64).abs()
                idx = tuple(int(i) for i in torch.nonzero(bad)[0])
                raise AssertionError(
                    f"{path}: {int(bad.sum())} of {bad.numel()} elements differ beyond "
                    f"rtol={rtol}, atol={atol} ({e.dtype}); max abs error {err.max().item():.3g};"
                    f" first at {idx}: {a64[idx].item()!r} vs expected {e64[idx].item()!r}"
                )

    compare.__qualname__ = f"allclose({table})"
    return compare


def rel_frobenius(bounds: Mapping[torch.dtype, float] | float | None = None) -> Comparator:
    """``||actual - expected||_F <= bound * ||expected||_F``, the bound per result dtype.

    A float applies to every dtype; a mapping overrides entries of :data:`FROBENIUS_BOUNDS`.
    """
    if isinstance(bounds, (int, float)):
        table = dict.fromkeys(FROBENIUS_BOUNDS, float(bounds))
    else:
        table = {**FROBENIUS_BOUNDS, **(bounds or {})}

    def compare(actual: Any, expected: Any) -> None:
        for path, a, e in _pairs(actual, expected):
            a64, e64 = a.detach().cpu().double(), e.detach().cpu().double()
            if not torch.isfinite(a64).all():
                raise AssertionError(f"{path}: result has non-finite values")
            norm = e64.norm().item()
            err = (a64 - e64).norm().item()
            rel = err / norm if norm else err
            if rel > table[e.dtype]:
                raise AssertionError(
                    f"{path}: relative Frobenius error {rel:.3g} exceeds {table[e.dtype]:g} "
                    f"({e.dtype})"
                )

    compare.__qualname__ = f"rel_frobenius({table})"
    return compare


# --------------------------------------------------------------------------------------
# Cases and their registry
# --------------------------------------------------------------------------------------


def _to_device(value: Any, device: torch.device | str) -> Any:
    return value.to(device) if isinstance(value, torch.Tensor) else value


def _clone(value: Any) -> Any:
    return value.clone() if isinstance(value, torch.Tensor) else value


@dataclass(frozen=True)
class Case:
    """One declared test case of an op.

    Attributes:
        name: unique among the op's cases; part of the test id.
        inputs: ``inputs(generator) -> {parameter: value}``, the op's keyword arguments
            (without ``backend``), built on CPU from the seeded ``torch.Generator``; tensors
            are moved to the test's device afterwards, so every device sees the same values.
        reference: ``reference(**inputs) -> expected``, computed on a copy of the inputs
            before the op runs (so in-place ops are fine).
        compare: ``compare(actual, expected)`` raising ``AssertionError`` on a mismatch.
        seed: seed of the generator handed to ``inputs``.
        result: ``result(inputs, returned) -> actual``; by default the returned value.  An
            in-place op returns what it wrote, e.g. ``lambda ins, _: ins["input"]``.
    """

    name: str
    inputs: Callable[[torch.Generator], Inputs]
    reference: Callable[..., Any]
    compare: Comparator
    seed: int = 0
    result: Callable[[Inputs, Any], Any] | None = field(default=None)

    def make_inputs(self, device: torch.device | str = "cpu") -> Inputs:
        """The case's inputs on ``device``, freshly generated from the seed."""
        generator = torch.Generator().manual_seed(self.seed)
        return {k: _to_device(v, device) for k, v in self.inputs(generator).items()}


_declared: dict[str, tuple[Any, list[Case]]] = {}
_overlap_rules: dict[str, OverlapRule] = {}


def _op_key(op: Any) -> str:
    return getattr(op, "api_key", None) or f"{op.__module__}.{op.__qualname__}"


def declare_cases(op: Any, cases: Iterable[Case], *, overlap: OverlapRule | None = None) -> None:
    """Register ``cases`` for ``op`` (a ``backend_requirement`` op or a plain API function),
    and ``overlap``, the rule the op checks for the tensors it writes (see
    :func:`overlap_items`).

    Call at import of the op's module.  Names must be unique per op; declaring again
    replaces the op's cases and rule (module reloads stay idempotent).
    """
    cases = list(cases)
    names = [c.name for c in cases]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ValueError(f"declare_cases({_op_key(op)}): duplicate case names {dupes}")
    _declared[_op_key(op)] = (op, cases)
    if overlap is None:
        _overlap_rules.pop(_op_key(op), None)
    else:
        _overlap_rules[_op_key(op)] = overlap


def overlap_rule_for(op: Any) -> OverlapRule | None:
    """The overlap rule declared with ``op``'s cases (``None`` if none was)."""
    return _overlap_rules.get(_op_key(op))


def cases_for(op: Any) -> list[Case]:
    """The cases declared for ``op`` (empty if none)."""
    entry = _declared.get(_op_key(op))
    return list(entry[1]) if entry else []


def declared_ops() -> list[Any]:
    """Every op with declared cases, after importing all API modules, sorted by name."""
    import flashinfer

    flashinfer.load_all_apis()
    return [_declared[k][0] for k in sorted(_declared)]


# --------------------------------------------------------------------------------------
# Conformance
# --------------------------------------------------------------------------------------


def support_reason(op: Any, backend: str | None, inputs: Inputs) -> str | None:
    """Why ``backend`` of ``op`` does not support ``inputs``, or ``None`` if it does.

    Asks the backend's own capability declaration and support checker (the checker's
    ``ValueError`` message is the reason), without running the op.  ``backend=None`` (a
    plain API without backends) always returns ``None``.
    """
    if backend is None:
        return None
    bound = inspect.signature(op.__wrapped__).bind(**inputs, backend=backend)
    bound.apply_defaults()
    args = dict(bound.arguments)
    cc = find_compute_capability(*args.values())
    reason = op.backend_runnable_reason(backend, cc)
    if reason is not None:
        return f"{backend}: {reason}"
    checker = op.backend_checks[backend]
    params = inspect.signature(checker).parameters
    try:
        ok = checker(**{n: args[n] for n in params if n in args})
    except ValueError as exc:
        return f"{backend}: {exc}"
    return None if ok else f"{backend}: support check returned False for these inputs"


@dataclass(frozen=True)
class ConformanceItem:
    """One (op, backend, case) triple; ``backend`` is ``None`` for an API without backends."""

    op: Any
    backend: str | None
    case: Case

    @property
    def experimental(self) -> bool:
        """Whether the op is an experimental API or the backend an experimental backend."""
        if getattr(self.op, "is_experimental", False):
            return True
        return self.backend is not None and self.op.is_experimental_backend(self.backend)

    def __str__(self) -> str:
        name = getattr(self.op, "api_name", None) or self.op.__name__
        return f"{name}-{self.backend or 'api'}-{self.case.name}"

    def run(self, device: torch.device | str = "cpu") -> str | None:
        """Run the case on ``device``: ``None`` if it matched, the reason if unsupported.

        Raises ``AssertionError`` when the result does not match the reference.  Experimental
        warnings are silenced (running an experimental backend here is deliberate).
        """
        inputs = self.case.make_inputs(device)
        reason = support_reason(self.op, self.backend, inputs)
        if reason is not None:
            return reason
        expected = self.case.reference(**{k: _clone(v) for k, v in inputs.items()})
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ExperimentalWarning)
            if self.backend is None:
                returned = self.op(**inputs)
            else:
                returned = self.op(**inputs, backend=self.backend)
        actual = returned if self.case.result is None else self.case.result(inputs, returned)
        self.case.compare(actual, expected)
        return None


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


# --------------------------------------------------------------------------------------
# Overlap attacks
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Attack:
    """One way of making an op's tensor arguments overlap in memory.

    Kinds:
        ``"self"``: ``target`` (a written argument) becomes a zero-stride ``expand()`` view.
        ``"shifted"``: ``target`` (written) and ``other`` live in one buffer, the second one
            row (of the first) after the first's start, so they overlap partially;
            ``target_first`` says which comes first.
        ``"same"``: the ``other`` tensor is passed as ``target`` as well (when their
            shapes and dtypes match).
        ``"read_alias"``: two read-only arguments; the smaller is a view into the larger,
            one row in (e.g. ``weight`` is a row of ``input``).
    """

    kind: str
    target: str
    other: str | None = None
    target_first: bool = True

    def __str__(self) -> str:
        if self.kind == "self":
            return f"{self.target}-self"
        if self.kind == "shifted":
            pair = [self.target, self.other]
            first, second = pair if self.target_first else pair[::-1]
            return f"{second}-shifted-into-{first}"
        return f"{self.target}-{self.kind}-{self.other}"

    def allowed(self, rule: OverlapRule) -> bool:
        """Whether ``rule`` lets this aliasing through (the result must then be right)."""
        if self.kind == "read_alias":
            return True
        return self.kind == "same" and (self.target, self.other) in rule.in_place


def overlap_attacks(rule: OverlapRule) -> list[Attack]:
    """Every attack on ``rule``'s arguments: each written one against itself, against every
    later written one and every read one (shifted both ways, and the same tensor), and each
    pair of read-only arguments aliasing each other."""
    attacks = [Attack("self", w) for w in rule.written]
    for i, target in enumerate(rule.written):
        for other in rule.written[i + 1 :] + rule.read:
            attacks += [
                Attack("shifted", target, other, True),
                Attack("shifted", target, other, False),
                Attack("same", target, other),
            ]
    attacks += [Attack("read_alias", a, b) for a, b in itertools.combinations(rule.read, 2)]
    return attacks


Built = tuple[dict[str, torch.Tensor], list[torch.Tensor]]


def _build_attack(attack: Attack, tensors: Mapping[str, torch.Tensor]) -> Built | str:
    """``(replacement arguments, buffers to watch)`` for ``attack``, or why it does not
    apply to these tensors."""
    target = tensors[attack.target]
    if attack.kind == "self":
        dims = [d for d, n in enumerate(target.shape) if n > 1]
        if not dims:
            return f"{attack.target} has no dimension of 2 or more elements to expand"
        base = target.narrow(dims[0], 0, 1).clone(memory_format=torch.contiguous_format)
        return {attack.target: base.expand(target.shape)}, [base]
    assert attack.other is not None
    other = tensors[attack.other]
    if attack.kind == "shifted":
        pair = [(attack.target, target), (attack.other, other)]
        return _build_shifted(*(pair if attack.target_first else pair[::-1]))
    if attack.kind == "same":
        if target.shape != other.shape or target.dtype != other.dtype:
            return f"{attack.target} and {attack.other} differ in shape or dtype"
        return {attack.target: other, attack.other: other}, [other]
    if target.dtype != other.dtype:
        return f"{attack.target} and {attack.other} differ in dtype"
    (host_name, host), (guest_name, guest) = sorted(
        ((attack.target, target), (attack.other, other)), key=lambda kv: -kv[1].numel()
    )
    host = host.clone(memory_format=torch.contiguous_format)
    row = host.shape[-1] if host.dim() else 0
    start = min(row, host.numel() - guest.numel())
    return {
        host_name: host,
        guest_name: host.view(-1)[start : start + guest.numel()].view(guest.shape),
    }, [host]


def _build_shifted(
    first: tuple[str, torch.Tensor], second: tuple[str, torch.Tensor]
) -> Built | str:
    """``first`` at the start of a buffer, ``second`` one row of ``first`` later (half of
    ``first`` when it is 1-D), both contiguous."""
    (first_name, t1), (second_name, t2) = first, second
    rows = t1.shape[0] if t1.dim() >= 2 else 2
    size = t2.element_size()
    shift = -(-max(t1.nbytes // rows, 1) // size) * size  # rounded up to t2's alignment
    if not 0 < shift < t1.nbytes:
        return f"{first_name} is too small to shift {second_name} into it"
    buf = torch.zeros(shift + t1.nbytes + t2.nbytes, dtype=torch.uint8, device=t1.device)
    v1 = buf[: t1.nbytes].view(t1.dtype).view(t1.shape)
    v2 = buf[shift : shift + t2.nbytes].view(t2.dtype).view(t2.shape)
    v2.copy_(t2)
    v1.copy_(t1)  # the values do not matter: the op must refuse before reading them
    return {first_name: v1, second_name: v2}, [buf]


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.detach().cpu().contiguous().reshape(-1).view(torch.uint8)


@dataclass(frozen=True)
class OverlapItem:
    """One attack on one (op, backend, case): ``backend`` is ``None`` for an API without
    backends, and ``"auto"`` is attacked like the named backends; ``skip_check`` passes
    ``skip_check=True`` (the overlap rule holds there too)."""

    op: Any
    backend: str | None
    case: Case
    attack: Attack
    skip_check: bool = False

    @property
    def experimental(self) -> bool:
        """Whether the op is an experimental API or the backend an experimental backend."""
        if getattr(self.op, "is_experimental", False):
            return True
        return self.backend not in (None, "auto") and self.op.is_experimental_backend(self.backend)

    def __str__(self) -> str:
        name = getattr(self.op, "api_name", None) or self.op.__name__
        skip = "-skip_check" if self.skip_check else ""
        return f"{name}-{self.backend or 'api'}-{self.case.name}-{self.attack}{skip}"

    def run(self, device: torch.device | str = "cpu") -> str | None:
        """Run the attack on ``device``: ``None`` if the op behaved, the reason if the
        attack does not apply (the backend does not support the case, or the tensors do not
        allow it).  Raises ``AssertionError`` if a refused aliasing got through, the
        ``ValueError`` does not name the arguments, anything was written before it, or an
        allowed aliasing gave a result that differs from the reference."""
        rule = overlap_rule_for(self.op)
        assert rule is not None, f"{self}: no overlap rule declared"
        inputs = self.case.make_inputs(device)
        if self.backend != "auto":
            reason = support_reason(self.op, self.backend, inputs)
            if reason is not None:
                return reason
        tensors = {n: inputs.get(n) for n in rule.written + rule.read}
        if any(tensors[n] is None for n in rule.written):  # an omitted out: shaped as the result
            result = self.case.reference(**{k: _clone(v) for k, v in inputs.items()})
            for n in rule.written:
                if tensors[n] is None:
                    tensors[n] = torch.zeros_like(result)
        built = _build_attack(self.attack, tensors)  # type: ignore[arg-type]
        if isinstance(built, str):
            return built
        replaced, watched = built
        args = {**inputs, **replaced}
        before = [_bits(t).clone() for t in watched]
        if self.attack.allowed(rule):
            self._expect_reference(args)
            if self.attack.kind == "read_alias" and not self._unchanged(watched, before):
                raise AssertionError(f"{self}: arguments that are only read were written")
            return None
        self._expect_refusal(args, watched, before)
        return None

    def _call(self, args: Inputs) -> Any:
        kwargs = dict(args)
        if self.backend is not None:
            kwargs["backend"] = self.backend
        if self.skip_check:
            kwargs["skip_check"] = True
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ExperimentalWarning)
            return self.op(**kwargs)

    def _expect_reference(self, args: Inputs) -> None:
        expected = self.case.reference(**{k: _clone(v) for k, v in args.items()})
        returned = self._call(args)
        actual = returned if self.case.result is None else self.case.result(args, returned)
        self.case.compare(actual, expected)

    def _expect_refusal(self, args: Inputs, watched: list[torch.Tensor], before: list) -> None:
        rule = overlap_rule_for(self.op)
        assert rule is not None
        target, other = self.attack.target, self.attack.other
        if other is None:
            phrases = [f"{rule.api}: {target} overlaps itself"]
        else:
            phrases = [
                f"{rule.api}: {target} overlaps {other} ",
                f"{rule.api}: {target} and {other} overlap",
            ]
        try:
            self._call(args)
        except ValueError as exc:
            if not any(p in str(exc) for p in phrases):
                raise AssertionError(
                    f"{self}: the ValueError does not name the overlap ({phrases}): {exc}"
                ) from exc
            if not self._unchanged(watched, before):
                raise AssertionError(f"{self}: memory was written before the ValueError") from exc
            return
        raise AssertionError(f"{self}: no ValueError; the op ran on overlapping arguments")

    @staticmethod
    def _unchanged(watched: list[torch.Tensor], before: list[torch.Tensor]) -> bool:
        return all(torch.equal(_bits(t), b) for t, b in zip(watched, before, strict=True))


def _attack_tensors(op: Any, rule: OverlapRule, case: Case) -> dict[str, torch.Tensor]:
    """The case's tensors that ``rule`` names, built on CPU (an omitted ``out`` shaped as
    the result): what decides whether an attack applies."""
    inputs = case.make_inputs("cpu")
    tensors = {n: inputs.get(n) for n in rule.written + rule.read}
    if any(tensors[n] is None for n in rule.written):
        result = case.reference(**{k: _clone(v) for k, v in inputs.items()})
        for n in rule.written:
            if tensors[n] is None:
                tensors[n] = torch.zeros_like(result)
    return tensors  # type: ignore[return-value]


def overlap_items(*, experimental: bool | None = None) -> list[OverlapItem]:
    """Every attack (:func:`overlap_attacks`) on every (op, backend, case) of the ops that
    declared an overlap rule, ``backend="auto"`` included; each refused attack also with
    ``skip_check=True`` on ops that have it.  Attacks that cannot be built for a case's
    shapes and dtypes (``"same"`` on tensors of different shapes, say) are left out here, at
    collection, rather than skipped.  ``experimental`` filters as in
    :func:`conformance_items`."""
    items = []
    for op in declared_ops():
        rule = overlap_rule_for(op)
        if rule is None:
            continue
        checks = getattr(op, "backend_checks", None)
        backends: list[str | None] = [*checks, "auto"] if checks else [None]
        for case in cases_for(op):
            tensors = _attack_tensors(op, rule, case)
            attacks = [
                a for a in overlap_attacks(rule) if not isinstance(_build_attack(a, tensors), str)
            ]
            for backend, attack in itertools.product(backends, attacks):
                for skip in (False, True) if checks and not attack.allowed(rule) else (False,):
                    item = OverlapItem(op, backend, case, attack, skip)
                    if experimental is None or item.experimental == experimental:
                        items.append(item)
    return items


def run_overlap_items_on(items: list[OverlapItem], device: str) -> list[str]:
    """Run every item on ``device`` (a GPU test runs them all in one test, not one skipped
    test per item on CPU machines); return the failures, one line each."""
    failures = []
    for item in items:
        try:
            item.run(device)
        except AssertionError as exc:
            failures.append(f"{item}: {exc}")
    return failures


# --------------------------------------------------------------------------------------
# Helpers for tests (pytest imported on call)
# --------------------------------------------------------------------------------------


def conformance_devices() -> list[Any]:
    """The ``device`` parameters of a conformance test: ``"cpu"``, and ``"cuda"`` marked
    ``gpu`` (skipped cleanly without a CUDA device)."""
    import pytest

    return ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]


def run_or_skip(item: ConformanceItem, device: str) -> None:
    """Run ``item`` on ``device`` inside a test; skip with the backend's own reason when it
    does not support the case, fail when the result does not match."""
    import pytest

    reason = item.run(device)
    if reason is not None:
        pytest.skip(reason)


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
