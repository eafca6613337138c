"""The overlap rule of every operator that writes into tensors it is given.

Decided from shapes, strides and addresses only: a ``ValueError`` naming the arguments when
an output overlaps itself, another output, or an input still read while it is written,
unless the op declares that pairing in place (``out=input``) and the two are the identical
view.  Disjoint address ranges are told apart by ``data_ptr()`` alone; intersecting ones
are compared exactly (in O(1) for stacks of equal runs with one row stride, else run by run).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import NamedTuple

import torch

from flashinfer.torch_boundary import FakeTensor, functorch_unwrapped, is_functorch_wrapped

__all__ = ["MAX_RUNS", "OverlapRule", "overlaps_itself", "tensors_overlap"]

MAX_RUNS = 1 << 20
"""Most runs of bytes listed per tensor in an exact comparison; beyond, overlap is assumed."""

_FEW_RUNS = 4096  # up to this many runs in all, compared as Python ints; beyond, as tensors


@dataclass(frozen=True)
class OverlapRule:
    """The tensors an op writes and reads, by parameter name: ``api`` (the first word of
    every message), ``written`` (``out``, or arguments updated in place), ``read`` (read
    while written), ``in_place``: ``(written, read)`` pairs that may be the identical view
    (the op updates in place and reads each element before writing it)."""

    api: str
    written: tuple[str, ...]
    read: tuple[str, ...]
    in_place: frozenset[tuple[str, str]] = frozenset()

    def check(self, *tensors: torch.Tensor | None) -> None:
        """Raise ``ValueError`` if ``tensors`` (in the order ``written + read``; None
        skipped) overlap in a way this rule forbids."""
        names = self.written + self.read
        if len(tensors) != len(names):
            raise TypeError(f"{self.api}: the overlap rule takes {names}, got {len(tensors)}")
        wrapped = is_functorch_wrapped
        if any(t is not None and (type(t) is not torch.Tensor or wrapped(t)) for t in tensors):
            tensors = tuple(None if t is None else _physical(t) for t in tensors)
        try:
            spans = [None if t is None else _span(t) for t in tensors]
        except _Undecidable:
            return  # a traced size without a value: the call is checked when it runs
        for i in range(len(self.written)):
            out, span = tensors[i], spans[i]
            if out is None or span is None:
                continue
            if overlaps_itself(out):
                raise ValueError(_self_overlap_message(self.api, names[i], out))
            lo, hi = span
            for j in range(i + 1, len(tensors)):
                t, t_span = tensors[j], spans[j]
                if t is None or t_span is None or hi <= t_span[0] or t_span[1] <= lo:
                    continue  # absent, or disjoint address ranges: the common case
                if _virtual(out) and not _same_storage(out, t):
                    continue  # fake tensors: addresses are offsets into each one's storage
                allowed = (names[i], names[j]) in self.in_place
                if allowed and _same_view(out, t):
                    continue
                if _runs_intersect(out, t):
                    raise ValueError(
                        _overlap_message(
                            self.api, names[i], names[j], j < len(self.written), allowed
                        )
                    )


def overlaps_itself(t: torch.Tensor) -> bool:
    """Whether two elements of ``t`` share an address (exact up to :data:`MAX_RUNS`)."""
    if _virtual(t):
        try:
            layout = _layout(t)
        except _Undecidable:
            return False  # decided when the call runs
    elif t.is_contiguous() or t.numel() <= 1:
        return False
    else:
        layout = _layout(t)
    if math.prod(layout.sizes) <= 1:
        return False
    dims = sorted(zip(layout.strides, layout.sizes, strict=True))
    span = 0  # elements reached by the dims with smaller strides
    for stride, size in dims:
        if size == 1:
            continue
        if stride == 0:
            return True
        if stride <= span:  # not nested: decide exactly
            return _runs_overlap_themselves(layout)
        span += (size - 1) * stride
    return False


def tensors_overlap(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether some byte of ``a`` is also a byte of ``b`` (exact up to :data:`MAX_RUNS`)."""
    a, b = _physical(a), _physical(b)
    if _virtual(a) and not _same_storage(a, b):
        return False
    try:
        a_lo, a_hi = _span(a)
    except _Undecidable:
        return False
    b_lo, b_hi = _span(b)
    return a_lo < b_hi and b_lo < a_hi and _runs_intersect(a, b)


