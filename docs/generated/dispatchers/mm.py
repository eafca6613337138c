# flashinfer.mm: its generated code, as written at import time.
#
# GENERATED FILE, do not edit.  Written by `python scripts/docs/write_dispatchers.py`
# from the generated functions' __generated_source__, in a fresh interpreter before
# any call (the dispatcher regenerates itself as it learns call patterns; this is its
# first form).  tests/test_generated_dispatchers.py fails when this file is stale.
# It is never imported: the package runs the code it generates, not this copy.
#
# The API: flashinfer.gemm.mm  (flashinfer/gemm.py)
#
# Backends (the dispatcher runs check, then run = op.implementations[backend]):
#   torch (stable)
#     check: flashinfer.gemm._check_torch  (flashinfer/gemm.py)
#     run:   a flashinfer.gemm.TorchRunner  (flashinfer/gemm.py)
#   triton (stable)
#     check: flashinfer.gemm._check_triton  (flashinfer/gemm.py)
#     run:   a flashinfer.gemm.TritonRunner  (flashinfer/gemm.py)
#   splitk (experimental)
#     check: flashinfer.experimental.splitk_gemm.support.check_splitk  (flashinfer/experimental/splitk_gemm/support.py)
#     run:   a flashinfer.experimental.splitk_gemm.support.SplitKRunner  (flashinfer/experimental/splitk_gemm/support.py)


# ---- mm_dispatcher --------------------------------------------------------------------------------
# A traceback names it <flashinfer generated dispatcher for flashinfer.gemm.mm>
# Its globals: module flashinfer.codegen.generated.mm_dispatcher.  The names it uses:
#   _d_out = None
#   _d_out_dtype = None
#   _d_backend = 'auto'
#   _ac = builtin _is_any_autocast_enabled
#   _acin = a flashinfer.dispatch.autocast._Inside  (flashinfer/dispatch/autocast.py)
#   _acall = a flashinfer.dispatch.autocast.AutocastCall  (flashinfer/dispatch/autocast.py)
#   _type = builtins.type
#   _Tensor = torch.Tensor
#   _jit = builtin _is_tracing
#   _traced = flashinfer.dispatch.torch_op.traced_call  (flashinfer/dispatch/torch_op.py)
#   _traceable = generated flashinfer.gemm.mm[traceable] (below)
#   _ovl = flashinfer.dispatch.overlap.OverlapRule.check, bound to a OverlapRule  (flashinfer/dispatch/overlap.py)
#   _func = flashinfer.gemm.mm  (flashinfer/gemm.py)
#   _CUDA = a flashinfer.dispatch.capability._CudaState  (flashinfer/dispatch/capability.py)
#   _live = a flashinfer.dispatch.thread_state.LiveFlags  (flashinfer/dispatch/thread_state.py)
#   _state = a flashinfer.dispatch.thread_state.CallState  (flashinfer/dispatch/thread_state.py)
#   _ccs0 = frozenset({60, 61, 70, 75, 80, 86, 87, 89, 90, 100, 101, 103, 110, 120, 121})
#   _fail = flashinfer.dispatch.reference.ReferenceDispatcher._fail, bound to a BackendRequirementOp  (flashinfer/dispatch/reference.py)
#   _common = flashinfer.gemm._common_check  (flashinfer/gemm.py)
#   _verd = flashinfer.dispatch.plan.DispatchPlan.check_result, bound to a BackendRequirementOp  (flashinfer/dispatch/plan.py)
#   _chk0 = flashinfer.gemm._check_torch  (flashinfer/gemm.py)
#   _ValueError = builtins.ValueError
#   _ccs1 = frozenset({75, 80, 86, 87, 89, 90, 100, 101, 103, 110, 120, 121})
#   _chk1 = flashinfer.gemm._check_triton  (flashinfer/gemm.py)
#   _ccs2 = frozenset({80, 86, 87, 89, 90, 100, 101, 103, 110, 120, 121})
#   _chk2 = flashinfer.experimental.splitk_gemm.support.check_splitk  (flashinfer/experimental/splitk_gemm/support.py)
#   _once2 = a flashinfer.gating.warn_once.OnceFlag  (flashinfer/gating/warn_once.py)
#   _warn = flashinfer.gating.warn_once.warn_experimental_backend_once  (flashinfer/gating/warn_once.py)
#   _api = 'flashinfer.gemm.mm'
#   _str = builtins.str
#   _tokcall = flashinfer.dispatch.restrictions.call_in_token_block  (flashinfer/dispatch/restrictions.py)
#   _self = a flashinfer.dispatch.op.BackendRequirementOp  (flashinfer/dispatch/op.py)
#   _rfind = flashinfer.dispatch.restrictions.restriction_for  (flashinfer/dispatch/restrictions.py)
#   _RS = a flashinfer.dispatch.restrictions._Switch  (flashinfer/dispatch/restrictions.py)
#   _env0 = functools.partial of builtin get
#   _os = module os
#   _environ = a os._Environ
#   _learn = flashinfer.dispatch.front.Front.learn, bound to a Front  (flashinfer/dispatch/front.py)
#   _Exception = builtins.Exception
#   _GATE_VALUES = a builtins.frozenset
#   _skip_auto = generated flashinfer.gemm.mm[skip_check auto dispatcher] (below)
#   _checked = generated flashinfer.gemm.mm[checking dispatcher] (below)
#   _memo = a builtins.dict
#   _route = flashinfer.autotuner.router.Router._route.<locals>.route  (flashinfer/autotuner/router.py)
#   _rslot = True
#   _clog = a flashinfer.dispatch.choice_log._Switch  (flashinfer/dispatch/choice_log.py)
#   _lg = a flashinfer.dispatch.choice_log.OpLog  (flashinfer/dispatch/choice_log.py)
#   _notea = flashinfer.dispatch.choice_log.note_auto  (flashinfer/dispatch/choice_log.py)
#   _warnl = flashinfer.dispatch.restrictions.warn_listed_experimental  (flashinfer/dispatch/restrictions.py)
#   _XS = frozenset({'splitk'})
#   _noter = flashinfer.dispatch.choice_log.note_restricted  (flashinfer/dispatch/choice_log.py)

