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
#   _Tensor = torch.Tensor
#   _jit = builtin _is_tracing
#   _traced = flashinfer.dispatch.torch_op.traced_call  (flashinfer/dispatch/torch_op.py)
#   _traceable = generated flashinfer.norm.rmsnorm[traceable] (below)
#   _ovl = flashinfer.dispatch.overlap.OverlapRule.check, bound to a OverlapRule  (flashinfer/dispatch/overlap.py)
#   _func = flashinfer.norm.rmsnorm  (flashinfer/norm.py)
#   _CUDA = a flashinfer.dispatch.capability._CudaState  (flashinfer/dispatch/capability.py)
#   _ccs0 = frozenset({60, 61, 70, 75, 80, 86, 87, 89, 90, 100, 101, 103, 110, 120, 121})
#   _fail = flashinfer.dispatch.reference.ReferenceDispatcher._fail, bound to a BackendRequirementOp  (flashinfer/dispatch/reference.py)
#   _common = flashinfer.norm._common_check  (flashinfer/norm.py)
#   _verd = flashinfer.dispatch.plan.DispatchPlan.check_result, bound to a BackendRequirementOp  (flashinfer/dispatch/plan.py)
#   _chk0 = flashinfer.norm._check_torch  (flashinfer/norm.py)
#   _ValueError = builtins.ValueError
#   _ccs1 = frozenset({75, 80, 86, 87, 89, 90, 100, 101, 103, 110, 120, 121})
#   _chk1 = flashinfer.norm._check_triton  (flashinfer/norm.py)
#   _str = builtins.str
#   _tokcall = flashinfer.dispatch.restrictions.call_in_token_block  (flashinfer/dispatch/restrictions.py)
#   _self = a flashinfer.dispatch.op.BackendRequirementOp  (flashinfer/dispatch/op.py)
#   _rfind = flashinfer.dispatch.restrictions.restriction_for  (flashinfer/dispatch/restrictions.py)
#   _api = 'flashinfer.norm.rmsnorm'
#   _RS = a flashinfer.dispatch.restrictions._Switch  (flashinfer/dispatch/restrictions.py)
#   _os = module os
#   _environ = a os._Environ
#   _learn = flashinfer.dispatch.front.Front.learn, bound to a Front  (flashinfer/dispatch/front.py)
#   _Exception = builtins.Exception
#   _skip_auto = generated flashinfer.norm.rmsnorm[skip_check auto dispatcher] (below)
#   _checked = generated flashinfer.norm.rmsnorm[checking dispatcher] (below)
#   _memo = a builtins.dict
#   _state = a flashinfer.dispatch.thread_state.CallState  (flashinfer/dispatch/thread_state.py)
#   _route = None
#   _rslot = False
#   _clog = a flashinfer.dispatch.choice_log._Switch  (flashinfer/dispatch/choice_log.py)
#   _lg = a flashinfer.dispatch.choice_log.OpLog  (flashinfer/dispatch/choice_log.py)
#   _notea = flashinfer.dispatch.choice_log.note_auto  (flashinfer/dispatch/choice_log.py)
#   _noter = flashinfer.dispatch.choice_log.note_restricted  (flashinfer/dispatch/choice_log.py)

