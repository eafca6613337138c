"""The source of the generated fast path: one function per API, the happy path only.

Everything that depends only on the API's signature and backend table is decided here, at
decoration: the wrapper's own parameter list does the argument binding (the way
``dataclasses`` generates ``__init__``), each checker is called directly with its spec
spelled out, and a capability test known when generating is left out.  Every call that does
not fit goes to the reference path (``op._fail``), which raises the explaining error; the
two paths are tested to agree.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import torch

from flashinfer.codegen.compiler import compile_function, module_namespace, render_call
from flashinfer.dispatch.autocast import INSIDE as AUTOCAST_INSIDE
from flashinfer.dispatch.autocast import prologue_lines
from flashinfer.dispatch.capability import CUDA_STATE, capability_reason, capability_rule
from flashinfer.dispatch.choice_log import LOG_SWITCH, note_auto, note_restricted
from flashinfer.dispatch.reference import ReferenceDispatcher
from flashinfer.dispatch.restrictions import (
    RESTRICTIONS,
    call_in_token_block,
    restriction_for,
    warn_listed_experimental,
)
from flashinfer.dispatch.torch_op import traced_call
from flashinfer.dispatch.tracing import route_lines
from flashinfer.gating.gate import (
    ALLOW_EXPERIMENTAL_AUTO_BACKENDS_ENV,
    environment_reader,
    experimental_auto_backends_allowed,
)
from flashinfer.gating.warn_once import backend_warning_flag, warn_experimental_backend_once

__all__ = [
    "MAX_BRANCHES",
    "body_call",
    "emit_fast_path",
    "explicit_lines",
    "overlap_lines",
    "refused",
]

MAX_BRANCHES = 32
"""Most backends a table may have for the generated code to spell out each backend's
checks: one ``if``/``elif`` branch per backend for a named (or listed) one, one block per
backend for ``"auto"``.  A larger table's backends go through small generated functions
instead, one per kind of backend (see :func:`_backend_functions`), found in a dict by name
(``_XT``, ``_AT``) or walked in order (``_AL``): an ``elif`` chain nests, and the compiler
refuses nesting a few thousand deep (``RecursionError``), and code the size of the table
takes long to compile; a dict also finds the last backend of a long table as fast as the
first.  Tables of any size work."""


class _Refs(NamedTuple):
    """How generated code names one backend's checker, capability set, name and once-flag:
    ``_chk<i>``... in the dispatcher; parameters in a function shared by backends alike."""

    chk: str
    ccs: str
    name: str
    once: str


def _refs(i: int, name: str) -> _Refs:
    return _Refs(f"_chk{i}", f"_ccs{i}", repr(name), f"_once{i}")


_SHARED = _Refs("_c", "_s", "_n", "_o")

# Clears this thread's recorded drops, reading the thread-local only once any thread has
# recorded some (ops with experimental backends only).
_CLEAR_DROPPED = ["if _live.dropped and (_r := _state.r).dropped:", "    _r.dropped = ()"]


def emit_fast_path(op: ReferenceDispatcher) -> tuple[Callable[..., Any], dict[str, Any]]:
    """The fast path of ``op`` and the namespace it runs in (whose ``_route`` the op sets
    later, see ``route_auto``)."""
    ns = _namespace(op)
    return _emit(op, ns), ns


def _namespace(op: ReferenceDispatcher) -> dict[str, Any]:
    """The globals of the generated code: what it calls, under names no parameter shadows.

    Checker ``i`` (in declaration order) is ``_chk<i>``, the capabilities it declares
    ``_ccs<i>``, and an experimental backend's once-flag ``_once<i>``.
    """
    ns = module_namespace(op.api_key, "dispatcher")
    ns |= {
        "_func": op.__wrapped__,
        "_common": op.common_check,
        "_heuristic": op.heuristic_func,
        "_filter": op.heuristic_order,
        "_verd": op.check_result,  # a check's result that is neither True nor False
        "_prefer": op.prefer_first,
        "_CUDA": CUDA_STATE,
        "_state": op._state,
        "_live": op._live,
        "_fail": op._fail,
        "_gate": experimental_auto_backends_allowed,
        "_warn": warn_experimental_backend_once,
        "_api": op.api_key,
        "_ORDER": tuple(op.backend_checks),
        "_route": None,
        # Builtins the code names, under names no API parameter can shadow.
        "_ValueError": ValueError,
        "_BaseException": BaseException,
        "_type": type,
        "_list": list,
        "_isinstance": isinstance,
        "_str": str,
        "_cc_reason": capability_reason,  # an API without backends: its common check's rule
        # Restrictions (use_backends, FLASHINFER_BACKENDS) and the once-per-choice log line.
        "_RS": RESTRICTIONS,
        "_rfind": restriction_for,
        "_warnl": warn_listed_experimental,
        "_XS": op.experimental_backends,
        "_clog": LOG_SWITCH,
        "_lg": op.choice_log,
        "_notea": note_auto,
        "_noter": note_restricted,
        # The verdict cache (see front): a checked call given a _key stores what it decided.
        "_put": op.verdict_cache.put,
        # An auto verdict's slot for the router's entry (see route_auto): none yet.
        "_NO_ROUTE": (None, None),
        "_rslot": False,
        # A traced call (fake, meta or functional tensors; export) goes to the API's torch
        # operator (see tracing); _traceable is set once the operator is built.
        "_traced": traced_call,
        "_jit": torch._C._is_tracing,  # torch.jit.trace recording: it records the operator
        "_traceable": None,
        "_Tensor": torch.Tensor,
        # The API's overlap rule (see overlap_lines).
        "_ovl": op.overlap.check if op.overlap is not None else None,
        # Autocast (see autocast.prologue_lines): _acall is set once the op is built.
        "_ac": torch._C._is_any_autocast_enabled,
        "_acin": AUTOCAST_INSIDE,
        "_acall": None,
        # Renamed backends (see alias_lines): old name -> new, and what warns once.
        "_ALIASES": op.backend_aliases,
        "_tokcall": call_in_token_block,
        "_self": op,
        "_alias": op.resolve_alias,
    }
    for i, (name, chk) in enumerate(op.backend_checks.items()):
        ns[f"_chk{i}"] = op._checkers[name]  # a grad gate for one that cannot differentiate
        ccs = capability_rule(chk)[1]
        if ccs is not None:
            ns[f"_ccs{i}"] = ccs
        if name in op.experimental_backends:
            ns[f"_once{i}"] = backend_warning_flag(op.api_key, name)
    return ns


def _emit(op: ReferenceDispatcher, ns: dict[str, Any]) -> Callable[..., Any]:
    """Source of the fast path: the happy path only, every failure goes to ``_fail``."""
    sig, specs = op._sig, op._specs
    if len(op.backend_checks) > MAX_BRANCHES:
        _backend_functions(op, ns)
    call_func = render_call("_func", specs["__func__"])
    scan = _scan_line(op)
    fail = _fail_call(op)
    cached = op.verdicts_cacheable
    params = sig.def_params(ns, "skip_check=False, _key=None" if cached else "skip_check=False")
    # Under autocast a call is cast first (the front does it for a cached op).
    first = [] if cached else prologue_lines(op)
    if not op.backend_checks:
        # skip_check=True bypasses the dispatcher entirely.
        lines = [*first, "    if skip_check:", *(f"        {c}" for c in overlap_lines(op))]
        lines += [f"        return {call_func}", f"    {scan}"]
        if op.common_check is None:  # upstream: a usage error, raised on the call
            lines.append(f"    {fail}")
            return _compile(op, params, lines, ns)
        lines += ["    if _cc_reason(_common, _cc) is not None:", f"        {fail}"]
        lines += [f"    {c}" for c in [*_common_lines(op, fail), *overlap_lines(op)]]
        lines.append(f"    return {call_func}")
        return _compile(op, params, lines, ns)

    # skip_check=True: an explicit backend runs with no check at all; "auto" still has
    # to choose, which a second generated function does (the whole selection, common
    # check included as upstream's; never routed), so that this one stays as short.
    skip_lines = [f"    {scan}", *_auto_lines(op, ns, routed=False)]
    ns["_skip_auto"] = _compile(
        op,
        sig.def_params(ns, "_key=None" if cached else None),
        skip_lines,
        ns,
        "skip_check auto dispatcher",
    )
    lines = [
        *alias_lines(op),
        *first,
        "    if skip_check:",
        "        if backend != 'auto':",
        *(f"        {c}" for c in route_lines(op, "unchecked")),
        *(f"            {c}" for c in overlap_lines(op)),
        f"            return {call_func}",
        f"        return {render_call('_skip_auto', specs['__func__'])}",
        f"    {scan}",
    ]
    lines += explicit_lines(op)
    if not cached:  # the public function: a traced "auto" call goes to the operator
        lines += route_lines(op, "named")
    lines += _auto_lines(op, ns, routed=True)
    # With a verdict cache, the public function is the front (see front) and this one the
    # checking path it calls on a miss.
    return _compile(op, params, lines, ns, "checking dispatcher" if cached else "dispatcher")


def alias_lines(op: ReferenceDispatcher) -> list[str]:
    """The first lines of a generated dispatcher of an op with renamed backends: an old
    name becomes the new one (warning once), before anything reads ``backend``.  None for
    an op without (most): they pay nothing."""
    if not op.backend_aliases:
        return []
    return [
        "    if _type(backend) is _str and backend in _ALIASES:",
        "        backend = _alias(backend)",
    ]


def explicit_lines(op: ReferenceDispatcher) -> list[str]:
    """The explicit-backend part of a generated function (at function-body indent): one
    branch per backend, each running the common check, the capability test and its checker,
    then the body.  Never cached (see ``verdicts``): the shipped ops' explicit checks cost
    about what reading the call's signature would.  A table of more than
    :data:`MAX_BRANCHES` backends finds the backend's function in a dict instead."""
    fail = _fail_call(op)
    # They sit under one "not auto" test, so that an "auto" call pays a single comparison.
    # A traced call goes to the API's operator first (see tracing.route_lines).
    lines = ["    if backend != 'auto':", *(f"    {c}" for c in route_lines(op, "named"))]
    if len(op.backend_checks) > MAX_BRANCHES:
        call = render_call("_xf", op._specs["__func__"], lead="_cc")
        test = "_isinstance(backend, _str) and (_xf := _XT.get(backend)) is not None"
        return [
            *lines,
            f"        if {test}:",
            f"            return {call}",
            *_token_lines(op),
            f"        {fail}",
        ]
    # An explicit backend: one branch each, its checker called with its own spec.
    for i, (name, chk) in enumerate(op.backend_checks.items()):
        lines.append(f"        {'if' if i == 0 else 'elif'} backend == {name!r}:")
        lines += [f"            {c}" for c in _explicit_branch(op, name, chk, _refs(i, name))]
    lines += _token_lines(op)
    lines.append(f"        {fail}")  # an unknown backend; _fail clears the record
    return lines