def mm_dispatcher(a, b, *, out=_d_out, out_dtype=_d_out_dtype, backend=_d_backend, skip_check=False):
    if _ac() and not _acin.on:
        return _acall({'a': a, 'b': b, 'out': out, 'out_dtype': out_dtype, 'backend': backend}, skip_check)
    if skip_check:
        if backend != 'auto':
            if (_type(a) is not _Tensor or a.is_meta or _jit()) and _traced(a, b, out):
                return _traceable(a, b, out=out, out_dtype=out_dtype, backend=backend, skip_check=skip_check)
            if out is not None:
                _ovl(out, a, b)
            return _func(a, b, out=out, out_dtype=out_dtype, backend=backend)
    _cc = None if _CUDA.absent else _CUDA.find(a, b, out, out_dtype)
    if backend != 'auto':
        if (_type(a) is not _Tensor or a.is_meta or _jit()) and _traced(a, b, out):
            return _traceable(a, b, out=out, out_dtype=out_dtype, backend=backend, skip_check=skip_check)
        if backend == 'torch':
            if _live.dropped and (_r := _state.r).dropped:
                _r.dropped = ()
            if not (_cc is None or _cc in _ccs0):
                _fail(_cc, {'a': a, 'b': b, 'out': out, 'out_dtype': out_dtype, 'backend': backend})
            _v = _common(a, b, out=out, out_dtype=out_dtype, backend=backend)
            if _v is not True and (_v is False or not _verd(None, _v)):
                _fail(_cc, {'a': a, 'b': b, 'out': out, 'out_dtype': out_dtype, 'backend': backend})
            if out is not None:
                _ovl(out, a, b)
            try:
                _v = _chk0(a=a)
            except _ValueError:
                _v = False
            if _v is not True and (_v is False or not _verd('torch', _v)):
                _fail(_cc, {'a': a, 'b': b, 'out': out, 'out_dtype': out_dtype, 'backend': backend})
            return _func(a, b, out=out, out_dtype=out_dtype, backend=backend)
        elif backend == 'triton':
            if _live.dropped and (_r := _state.r).dropped:
                _r.dropped = ()
            if not (_cc is None or _cc in _ccs1):
                _fail(_cc, {'a': a, 'b': b, 'out': out, 'out_dtype': out_dtype, 'backend': backend})
            _v = _common(a, b, out=out, out_dtype=out_dtype, backend=backend)
            if _v is not True and (_v is False or not _verd(None, _v)):
                _fail(_cc, {'a': a, 'b': b, 'out': out, 'out_dtype': out_dtype, 'backend': backend})
            if out is not None:
                _ovl(out, a, b)
            try:
                _v = _chk1(a, b, out=out, out_dtype=out_dtype, backend=backend)
            except _ValueError:
                _v = False
            if _v is not True and (_v is False or not _verd('triton', _v)):
                _fail(_cc, {'a': a, 'b': b, 'out': out, 'out_dtype': out_dtype, 'backend': backend})
            return _func(a, b, out=out, out_dtype=out_dtype, backend=backend)
        elif backend == 'splitk':
            if _live.dropped and (_r := _state.r).dropped:
                _r.dropped = ()
            if not (_cc is None or _cc in _ccs2):
                _fail(_cc, {'a': a, 'b': b, 'out': out, 'out_dtype': out_dtype, 'backend': backend})
            _v = _common(a, b, out=out, out_dtype=out_dtype, backend=backend)
            if _v is not True and (_v is False or not _verd(None, _v)):
                _fail(_cc, {'a': a, 'b': b, 'out': out, 'out_dtype': out_dtype, 'backend': backend})
            if out is not None:
                _ovl(out, a, b)
            try:
                _v = _chk2(a, b, out=out, out_dtype=out_dtype, backend=backend)
            except _ValueError:
                _v = False
            if _v is not True and (_v is False or not _verd('splitk', _v)):
                _fail(_cc, {'a': a, 'b': b, 'out': out, 'out_dtype': out_dtype, 'backend': backend})
            if not _once2.warned:
                _warn(_api, 'splitk')
            return _func(a, b, out=out, out_dtype=out_dtype, backend=backend)
        if _type(backend) is _str and backend.startswith('auto|'):
            return _tokcall(_self, backend, {'a': a, 'b': b, 'out': out, 'out_dtype': out_dtype, 'backend': backend})
        _fail(_cc, {'a': a, 'b': b, 'out': out, 'out_dtype': out_dtype, 'backend': backend})
    if _jit() and _traced(a, b, out):
        return _traceable(a, b, out=out, out_dtype=out_dtype, backend=backend, skip_check=skip_check)
    _rx = _rfind(_api) if _RS.on else None
    _g = _env0()
    try:
        if _os.environ is not _environ:
            _k = None
        else:
            _k = _learn((a, b, out, out_dtype, backend,))
    except _Exception:
        _k = None
    if _g not in _GATE_VALUES:
        _k = None
    if _k is None:
        if _traced(a, b, out):
            return _traceable(a, b, out=out, out_dtype=out_dtype, backend=backend, skip_check=skip_check)
        if skip_check:
            return _skip_auto(a, b, out=out, out_dtype=out_dtype, backend=backend)
        return _checked(a, b, out=out, out_dtype=out_dtype, backend=backend)
    _v = _memo.get(_k)
    if _v is None:
        if skip_check:
            return _skip_auto(a, b, out=out, out_dtype=out_dtype, backend=backend, _key=_k)
        return _checked(a, b, out=out, out_dtype=out_dtype, backend=backend, _key=_k)
    if out is not None:
        _ovl(out, a, b)
    _ok, _drop, _wx, _rs = _v
    if _rx is None:
        _r = _state.r
        _r.suitable = _ok
        _r.dropped = _drop
        if _wx:
            _warn(_api, _ok[0], automatic=True)
        if _route is not None and not skip_check:
            if _rslot:
                _p = _r.open
                _r.open = _ok
                try:
                    return _route(_ok, (a, b, out, out_dtype), _rs)
                finally:
                    _r.open = _p
                    if _p is not None:
                        _r.suitable = _p
            _p = _r.open
            _r.open = _ok
            try:
                return _route(_ok, (a, b, out, out_dtype))
            finally:
                _r.open = _p
                if _p is not None:
                    _r.suitable = _p
        if _clog.armed and _ok[0] is not _lg.auto:
            _notea(_lg, _ok, _drop)
        _p = _r.open
        _r.open = _ok
        try:
            return _func(a, b, out=out, out_dtype=out_dtype, backend=backend)
        finally:
            _r.open = _p
            if _p is not None:
                _r.suitable = _p
    _r = _state.r
    if _live.dropped and _r.dropped:
        _r.dropped = ()
    _r.suitable = _ok
    if _wx:
        _warnl(_api, _ok, _XS)
    if _route is not None and not skip_check:
        if _rslot:
            _p = _r.open
            _r.open = _ok
            try:
                return _route(_ok, (a, b, out, out_dtype), _rs)
            finally:
                _r.open = _p
                if _p is not None:
                    _r.suitable = _p
        _p = _r.open
        _r.open = _ok
        try:
            return _route(_ok, (a, b, out, out_dtype))
        finally:
            _r.open = _p
            if _p is not None:
                _r.suitable = _p
    if _clog.armed and _ok[0] is not _lg.restricted:
        _noter(_lg, _ok)
    _p = _r.open
    _r.open = _ok
    try:
        return _func(a, b, out=out, out_dtype=out_dtype, backend=backend)
    finally:
        _r.open = _p
        if _p is not None:
            _r.suitable = _p