def _self_overlap_message(api: str, name: str, t: torch.Tensor) -> str:
    if name == "out":
        fix = "Pass a fresh out (e.g. torch.empty of the result's shape) or out=None."
    else:
        fix = (
            f"{name} is written in place, so pass {name}.contiguous() (a copy whose elements "
            "are distinct) and read the result from that tensor."
        )
    return (
        f"{api}: {name} overlaps itself (shape {tuple(t.shape)}, strides {t.stride()}): "
        "several of its elements share one address, so the results written to them would "
        f"overwrite each other. {fix}"
    )


def _overlap_message(api: str, out: str, other: str, both_written: bool, in_place: bool) -> str:
    if both_written:
        return (
            f"{api}: {out} and {other} overlap, and both are written, so one would overwrite "
            f"the other's result. Pass tensors that share no memory, e.g. {other}.clone()."
        )
    if in_place:
        how = f"but is not the same view ({out}={other} itself updates in place)"
        fix = f"{out}={other} itself, a separate {out}, or {other}.clone()"
    else:
        how = f"and {api} cannot run in place on {other}"
        fix = f"a {out} that shares no memory with {other}, or {other}.clone()"
    return (
        f"{api}: {out} overlaps {other} {how}: {out} is written while {other} is still being "
        f"read, so the result would depend on the order the kernel runs in. Pass {fix}."
    )


def _physical(t: torch.Tensor) -> torch.Tensor:
    """The tensor whose memory a kernel would touch, under functorch's wrappers."""
    while is_functorch_wrapped(t):
        t = functorch_unwrapped(t)
    return t


class _Undecidable(Exception):
    """A traced (symbolic) size, stride or offset with no example value behind it."""


class _Layout(NamedTuple):
    """Where a tensor's elements lie: first byte (a fake tensor's: its storage offset),
    sizes, strides (in elements), element size."""

    address: int
    sizes: tuple[int, ...]
    strides: tuple[int, ...]
    element_size: int


def _layout(t: torch.Tensor) -> _Layout:
    """``t``'s layout; symbolic sizes read as their hints (no guard: overlap is a property
    of how the views were built, not of their sizes)."""
    es = t.element_size()
    if not _virtual(t):
        return _Layout(t.data_ptr(), tuple(t.shape), tuple(t.stride()), es)
    return _Layout(
        _hint(t.storage_offset()) * es,
        tuple(_hint(s) for s in t.shape),
        tuple(_hint(s) for s in t.stride()),
        es,
    )


def _hint(value: int | torch.SymInt) -> int:
    if isinstance(value, int):
        return value
    hint = value.node.hint
    if hint is None:
        raise _Undecidable
    return int(hint)


def _virtual(t: torch.Tensor) -> bool:
    """Whether ``t`` has no real addresses (a fake tensor: only tensors of one storage are
    compared, as fake storages alias as the real ones will)."""
    return isinstance(t, FakeTensor)


def _same_storage(a: torch.Tensor, b: torch.Tensor) -> bool:
    return bool(a.untyped_storage()._cdata == b.untyped_storage()._cdata)