def _token_lines(op: ReferenceDispatcher) -> list[str]:
    """No backend has the name: ``"auto|a,b"`` is ``"auto"`` restricted to those backends
    (``restrictions.token_block``, the operator's grammar too), anything else fails."""
    bound = _bound_literal(op)
    return [
        "        if _type(backend) is _str and backend.startswith('auto|'):",
        f"            return _tokcall(_self, backend, {bound})",
    ]


def _explicit_branch(op: ReferenceDispatcher, name: str, chk: Any, refs: _Refs) -> list[str]:
    """What a call naming backend ``name`` runs (at indent 0): the common check, the
    capability test, the checker, then the body.  A checker's ValueError goes to _fail,
    which names the op and backend with it."""
    fail = _fail_call(op)
    # Only ops with experimental backends ever record dropped ones; each checked call
    # clears this thread's record first (an explicit branch) or rewrites it (auto).
    clear = _CLEAR_DROPPED if op.experimental_backends else []
    # The common check runs after the backend is known to exist (inside each branch) and
    # to run at the call's capability, as in the reference and upstream: an unknown
    # backend, or one the device lacks, is reported whatever the check would say.
    branch = [
        *clear,
        f"if not {_capability_guard(chk, refs.ccs)}:",
        f"    {fail}",
        *_common_lines(op, fail),
        *overlap_lines(op),
        "try:",
        f"    _v = {render_call(refs.chk, op._specs[name])}",
        "except _ValueError:",
        "    _v = False",
        f"if {refused('_v', refs.name)}:",
        f"    {fail}",
    ]
    if name in op.experimental_backends:
        branch += [f"if not {refs.once}.warned:", f"    _warn(_api, {refs.name})"]
    branch.append(f"return {render_call('_func', op._specs['__func__'])}")
    return branch