# ---- mm_traceable ---------------------------------------------------------------------------------
# A traceback names it <flashinfer generated traceable for flashinfer.gemm.mm>
# Its globals: module flashinfer.codegen.generated.mm_traceable.  The names it uses:
#   _d_out = None
#   _d_out_dtype = None
#   _d_backend = 'auto'
#   _jit_tracing = flashinfer.dispatch.traceable.jit_tracing  (flashinfer/dispatch/traceable.py)
#   _out = a torch._ops.OpOverload
#   _default = a torch._ops.OpOverload
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
#   _body = flashinfer.gemm.mm  (flashinfer/gemm.py)
#   _transforms = flashinfer.dispatch.traceable._transforms  (flashinfer/dispatch/traceable.py)
#   _dual = flashinfer.torch_boundary.forward_ad_open  (flashinfer/torch_boundary.py)
#   _no_grad = a torch._ops.OpOverload

def mm_traceable(a, b, *, out=_d_out, out_dtype=_d_out_dtype, backend=_d_backend, skip_check=False):
    if _jit_tracing():
        if out is not None:
            _out(a, b, out_dtype=out_dtype, out=out, backend=backend, skip_check=skip_check)
            return out
        return _default(a, b, out_dtype=out_dtype, backend=backend, skip_check=skip_check)
    if out is None:
        a, b = _cast(_acrule, a, b)
    _r = _restriction('flashinfer.gemm.mm') if backend == 'auto' else None
    if out is None and not _exporting():
        _watch()
        _tf = _facts(a, b)
        _b = _choose(_grad_on(), (_g.environment['FLASHINFER_ALLOW_EXPERIMENTAL_AUTO_BACKENDS'], _g.environment['TRITON_INTERPRET'], _g.epoch,), _tf[0], _tf[1], _scalar(out_dtype), backend, skip_check, _r)
        if _b is not None and (
            backend != 'auto' or _r is not None or not _flag.named
        ):
            return _body(a, b, out_dtype=out_dtype, out=None, backend=_b, skip_check=skip_check)
    if _r is not None:
        backend = _r
    if out is not None:
        _out(a, b, out_dtype=out_dtype, out=out, backend=backend, skip_check=skip_check)
        return out
    if not _exporting() and not _transforms() and not _dual() and (
        not _grad_on() or not (a.requires_grad or b.requires_grad)
    ):
        return _no_grad(a, b, out_dtype, backend, skip_check)
    return _default(a, b, out_dtype=out_dtype, backend=backend, skip_check=skip_check)


