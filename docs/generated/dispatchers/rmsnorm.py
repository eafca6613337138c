# flashinfer.rmsnorm: its generated code, as written at import time.
#
# GENERATED FILE, do not edit.  Written by `python scripts/docs/write_dispatchers.py`
# from the generated functions' __generated_source__, in a fresh interpreter before
# any call (the dispatcher regenerates itself as it learns call patterns; this is its
# first form).  tests/test_generated_dispatchers.py fails when this file is stale.
# It is never imported: the package runs the code it generates, not this copy.
#
# The API: flashinfer.norm.rmsnorm  (flashinfer/norm.py)
#
# Backends (the dispatcher runs check, then run = op.implementations[backend]):
#   torch (stable)
#     check: flashinfer.norm._check_torch  (flashinfer/norm.py)
#     run:   flashinfer.norm._rmsnorm_torch  (flashinfer/norm.py)
#   triton (stable)
#     check: flashinfer.norm._check_triton  (flashinfer/norm.py)
#     run:   flashinfer.norm._rmsnorm_triton  (flashinfer/norm.py)


# ---- rmsnorm_dispatcher ---------------------------------------------------------------------------
# A traceback names it <flashinfer generated dispatcher for flashinfer.norm.rmsnorm>
# Its globals: module flashinfer.codegen.generated.rmsnorm_dispatcher.  The names it uses:
#   _d_eps = 1e-06
#   _d_out = None
#   _d_backend = 'auto'
#   _ac = builtin _is_any_autocast_enabled
#   _acin = a flashinfer.dispatch.autocast._Inside  (flashinfer/dispatch/autocast.py)
#   _acall = a flashinfer.dispatch.autocast.AutocastCall  (flashinfer/dispatch/autocast.py)
#   _type = builtins.type
#   _str = builtins.str
#   _CHECKS = a builtins.dict
#   _alias = flashinfer.dispatch.plan.DispatchPlan.resolve_alias, bound to a BackendRequirementOp  (flashinfer/dispatch/plan.py)
#   _Tensor = torch.Tensor
#   _jit = builtin _is_tracing
#   _traced = flashinfer.dispatch.torch_op.traced_call  (flashinfer/dispatch/torch_op.py)
#   _traceable = generated flashinfer.norm.rmsnorm[traceable] (below)
#   _ovl = flashinfer.dispatch.overlap.OverlapRule.check, bound to a OverlapRule  (flashinfer/dispatch/overlap.py)
#   _func = flashinfer.norm.rmsnorm  (flashinfer/norm.py)
#   _CUDA = a flashinfer.dispatch.capability._CudaState  (flashinfer/dispatch/capability.py)
#   _ccs0 = frozenset({60, 61, 70, 75, 80, 86, 87, 89, 90, 100, 101, 103, 110, 120, 121})
#   _common = flashinfer.norm._common_check  (flashinfer/norm.py)
#   _ValueError = builtins.ValueError
#   _chk0 = flashinfer.norm._check_torch  (flashinfer/norm.py)
#   _ccs1 = frozenset({75, 80, 86, 87, 89, 90, 100, 101, 103, 110, 120, 121})
#   _chk1 = flashinfer.norm._check_triton  (flashinfer/norm.py)
#   _tokcall = flashinfer.dispatch.restrictions.call_in_token_block  (flashinfer/dispatch/restrictions.py)
#   _self = a flashinfer.dispatch.op.BackendRequirementOp  (flashinfer/dispatch/op.py)
#   _named = flashinfer.dispatch.op.BackendRequirementOp._select, bound to a BackendRequirementOp  (flashinfer/dispatch/op.py)
#   _rfind = flashinfer.dispatch.restrictions.restriction_for  (flashinfer/dispatch/restrictions.py)
#   _api = 'flashinfer.norm.rmsnorm'
#   _RS = a flashinfer.dispatch.restrictions._Switch  (flashinfer/dispatch/restrictions.py)
#   _os = module os
#   _environ = a os._Environ
#   _learn = flashinfer.dispatch.emitter.Front.learn, bound to a Front  (flashinfer/dispatch/emitter.py)
#   _Exception = builtins.Exception
#   _memo = a builtins.dict
#   _decide = flashinfer.dispatch.op.BackendRequirementOp._decide, bound to a BackendRequirementOp  (flashinfer/dispatch/op.py)
#   _state = a flashinfer.dispatch.thread_state.CallState  (flashinfer/dispatch/thread_state.py)
#   _route = None
#   _rslot = False
#   _clog = a flashinfer.dispatch.choice_log._Switch  (flashinfer/dispatch/choice_log.py)
#   _lg = a flashinfer.dispatch.choice_log.OpLog  (flashinfer/dispatch/choice_log.py)
#   _note = flashinfer.dispatch.op.BackendRequirementOp._log_choice, bound to a BackendRequirementOp  (flashinfer/dispatch/op.py)

