"""The one emitter: the op's public function, generated with the API's own parameter list."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import Any

import torch

from flashinfer.codegen.compiler import compile_function, module_namespace, render_call
from flashinfer.dispatch.autocast import INSIDE as AUTOCAST_INSIDE
from flashinfer.dispatch.autocast import prologue_lines
from flashinfer.dispatch.capability import CUDA_STATE, capability_rule
from flashinfer.dispatch.choice_log import LOG_SWITCH
from flashinfer.dispatch.restrictions import RESTRICTIONS, call_in_token_block, restriction_for
from flashinfer.dispatch.torch_op import run_outside_dynamo, traced_call
from flashinfer.dispatch.tracing import route_lines
from flashinfer.dispatch.verdicts import (
    MAX_PATTERNS,
    TENSOR_TYPES,
    cacheable_pattern,
    pattern_source,
)
from flashinfer.gating.gate import (
    ALLOW_EXPERIMENTAL_AUTO_BACKENDS_ENV,
    GATE_OFF_VALUES,
    environment_reader,
)
from flashinfer.gating.warn_once import backend_warning_flag, warn_experimental_backend_once
from flashinfer.kernels.availability import TRITON_INTERPRET_ENV, TRITON_LIBRARY_MODULE
from flashinfer.torch_boundary import is_any_autocast_enabled, is_jit_tracing

MAX_BRANCHES = 32
"""Most backends whose named-backend checks are spelled out (one ``elif`` each); a larger
table's named calls are checked by ``_named`` (a dict look-up): an ``elif`` chain of
thousands nests too deep for the compiler and takes long to compile."""


class Front:
    """Generates the public function of ``op`` and regenerates it as patterns appear."""

    def __init__(self, op: Any) -> None:
        self.op = op
        self.names = list(op._sig.names)
        self.patterns: list[tuple[type, ...]] = []
        self._lock = threading.Lock()
        self.function: Any = None
        self.ns = self._namespace()

    def _namespace(self) -> dict[str, Any]:
        """The generated code's globals, under names no API parameter can shadow."""
        op = self.op
        ns = module_namespace(op.api_key, "dispatcher")
        ns |= {
            "_func": op.__wrapped__,
            "_common": op.common_check,
            "_named": op._select,  # raises why a named backend cannot run
            "_decide": op._decide,  # the one selection, on a verdict-cache miss
            "_note": op._log_choice,
            "_CUDA": CUDA_STATE,
            "_state": op._state,
            "_live": op._live,
            "_warn": warn_experimental_backend_once,
            "_api": op.api_key,
            "_route": None,
            "_rslot": False,
            "_ValueError": ValueError,
            "_Exception": Exception,
            "_type": type,
            "_str": str,
            "_RS": RESTRICTIONS,
            "_rfind": restriction_for,
            "_clog": LOG_SWITCH,
            "_lg": op.choice_log,
            "_memo": op.verdict_cache.memo,
            "_learn": self.learn,
            # A traced call goes to the API's torch operator (see tracing).
            "_traced": traced_call,
            "_jit": is_jit_tracing,
            "_traceable": None,
            "_Tensor": torch.Tensor,
            "_ovl": op.overlap.check if op.overlap is not None else None,
            "_ac": is_any_autocast_enabled,
            "_acin": AUTOCAST_INSIDE,
            "_acall": None,
            "_CHECKS": op.backend_checks,
            "_alias": op.resolve_alias,
            "_tokcall": call_in_token_block,
            "_self": op,
        }
        for i, (name, chk) in enumerate(op.backend_checks.items()):
            ns[f"_chk{i}"] = chk
            ccs = capability_rule(chk)[1]
            if ccs is not None:
                ns[f"_ccs{i}"] = ccs
            if name in op.experimental_backends:
                ns[f"_once{i}"] = backend_warning_flag(op.api_key, name)
        # The verdict's environment: the gate (ops with experimental backends) and what the
        # checks declare they read, each read raw (at C level where the platform allows).
        env = list(op.environment)
        if op.experimental_backends:
            gate = ALLOW_EXPERIMENTAL_AUTO_BACKENDS_ENV
            env = [gate, *(e for e in env if e != gate)]
            quiet = (*GATE_OFF_VALUES, "1")  # the raw values that do not warn
            ns["_GATE_VALUES"] = frozenset({None, *quiet, *(v.encode() for v in quiet)})
        self.env, self.environ_checked = env, False
        for i, name in enumerate(env):
            read, environ = environment_reader(name)
            ns[f"_env{i}"] = read
            if environ is not None:  # the reader holds os.environ's data: check it is current
                ns["_os"], ns["_environ"] = environ
                self.environ_checked = True
        # TRITON_INTERPRET means what it says only until Triton is imported, so the key
        # also holds whether Triton's library is (issue 34, item 21).
        self.triton_mode = TRITON_INTERPRET_ENV in env
        if self.triton_mode:
            ns["_modules"], ns["_TRITON_LIBRARY"] = sys.modules, TRITON_LIBRARY_MODULE
        return ns

    def build(self) -> Callable[..., Any]:
        """The public function (no pattern learnt yet)."""
        self.function = self._generate()
        return self.function

    def learn(self, values: tuple) -> None:
        """A call whose types match no learnt pattern."""
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

    # ---- the source ----------------------------------------------------------------

    def _generate(self) -> Callable[..., Any]:
        op = self.op
        call = render_call("_func", op._specs["__func__"])
        bound = "{" + ", ".join(f"{n!r}: {n}" for n in self.names) + "}"
        scanned = ", ".join(f"*{n}" if spread else n for n, spread in op._scanned)
        cc = f"_cc = None if _CUDA.absent else _CUDA.find({scanned})"
        overlap = overlap_lines(op)
        if not op.backend_checks:  # no selection: the common check, then the body
            lines = [
                *prologue_lines(op),
                "    if skip_check:",
                *(f"        {c}" for c in overlap),
                f"        return {call}",
                f"    {cc}",
                f"    _named(_cc, {bound})",
                f"    return {call}",
            ]
        else:
            lines = [
                *prologue_lines(op),
                "    if skip_check and backend != 'auto':",  # no check but the overlap rule
                "        if _type(backend) is _str and backend not in _CHECKS:",
                "            backend = _alias(backend)",  # a renamed backend: the new name
                *(f"    {c}" for c in route_lines(op, "unchecked")),
                *(f"        {c}" for c in overlap),
                f"        return {call}",
                f"    {cc}",
                "    if backend != 'auto':",
                *(f"    {c}" for c in route_lines(op, "named")),
                *self._named_lines(call, bound),
                *self._auto_lines(call, bound),
            ]
        params = op._sig.def_params(self.ns, "skip_check=False")
        return compile_function(params, lines, self.ns, role="dispatcher", api=op.api_key)

    def _named_lines(self, call: str, bound: str) -> list[str]:
        """A named backend: its checks spelled out, then the body; else ``_named`` raises why."""
        op, lines = self.op, list[str]()
        checks = [("_common", "__common__")] if op.common_check is not None else []
        for i, (name, chk) in enumerate(op.backend_checks.items()):
            if len(op.backend_checks) > MAX_BRANCHES:
                break
            if name in op.non_differentiable_backends:  # its grad rule: _named's
                continue
            branch = []
            if op.experimental_backends:  # this call records no drops
                branch += ["if _live.dropped and (_r := _state.r).dropped:", "    _r.dropped = ()"]
            # The common check, the overlap rule, then the backend's checker (each refusal,
            # a ValueError included, goes to _named, which raises the explaining error).
            branch += [f"if {_capability_guard(chk, f'_ccs{i}')}:"]
            indent = "    "
            for fn, spec in [*checks, (f"_chk{i}", name)]:
                if fn != "_common":
                    branch += [f"{indent}{c}" for c in overlap_lines(op)]
                branch += [
                    f"{indent}try:",
                    f"{indent}    _fits = {render_call(fn, op._specs[spec])} is True",
                    f"{indent}except _ValueError:",
                    f"{indent}    _fits = False",
                    f"{indent}if _fits:",
                ]
                indent += "    "
            if name in op.experimental_backends:
                branch += [f"{indent}if not _once{i}.warned:", f"{indent}    _warn(_api, {name!r})"]
            branch.append(f"{indent}return {call}")
            lines.append(f"        {'elif' if lines else 'if'} backend == {name!r}:")
            lines += [f"            {c}" for c in branch]
        return [
            *lines,
            "        if _type(backend) is _str and backend.startswith('auto|'):",
            f"            return _tokcall(_self, backend, {bound})",
            f"        backend = _named(_cc, {bound})[0]",  # checked (and a renamed one's new name)
            f"        return {call}",
        ]

    def _auto_lines(self, call: str, bound: str) -> list[str]:
        """``"auto"``: the verdict (cached, or decided by ``_decide``), then the router or the
        body."""
        op = self.op
        lines = ["    _rx = _rfind(_api) if _RS.on else None"]
        if op.verdicts_cacheable:
            lines = [*route_lines(op, "auto"), *lines, *self._key_lines()]
            lines += [
                "    _verdict = None if _k is None else _memo.get(_k)",
                "    if _verdict is None:",
            ]
            uncached = route_lines(op, "uncached")
            if uncached:
                lines += ["        if _k is None:", *(f"        {c}" for c in uncached)]
            lines += [f"        _verdict = _decide(_k, _cc, _rx, {bound})"]
        else:  # a traced call goes to the operator
            lines = [*route_lines(op, "named"), *lines]
            lines += [f"    _verdict = _decide(None, _cc, _rx, {bound})"]
        lines += [f"    {c}" for c in overlap_lines(op)]
        lines += [
            "    candidates, dropped, warns, slot = _verdict",
            "    record = _state.r",
            "    record.suitable = candidates",
        ]
        if op.experimental_backends:
            lines += [
                "    if dropped or record.dropped:",
                "        record.dropped = dropped",
                "    if warns is not None:",
                "        warns()",
            ]
        # The body may call the op again (on a chunk) before it reads its candidates: the
        # record's ``open`` holds those of the innermost call whose body runs, and a call
        # leaving gives the enclosing call its own back (see thread_state).
        lines += ["    outer = record.open", "    record.open = candidates", "    try:"]
        routable = op.routed_inputs()
        if routable is not None:
            items = ", ".join(routable) + ("," if len(routable) == 1 else "")
            lines += [
                "        if _route is not None and not skip_check:",
                "            if _rslot:",
                f"                return _route(candidates, ({items}), slot)",
                f"            return _route(candidates, ({items}))",
            ]
        return [
            *lines,
            # (a routed call: the autotuner logs what it runs); once logged, a comparison
            "        if _clog.armed and candidates[0] is not (_lg.auto if _rx is None else "
            "_lg.restricted):",
            "            _note(candidates, dropped, _rx is not None)",
            f"        return {call}",
            "    finally:",
            "        record.open = outer",
            "        if outer is not None:",
            "            record.suitable = outer",
        ]

    def _key_lines(self) -> list[str]:
        """``_k``: the call's signature, the verdict cache's key (None: not cacheable)."""
        gated = bool(self.op.experimental_backends)
        lines = ["    _g = _env0()"] if gated else []
        env = [f"_env{i}()" for i in range(1 if gated else 0, len(self.env))]
        if self.triton_mode:
            env.append("(_TRITON_LIBRARY in _modules)")
        lines.append("    try:")
        branch = "if"
        if self.environ_checked:  # os.environ replaced (a mock): the readers would not see it
            lines += ["        if _os.environ is not _environ:", "            _k = None"]
            branch = "elif"
        for i, pattern in enumerate(self.patterns):
            test, items = pattern_source(pattern, self.names, self.ns, f"p{i}_")
            tail = ["_cc", "_rx", *(["_g"] if gated else []), *env]
            tail += [*self._grad_item(pattern), "skip_check"]
            lines += [
                f"        {branch} {test}:",
                f"            _k = ({', '.join([str(i), *items, *tail])},)",
            ]
            branch = "elif"
        learn = f"_learn(({', '.join(self.names)},))"
        lines += (
            [f"        _k = {learn}"]
            if branch == "if"
            else ["        else:", f"            _k = {learn}"]
        )
        lines += ["    except _Exception:", "        _k = None"]
        if gated:  # an unrecognised gate value warns, on every call that reads it
            lines += ["    if _g not in _GATE_VALUES:", "        _k = None"]
        return lines

    def _grad_item(self, pattern: tuple[type, ...]) -> list[str]:
        """For an op with a backend that cannot differentiate."""
        if not self.op.non_differentiable_backends:
            return []
        tensors = [n for n, tp in zip(self.names, pattern, strict=True) if tp in TENSOR_TYPES]
        if not tensors:
            return []
        self.ns["_grad_on"] = torch.is_grad_enabled
        return [f"(_grad_on() and ({' or '.join(f'{n}.requires_grad' for n in tensors)}))"]


def overlap_lines(op: Any) -> list[str]:
    """The API's overlap rule (at indent 0), on every path."""
    rule = op.overlap
    if rule is None:
        return []
    test = " or ".join(f"{n} is not None" for n in rule.written)
    return [f"if {test}:", f"    _ovl({', '.join((*rule.written, *rule.read))})"]


def _capability_guard(chk: Any, ccs: str) -> str:
    """Expression: the call's capability ``_cc`` lets ``chk``'s backend run."""
    without_cuda, declared = capability_rule(chk)
    if declared is None:
        return "_cc is None"
    if without_cuda:
        return f"(_cc is None or _cc in {ccs})"
    return f"_cc in {ccs}"