# ---- mm_skip_check_auto_dispatcher ----------------------------------------------------------------
# A traceback names it <flashinfer generated skip_check auto dispatcher for flashinfer.gemm.mm>
# Its globals: module flashinfer.codegen.generated.mm_dispatcher.  The names it uses:
#   _d_out = None
#   _d_out_dtype = None
#   _d_backend = 'auto'
#   _CUDA = a flashinfer.dispatch.capability._CudaState  (flashinfer/dispatch/capability.py)
#   _common = flashinfer.gemm._common_check  (flashinfer/gemm.py)
#   _verd = flashinfer.dispatch.plan.DispatchPlan.check_result, bound to a BackendRequirementOp  (flashinfer/dispatch/plan.py)
#   _fail = flashinfer.dispatch.reference.ReferenceDispatcher._fail, bound to a BackendRequirementOp  (flashinfer/dispatch/reference.py)
#   _ovl = flashinfer.dispatch.overlap.OverlapRule.check, bound to a OverlapRule  (flashinfer/dispatch/overlap.py)
#   _rfind = flashinfer.dispatch.restrictions.restriction_for  (flashinfer/dispatch/restrictions.py)
#   _api = 'flashinfer.gemm.mm'
#   _RS = a flashinfer.dispatch.restrictions._Switch  (flashinfer/dispatch/restrictions.py)
#   _chk0 = flashinfer.gemm._check_torch  (flashinfer/gemm.py)
#   _ValueError = builtins.ValueError
#   _chk1 = flashinfer.gemm._check_triton  (flashinfer/gemm.py)
#   _chk2 = flashinfer.experimental.splitk_gemm.support.check_splitk  (flashinfer/experimental/splitk_gemm/support.py)
#   _ccs0 = frozenset({60, 61, 70, 75, 80, 86, 87, 89, 90, 100, 101, 103, 110, 120, 121})
#   _ccs1 = frozenset({75, 80, 86, 87, 89, 90, 100, 101, 103, 110, 120, 121})
#   _ccs2 = frozenset({80, 86, 87, 89, 90, 100, 101, 103, 110, 120, 121})
#   _gread = functools.partial of builtin get
#   _os = module os
#   _environ = a os._Environ
#   _live = a flashinfer.dispatch.thread_state.LiveFlags  (flashinfer/dispatch/thread_state.py)
#   _gate = flashinfer.gating.gate.experimental_auto_backends_allowed  (flashinfer/gating/gate.py)
#   _heuristic = flashinfer.gemm._heuristic  (flashinfer/gemm.py)
#   _type = builtins.type
#   _list = builtins.list
#   _filter = flashinfer.dispatch.plan.DispatchPlan.heuristic_order, bound to a BackendRequirementOp  (flashinfer/dispatch/plan.py)
#   _prefer = flashinfer.dispatch.plan.DispatchPlan.prefer_first, bound to a BackendRequirementOp  (flashinfer/dispatch/plan.py)
#   _BaseException = builtins.BaseException
#   _state = a flashinfer.dispatch.thread_state.CallState  (flashinfer/dispatch/thread_state.py)
#   _put = flashinfer.dispatch.verdicts.VerdictCache.put, bound to a VerdictCache  (flashinfer/dispatch/verdicts.py)
#   _XS = frozenset({'splitk'})
#   _NO_ROUTE = (None, None)
#   _warnl = flashinfer.dispatch.restrictions.warn_listed_experimental  (flashinfer/dispatch/restrictions.py)
#   _clog = a flashinfer.dispatch.choice_log._Switch  (flashinfer/dispatch/choice_log.py)
#   _lg = a flashinfer.dispatch.choice_log.OpLog  (flashinfer/dispatch/choice_log.py)
#   _noter = flashinfer.dispatch.choice_log.note_restricted  (flashinfer/dispatch/choice_log.py)
#   _func = flashinfer.gemm.mm  (flashinfer/gemm.py)
#   _warn = flashinfer.gating.warn_once.warn_experimental_backend_once  (flashinfer/gating/warn_once.py)
#   _notea = flashinfer.dispatch.choice_log.note_auto  (flashinfer/dispatch/choice_log.py)