def refused(value: str, backend: str) -> str:
    """Expression: the check result ``value`` (of backend ``backend``, an expression; None:
    the common check) refuses the call.  True and False cost an identity test each; anything
    else goes to ``_verd`` (``op.check_result``), which takes a numpy bool as the bool it is
    and raises the TypeError naming the check for the rest (see ``results``)."""
    return f"{value} is not True and ({value} is False or not _verd({backend}, {value}))"


def _backend_functions(op: ReferenceDispatcher, ns: dict[str, Any]) -> None:
    """For a table of more than :data:`MAX_BRANCHES` backends: what a call naming a backend
    runs, ``_XT[name](_cc, <the API's arguments>)``, and whether a backend accepts a call,
    ``_AT[name](...)`` (``_AL``: ``(name, accepts)`` in declaration order, for ``"auto"``).

    Backends alike (the same capability test, checker call spec, and stable or
    experimental) share one generated function, which takes the backend's name, checker,
    capability set and once-flag first (``_n, _c, _s, _o``, then ``_cc``); each backend's
    entry is that function with its own bound (``functools.partial``, C-level).  A table of
    thousands of backends declared the same way compiles a handful of short functions.
    """
    params = op._sig.def_params(ns)
    explicit: dict[tuple, Callable[..., Any]] = {}
    accepting: dict[tuple, Callable[..., Any]] = {}
    table, accepts = {}, {}
    for name, chk in op.backend_checks.items():
        experimental = name in op.experimental_backends
        kind = (_capability_guard(chk, "_s"), tuple(op._specs[name]), experimental)
        if kind not in explicit:
            branch = _explicit_branch(op, name, chk, _SHARED)
            explicit[kind] = _compile(
                op,
                f"_n, _c, _s, _o, _cc, {params}",
                [f"    {c}" for c in branch],
                ns,
                "explicit backend",
            )
            accept = _guarded_check(op, name, _SHARED, kind[0], "return True")
            accepting[kind] = _compile(
                op,
                f"_n, _c, _s, _cc, {params}",
                [*(f"    {c}" for c in accept), "    return False"],
                ns,
                "backend check",
            )
        ccs = capability_rule(chk)[1]
        once = backend_warning_flag(op.api_key, name) if experimental else None
        called = op._checkers[name]  # (see _namespace)
        table[name] = functools.partial(explicit[kind], name, called, ccs, once)
        accepts[name] = functools.partial(accepting[kind], name, called, ccs)
    ns["_XT"], ns["_AT"], ns["_AL"] = table, accepts, list(accepts.items())


