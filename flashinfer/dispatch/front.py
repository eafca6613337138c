"""The public dispatcher of an op whose verdicts are cached: read the signature, look it up.

What ``backend_requirement`` returns, generated per op like the checking path (``emitter``)
it stands in front of.  A named backend runs its checks here, as the checking path would
(``emitter.explicit_lines``): they cost about what reading the signature does.  A
``backend="auto"`` call reads its signature (``signature``: unrolled for each argument-type
pattern learnt so far), looks the verdict up in the op's cache (``verdicts``) and, on a hit,
does what the checking path does after its selection: the per-thread records, the warn-once
test, the choice log, then the router (with the verdict's slot, see ``route_auto``) or the
body.  A miss calls the checking path with the signature, which stores the verdict when the
selection succeeds; a call that cannot be cached (a new pattern, an uncacheable argument, an
unrecognised gate value) calls it without one.  An op with a backend that cannot
differentiate (see ``plan``) also keys on whether grad is required; no other op reads grad
mode.

A hit allocates no tensor, never synchronises a device and calls nothing of ``warnings``
(only a once-flag test), so a cached decision can sit inside a captured region.

A call of a pattern not seen yet learns it (up to ``MAX_PATTERNS``): the function is
regenerated and its code replaced in place (``__code__``), since users hold the function
itself (``flashinfer.rmsnorm``); the call in flight finishes on the old code.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import Any

import torch

from flashinfer.codegen.compiler import compile_function, render_call
from flashinfer.dispatch.autocast import prologue_lines
from flashinfer.dispatch.emitter import body_call, explicit_lines, overlap_lines
from flashinfer.dispatch.reference import ReferenceDispatcher
from flashinfer.dispatch.signature import (
    MAX_PATTERNS,
    TENSOR_TYPES,
    cacheable_pattern,
    pattern_source,
)
from flashinfer.dispatch.torch_op import run_outside_dynamo
from flashinfer.dispatch.tracing import route_lines
from flashinfer.gating.gate import (
    ALLOW_EXPERIMENTAL_AUTO_BACKENDS_ENV,
    GATE_OFF_VALUES,
    environment_reader,
)
from flashinfer.kernels.availability import TRITON_INTERPRET_ENV, TRITON_LIBRARY_MODULE

__all__ = ["Front"]


class Front:
    """Builds the public dispatcher of ``op`` and relearns it as patterns appear."""

    def __init__(self, op: ReferenceDispatcher, ns: dict[str, Any]) -> None:
        self.op, self.ns = op, ns
        self.names = list(op._sig.names)
        self.patterns: list[tuple[type, ...]] = []
        self._lock = threading.Lock()
        self.function: Any = None
        self._namespace()

    def _namespace(self) -> None:
        ns, op = self.ns, self.op
        ns["_memo"] = op.verdict_cache.memo
        ns["_learn"] = self.learn
        ns["_Exception"] = Exception
        # The raw gate values that do not warn (bytes from os.environ's data, str elsewhere).
        quiet = (*GATE_OFF_VALUES, "1")
        ns["_GATE_VALUES"] = frozenset({None, *quiet, *(v.encode() for v in quiet)})
        # Environment the verdicts depend on: the gate (ops with experimental backends) and
        # what the checks declare.  Each is read raw, at C level where the platform allows.
        env = list(op.environment)
        if op.experimental_backends:
            gate = ALLOW_EXPERIMENTAL_AUTO_BACKENDS_ENV
            env = [gate, *(e for e in env if e != gate)]
        self.env = env
        self.environ_checked = False
        for i, name in enumerate(env):
            read, environ = environment_reader(name)
            ns[f"_env{i}"] = read
            if environ is not None:  # the reader holds os.environ's data: check it is current
                ns["_os"], ns["_environ"] = environ
                self.environ_checked = True
        # TRITON_INTERPRET means what it says only until Triton is imported: from then on
        # Triton runs in the mode it was imported in, whatever the variable says later.  So
        # the key holds whether Triton's library is imported, beside the raw value: a
        # verdict cached before the import is never served after it (issue 34, item 21).
        self.triton_mode = TRITON_INTERPRET_ENV in env
        if self.triton_mode:
            ns["_modules"], ns["_TRITON_LIBRARY"] = sys.modules, TRITON_LIBRARY_MODULE

    def build(self) -> Callable[..., Any]:
        """The public function (no pattern learnt yet)."""
        self.function = self._generate()
        return self.function

    def learn(self, values: tuple) -> None:
        """A call whose types match no learnt pattern: learn its pattern, if cacheable and
        there is room, and regenerate.  That call itself goes uncached."""
        pattern = cacheable_pattern(values)
        if pattern is None:
            return
        with self._lock:
            if pattern in self.patterns or len(self.patterns) >= MAX_PATTERNS:
                return
            self.patterns.append(pattern)
            new: Any = self._generate()
            fn = self.function
            fn.__code__ = new.__code__
            fn.__generated_source__ = new.__generated_source__
            if getattr(fn, "_flashinfer_eager_only", False):  # see tracing._eager_only
                run_outside_dynamo(fn.__code__)

    # ---- the generated source --------------------------------------------------------------

    def _generate(self) -> Callable[..., Any]:
        op, ns = self.op, self.ns
        sig, specs = op._sig, op._specs
        call = render_call("_func", specs["__func__"])
        keyed = render_call("_checked", specs["__func__"])[:-1] + ", _key=_k)"
        keyed_skip = render_call("_skip_auto", specs["__func__"])[:-1] + ", _key=_k)"
        scanned = ", ".join(f"*{n}" if spread else n for n, spread in op._scanned)
        lines = [
            *prologue_lines(op),
            "    if skip_check:",
            "        if backend != 'auto':",
            *(f"        {c}" for c in route_lines(op, "unchecked")),
            *(f"            {c}" for c in overlap_lines(op)),
            f"            return {call}",
            f"    _cc = None if _CUDA.absent else _CUDA.find({scanned})",
        ]
        # A named backend runs its checks, as it did before the cache (see emitter).
        lines += explicit_lines(op)
        lines += route_lines(op, "auto")
        gated = bool(op.experimental_backends)
        lines.append("    _rx = _rfind(_api) if _RS.on else None")
        if gated:
            lines.append("    _g = _env0()")
        env = [f"_env{i}()" for i in range(1 if gated else 0, len(self.env))]
        if self.triton_mode:
            env.append("(_TRITON_LIBRARY in _modules)")
        lines.append("    try:")
        branch = "if"
        if self.environ_checked:  # os.environ replaced (a mock): the readers would not see it
            lines += ["        if _os.environ is not _environ:", "            _k = None"]
            branch = "elif"
        for i, pattern in enumerate(self.patterns):
            test, items = pattern_source(pattern, self.names, ns, f"p{i}_")
            tail = ["_cc", "_rx", *(["_g"] if gated else []), *env]
            tail += [*self._grad_item(pattern), "skip_check"]
            lines += [
                f"        {branch} {test}:",
                f"            _k = ({', '.join([str(i), *items, *tail])},)",
            ]
            branch = "elif"
        learn = f"_learn(({', '.join(self.names)},))"
        if branch == "if":
            lines += [f"        _k = {learn}"]
        else:
            lines += ["        else:", f"            _k = {learn}"]
        lines += ["    except _Exception:", "        _k = None"]
        if gated:  # an unrecognised gate value warns once, on the call that reads it:
            lines += ["    if _g not in _GATE_VALUES:", "        _k = None"]  # never cached
        lines += [
            "    if _k is None:",
            *(f"    {c}" for c in route_lines(op, "uncached")),
            "        if skip_check:",
            f"            return {render_call('_skip_auto', specs['__func__'])}",
            f"        return {render_call('_checked', specs['__func__'])}",
            "    _v = _memo.get(_k)",
            "    if _v is None:",
            "        if skip_check:",
            f"            return {keyed_skip}",
            f"        return {keyed}",
        ]
        # A hit: the verdict stands for the checks; the overlap rule needs the addresses.
        lines += [f"    {c}" for c in overlap_lines(op)]
        lines += self._auto_hit(call)
        params = sig.def_params(ns, "skip_check=False")
        return compile_function(params, lines, ns, role="dispatcher", api=op.api_key)

    def _grad_item(self, pattern: tuple[type, ...]) -> list[str]:
        """The key's item saying whether grad is required, for a grad-gated op (one with a
        backend that cannot differentiate, see ``plan``): grad mode is on and a tensor
        argument of the pattern requires grad, as the grad gates decide.  None for any
        other op (nothing added), nor for a pattern without tensors (grad is never
        required)."""
        if not self.op.non_differentiable_backends:
            return []
        tensors = [n for n, tp in zip(self.names, pattern, strict=True) if tp in TENSOR_TYPES]
        if not tensors:
            return []
        self.ns["_grad_on"] = torch.is_grad_enabled
        needs = " or ".join(f"{n}.requires_grad" for n in tensors)
        return [f"(_grad_on() and ({needs}))"]

    def _auto_hit(self, call: str) -> list[str]:
        """``"auto"``: the verdict is (candidates, drops, whether it warns), recorded and
        handed on as the checking path does (``emitter._hand_on``)."""
        op = self.op
        routable = op.routed_inputs()
        route: list[str] = []
        if routable is not None:  # (the body or router runs as this call's: body_call)
            items = ", ".join(routable) + ("," if len(routable) == 1 else "")
            route = [
                "    if _route is not None and not skip_check:",
                "        if _rslot:",
                *(f"            {c}" for c in body_call(f"_route(_ok, ({items}), _rs)")),
                *(f"        {c}" for c in body_call(f"_route(_ok, ({items}))")),
            ]
        lines = ["    _ok, _drop, _wx, _rs = _v", "    if _rx is None:", "        _r = _state.r"]
        lines.append("        _r.suitable = _ok")
        if op.experimental_backends:
            lines += [
                "        _r.dropped = _drop",
                "        if _wx:",
                "            _warn(_api, _ok[0], automatic=True)",
            ]
        lines += [f"    {c}" for c in route]
        lines += [
            "        if _clog.armed and _ok[0] is not _lg.auto:",
            "            _notea(_lg, _ok, _drop)",
            *(f"        {c}" for c in body_call(call)),
        ]
        lines.append("    _r = _state.r")
        if op.experimental_backends:
            lines += ["    if _live.dropped and _r.dropped:", "        _r.dropped = ()"]
        lines.append("    _r.suitable = _ok")
        if op.experimental_backends:
            lines += ["    if _wx:", "        _warnl(_api, _ok, _XS)"]
        lines += route
        lines += [
            "    if _clog.armed and _ok[0] is not _lg.restricted:",
            "        _noter(_lg, _ok)",
            *(f"    {c}" for c in body_call(call)),
        ]
        return lines