def rmsnorm_dispatcher(input, weight, eps=_d_eps, *, out=_d_out, backend=_d_backend, skip_check=False):
    if _ac() and not _acin.on:
        return _acall({'input': input, 'weight': weight, 'eps': eps, 'out': out, 'backend': backend}, skip_check)
    if skip_check:
        if backend != 'auto':
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
            if not (_cc is None or _cc in _ccs0):
                _fail(_cc, {'input': input, 'weight': weight, 'eps': eps, 'out': out, 'backend': backend})
            _v = _common(input, weight, eps, out=out, backend=backend)
            if _v is not True and (_v is False or not _verd(None, _v)):
                _fail(_cc, {'input': input, 'weight': weight, 'eps': eps, 'out': out, 'backend': backend})
            if out is not None:
                _ovl(out, input, weight)
            try:
                _v = _chk0(input=input)
            except _ValueError:
                _v = False
            if _v is not True and (_v is False or not _verd('torch', _v)):
                _fail(_cc, {'input': input, 'weight': weight, 'eps': eps, 'out': out, 'backend': backend})
            return _func(input, weight, eps, out=out, backend=backend)
        elif backend == 'triton':
            if not (_cc is None or _cc in _ccs1):
                _fail(_cc, {'input': input, 'weight': weight, 'eps': eps, 'out': out, 'backend': backend})
            _v = _common(input, weight, eps, out=out, backend=backend)
            if _v is not True and (_v is False or not _verd(None, _v)):
                _fail(_cc, {'input': input, 'weight': weight, 'eps': eps, 'out': out, 'backend': backend})
            if out is not None:
                _ovl(out, input, weight)
            try:
                _v = _chk1(input, weight, eps, out=out, backend=backend)
            except _ValueError:
                _v = False
            if _v is not True and (_v is False or not _verd('triton', _v)):
                _fail(_cc, {'input': input, 'weight': weight, 'eps': eps, 'out': out, 'backend': backend})
            return _func(input, weight, eps, out=out, backend=backend)
        if _type(backend) is _str and backend.startswith('auto|'):
            return _tokcall(_self, backend, {'input': input, 'weight': weight, 'eps': eps, 'out': out, 'backend': backend})
        _fail(_cc, {'input': input, 'weight': weight, 'eps': eps, 'out': out, 'backend': backend})
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
    if _k is None:
        if _traced(input, weight, out):
            return _traceable(input, weight, eps, out=out, backend=backend, skip_check=skip_check)
        if skip_check:
            return _skip_auto(input, weight, eps, out=out, backend=backend)
        return _checked(input, weight, eps, out=out, backend=backend)
    _v = _memo.get(_k)
    if _v is None:
        if skip_check:
            return _skip_auto(input, weight, eps, out=out, backend=backend, _key=_k)
        return _checked(input, weight, eps, out=out, backend=backend, _key=_k)
    if out is not None:
        _ovl(out, input, weight)
    _ok, _drop, _wx, _rs = _v
    if _rx is None:
        _r = _state.r
        _r.suitable = _ok
        if _route is not None and not skip_check:
            if _rslot:
                _p = _r.open
                _r.open = _ok
                try:
                    return _route(_ok, (input, weight, eps, out), _rs)
                finally:
                    _r.open = _p
                    if _p is not None:
                        _r.suitable = _p
            _p = _r.open
            _r.open = _ok
            try:
                return _route(_ok, (input, weight, eps, out))
            finally:
                _r.open = _p
                if _p is not None:
                    _r.suitable = _p
        if _clog.armed and _ok[0] is not _lg.auto:
            _notea(_lg, _ok, _drop)
        _p = _r.open
        _r.open = _ok
        try:
            return _func(input, weight, eps, out=out, backend=backend)
        finally:
            _r.open = _p
            if _p is not None:
                _r.suitable = _p
    _r = _state.r
    _r.suitable = _ok
    if _route is not None and not skip_check:
        if _rslot:
            _p = _r.open
            _r.open = _ok
            try:
                return _route(_ok, (input, weight, eps, out), _rs)
            finally:
                _r.open = _p
                if _p is not None:
                    _r.suitable = _p
        _p = _r.open
        _r.open = _ok
        try:
            return _route(_ok, (input, weight, eps, out))
        finally:
            _r.open = _p
            if _p is not None:
                _r.suitable = _p
    if _clog.armed and _ok[0] is not _lg.restricted:
        _noter(_lg, _ok)
    _p = _r.open
    _r.open = _ok
    try:
        return _func(input, weight, eps, out=out, backend=backend)
    finally:
        _r.open = _p
        if _p is not None:
            _r.suitable = _p


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
#   _watch = flashinfer.dispatch.transparent.TransparentPlan.__init__.<locals>.watch  (flashinfer/dispatch/transparent.py)
#   _facts = flashinfer.dispatch.transparent.tensor_facts  (flashinfer/dispatch/transparent.py)
#   _choose = flashinfer.dispatch.transparent.TransparentPlan._chooser.<locals>.choose  (flashinfer/dispatch/transparent.py)
#   _grad_on = builtin is_grad_enabled
#   _g = a flashinfer.dispatch.guarded_state.GuardedState  (flashinfer/dispatch/guarded_state.py)
#   _scalar = flashinfer.dispatch.transparent.scalar_value  (flashinfer/dispatch/transparent.py)
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