def mm_skip_check_auto_dispatcher(a, b, *, out=_d_out, out_dtype=_d_out_dtype, backend=_d_backend, _key=None):
    _cc = None if _CUDA.absent else _CUDA.find(a, b, out, out_dtype)
    _xok = _drop = ()
    try:
        _v = _common(a, b, out=out, out_dtype=out_dtype, backend=backend)
        if _v is not True and (_v is False or not _verd(None, _v)):
            _fail(_cc, {'a': a, 'b': b, 'out': out, 'out_dtype': out_dtype, 'backend': backend})
        if out is not None:
            _ovl(out, a, b)
        _rx = _rfind(_api) if _RS.on else None
        if _rx is None:
            _ok = []
            if _cc is None:
                try:
                    _v = _chk0(a=a)
                except _ValueError:
                    _v = False
                if _v is True or (_v is not False and _verd('torch', _v)):
                    _ok.append('torch')
                try:
                    _v = _chk1(a, b, out=out, out_dtype=out_dtype, backend=backend)
                except _ValueError:
                    _v = False
                if _v is True or (_v is not False and _verd('triton', _v)):
                    _ok.append('triton')
                try:
                    _v = _chk2(a, b, out=out, out_dtype=out_dtype, backend=backend)
                except _ValueError:
                    _v = False
                if _v is True or (_v is not False and _verd('splitk', _v)):
                    _xok += ('splitk',)
            else:
                if _cc in _ccs0:
                    try:
                        _v = _chk0(a=a)
                    except _ValueError:
                        _v = False
                    if _v is True or (_v is not False and _verd('torch', _v)):
                        _ok.append('torch')
                if _cc in _ccs1:
                    try:
                        _v = _chk1(a, b, out=out, out_dtype=out_dtype, backend=backend)
                    except _ValueError:
                        _v = False
                    if _v is True or (_v is not False and _verd('triton', _v)):
                        _ok.append('triton')
                if _cc in _ccs2:
                    try:
                        _v = _chk2(a, b, out=out, out_dtype=out_dtype, backend=backend)
                    except _ValueError:
                        _v = False
                    if _v is True or (_v is not False and _verd('splitk', _v)):
                        _xok += ('splitk',)
            if _xok:
                if (_g := _gread()) is None and _os.environ is _environ:
                    _drop = _xok
                    _live.dropped = True
                elif (_g == b'1' and _os.environ is _environ) or _gate():
                    _ok += _xok
                else:
                    _drop = _xok
                    _live.dropped = True
            if _ok:
                _h = _heuristic(_ok.copy(), a, b, out=out, out_dtype=out_dtype, backend=backend)
                if _type(_h) is not _list or _h != _ok:
                    _ok = _filter(_h, _ok)
            if _xok and not _drop:
                _ok = _prefer(_ok, {'a': a, 'b': b, 'out': out, 'out_dtype': out_dtype, 'backend': backend})
    except _BaseException:
        if _live.dropped:
            _state.r.dropped = _drop
        raise
    if _rx is not None:
        if _live.dropped and (_r := _state.r).dropped:
            _r.dropped = ()
        _ok = []
        for _b in _rx:
            if _b == 'torch':
                if (_cc is None or _cc in _ccs0):
                    try:
                        _v = _chk0(a=a)
                    except _ValueError:
                        _v = False
                    if _v is True or (_v is not False and _verd('torch', _v)):
                        _ok.append(_b)
            elif _b == 'triton':
                if (_cc is None or _cc in _ccs1):
                    try:
                        _v = _chk1(a, b, out=out, out_dtype=out_dtype, backend=backend)
                    except _ValueError:
                        _v = False
                    if _v is True or (_v is not False and _verd('triton', _v)):
                        _ok.append(_b)
            elif _b == 'splitk':
                if (_cc is None or _cc in _ccs2):
                    try:
                        _v = _chk2(a, b, out=out, out_dtype=out_dtype, backend=backend)
                    except _ValueError:
                        _v = False
                    if _v is True or (_v is not False and _verd('splitk', _v)):
                        _ok.append(_b)
        if not _ok:
            _fail(_cc, {'a': a, 'b': b, 'out': out, 'out_dtype': out_dtype, 'backend': backend})
        if _key is not None:
            _put(_key, (_ok, (), not _XS.isdisjoint(_ok), [_NO_ROUTE]))
        _r = _state.r
        _r.suitable = _ok
        if not _XS.isdisjoint(_ok):
            _warnl(_api, _ok, _XS)
        if _clog.armed and _ok[0] is not _lg.restricted:
            _noter(_lg, _ok)
        _p = _r.open
        _r.open = _ok
        try:
            return _func(a, b, out=out, out_dtype=out_dtype, backend=backend)
        finally:
            _r.open = _p
            if _p is not None:
                _r.suitable = _p
    if not _ok:
        _fail(_cc, {'a': a, 'b': b, 'out': out, 'out_dtype': out_dtype, 'backend': backend})
    if _key is not None:
        _put(_key, (_ok, _drop, bool(_xok) and _ok[0] in _xok, [_NO_ROUTE]))
    _r = _state.r
    _r.suitable = _ok
    _r.dropped = _drop
    if _xok and _ok[0] in _xok:
        _warn(_api, _ok[0], automatic=True)
    if _clog.armed and _ok[0] is not _lg.auto:
        _notea(_lg, _ok, _drop)
    _p = _r.open
    _r.open = _ok
    try:
        return _func(a, b, out=out, out_dtype=out_dtype, backend=backend)
    finally:
        _r.open = _p
        if _p is not None:
            _r.suitable = _p