def body_call(call: str) -> list[str]:
    """Lines (at indent 0) returning ``call`` (the API body, or the router) as this call's
    own: ``_r`` is the thread's record, already holding ``_ok``, this call's candidates.

    The body may call the op again (``"auto"``, on a chunk) before it reads
    ``op.suitable_auto_backends``: the record's ``open`` holds the candidates of the
    innermost call whose body runs, and a call leaving gives the enclosing call's back
    (the outermost call, with none to give back, leaves its own).  On the way out whatever
    happens, or a raising body would leave an enclosing call's list in place for good."""
    return [
        "_p = _r.open",
        "_r.open = _ok",
        "try:",
        f"    return {call}",
        "finally:",
        "    _r.open = _p",
        "    if _p is not None:",
        "        _r.suitable = _p",
    ]


def _scan_line(op: ReferenceDispatcher) -> str:
    """The statement finding the call's capability: the first CUDA tensor among the
    scanned arguments (see ``DispatchPlan``)."""
    scanned = [f"*{n}" if spread else n for n, spread in op._scanned]
    return f"_cc = None if _CUDA.absent else _CUDA.find({', '.join(scanned)})"


def _bound_literal(op: ReferenceDispatcher) -> str:
    """A dict literal of the call's arguments by parameter name, as the reference path
    binds them."""
    return "{" + ", ".join(f"{n!r}: {n}" for n in op._sig.names) + "}"


