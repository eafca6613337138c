"""What is decided once, at decoration: the facts about an API and the checks on them."""

from __future__ import annotations

import functools
import inspect
import sys
import types
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

import torch

from flashinfer.codegen.compiler import POSITIONAL_KINDS, CallSpec, ParameterList
from flashinfer.dispatch.declarations import (
    Backend,
    ImplementationTable,
    qualified_check_name,
    read_table,
)
from flashinfer.dispatch.families import TORCH, differentiable_by_family, family_of
from flashinfer.dispatch.verdicts import declared_environment, reads_tensor_data_marked
from flashinfer.gating.gate import ALLOW_EXPERIMENTAL_AUTO_BACKENDS_ENV
from flashinfer.gating.records import EXPERIMENTAL_PACKAGE, in_experimental_package, qualified_name


def _requires_grad(value: Any) -> bool:
    if isinstance(value, torch.Tensor):
        return value.requires_grad
    if isinstance(value, (list, tuple)):
        return any(isinstance(v, torch.Tensor) and v.requires_grad for v in value)
    if isinstance(value, dict):
        return any(isinstance(v, torch.Tensor) and v.requires_grad for v in value.values())
    return False


def grad_inputs(names: tuple[str, ...], values: tuple[Any, ...]) -> list[str]:
    """The names of the arguments that require grad."""
    return [n for n, v in zip(names, values, strict=True) if _requires_grad(v)]


def _check_declared_skip_check(func: Callable[..., Any]) -> None:
    """An API may declare the dispatcher's ``skip_check`` itself, so that type checkers
    see it, but only as the dispatcher takes it: keyword-only, defaulting to False."""
    param = inspect.signature(func).parameters.get("skip_check")
    if param is None:
        return
    if param.kind != param.KEYWORD_ONLY or param.default is not False:
        default = "no default" if param.default is param.empty else f"default {param.default!r}"
        raise TypeError(
            f"backend_requirement: {func.__qualname__} declares skip_check as "
            f"{param.kind.description} with {default}; the dispatcher takes "
            "it keyword-only with default False: declare it as `*, skip_check: bool = False` "
            "or leave it out (the dispatcher adds it either way)"
        )