# ---- rmsnorm_skip_check_auto_dispatcher -----------------------------------------------------------
# A traceback names it <flashinfer generated skip_check auto dispatcher for flashinfer.norm.rmsnorm>
# Its globals: module flashinfer.codegen.generated.rmsnorm_dispatcher.  The names it uses:
#   _d_eps = 1e-06
#   _d_out = None
#   _d_backend = 'auto'
#   _CUDA = a flashinfer.dispatch.capability._CudaState  (flashinfer/dispatch/capability.py)
#   _common = flashinfer.norm._common_check  (flashinfer/norm.py)
#   _verd = flashinfer.dispatch.plan.DispatchPlan.check_result, bound to a BackendRequirementOp  (flashinfer/dispatch/plan.py)
#   _fail = flashinfer.dispatch.reference.ReferenceDispatcher._fail, bound to a BackendRequirementOp  (flashinfer/dispatch/reference.py)
#   _ovl = flashinfer.dispatch.overlap.OverlapRule.check, bound to a OverlapRule  (flashinfer/dispatch/overlap.py)
#   _rfind = flashinfer.dispatch.restrictions.restriction_for  (flashinfer/dispatch/restrictions.py)
#   _api = 'flashinfer.norm.rmsnorm'
#   _RS = a flashinfer.dispatch.restrictions._Switch  (flashinfer/dispatch/restrictions.py)
#   _chk0 = flashinfer.norm._check_torch  (flashinfer/norm.py)
#   _ValueError = builtins.ValueError
#   _chk1 = flashinfer.norm._check_triton  (flashinfer/norm.py)
#   _ccs0 = frozenset({60, 61, 70, 75, 80, 86, 87, 89, 90, 100, 101, 103, 110, 120, 121})
#   _ccs1 = frozenset({75, 80, 86, 87, 89, 90, 100, 101, 103, 110, 120, 121})
#   _heuristic = flashinfer.norm._heuristic  (flashinfer/norm.py)
#   _type = builtins.type
#   _list = builtins.list
#   _filter = flashinfer.dispatch.plan.DispatchPlan.heuristic_order, bound to a BackendRequirementOp  (flashinfer/dispatch/plan.py)
#   _put = flashinfer.dispatch.verdicts.VerdictCache.put, bound to a VerdictCache  (flashinfer/dispatch/verdicts.py)
#   _NO_ROUTE = (None, None)
#   _state = a flashinfer.dispatch.thread_state.CallState  (flashinfer/dispatch/thread_state.py)
#   _clog = a flashinfer.dispatch.choice_log._Switch  (flashinfer/dispatch/choice_log.py)
#   _lg = a flashinfer.dispatch.choice_log.OpLog  (flashinfer/dispatch/choice_log.py)
#   _noter = flashinfer.dispatch.choice_log.note_restricted  (flashinfer/dispatch/choice_log.py)
#   _func = flashinfer.norm.rmsnorm  (flashinfer/norm.py)
#   _notea = flashinfer.dispatch.choice_log.note_auto  (flashinfer/dispatch/choice_log.py)