def _fail_call(op: ReferenceDispatcher) -> str:
    """The expression handing a call that does not fit to the reference path."""
    return f"_fail(_cc, {_bound_literal(op)})"


def overlap_lines(op: ReferenceDispatcher) -> list[str]:
    """The API's overlap rule applied (at indent 0): after the common check (which says
    what a malformed written argument is), before any backend's checker or body, on every
    path, ``skip_check=True`` included.  A call whose written arguments are all None
    (``out=None``) pays one ``is not None`` test each; a backend never checks it itself."""
    rule = op.overlap
    if rule is None:
        return []
    test = " or ".join(f"{n} is not None" for n in rule.written)
    return [f"if {test}:", f"    _ovl({', '.join((*rule.written, *rule.read))})"]


def _common_lines(op: ReferenceDispatcher, fail: str) -> list[str]:
    if op.common_check is None:
        return []
    call = render_call("_common", op._specs["__common__"])
    return [f"_v = {call}", f"if {refused('_v', 'None')}:", f"    {fail}"]


def _auto_lines(op: ReferenceDispatcher, ns: dict[str, Any], *, routed: bool) -> list[str]:
    """The ``backend="auto"`` part of a generated function (at function-body indent):
    select, record, then hand on to the router or call the body.

    A restriction (``use_backends``, ``FLASHINFER_BACKENDS``) costs one attribute test while
    none exists in the process (``_RS.on``); otherwise ``_rfind`` says whether this op is
    restricted here, and a restricted call takes :func:`_restricted_block` instead."""
    fail = _fail_call(op)
    body = _common_lines(op, fail)  # skip_check=True too, as upstream
    body += overlap_lines(op)
    body += ["_rx = _rfind(_api) if _RS.on else None", "if _rx is None:"]
    body += [f"    {c}" for c in _selection(op, ns)]
    lines: list[str] = []
    if op.experimental_backends:
        lines += [
            "    _xok = _drop = ()",
            "    try:",
            *(f"        {c}" for c in body),
            "    except _BaseException:",
            "        if _live.dropped:",
            "            _state.r.dropped = _drop",
            "        raise",
        ]
    else:
        lines += [f"    {c}" for c in body]
    lines += _restricted_block(op, fail, routed=routed)
    # _fail re-runs the selection, which records this call's drops itself.
    lines += ["    if not _ok:", f"        {fail}"]
    if op.verdicts_cacheable:  # (candidates, drops, whether the choice warns as experimental)
        first_warns = "bool(_xok) and _ok[0] in _xok" if op.experimental_backends else "False"
        drops = "_drop" if op.experimental_backends else "()"
        lines += [
            "    if _key is not None:",
            f"        _put(_key, (_ok, {drops}, {first_warns}, [_NO_ROUTE]))",
        ]
    if op.experimental_backends:
        lines += [
            "    _r = _state.r",
            "    _r.suitable = _ok",
            "    _r.dropped = _drop",
            "    if _xok and _ok[0] in _xok:",
            "        _warn(_api, _ok[0], automatic=True)",
        ]
    else:
        lines += ["    _r = _state.r", "    _r.suitable = _ok"]
    drop = "_drop" if op.experimental_backends else "()"
    return lines + [f"    {c}" for c in _hand_on(op, routed, "auto", f"_notea(_lg, _ok, {drop})")]