class DispatchPlan:
    """The decoration-time analysis of an API wrapped by ``backend_requirement``."""

    _history: tuple[Mapping[str, str], Mapping[str, Any]] | None

    def resolve_alias(self, backend: str) -> str:
        """The backend an old (renamed) name stands for, after its one deprecation warning
        (``backend`` itself when it is no old name)."""
        if backend not in self.backend_aliases:
            return backend
        from flashinfer.gating.history import warn_alias_once

        warn_alias_once(self._alias_messages[backend])
        return self.backend_aliases[backend]

    def _read_history(self) -> tuple[Mapping[str, str], Mapping[str, Any]]:
        """Renamed backends (old name -> the name it runs under now) and removed backends'
        tombstones, from ``flashinfer.gating.history``: read at decoration when it is loaded,
        else when a call first names a backend the table lacks (touching an op does not load
        the history)."""
        if self._history is None:
            from flashinfer.gating import history as h

            aliases = {
                old: new
                for old, new in h.backend_aliases(self.api_key).items()
                if new in self.backend_checks and old not in self.backend_checks
            }
            self._alias_messages = {
                old: h.alias_message(
                    h.renamed_backend(self.api_key, old) or h.Renamed("", old, new, "", "")
                )
                for old, new in aliases.items()
            }
            tombs = h.removed_backends(self.api_key)
            self._history = (types.MappingProxyType(aliases), types.MappingProxyType(tombs))
        return self._history

    @property
    def backend_aliases(self) -> Mapping[str, str]:
        """Renamed backends: old name -> the name it runs under now (naming one warns once)."""
        return self._read_history()[0]

    @property
    def backend_tombstones(self) -> Mapping[str, Any]:
        """Removed backends' tombstones: naming one raises, saying what to use instead."""
        return self._read_history()[1]

    def __init__(
        self,
        func: Callable[..., Any],
        backend_checks: Mapping[str, Callable[..., Any]] | Iterable[Backend],
        common_check: Callable[..., Any] | None,
        heuristic_func: Callable[..., Any] | None,
        *,
        overlap: Any = None,
    ) -> None:
        if not callable(func) or isinstance(func, type):
            kind = (
                "a class"
                if isinstance(func, type)
                else "a module"
                if isinstance(func, types.ModuleType)
                else f"an object of type {type(func).__name__}"
            )
            raise TypeError(
                f"backend_requirement decorates a function or method, not {kind} "
                f"({getattr(func, '__name__', func)!r}): apply it to the function the API "
                "runs"
            )
        self.__wrapped__ = func
        for attr in ("__module__", "__name__", "__qualname__", "__doc__"):
            setattr(self, attr, getattr(func, attr, None))
        self.api_name = func.__name__
        # Warnings are keyed by the qualified name: two modules may both define "mm".
        self.api_key = qualified_name(func)
        self.backend_checks, declared = read_table(backend_checks, self.api_key)
        # The declarations (none in upstream's form) and what the body runs for each.
        self.backends: Mapping[str, Backend] = types.MappingProxyType(declared)
        self.implementations = ImplementationTable({n: d.run for n, d in declared.items()})
        self.common_check = common_check
        self.heuristic_func = heuristic_func
        self.experimental_backends = frozenset(
            name
            for name, chk in self.backend_checks.items()
            if getattr(chk, "is_experimental_backend", False)
        )
        self.stable_backends = tuple(
            b for b in self.backend_checks if b not in self.experimental_backends
        )
        self._history = None
        if "flashinfer.gating.history" in sys.modules:  # else read when first needed
            self._read_history()
        _check_declared_skip_check(func)
        # A declared skip_check is the dispatcher's: never passed on (the body sees its
        # default), so the API's parameters are the rest.
        self._sig = ParameterList(func, omit=("skip_check",))
        #: What the API writes (its ``OverlapRule``), or None; the dispatcher checks it
        #: before any backend's checker or body, on every path (see ``emitter``).
        self.overlap = overlap
        self._check_overlap_names()
        self._check_experimental_placement()
        self._specs = self._build_specs()
        self._plan_grad_gates(declared)
        # The declared preferences of experimental backends, and how to call each.
        self._preferences = {
            name: (d.prefer, self._preference_spec(name, d.prefer))
            for name, d in declared.items()
            if d.prefer is not None
        }
        # The arguments searched for a CUDA tensor, in order: every parameter but
        # ``backend``, each as (name, spread) where ``*args`` is spread out.
        self._scanned = [
            (n, how == "star")
            for how, n in self._specs["__func__"]
            if how in ("pos", "kw", "star") and n != "backend"
        ]
        self._plan_verdicts()

    def _plan_grad_gates(self, declared: Mapping[str, Backend]) -> None:
        """Which backends cannot differentiate (``Backend.differentiable``, else the checker's
        family)."""
        self.non_differentiable_backends = frozenset(
            name
            for name, chk in self.backend_checks.items()
            if not (
                declared[name].differentiable
                if name in declared and declared[name].differentiable is not None
                else differentiable_by_family(chk)
            )
        )

    def _grad_reason(self, backend: str) -> Callable[[list[str]], str]:
        """The reason grad refuses backend ``backend``, given the arguments that require grad."""
        able = [b for b in self.backend_checks if b not in self.non_differentiable_backends]
        able.sort(
            key=lambda b: (
                b in self.experimental_backends,
                family_of(self.backend_checks[b]) is not TORCH,
            )
        )
        if able:
            other = f"pass backend={able[0]!r}, which can differentiate"
        else:
            other = (
                f"no backend of {self.api_name} can differentiate: declare one that can "
                "(a torch-family backend, or Backend(..., differentiable=True) whose run "
                "has a backward formula)"
            )

        def reason(names: list[str]) -> str:
            what = ", ".join(repr(n) for n in names)
            if len(names) == 1:
                what = f"the argument {what} requires"
            else:
                what = f"the arguments {what} require"
            return (
                f"cannot differentiate: {what} grad, and backend {backend!r} is not "
                "differentiable (its results would be detached from the autograd graph); "
                f"call under torch.no_grad() (inference), or {other}"
            )

        return reason

    def grad_refusal(self, backend: str, bound: Mapping[str, Any]) -> str | None:
        """Why ``backend`` refuses a call's bound arguments because grad is required (it cannot
        differentiate, grad mode is on and an argument requires grad), or None."""
        if backend not in self.non_differentiable_backends or not torch.is_grad_enabled():
            return None
        inputs = tuple(n for n in self._sig.names if n != "backend")
        names = grad_inputs(inputs, tuple(bound[n] for n in inputs))
        return self._grad_reason(backend)(names) if names else None

    def _plan_verdicts(self) -> None:
        """Whether ``"auto"`` verdicts may be cached (see ``verdicts``)."""
        checks = [self.common_check, self.heuristic_func, *self.backend_checks.values()]
        checks += [prefer for prefer, _ in self._preferences.values()]
        present = [c for c in checks if c is not None]
        self.environment = declared_environment(present)
        self.reads_data = any(reads_tensor_data_marked(c) for c in present)
        self.verdicts_cacheable = (
            bool(self.backend_checks) and not self._sig.has_var and not self.reads_data
        )

    def check_overlap(self, bound: Mapping[str, Any]) -> None:
        """Apply the API's overlap rule to a call's bound arguments (what the generated
        path's overlap lines do): nothing to check while every written argument is None."""
        rule = self.overlap
        if rule is not None and any(bound.get(n) is not None for n in rule.written):
            rule.check(*(bound.get(n) for n in (*rule.written, *rule.read)))

    # ---- decoration-time checks --------------------------------------------------------

    def _check_overlap_names(self) -> None:
        """The overlap rule names parameters of the API (the dispatcher passes them by name)."""
        rule = self.overlap
        if rule is None:
            return
        params = {p.name: p for p in self._sig.params}
        spread = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
        unknown = [
            n for n in (*rule.written, *rule.read) if n not in params or params[n].kind in spread
        ]
        if unknown:
            raise ValueError(
                f"API {self.api_name!r}: its overlap rule names {unknown}, which are not "
                f"named parameters of the API ({', '.join(params)}); name the parameters "
                "the API writes and reads"
            )

    def _check_experimental_placement(self) -> None:
        """A backend whose checker or declared implementation is experimental code (defined under,
        or importing from, ``flashinfer.experimental``) must be marked."""
        for backend, checker in self.backend_checks.items():
            if getattr(checker, "is_experimental_backend", False):
                continue
            declared = self.backends.get(backend)
            parts = [("checker", checker)]
            if declared is not None:
                parts.append(("implementation", declared.run))
            for role, fn in parts:
                found = experimental_code(fn)
                if found is not None:
                    raise ValueError(
                        f"API {self.api_name!r}: the {role} of backend {backend!r} {found}, "
                        "but the backend's checker is not marked @experimental_backend. "
                        "Backends under flashinfer.experimental must be marked (and their "
                        "checkers live in flashinfer/experimental/<feature>/support.py), so "
                        "that backend='auto' skips them unless "
                        f"{ALLOW_EXPERIMENTAL_AUTO_BACKENDS_ENV}=1."
                    )
            if declared is not None and declared.prefer is not None:  # after: a missing mark
                raise ValueError(  # is the likelier mistake, and this message would hide it
                    f"API {self.api_name!r}: backend {backend!r} is stable (its checker is not "
                    "marked @experimental_backend) but declares prefer=. The order of stable "
                    "backends is the API's heuristic's job: rank it there (heuristic_func) "
                    "and drop prefer=, or mark the checker if the backend is experimental."
                )
        if self.backend_checks and "backend" not in self._sig.names:
            raise TypeError(
                f"backend_requirement: {self.api_name} has backend checks but no 'backend' "
                "parameter to select them with"
            )

    def _preference_spec(self, name: str, prefer: Callable[..., Any]) -> CallSpec:
        role = f"the preference of backend {name!r}"
        return checker_spec(self._sig, prefer, role, self.api_name)

    def prefer_first(self, candidates: list[str], bound: Mapping[str, Any]) -> list[str]:
        """``candidates`` (the heuristic's order) with the experimental backends whose declared
        preference (``Backend.prefer``) says so for the call's arguments ``bound`` moved to the
        front, in their order."""
        first = [
            b
            for b in candidates
            if b in self._preferences
            and invoke(self._preferences[b][0], self._preferences[b][1], bound)
        ]
        if not first:
            return candidates
        return first + [b for b in candidates if b not in first]

    def check_result(self, backend: str | None, value: Any) -> bool:
        """``value``, what backend ``backend``'s support checker (None: the common check)
        returned, as a verdict: a bool (a numpy bool too), else a ``TypeError`` naming it."""
        if value is True or value is False:
            return value
        numpy = sys.modules.get("numpy")  # never imported here
        if numpy is not None and isinstance(value, numpy.bool_):
            return bool(value)
        if backend is None:
            check, role = self.common_check, "the common check"
        else:
            check, role = (
                self.backend_checks[backend],
                f"the support checker of backend {backend!r}",
            )
        hint = ""
        if value is None:
            hint = " (None: does a path through it end without a return statement?)"
        elif isinstance(value, str):
            hint = " (a non-empty str would have counted as support)"
        raise TypeError(
            f"{self.api_name}: {role} ({qualified_check_name(check)}) returned "
            f"{_described(value)}{hint}; a check returns True or False (a numpy bool is "
            "accepted), or raises ValueError saying why the inputs are not supported"
        )

    def heuristic_order(self, answer: Any, candidates: list[str]) -> list[str]:
        """The candidates in the order of ``answer`` (what the heuristic returned): it may drop
        some, never add one (a name that is no backend is kept, as upstream keeps it)."""
        problem = _names_problem(answer)
        if problem is not None:
            raise TypeError(
                f"{self.api_name}: the heuristic ({qualified_check_name(self.heuristic_func)}) "
                f"returned {_described(answer)}{problem}; a heuristic returns a list (or tuple) "
                "of backend names (str), best first, taken from the candidates it is given"
            )
        kept: list[str] = []
        for b in answer:
            if (b in candidates or b not in self.backend_checks) and b not in kept:
                kept.append(b)
        return kept

    def _build_specs(self) -> dict[str, CallSpec]:
        sig, api = self._sig, self.api_name
        specs = {"__func__": sig.call_spec()}
        if self.common_check is not None:
            specs["__common__"] = checker_spec(sig, self.common_check, "common_check", api)
        for name, chk in self.backend_checks.items():
            specs[name] = checker_spec(sig, chk, f"the checker of backend {name!r}", api)
        if self.heuristic_func is not None:  # after the candidates, by name as a checker
            heuristic = self.heuristic_func
            specs["__heuristic__"] = checker_spec(sig, heuristic, "heuristic_func", api, lead=True)
        return specs

    def routed_inputs(self) -> list[str] | None:
        """The parameters whose arguments a routed auto call passes on (see :meth:`route_auto`)."""
        if not self.backend_checks or self._sig.has_var:
            return None
        return [n for n in self._sig.names if n != "backend"]