def _same_view(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Same address, dtype, shape, and stride wherever a dim has two or more elements."""
    la, lb = _layout(a), _layout(b)
    if la.address != lb.address or a.dtype != b.dtype or la.sizes != lb.sizes:
        return False
    return la.strides == lb.strides or all(
        sa == sb or size == 1 for size, sa, sb in zip(la.sizes, la.strides, lb.strides, strict=True)
    )


def _span(t: torch.Tensor) -> tuple[int, int]:
    """``t``'s address range ``[first byte, one past the last)``."""
    if not _virtual(t) and t.is_contiguous():  # the common case, without building a layout
        lo = t.data_ptr()
        return lo, lo + t.nbytes
    layout = _layout(t)
    lo = layout.address
    if 0 in layout.sizes:
        return lo, lo
    dims = zip(layout.sizes, layout.strides, strict=True)
    last = sum((size - 1) * stride for size, stride in dims)
    return lo, lo + (last + 1) * layout.element_size


class _Runs(NamedTuple):
    """A tensor's bytes as ``number`` equal runs of ``length`` bytes, starting at
    ``start + sum(i_k * stride_k)`` over the ``outer`` ``(byte stride, size)`` dims."""

    start: int
    length: int
    outer: list[tuple[int, int]]
    number: int

    def listed(self) -> list[int]:
        """The sorted starts, as Python ints."""
        starts = [self.start]
        for stride, size in self.outer:
            starts = [s + i * stride for s in starts for i in range(size)]
        return sorted(starts)

    def tensor(self) -> torch.Tensor:
        """The sorted starts, as an int64 CPU tensor."""
        starts = torch.tensor([self.start], dtype=torch.int64)
        for stride, size in self.outer:
            starts = (starts[:, None] + torch.arange(size, dtype=torch.int64) * stride).reshape(-1)
        return starts.sort().values


def _runs(layout: _Layout) -> _Runs:
    """A layout's runs (the innermost contiguous dims folded into one)."""
    es = layout.element_size
    dims = sorted(zip(layout.strides, layout.sizes, strict=True))
    dims = [(stride, size) for stride, size in dims if size > 1 and stride > 0]
    length = es
    while dims and dims[0][0] * es == length:
        length *= dims.pop(0)[1]
    number = 1
    for _, size in dims:
        number *= size
    return _Runs(layout.address, length, [(stride * es, size) for stride, size in dims], number)


def _runs_overlap_themselves(layout: _Layout) -> bool:
    runs = _runs(layout)  # callers have ruled out zero strides, which _runs drops
    if runs.number > MAX_RUNS:
        return True  # too many pieces to list: assume the worst
    if runs.number <= _FEW_RUNS:
        starts = runs.listed()
        return any(nxt < cur + runs.length for cur, nxt in itertools.pairwise(starts))
    tensor = runs.tensor()
    return bool((tensor[1:] < tensor[:-1] + runs.length).any())


def _runs_intersect(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Exact overlap of two tensors (called when their address ranges intersect)."""
    if a.device != b.device or (a.device.type == "meta" and not _virtual(a)):
        return False  # no memory shared: another device, or none at all
    ra, rb = _runs(_layout(a)), _runs(_layout(b))
    if len(ra.outer) <= 1 and len(rb.outer) <= 1:
        return _strided_runs_meet(ra, rb)
    if ra.number > MAX_RUNS or rb.number > MAX_RUNS:
        return True  # too many pieces to list: assume the worst
    if ra.number + rb.number <= _FEW_RUNS:
        return _sorted_runs_meet(ra.listed(), ra.length, rb.listed(), rb.length)
    a_starts, b_starts = ra.tensor(), rb.tensor()
    # A run of b [s, s + rb.length) meets a's runs iff the last of a's runs starting
    # before its end ends after s (a's runs are sorted and of equal length).
    before = torch.searchsorted(a_starts, b_starts + rb.length, side="left") - 1
    ends = a_starts[before.clamp(min=0)] + ra.length
    return bool(((before >= 0) & (ends > b_starts)).any())


def _strided_runs_meet(a: _Runs, b: _Runs) -> bool:
    """Whether runs of at most one outer dim each meet: O(1) when the strides agree."""
    a_stride, a_rows = a.outer[0] if a.outer else (0, 1)
    b_stride, b_rows = b.outer[0] if b.outer else (0, 1)
    stride = a_stride or b_stride
    if b_stride not in (0, stride):
        return _sorted_runs_meet(a.listed(), a.length, b.listed(), b.length)
    if stride == 0:  # one run each
        return a.start < b.start + b.length and b.start < a.start + a.length
    # Run i of a and run k of b meet iff -b.length < d + (k - i) * stride < a.length, with
    # d the distance between the first runs: solve for t = k - i, then clip t to the rows.
    d = b.start - a.start
    t_min = (-b.length - d) // stride + 1
    t_max = -((d - a.length) // stride) - 1
    return max(t_min, 1 - a_rows) <= min(t_max, b_rows - 1)


def _sorted_runs_meet(a: list[int], a_len: int, b: list[int], b_len: int) -> bool:
    """Whether runs of ``a_len`` bytes at sorted starts ``a`` meet runs of ``b_len`` at
    sorted starts ``b`` (runs of one length end in the order they start)."""
    i = j = 0
    while i < len(a) and j < len(b):
        if a[i] + a_len <= b[j]:
            i += 1
        elif b[j] + b_len <= a[i]:
            j += 1
        else:
            return True
    return False