def rmsnorm_skip_check_auto_dispatcher(input, weight, eps=_d_eps, *, out=_d_out, backend=_d_backend, _key=None):
    _cc = None if _CUDA.absent else _CUDA.find(input, weight, eps, out)
    _v = _common(input, weight, eps, out=out, backend=backend)
    if _v is not True and (_v is False or not _verd(None, _v)):
        _fail(_cc, {'input': input, 'weight': weight, 'eps': eps, 'out': out, 'backend': backend})
    if out is not None:
        _ovl(out, input, weight)
    _rx = _rfind(_api) if _RS.on else None
    if _rx is None:
        _ok = []
        if _cc is None:
            try:
                _v = _chk0(input=input)
            except _ValueError:
                _v = False
            if _v is True or (_v is not False and _verd('torch', _v)):
                _ok.append('torch')
            try:
                _v = _chk1(input, weight, eps, out=out, backend=backend)
            except _ValueError:
                _v = False
            if _v is True or (_v is not False and _verd('triton', _v)):
                _ok.append('triton')
        else:
            if _cc in _ccs0:
                try:
                    _v = _chk0(input=input)
                except _ValueError:
                    _v = False
                if _v is True or (_v is not False and _verd('torch', _v)):
                    _ok.append('torch')
            if _cc in _ccs1:
                try:
                    _v = _chk1(input, weight, eps, out=out, backend=backend)
                except _ValueError:
                    _v = False
                if _v is True or (_v is not False and _verd('triton', _v)):
                    _ok.append('triton')
        if _ok:
            _h = _heuristic(_ok.copy(), input, weight, eps, out=out, backend=backend)
            if _type(_h) is not _list or _h != _ok:
                _ok = _filter(_h, _ok)
    if _rx is not None:
        _ok = []
        for _b in _rx:
            if _b == 'torch':
                if (_cc is None or _cc in _ccs0):
                    try:
                        _v = _chk0(input=input)
                    except _ValueError:
                        _v = False
                    if _v is True or (_v is not False and _verd('torch', _v)):
                        _ok.append(_b)
            elif _b == 'triton':
                if (_cc is None or _cc in _ccs1):
                    try:
                        _v = _chk1(input, weight, eps, out=out, backend=backend)
                    except _ValueError:
                        _v = False
                    if _v is True or (_v is not False and _verd('triton', _v)):
                        _ok.append(_b)
        if not _ok:
            _fail(_cc, {'input': input, 'weight': weight, 'eps': eps, 'out': out, 'backend': backend})
        if _key is not None:
            _put(_key, (_ok, (), False, [_NO_ROUTE]))
        _r = _state.r
        _r.suitable = _ok
        if _clog.armed and _ok[0] is not _lg.restricted:
            _noter(_lg, _ok)
        _p = _r.open
        _r.open = _ok
        try:
            return _func(input, weight, eps, out=out, backend=backend)
        finally:
            _r.open = _p
            if _p is not None:
                _r.suitable = _p
    if not _ok:
        _fail(_cc, {'input': input, 'weight': weight, 'eps': eps, 'out': out, 'backend': backend})
    if _key is not None:
        _put(_key, (_ok, (), False, [_NO_ROUTE]))
    _r = _state.r
    _r.suitable = _ok
    if _clog.armed and _ok[0] is not _lg.auto:
        _notea(_lg, _ok, ())
    _p = _r.open
    _r.open = _ok
    try:
        return _func(input, weight, eps, out=out, backend=backend)
    finally:
        _r.open = _p
        if _p is not None:
            _r.suitable = _p