def checker_spec(
    api: ParameterList, fn: Callable[..., Any], role: str, name: str, *, lead: bool = False
) -> CallSpec:
    """How to call a checker."""
    try:
        theirs = ParameterList(functools.partial(fn, None) if lead else fn, redeclared=False)
    except (TypeError, ValueError):
        return api.call_spec()
    if api.matches_positionally(theirs):
        return [("pos", n) for n in api.names]
    var = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    ours = {p.name: p for p in api.params}
    for p in theirs.params:
        if p.name not in ours and p.default is p.empty and p.kind not in var:
            raise TypeError(
                f"{role} of {name} has parameter {p.name!r}, which {name} does not have; "
                f"a checker takes (a subset of) the API's parameters: {api.names}"
            )
    if _leads_with(theirs, api):  # the API's own parameter list, then defaulted extras
        return api.call_spec()
    # By name.  Positional-only parameters (always first) can only be passed by position.
    spec: CallSpec = []
    for p in theirs.params:
        mine = ours.get(p.name)
        if mine is None:
            continue
        if p.kind == p.POSITIONAL_ONLY:
            spec.append(("pos", p.name))
        elif p.kind in var:  # *args to *args, **kwargs to **kwargs; else by name below
            if mine.kind == p.kind:
                spec.append(("star" if p.kind == p.VAR_POSITIONAL else "starstar", p.name))
        else:
            spec.append(("kw", p.name))
    if any(p.kind == p.VAR_KEYWORD for p in theirs.params):
        # The rest of the API's arguments go to the checker's **kwargs, by name
        # (``*args`` as the tuple it is, ``**kwargs`` spread out).
        taken = {n for _, n in spec}
        for q in api.params:
            if q.name not in taken:
                spec.append(("starstar" if q.kind == q.VAR_KEYWORD else "kw", q.name))
    order = {"pos": 0, "star": 1, "kw": 2, "starstar": 3}
    return sorted(spec, key=lambda item: order[item[0]])


