"""Overlap attacks: an :class:`OverlapItem` runs one :class:`Attack` on one (op, backend,
case): the op must raise ``ValueError`` before writing anything, or, where its rule allows
the aliasing, match the reference.  Import these from :mod:`flashinfer.testing`."""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

from flashinfer.dispatch.overlap import OverlapRule
from flashinfer.testing.conformance import (
    Case,
    ConformanceItem,
    Inputs,
    call_quietly,
    expected_output,
    run_and_compare,
    support_reason,
)


@dataclass(frozen=True)
class Attack:
    """One way of making an op's tensor arguments overlap in memory, by ``kind``: ``"self"``
    (``target``, a written argument, becomes a zero-stride ``expand()`` view), ``"shifted"``
    (``target`` and ``other`` in one buffer, the second one row of the first after its start;
    ``target_first`` says which is first), ``"same"`` (``other`` passed as ``target`` too) or
    ``"read_alias"`` (of two read-only arguments, the smaller is a view one row into the
    larger)."""

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
    """Every attack on ``rule``'s arguments: each written one against itself and every later
    argument (shifted both ways, and the same tensor); each read-only pair aliased."""
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


@dataclass(frozen=True, order=True)
class UnbuiltAttack:
    """An attack that could not be built for a declared case, and why."""

    op: str
    case: str
    attack: str
    reason: str


Built = tuple[dict[str, torch.Tensor], list[torch.Tensor]]


def build_attack(attack: Attack, tensors: Mapping[str, torch.Tensor]) -> Built | str:
    """``(replacement arguments, buffers to watch)``, or why the attack does not apply."""
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
    # ``first`` at the start of a buffer, ``second`` one row (1-D: half) of it later.
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
class OverlapItem(ConformanceItem):
    """One attack on one (op, backend, case) (``"auto"`` too); ``skip_check`` passes
    ``skip_check=True`` (the overlap rule holds there too)."""

    attack: Attack
    skip_check: bool = False
    rule: OverlapRule | None = None  # the op's, set by overlap_items()

    def __str__(self) -> str:
        skip = "-skip_check" if self.skip_check else ""
        return f"{super().__str__()}-{self.attack}{skip}"

    def run(self, device: torch.device | str = "cpu") -> str | None:
        """``None`` if the op behaved, the reason if the attack does not apply;
        ``AssertionError`` if it misbehaved."""
        rule = self.rule
        assert rule is not None, f"{self}: no overlap rule declared"
        inputs = self.case.make_inputs(device)
        if self.backend != "auto":
            reason = support_reason(self.op, self.backend, inputs)
            if reason is not None:
                return reason
        built = build_attack(self.attack, attack_tensors(rule, self.case, inputs))
        if isinstance(built, str):
            return built
        replaced, watched = built
        args = {**inputs, **replaced}
        before = [_bits(t).clone() for t in watched]
        if self.attack.allowed(rule):
            run_and_compare(self.op, self.case, args, self._options())
            if self.attack.kind == "read_alias" and not self._unchanged(watched, before):
                raise AssertionError(f"{self}: arguments that are only read were written")
            return None
        self._expect_refusal(rule, args, watched, before)
        return None

    def _options(self) -> dict[str, Any]:
        options = {} if self.backend is None else {"backend": self.backend}
        return {**options, "skip_check": True} if self.skip_check else options

    def _expect_refusal(
        self, rule: OverlapRule, args: Inputs, watched: list[torch.Tensor], before: list
    ) -> None:
        target, other, api = self.attack.target, self.attack.other, rule.api
        phrases = [f"{api}: {target} overlaps {other} ", f"{api}: {target} and {other} overlap"]
        if other is None:
            phrases = [f"{api}: {target} overlaps itself"]
        try:
            call_quietly(self.op, args, self._options())
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


def attack_tensors(rule: OverlapRule, case: Case, inputs: Inputs) -> dict[str, torch.Tensor]:
    """The tensors ``rule`` names (an omitted written one as zeros like the result)."""
    tensors = {n: inputs.get(n) for n in rule.written + rule.read}
    if any(tensors[n] is None for n in rule.written):
        result = expected_output(case, inputs)
        for n in rule.written:
            if tensors[n] is None:
                tensors[n] = torch.zeros_like(result)
    return tensors  # type: ignore[return-value]


def run_overlap_items_on(items: list[OverlapItem], device: str) -> list[str]:
    """Run every item on ``device`` in one test; the failures, one line each."""
    failures = []
    for item in items:
        try:
            item.run(device)
        except AssertionError as exc:
            failures.append(f"{item}: {exc}")
    return failures