# ---- rmsnorm_checking_dispatcher ------------------------------------------------------------------
# A traceback names it <flashinfer generated checking dispatcher for flashinfer.norm.rmsnorm>
# Its globals: module flashinfer.codegen.generated.rmsnorm_dispatcher.  The names it uses:
#   _d_eps = 1e-06
#   _d_out = None
#   _d_backend = 'auto'
#   _type = builtins.type
#   _Tensor = torch.Tensor
#   _jit = builtin _is_tracing
#   _traced = flashinfer.dispatch.torch_op.traced_call  (flashinfer/dispatch/torch_op.py)
#   _traceable = generated flashinfer.norm.rmsnorm[traceable] (below)
#   _ovl = flashinfer.dispatch.overlap.OverlapRule.check, bound to a OverlapRule  (flashinfer/dispatch/overlap.py)
#   _func = flashinfer.norm.rmsnorm  (flashinfer/norm.py)
#   _skip_auto = generated flashinfer.norm.rmsnorm[skip_check auto dispatcher] (below)
#   _CUDA = a flashinfer.dispatch.capability._CudaState  (flashinfer/dispatch/capability.py)
#   _ccs0 = frozenset({60, 61, 70, 75, 80, 86, 87, 89, 90, 100, 101, 103, 110, 120, 121})
#   _fail = flashinfer.dispatch.reference.ReferenceDispatcher._fail, bound to a BackendRequirementOp  (flashinfer/dispatch/reference.py)
#   _common = flashinfer.norm._common_check  (flashinfer/norm.py)
#   _verd = flashinfer.dispatch.plan.DispatchPlan.check_result, bound to a BackendRequirementOp  (flashinfer/dispatch/plan.py)
#   _chk0 = flashinfer.norm._check_torch  (flashinfer/norm.py)
#   _ValueError = builtins.ValueError
#   _ccs1 = frozenset({75, 80, 86, 87, 89, 90, 100, 101, 103, 110, 120, 121})
#   _chk1 = flashinfer.norm._check_triton  (flashinfer/norm.py)
#   _str = builtins.str
#   _tokcall = flashinfer.dispatch.restrictions.call_in_token_block  (flashinfer/dispatch/restrictions.py)
#   _self = a flashinfer.dispatch.op.BackendRequirementOp  (flashinfer/dispatch/op.py)
#   _rfind = flashinfer.dispatch.restrictions.restriction_for  (flashinfer/dispatch/restrictions.py)
#   _api = 'flashinfer.norm.rmsnorm'
#   _RS = a flashinfer.dispatch.restrictions._Switch  (flashinfer/dispatch/restrictions.py)
#   _heuristic = flashinfer.norm._heuristic  (flashinfer/norm.py)
#   _list = builtins.list
#   _filter = flashinfer.dispatch.plan.DispatchPlan.heuristic_order, bound to a BackendRequirementOp  (flashinfer/dispatch/plan.py)
#   _put = flashinfer.dispatch.verdicts.VerdictCache.put, bound to a VerdictCache  (flashinfer/dispatch/verdicts.py)
#   _NO_ROUTE = (None, None)
#   _state = a flashinfer.dispatch.thread_state.CallState  (flashinfer/dispatch/thread_state.py)
#   _route = None
#   _clog = a flashinfer.dispatch.choice_log._Switch  (flashinfer/dispatch/choice_log.py)
#   _lg = a flashinfer.dispatch.choice_log.OpLog  (flashinfer/dispatch/choice_log.py)
#   _noter = flashinfer.dispatch.choice_log.note_restricted  (flashinfer/dispatch/choice_log.py)
#   _notea = flashinfer.dispatch.choice_log.note_auto  (flashinfer/dispatch/choice_log.py)