# ---- mm_checking_dispatcher -----------------------------------------------------------------------
# A traceback names it <flashinfer generated checking dispatcher for flashinfer.gemm.mm>
# Its globals: module flashinfer.codegen.generated.mm_dispatcher.  The names it uses:
#   _d_out = None
#   _d_out_dtype = None
#   _d_backend = 'auto'
#   _type = builtins.type
#   _Tensor = torch.Tensor
#   _jit = builtin _is_tracing
#   _traced = flashinfer.dispatch.torch_op.traced_call  (flashinfer/dispatch/torch_op.py)
#   _traceable = generated flashinfer.gemm.mm[traceable] (below)
#   _ovl = flashinfer.dispatch.overlap.OverlapRule.check, bound to a OverlapRule  (flashinfer/dispatch/overlap.py)
#   _func = flashinfer.gemm.mm  (flashinfer/gemm.py)
#   _skip_auto = generated flashinfer.gemm.mm[skip_check auto dispatcher] (below)
#   _CUDA = a flashinfer.dispatch.capability._CudaState  (flashinfer/dispatch/capability.py)
#   _live = a flashinfer.dispatch.thread_state.LiveFlags  (flashinfer/dispatch/thread_state.py)
#   _state = a flashinfer.dispatch.thread_state.CallState  (flashinfer/dispatch/thread_state.py)
#   _ccs0 = frozenset({60, 61, 70, 75, 80, 86, 87, 89, 90, 100, 101, 103, 110, 120, 121})
#   _fail = flashinfer.dispatch.reference.ReferenceDispatcher._fail, bound to a BackendRequirementOp  (flashinfer/dispatch/reference.py)
#   _common = flashinfer.gemm._common_check  (flashinfer/gemm.py)
#   _verd = flashinfer.dispatch.plan.DispatchPlan.check_result, bound to a BackendRequirementOp  (flashinfer/dispatch/plan.py)
#   _chk0 = flashinfer.gemm._check_torch  (flashinfer/gemm.py)
#   _ValueError = builtins.ValueError
#   _ccs1 = frozenset({75, 80, 86, 87, 89, 90, 100, 101, 103, 110, 120, 121})
#   _chk1 = flashinfer.gemm._check_triton  (flashinfer/gemm.py)
#   _ccs2 = frozenset({80, 86, 87, 89, 90, 100, 101, 103, 110, 120, 121})
#   _chk2 = flashinfer.experimental.splitk_gemm.support.check_splitk  (flashinfer/experimental/splitk_gemm/support.py)
#   _once2 = a flashinfer.gating.warn_once.OnceFlag  (flashinfer/gating/warn_once.py)
#   _warn = flashinfer.gating.warn_once.warn_experimental_backend_once  (flashinfer/gating/warn_once.py)
#   _api = 'flashinfer.gemm.mm'
#   _str = builtins.str
#   _tokcall = flashinfer.dispatch.restrictions.call_in_token_block  (flashinfer/dispatch/restrictions.py)
#   _self = a flashinfer.dispatch.op.BackendRequirementOp  (flashinfer/dispatch/op.py)
#   _rfind = flashinfer.dispatch.restrictions.restriction_for  (flashinfer/dispatch/restrictions.py)
#   _RS = a flashinfer.dispatch.restrictions._Switch  (flashinfer/dispatch/restrictions.py)
#   _gread = functools.partial of builtin get
#   _os = module os
#   _environ = a os._Environ
#   _gate = flashinfer.gating.gate.experimental_auto_backends_allowed  (flashinfer/gating/gate.py)
#   _heuristic = flashinfer.gemm._heuristic  (flashinfer/gemm.py)
#   _list = builtins.list
#   _filter = flashinfer.dispatch.plan.DispatchPlan.heuristic_order, bound to a BackendRequirementOp  (flashinfer/dispatch/plan.py)
#   _prefer = flashinfer.dispatch.plan.DispatchPlan.prefer_first, bound to a BackendRequirementOp  (flashinfer/dispatch/plan.py)
#   _BaseException = builtins.BaseException
#   _put = flashinfer.dispatch.verdicts.VerdictCache.put, bound to a VerdictCache  (flashinfer/dispatch/verdicts.py)
#   _XS = frozenset({'splitk'})
#   _NO_ROUTE = (None, None)
#   _warnl = flashinfer.dispatch.restrictions.warn_listed_experimental  (flashinfer/dispatch/restrictions.py)
#   _route = flashinfer.autotuner.router.Router._route.<locals>.route  (flashinfer/autotuner/router.py)
#   _clog = a flashinfer.dispatch.choice_log._Switch  (flashinfer/dispatch/choice_log.py)
#   _lg = a flashinfer.dispatch.choice_log.OpLog  (flashinfer/dispatch/choice_log.py)
#   _noter = flashinfer.dispatch.choice_log.note_restricted  (flashinfer/dispatch/choice_log.py)
#   _notea = flashinfer.dispatch.choice_log.note_auto  (flashinfer/dispatch/choice_log.py)