def rmsnorm_dispatcher(input, weight, eps=_d_eps, *, out=_d_out, backend=_d_backend, skip_check=False):
    if _ac() and not _acin.on:
        return _acall({'input': input, 'weight': weight, 'eps': eps, 'out': out, 'backend': backend}, skip_check)
    if skip_check and backend != 'auto':
        if _type(backend) is _str and backend not in _CHECKS:
            backend = _alias(backend)
        if (_type(input) is not _Tensor or input.is_meta or _jit()) and _traced(input, weight, out):
            return _traceable(input, weight, eps, out=out, backend=backend, skip_check=skip_check)
        if out is not None:
            _ovl(out, input, weight)
        return _func(input, weight, eps, out=out, backend=backend)
    _cc = None if _CUDA.absent else _CUDA.find(input, weight, eps, out)
    if backend != 'auto':
        if (_type(input) is not _Tensor or input.is_meta or _jit()) and _traced(input, weight, out):
            return _traceable(input, weight, eps, out=out, backend=backend, skip_check=skip_check)
        if backend == 'torch':
            if (_cc is None or _cc in _ccs0):
                try:
                    _fits = _common(input, weight, eps, out=out, backend=backend) is True
                except _ValueError:
                    _fits = False
                if _fits:
                    if out is not None:
                        _ovl(out, input, weight)
                    try:
                        _fits = _chk0(input=input) is True
                    except _ValueError:
                        _fits = False
                    if _fits:
                        return _func(input, weight, eps, out=out, backend=backend)
        elif backend == 'triton':
            if (_cc is None or _cc in _ccs1):
                try:
                    _fits = _common(input, weight, eps, out=out, backend=backend) is True
                except _ValueError:
                    _fits = False
                if _fits:
                    if out is not None:
                        _ovl(out, input, weight)
                    try:
                        _fits = _chk1(input, weight, eps, out=out, backend=backend) is True
                    except _ValueError:
                        _fits = False
                    if _fits:
                        return _func(input, weight, eps, out=out, backend=backend)
        if _type(backend) is _str and backend.startswith('auto|'):
            return _tokcall(_self, backend, {'input': input, 'weight': weight, 'eps': eps, 'out': out, 'backend': backend})
        backend = _named(_cc, {'input': input, 'weight': weight, 'eps': eps, 'out': out, 'backend': backend})[0]
        return _func(input, weight, eps, out=out, backend=backend)
    if _jit() and _traced(input, weight, out):
        return _traceable(input, weight, eps, out=out, backend=backend, skip_check=skip_check)
    _rx = _rfind(_api) if _RS.on else None
    try:
        if _os.environ is not _environ:
            _k = None
        else:
            _k = _learn((input, weight, eps, out, backend,))
    except _Exception:
        _k = None
    _verdict = None if _k is None else _memo.get(_k)
    if _verdict is None:
        if _k is None:
            if _traced(input, weight, out):
                return _traceable(input, weight, eps, out=out, backend=backend, skip_check=skip_check)
        _verdict = _decide(_k, _cc, _rx, {'input': input, 'weight': weight, 'eps': eps, 'out': out, 'backend': backend})
    if out is not None:
        _ovl(out, input, weight)
    candidates, dropped, warns, slot = _verdict
    record = _state.r
    record.suitable = candidates
    outer = record.open
    record.open = candidates
    try:
        if _route is not None and not skip_check:
            if _rslot:
                return _route(candidates, (input, weight, eps, out), slot)
            return _route(candidates, (input, weight, eps, out))
        if _clog.armed and candidates[0] is not (_lg.auto if _rx is None else _lg.restricted):
            _note(candidates, dropped, _rx is not None)
        return _func(input, weight, eps, out=out, backend=backend)
    finally:
        record.open = outer
        if outer is not None:
            record.suitable = outer