def rmsnorm_checking_dispatcher(input, weight, eps=_d_eps, *, out=_d_out, backend=_d_backend, skip_check=False, _key=None):
    if skip_check:
        if backend != 'auto':
            if (_type(input) is not _Tensor or input.is_meta or _jit()) and _traced(input, weight, out):
                return _traceable(input, weight, eps, out=out, backend=backend, skip_check=skip_check)
            if out is not None:
                _ovl(out, input, weight)
            return _func(input, weight, eps, out=out, backend=backend)
        return _skip_auto(input, weight, eps, out=out, backend=backend)
    _cc = None if _CUDA.absent else _CUDA.find(input, weight, eps, out)
    if backend != 'auto':
        if (_type(input) is not _Tensor or input.is_meta or _jit()) and _traced(input, weight, out):
            return _traceable(input, weight, eps, out=out, backend=backend, skip_check=skip_check)
        if backend == 'torch':
            if not (_cc is None or _cc in _ccs0):
                _fail(_cc, {'input': input, 'weight': weight, 'eps': eps, 'out': out, 'backend': backend})
            _v = _common(input, weight, eps, out=out, backend=backend)
            if _v is not True and (_v is False or not _verd(None, _v)):
                _fail(_cc, {'input': input, 'weight': weight, 'eps': eps, 'out': out, 'backend': backend})
            if out is not None:
                _ovl(out, input, weight)
            try:
                _v = _chk0(input=input)
            except _ValueError:
                _v = False
            if _v is not True and (_v is False or not _verd('torch', _v)):
                _fail(_cc, {'input': input, 'weight': weight, 'eps': eps, 'out': out, 'backend': backend})
            return _func(input, weight, eps, out=out, backend=backend)
        elif backend == 'triton':
            if not (_cc is None or _cc in _ccs1):
                _fail(_cc, {'input': input, 'weight': weight, 'eps': eps, 'out': out, 'backend': backend})
            _v = _common(input, weight, eps, out=out, backend=backend)
            if _v is not True and (_v is False or not _verd(None, _v)):
                _fail(_cc, {'input': input, 'weight': weight, 'eps': eps, 'out': out, 'backend': backend})
            if out is not None:
                _ovl(out, input, weight)
            try:
                _v = _chk1(input, weight, eps, out=out, backend=backend)
            except _ValueError:
                _v = False
            if _v is not True and (_v is False or not _verd('triton', _v)):
                _fail(_cc, {'input': input, 'weight': weight, 'eps': eps, 'out': out, 'backend': backend})
            return _func(input, weight, eps, out=out, backend=backend)
        if _type(backend) is _str and backend.startswith('auto|'):
            return _tokcall(_self, backend, {'input': input, 'weight': weight, 'eps': eps, 'out': out, 'backend': backend})
        _fail(_cc, {'input': input, 'weight': weight, 'eps': eps, 'out': out, 'backend': backend})
    _v = _common(input, weight, eps, out=out, backend=backend)
    if _v is not True and (_v is False or not _verd(None, _v)):
        _fail(_cc, {'input': input, 'weight': weight, 'eps': eps, 'out': out, 'backend': backend})
    if out is not None:
        _ovl(out, input, weight)
    _rx = _rfind(_api) if _RS.on else None
    if _rx is None:
        _ok = []
        if _cc is None:
            try:
                _v = _chk0(input=input)
            except _ValueError:
                _v = False
            if _v is True or (_v is not False and _verd('torch', _v)):
                _ok.append('torch')
            try:
                _v = _chk1(input, weight, eps, out=out, backend=backend)
            except _ValueError:
                _v = False
            if _v is True or (_v is not False and _verd('triton', _v)):
                _ok.append('triton')
        else:
            if _cc in _ccs0:
                try:
                    _v = _chk0(input=input)
                except _ValueError:
                    _v = False
                if _v is True or (_v is not False and _verd('torch', _v)):
                    _ok.append('torch')
            if _cc in _ccs1:
                try:
                    _v = _chk1(input, weight, eps, out=out, backend=backend)
                except _ValueError:
                    _v = False
                if _v is True or (_v is not False and _verd('triton', _v)):
                    _ok.append('triton')
        if _ok:
            _h = _heuristic(_ok.copy(), input, weight, eps, out=out, backend=backend)
            if _type(_h) is not _list or _h != _ok:
                _ok = _filter(_h, _ok)
    if _rx is not None:
        _ok = []
        for _b in _rx:
            if _b == 'torch':
                if (_cc is None or _cc in _ccs0):
                    try:
                        _v = _chk0(input=input)
                    except _ValueError:
                        _v = False
                    if _v is True or (_v is not False and _verd('torch', _v)):
                        _ok.append(_b)
            elif _b == 'triton':
                if (_cc is None or _cc in _ccs1):
                    try:
                        _v = _chk1(input, weight, eps, out=out, backend=backend)
                    except _ValueError:
                        _v = False
                    if _v is True or (_v is not False and _verd('triton', _v)):
                        _ok.append(_b)
        if not _ok:
            _fail(_cc, {'input': input, 'weight': weight, 'eps': eps, 'out': out, 'backend': backend})
        if _key is not None:
            _put(_key, (_ok, (), False, [_NO_ROUTE]))
        _r = _state.r
        _r.suitable = _ok
        if _route is not None:
            _p = _r.open
            _r.open = _ok
            try:
                return _route(_ok, (input, weight, eps, out))
            finally:
                _r.open = _p
                if _p is not None:
                    _r.suitable = _p
        if _clog.armed and _ok[0] is not _lg.restricted:
            _noter(_lg, _ok)
        _p = _r.open
        _r.open = _ok
        try:
            return _func(input, weight, eps, out=out, backend=backend)
        finally:
            _r.open = _p
            if _p is not None:
                _r.suitable = _p
    if not _ok:
        _fail(_cc, {'input': input, 'weight': weight, 'eps': eps, 'out': out, 'backend': backend})
    if _key is not None:
        _put(_key, (_ok, (), False, [_NO_ROUTE]))
    _r = _state.r
    _r.suitable = _ok
    if _route is not None:
        _p = _r.open
        _r.open = _ok
        try:
            return _route(_ok, (input, weight, eps, out))
        finally:
            _r.open = _p
            if _p is not None:
                _r.suitable = _p
    if _clog.armed and _ok[0] is not _lg.auto:
        _notea(_lg, _ok, ())
    _p = _r.open
    _r.open = _ok
    try:
        return _func(input, weight, eps, out=out, backend=backend)
    finally:
        _r.open = _p
        if _p is not None:
            _r.suitable = _p