def _leads_with(theirs: ParameterList, api: ParameterList) -> bool:
    """Whether ``theirs`` starts with ``api``'s parameters: same names, order and kinds."""
    if len(theirs.params) < len(api.params):
        return False
    for mine, other in zip(api.params, theirs.params[: len(api.params)], strict=True):
        if mine.name != other.name:
            return False
        if mine.kind in POSITIONAL_KINDS:
            if other.kind not in POSITIONAL_KINDS:
                return False
        elif mine.kind != other.kind:
            return False
    return True


def invoke(
    fn: Callable[..., Any], spec: list[tuple[str, str]], bound: Mapping[str, Any], *lead: Any
) -> Any:
    """Reference-path equivalent of a generated call."""
    args: list[Any] = list(lead)
    kwargs: dict[str, Any] = {}
    for how, name in spec:
        if how == "pos":
            args.append(bound[name])
        elif how == "star":
            args.extend(bound[name])
        elif how == "kw":
            kwargs[name] = bound[name]
        else:
            kwargs.update(bound[name])
    return fn(*args, **kwargs)


def _described(value: Any) -> str:
    """``None``, or the value's type and a repr cut to a line."""
    if value is None:
        return "None"
    text = repr(value)
    if len(text) > 80:  # a line
        text = text[:77] + "..."
    return f"{type(value).__name__} {text}"