def mm_checking_dispatcher(a, b, *, out=_d_out, out_dtype=_d_out_dtype, backend=_d_backend, skip_check=False, _key=None):
    if skip_check:
        if backend != 'auto':
            if (_type(a) is not _Tensor or a.is_meta or _jit()) and _traced(a, b, out):
                return _traceable(a, b, out=out, out_dtype=out_dtype, backend=backend, skip_check=skip_check)
            if out is not None:
                _ovl(out, a, b)
            return _func(a, b, out=out, out_dtype=out_dtype, backend=backend)
        return _skip_auto(a, b, out=out, out_dtype=out_dtype, backend=backend)
    _cc = None if _CUDA.absent else _CUDA.find(a, b, out, out_dtype)
    if backend != 'auto':
        if (_type(a) is not _Tensor or a.is_meta or _jit()) and _traced(a, b, out):
            return _traceable(a, b, out=out, out_dtype=out_dtype, backend=backend, skip_check=skip_check)
        if backend == 'torch':
            if _live.dropped and (_r := _state.r).dropped:
                _r.dropped = ()
            if not (_cc is None or _cc in _ccs0):
                _fail(_cc, {'a': a, 'b': b, 'out': out, 'out_dtype': out_dtype, 'backend': backend})
            _v = _common(a, b, out=out, out_dtype=out_dtype, backend=backend)
            if _v is not True and (_v is False or not _verd(None, _v)):
                _fail(_cc, {'a': a, 'b': b, 'out': out, 'out_dtype': out_dtype, 'backend': backend})
            if out is not None:
                _ovl(out, a, b)
            try:
                _v = _chk0(a=a)
            except _ValueError:
                _v = False
            if _v is not True and (_v is False or not _verd('torch', _v)):
                _fail(_cc, {'a': a, 'b': b, 'out': out, 'out_dtype': out_dtype, 'backend': backend})
            return _func(a, b, out=out, out_dtype=out_dtype, backend=backend)
        elif backend == 'triton':
            if _live.dropped and (_r := _state.r).dropped:
                _r.dropped = ()
            if not (_cc is None or _cc in _ccs1):
                _fail(_cc, {'a': a, 'b': b, 'out': out, 'out_dtype': out_dtype, 'backend': backend})
            _v = _common(a, b, out=out, out_dtype=out_dtype, backend=backend)
            if _v is not True and (_v is False or not _verd(None, _v)):
                _fail(_cc, {'a': a, 'b': b, 'out': out, 'out_dtype': out_dtype, 'backend': backend})
            if out is not None:
                _ovl(out, a, b)
            try:
                _v = _chk1(a, b, out=out, out_dtype=out_dtype, backend=backend)
            except _ValueError:
                _v = False
            if _v is not True and (_v is False or not _verd('triton', _v)):
                _fail(_cc, {'a': a, 'b': b, 'out': out, 'out_dtype': out_dtype, 'backend': backend})
            return _func(a, b, out=out, out_dtype=out_dtype, backend=backend)
        elif backend == 'splitk':
            if _live.dropped and (_r := _state.r).dropped:
                _r.dropped = ()
            if not (_cc is None or _cc in _ccs2):
                _fail(_cc, {'a': a, 'b': b, 'out': out, 'out_dtype': out_dtype, 'backend': backend})
            _v = _common(a, b, out=out, out_dtype=out_dtype, backend=backend)
            if _v is not True and (_v is False or not _verd(None, _v)):
                _fail(_cc, {'a': a, 'b': b, 'out': out, 'out_dtype': out_dtype, 'backend': backend})
            if out is not None:
                _ovl(out, a, b)
            try:
                _v = _chk2(a, b, out=out, out_dtype=out_dtype, backend=backend)
            except _ValueError:
                _v = False
            if _v is not True and (_v is False or not _verd('splitk', _v)):
                _fail(_cc, {'a': a, 'b': b, 'out': out, 'out_dtype': out_dtype, 'backend': backend})
            if not _once2.warned:
                _warn(_api, 'splitk')
            return _func(a, b, out=out, out_dtype=out_dtype, backend=backend)
        if _type(backend) is _str and backend.startswith('auto|'):
            return _tokcall(_self, backend, {'a': a, 'b': b, 'out': out, 'out_dtype': out_dtype, 'backend': backend})
        _fail(_cc, {'a': a, 'b': b, 'out': out, 'out_dtype': out_dtype, 'backend': backend})
    _xok = _drop = ()
    try:
        _v = _common(a, b, out=out, out_dtype=out_dtype, backend=backend)
        if _v is not True and (_v is False or not _verd(None, _v)):
            _fail(_cc, {'a': a, 'b': b, 'out': out, 'out_dtype': out_dtype, 'backend': backend})
        if out is not None:
            _ovl(out, a, b)
        _rx = _rfind(_api) if _RS.on else None
        if _rx is None:
            _ok = []
            if _cc is None:
                try:
                    _v = _chk0(a=a)
                except _ValueError:
                    _v = False
                if _v is True or (_v is not False and _verd('torch', _v)):
                    _ok.append('torch')
                try:
                    _v = _chk1(a, b, out=out, out_dtype=out_dtype, backend=backend)
                except _ValueError:
                    _v = False
                if _v is True or (_v is not False and _verd('triton', _v)):
                    _ok.append('triton')
                try:
                    _v = _chk2(a, b, out=out, out_dtype=out_dtype, backend=backend)
                except _ValueError:
                    _v = False
                if _v is True or (_v is not False and _verd('splitk', _v)):
                    _xok += ('splitk',)
            else:
                if _cc in _ccs0:
                    try:
                        _v = _chk0(a=a)
                    except _ValueError:
                        _v = False
                    if _v is True or (_v is not False and _verd('torch', _v)):
                        _ok.append('torch')
                if _cc in _ccs1:
                    try:
                        _v = _chk1(a, b, out=out, out_dtype=out_dtype, backend=backend)
                    except _ValueError:
                        _v = False
                    if _v is True or (_v is not False and _verd('triton', _v)):
                        _ok.append('triton')
                if _cc in _ccs2:
                    try:
                        _v = _chk2(a, b, out=out, out_dtype=out_dtype, backend=backend)
                    except _ValueError:
                        _v = False
                    if _v is True or (_v is not False and _verd('splitk', _v)):
                        _xok += ('splitk',)
            if _xok:
                if (_g := _gread()) is None and _os.environ is _environ:
                    _drop = _xok
                    _live.dropped = True
                elif (_g == b'1' and _os.environ is _environ) or _gate():
                    _ok += _xok
                else:
                    _drop = _xok
                    _live.dropped = True
            if _ok:
                _h = _heuristic(_ok.copy(), a, b, out=out, out_dtype=out_dtype, backend=backend)
                if _type(_h) is not _list or _h != _ok:
                    _ok = _filter(_h, _ok)
            if _xok and not _drop:
                _ok = _prefer(_ok, {'a': a, 'b': b, 'out': out, 'out_dtype': out_dtype, 'backend': backend})
    except _BaseException:
        if _live.dropped:
            _state.r.dropped = _drop
        raise
    if _rx is not None:
        if _live.dropped and (_r := _state.r).dropped:
            _r.dropped = ()
        _ok = []
        for _b in _rx:
            if _b == 'torch':
                if (_cc is None or _cc in _ccs0):
                    try:
                        _v = _chk0(a=a)
                    except _ValueError:
                        _v = False
                    if _v is True or (_v is not False and _verd('torch', _v)):
                        _ok.append(_b)
            elif _b == 'triton':
                if (_cc is None or _cc in _ccs1):
                    try:
                        _v = _chk1(a, b, out=out, out_dtype=out_dtype, backend=backend)
                    except _ValueError:
                        _v = False
                    if _v is True or (_v is not False and _verd('triton', _v)):
                        _ok.append(_b)
            elif _b == 'splitk':
                if (_cc is None or _cc in _ccs2):
                    try:
                        _v = _chk2(a, b, out=out, out_dtype=out_dtype, backend=backend)
                    except _ValueError:
                        _v = False
                    if _v is True or (_v is not False and _verd('splitk', _v)):
                        _ok.append(_b)
        if not _ok:
            _fail(_cc, {'a': a, 'b': b, 'out': out, 'out_dtype': out_dtype, 'backend': backend})
        if _key is not None:
            _put(_key, (_ok, (), not _XS.isdisjoint(_ok), [_NO_ROUTE]))
        _r = _state.r
        _r.suitable = _ok
        if not _XS.isdisjoint(_ok):
            _warnl(_api, _ok, _XS)
        if _route is not None:
            _p = _r.open
            _r.open = _ok
            try:
                return _route(_ok, (a, b, out, out_dtype))
            finally:
                _r.open = _p
                if _p is not None:
                    _r.suitable = _p
        if _clog.armed and _ok[0] is not _lg.restricted:
            _noter(_lg, _ok)
        _p = _r.open
        _r.open = _ok
        try:
            return _func(a, b, out=out, out_dtype=out_dtype, backend=backend)
        finally:
            _r.open = _p
            if _p is not None:
                _r.suitable = _p
    if not _ok:
        _fail(_cc, {'a': a, 'b': b, 'out': out, 'out_dtype': out_dtype, 'backend': backend})
    if _key is not None:
        _put(_key, (_ok, _drop, bool(_xok) and _ok[0] in _xok, [_NO_ROUTE]))
    _r = _state.r
    _r.suitable = _ok
    _r.dropped = _drop
    if _xok and _ok[0] in _xok:
        _warn(_api, _ok[0], automatic=True)
    if _route is not None:
        _p = _r.open
        _r.open = _ok
        try:
            return _route(_ok, (a, b, out, out_dtype))
        finally:
            _r.open = _p
            if _p is not None:
                _r.suitable = _p
    if _clog.armed and _ok[0] is not _lg.auto:
        _notea(_lg, _ok, _drop)
    _p = _r.open
    _r.open = _ok
    try:
        return _func(a, b, out=out, out_dtype=out_dtype, backend=backend)
    finally:
        _r.open = _p
        if _p is not None:
            _r.suitable = _p