def _selection(op: ReferenceDispatcher, ns: dict[str, Any]) -> list[str]:
    """Unrestricted selection into ``_ok``: the checks, the gate, the heuristic.

    Every checker in declaration order.  Viable stable backends go to _ok, experimental ones
    to _xok: with the gate off (the default) they are this call's drops as they stand; with
    it on they are merged back in declaration order.  The thread's record is written at the
    end; whatever raises before that leaves this call's drops in it (none before the gate
    is read), as the reference does.  The checks are generated twice: without CUDA tensors
    (_cc None, every call of a CPU-only process) each capability test is known when
    generating, so that block has none; the other tests the capability per checker.
    """
    body = ["_ok = []"]
    if len(op.backend_checks) > MAX_BRANCHES:  # (see _backend_functions)
        keep = ["    _ok.append(_b)"]
        if op.experimental_backends:
            keep = [
                "    if _b in _XS:",
                "        _xok += (_b,)",
                "    else:",
                "        _ok.append(_b)",
            ]
        accepts = render_call("_af", op._specs["__func__"], lead="_cc")
        body += ["for _b, _af in _AL:", f"    if {accepts}:", *(f"    {c}" for c in keep)]
    else:
        body += ["if _cc is None:"]
        body += [f"    {c}" for c in _auto_checks(op, cc_none=True) or ["pass"]]
        body += ["else:"]
        body += [f"    {c}" for c in _auto_checks(op, cc_none=False) or ["pass"]]
    if op.experimental_backends:
        gate = "_gate()"
        unset = "False"
        gread, environ = environment_reader(ALLOW_EXPERIMENTAL_AUTO_BACKENDS_ENV)
        if environ is not None:  # read the variable inline; anything else goes to _gate
            ns["_os"], ns["_environ"] = environ
            ns["_gread"] = gread  # C-level: no frame
            # Unset (the default) first, in the fewest steps; "1" next; the rest
            # (odd values warn, a replaced os.environ) through the full reader.
            unset = "(_g := _gread()) is None and _os.environ is _environ"
            gate = "(_g == b'1' and _os.environ is _environ) or _gate()"
        order = list(op.backend_checks)
        last_stable = max((order.index(b) for b in op.stable_backends), default=-1)
        if all(order.index(b) > last_stable for b in op.experimental_backends):
            merge = "_ok += _xok"  # experimental ones are declared last
        else:
            merge = "_ok = [_b for _b in _ORDER if _b in _xok or _b in _ok]"
        drop = ["        _drop = _xok", "        _live.dropped = True"]
        body += [
            "if _xok:",
            f"    if {unset}:",
            *drop,
            f"    elif {gate}:",
            f"        {merge}",
            "    else:",
            *drop,
        ]
    if op.heuristic_func is not None:
        # The heuristic gets a copy: were it given _ok itself, it could add a backend
        # (an unknown one, or one the gate dropped) by editing the list in place.  Any
        # other answer (reordered, shortened, with duplicates) goes through _filter.
        # _filter (op.heuristic_order) checks the answer is a list or tuple of names, as
        # the reference path does; an unchanged list of them needs no filtering.
        heur = render_call("_heuristic", op._specs["__heuristic__"], lead="_ok.copy()")
        body += [
            "if _ok:",
            f"    _h = {heur}",
            "    if _type(_h) is not _list or _h != _ok:",
            "        _ok = _filter(_h, _ok)",
        ]
    if op._preferences:
        # Declared preferences of experimental backends: only while the gate let viable
        # experimental ones in (_xok, none dropped), so stable selection pays two tests.
        body += ["if _xok and not _drop:", f"    _ok = _prefer(_ok, {_bound_literal(op)})"]
    return body


def _restricted_block(op: ReferenceDispatcher, fail: str, *, routed: bool) -> list[str]:
    """A restricted call (``_rx``, the listed backends): those that can run it, in the
    listed order; no gate (listing an experimental backend opts in to it: it warns once, as
    naming it does) and no heuristic (the list is the order).  Recorded with no drops, then
    handed on as an unrestricted call is.  As in the reference, this thread's drops are
    cleared first."""
    block: list[str] = []
    if op.experimental_backends:
        block += _CLEAR_DROPPED
    block += ["_ok = []", "for _b in _rx:"]
    if len(op.backend_checks) > MAX_BRANCHES:  # (a listed name is one of the op's)
        accepts = render_call("_af", op._specs["__func__"], lead="_cc")
        block += [
            "    _af = _AT.get(_b)",
            f"    if _af is not None and {accepts}:",
            "        _ok.append(_b)",
        ]
    else:
        for i, (name, chk) in enumerate(op.backend_checks.items()):
            guard = _capability_guard(chk, f"_ccs{i}")
            test = _guarded_check(op, name, _refs(i, name), guard, "_ok.append(_b)")
            block += [f"    {'if' if i == 0 else 'elif'} _b == {name!r}:"]
            block += [f"        {c}" for c in test]
    block += ["if not _ok:", f"    {fail}"]
    if op.verdicts_cacheable:
        lists_x = "not _XS.isdisjoint(_ok)" if op.experimental_backends else "False"
        block += ["if _key is not None:", f"    _put(_key, (_ok, (), {lists_x}, [_NO_ROUTE]))"]
    block += ["_r = _state.r", "_r.suitable = _ok"]
    if op.experimental_backends:
        block += ["if not _XS.isdisjoint(_ok):", "    _warnl(_api, _ok, _XS)"]
    block += _hand_on(op, routed, "restricted", "_noter(_lg, _ok)")
    return ["    if _rx is not None:", *(f"        {c}" for c in block)]