def _names_problem(answer: Any) -> str | None:
    """What is wrong with a heuristic's answer, or None: a list or tuple of str."""
    if not isinstance(answer, (list, tuple)):
        if answer is None:
            return " (None: does a path through it end without a return statement?)"
        if isinstance(answer, (set, frozenset)):
            return " (a set has no order)"
        if type(answer).__module__ == "numpy":
            return " (a numpy array: return array.tolist())"
        return ""
    for i, name in enumerate(answer):
        if not isinstance(name, str):
            return f" (item {i} is {_described(name)})"
    return None


def experimental_code(fn: Any) -> str | None:
    """How ``fn`` is experimental code (defined under or importing from
    ``flashinfer.experimental``), or None."""
    owner = inspect.unwrap(fn) if inspect.isroutine(fn) else fn
    if not (inspect.isroutine(owner) or inspect.isclass(owner)):
        owner = type(owner)  # a callable object: its class's code
    module = getattr(owner, "__module__", "") or ""
    if in_experimental_package(module):
        return f"is defined in module {module!r} under {EXPERIMENTAL_PACKAGE}"
    for code in _code_objects(owner):
        for imported in _imports(code, module):
            if in_experimental_package(imported):
                return f"imports {imported!r} (in {code.co_name})"
    return None


def _code_objects(owner: Any) -> Iterator[types.CodeType]:
    """The code of a function, or of every function a class defines (``object``'s aside),
    with the code nested in it."""
    if inspect.isclass(owner):
        functions = [
            inspect.unwrap(v)
            for klass in owner.__mro__[:-1]
            for v in vars(klass).values()
            if inspect.isfunction(v)
        ]
    else:
        functions = [owner]
    stack = [
        f.__code__ for f in functions if isinstance(getattr(f, "__code__", None), types.CodeType)
    ]
    while stack:
        code = stack.pop()
        yield code
        stack.extend(c for c in code.co_consts if isinstance(c, types.CodeType))


def _imports(code: types.CodeType, module: str) -> Iterator[str]:
    """The absolute names of the modules ``code`` imports (relative ones resolved against
    ``module``'s package)."""
    import dis  # only when an API with declared backends is decorated
    import importlib.util

    package = getattr(sys.modules.get(module), "__package__", None) or module.rpartition(".")[0]
    instructions = list(dis.get_instructions(code))
    for i, ins in enumerate(instructions):
        if ins.opname != "IMPORT_NAME":
            continue
        level = instructions[i - 2].argval if i >= 2 else 0
        name = str(ins.argval)
        if isinstance(level, int) and level > 0:
            try:
                name = importlib.util.resolve_name("." * level + name, package)
            except ImportError:
                continue
        yield name