# ---- rmsnorm_traceable ----------------------------------------------------------------------------
# A traceback names it <flashinfer generated traceable for flashinfer.norm.rmsnorm>
# Its globals: module flashinfer.codegen.generated.rmsnorm_traceable.  The names it uses:
#   _d_eps = 1e-06
#   _d_out = None
#   _d_backend = 'auto'
#   _jit_tracing = flashinfer.dispatch.traceable.jit_tracing  (flashinfer/dispatch/traceable.py)
#   _out = a torch._ops.OpOverload
#   _default = a torch._ops.OpOverload
#   _refuse_bool = flashinfer.dispatch.traceable._bool_refusal.<locals>.refuse_bool  (flashinfer/dispatch/traceable.py)
#   _Tensor = torch.Tensor
#   _cast = flashinfer.dispatch.autocast.cast_tensors  (flashinfer/dispatch/autocast.py)
#   _acrule = a flashinfer.dispatch.autocast.AutocastRule  (flashinfer/dispatch/autocast.py)
#   _restriction = flashinfer.dispatch.traced_blocks.traced_restriction  (flashinfer/dispatch/traced_blocks.py)
#   _exporting = torch.compiler.is_exporting
#   _watch = flashinfer.dispatch.tracing.TransparentPlan.__init__.<locals>.watch  (flashinfer/dispatch/tracing.py)
#   _facts = flashinfer.dispatch.traceable._tensor_facts  (flashinfer/dispatch/traceable.py)
#   _choose = flashinfer.dispatch.tracing.TransparentPlan.__init__.<locals>.choose  (flashinfer/dispatch/tracing.py)
#   _grad_on = builtin is_grad_enabled
#   _g = a flashinfer.dispatch.guarded_state.GuardedState  (flashinfer/dispatch/guarded_state.py)
#   _scalar = flashinfer.dispatch.traceable._scalar_value  (flashinfer/dispatch/traceable.py)
#   _flag = a flashinfer.dispatch.restrictions.BlockFlag  (flashinfer/dispatch/restrictions.py)
#   _body = flashinfer.norm.rmsnorm  (flashinfer/norm.py)
#   _transforms = flashinfer.dispatch.traceable._transforms  (flashinfer/dispatch/traceable.py)
#   _dual = flashinfer.torch_boundary.forward_ad_open  (flashinfer/torch_boundary.py)
#   _no_grad = a torch._ops.OpOverload

def rmsnorm_traceable(input, weight, eps=_d_eps, *, out=_d_out, backend=_d_backend, skip_check=False):
    if _jit_tracing():
        if out is not None:
            _out(input, weight, eps, out=out, backend=backend, skip_check=skip_check)
            return out
        return _default(input, weight, eps, backend=backend, skip_check=skip_check)
    if isinstance(eps, bool):
        _refuse_bool('eps', eps)
    elif eps is not None and not isinstance(eps, (int, float, _Tensor)):
        eps = float(eps)
    if out is None:
        input, weight = _cast(_acrule, input, weight)
    _r = _restriction('flashinfer.norm.rmsnorm') if backend == 'auto' else None
    if out is None and not _exporting():
        _watch()
        _tf = _facts(input, weight)
        _b = _choose(_grad_on(), (_g.environment['TRITON_INTERPRET'], _g.epoch,), _tf[0], _tf[1], _scalar(eps), backend, skip_check, _r)
        if _b is not None and (
            backend != 'auto' or _r is not None or not _flag.named
        ):
            return _body(input, weight, eps, out=None, backend=_b, skip_check=skip_check)
    if _r is not None:
        backend = _r
    if out is not None:
        _out(input, weight, eps, out=out, backend=backend, skip_check=skip_check)
        return out
    if not _exporting() and not _transforms() and not _dual() and (
        not _grad_on() or not (input.requires_grad or weight.requires_grad)
    ):
        return _no_grad(input, weight, eps, backend, skip_check)
    return _default(input, weight, eps, backend=backend, skip_check=skip_check)