def _hand_on(op: ReferenceDispatcher, routed: bool, how: str, note: str) -> list[str]:
    """After selecting: an op whose auto calls are routed (route_auto) hands the candidates
    and its arguments straight to the router (the autotuner, which logs what it runs);
    otherwise the choice's log line (an attribute test once logged, or while logging is
    off: see choice_log) and the body.  A skip_check=True call keeps calling the body
    (route_auto's contract)."""
    lines: list[str] = []
    routable = op.routed_inputs()
    if routable is not None and routed:
        items = ", ".join(routable) + ("," if len(routable) == 1 else "")
        lines += ["if _route is not None:"]
        lines += [f"    {c}" for c in body_call(f"_route(_ok, ({items}))")]
    lines += [f"if _clog.armed and _ok[0] is not _lg.{how}:", f"    {note}"]
    lines += body_call(render_call("_func", op._specs["__func__"]))
    return lines


def _auto_checks(op: ReferenceDispatcher, *, cc_none: bool) -> list[str]:
    """The auto path's checker calls, in declaration order: viable stable backends are
    appended to _ok, experimental ones to _xok; each under its capability guard, known
    here to be ``_cc is None`` (``cc_none``) or not."""
    lines: list[str] = []
    for i, (name, chk) in enumerate(op.backend_checks.items()):
        guard = _capability_guard(chk, f"_ccs{i}", cc_none=cc_none)
        if guard == "False":
            continue
        keep = (
            f"_xok += ({name!r},)"
            if name in op.experimental_backends
            else (f"_ok.append({name!r})")
        )
        lines += _guarded_check(op, name, _refs(i, name), guard, keep)
    return lines


def _guarded_check(
    op: ReferenceDispatcher, name: str, refs: _Refs, guard: str, keep: str
) -> list[str]:
    """Backend ``name``'s checker called under its capability ``guard``: ``keep`` runs when
    it accepts; a ``ValueError`` from it is a refusal, as False is; a result neither True
    nor False goes to ``_verd`` (see :func:`refused`)."""
    block = [
        "try:",
        f"    _v = {render_call(refs.chk, op._specs[name])}",
        "except _ValueError:",
        "    _v = False",
        f"if _v is True or (_v is not False and _verd({refs.name}, _v)):",
        f"    {keep}",
    ]
    if guard == "True":
        return block
    return [f"if {guard}:", *(f"    {c}" for c in block)]


def _capability_guard(chk: Any, ccs: str, *, cc_none: bool | None = None) -> str:
    """Expression: the capability ``_cc`` lets ``chk``'s backend run (see
    :func:`capability_rule`); ``ccs`` names the set of capabilities it declares.
    ``cc_none``: whether ``_cc is None`` is known where the expression goes, which may
    reduce it to ``"True"`` or ``"False"``."""
    without_cuda, declared = capability_rule(chk)
    if cc_none is not None:
        if cc_none:
            return "True" if without_cuda else "False"
        return "False" if declared is None else f"_cc in {ccs}"
    if declared is None:
        return "_cc is None"
    if without_cuda:
        return f"(_cc is None or _cc in {ccs})"
    return f"_cc in {ccs}"


def _compile(
    op: ReferenceDispatcher,
    params: str,
    body: list[str],
    ns: dict[str, Any],
    role: str = "dispatcher",
) -> Callable[..., Any]:
    """Compile one generated function of ``op``.  Its code keeps the role's name (what
    tracebacks show) when the op dresses the fast path as the API."""
    return compile_function(params, body, ns, role=role, api=op.api_key)
