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
#   _str = builtins.str
#   _CHECKS = a builtins.dict
#   _alias = flashinfer.dispatch.plan.DispatchPlan.resolve_alias, bound to a BackendRequirementOp  (flashinfer/dispatch/plan.py)
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
#   _common = flashinfer.gemm._common_check  (flashinfer/gemm.py)
#   _ValueError = builtins.ValueError
#   _chk0 = flashinfer.gemm._check_torch  (flashinfer/gemm.py)
#   _ccs1 = frozenset({75, 80, 86, 87, 89, 90, 100, 101, 103, 110, 120, 121})
#   _chk1 = flashinfer.gemm._check_triton  (flashinfer/gemm.py)
#   _ccs2 = frozenset({80, 86, 87, 89, 90, 100, 101, 103, 110, 120, 121})
#   _chk2 = flashinfer.experimental.splitk_gemm.support.check_splitk  (flashinfer/experimental/splitk_gemm/support.py)
#   _once2 = a flashinfer.gating.warn_once.OnceFlag  (flashinfer/gating/warn_once.py)
#   _warn = flashinfer.gating.warn_once.warn_experimental_backend_once  (flashinfer/gating/warn_once.py)
#   _api = 'flashinfer.gemm.mm'
#   _tokcall = flashinfer.dispatch.restrictions.call_in_token_block  (flashinfer/dispatch/restrictions.py)
#   _self = a flashinfer.dispatch.op.BackendRequirementOp  (flashinfer/dispatch/op.py)
#   _named = flashinfer.dispatch.op.BackendRequirementOp._select, bound to a BackendRequirementOp  (flashinfer/dispatch/op.py)
#   _rfind = flashinfer.dispatch.restrictions.restriction_for  (flashinfer/dispatch/restrictions.py)
#   _RS = a flashinfer.dispatch.restrictions._Switch  (flashinfer/dispatch/restrictions.py)
#   _env0 = functools.partial of builtin get
#   _os = module os
#   _environ = a os._Environ
#   _learn = flashinfer.dispatch.emitter.Front.learn, bound to a Front  (flashinfer/dispatch/emitter.py)
#   _Exception = builtins.Exception
#   _GATE_VALUES = a builtins.frozenset
#   _memo = a builtins.dict
#   _decide = flashinfer.dispatch.op.BackendRequirementOp._decide, bound to a BackendRequirementOp  (flashinfer/dispatch/op.py)
#   _route = flashinfer.autotuner.tuner.Router.route.<locals>.route  (flashinfer/autotuner/tuner.py)
#   _rslot = True
#   _clog = a flashinfer.dispatch.choice_log._Switch  (flashinfer/dispatch/choice_log.py)
#   _lg = a flashinfer.dispatch.choice_log.OpLog  (flashinfer/dispatch/choice_log.py)
#   _note = flashinfer.dispatch.op.BackendRequirementOp._log_choice, bound to a BackendRequirementOp  (flashinfer/dispatch/op.py)

def mm_dispatcher(a, b, *, out=_d_out, out_dtype=_d_out_dtype, backend=_d_backend, skip_check=False):
    if _ac() and not _acin.on:
        return _acall({'a': a, 'b': b, 'out': out, 'out_dtype': out_dtype, 'backend': backend}, skip_check)
    if skip_check and backend != 'auto':
        if _type(backend) is _str and backend not in _CHECKS:
            backend = _alias(backend)
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
            if (_cc is None or _cc in _ccs0):
                try:
                    _fits = _common(a, b, out=out, out_dtype=out_dtype, backend=backend) is True
                except _ValueError:
                    _fits = False
                if _fits:
                    if out is not None:
                        _ovl(out, a, b)
                    try:
                        _fits = _chk0(a=a) is True
                    except _ValueError:
                        _fits = False
                    if _fits:
                        return _func(a, b, out=out, out_dtype=out_dtype, backend=backend)
        elif backend == 'triton':
            if _live.dropped and (_r := _state.r).dropped:
                _r.dropped = ()
            if (_cc is None or _cc in _ccs1):
                try:
                    _fits = _common(a, b, out=out, out_dtype=out_dtype, backend=backend) is True
                except _ValueError:
                    _fits = False
                if _fits:
                    if out is not None:
                        _ovl(out, a, b)
                    try:
                        _fits = _chk1(a, b, out=out, out_dtype=out_dtype, backend=backend) is True
                    except _ValueError:
                        _fits = False
                    if _fits:
                        return _func(a, b, out=out, out_dtype=out_dtype, backend=backend)
        elif backend == 'splitk':
            if _live.dropped and (_r := _state.r).dropped:
                _r.dropped = ()
            if (_cc is None or _cc in _ccs2):
                try:
                    _fits = _common(a, b, out=out, out_dtype=out_dtype, backend=backend) is True
                except _ValueError:
                    _fits = False
                if _fits:
                    if out is not None:
                        _ovl(out, a, b)
                    try:
                        _fits = _chk2(a, b, out=out, out_dtype=out_dtype, backend=backend) is True
                    except _ValueError:
                        _fits = False
                    if _fits:
                        if not _once2.warned:
                            _warn(_api, 'splitk')
                        return _func(a, b, out=out, out_dtype=out_dtype, backend=backend)
        if _type(backend) is _str and backend.startswith('auto|'):
            return _tokcall(_self, backend, {'a': a, 'b': b, 'out': out, 'out_dtype': out_dtype, 'backend': backend})
        backend = _named(_cc, {'a': a, 'b': b, 'out': out, 'out_dtype': out_dtype, 'backend': backend})[0]
        return _func(a, b, out=out, out_dtype=out_dtype, backend=backend)
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
    _verdict = None if _k is None else _memo.get(_k)
    if _verdict is None:
        if _k is None:
            if _traced(a, b, out):
                return _traceable(a, b, out=out, out_dtype=out_dtype, backend=backend, skip_check=skip_check)
        _verdict = _decide(_k, _cc, _rx, {'a': a, 'b': b, 'out': out, 'out_dtype': out_dtype, 'backend': backend})
    if out is not None:
        _ovl(out, a, b)
    candidates, dropped, warns, slot = _verdict
    record = _state.r
    record.suitable = candidates
    if dropped or record.dropped:
        record.dropped = dropped
    if warns is not None:
        warns()
    outer = record.open
    record.open = candidates
    try:
        if _route is not None and not skip_check:
            if _rslot:
                return _route(candidates, (a, b, out, out_dtype), slot)
            return _route(candidates, (a, b, out, out_dtype))
        if _clog.armed and candidates[0] is not (_lg.auto if _rx is None else _lg.restricted):
            _note(candidates, dropped, _rx is not None)
        return _func(a, b, out=out, out_dtype=out_dtype, backend=backend)
    finally:
        record.open = outer
        if outer is not None:
            record.suitable = outer


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
#   _watch = flashinfer.dispatch.tracing.TransparentPlan.__init__.<locals>.watch  (flashinfer/dispatch/tracing.py)
#   _facts = flashinfer.dispatch.traceable._tensor_facts  (flashinfer/dispatch/traceable.py)
#   _choose = flashinfer.dispatch.tracing.TransparentPlan.__init__.<locals>.choose  (flashinfer/dispatch/tracing.py)
#   _grad_on = builtin is_grad_enabled
#   _g = a flashinfer.dispatch.guarded_state.GuardedState  (flashinfer/dispatch/guarded_state.py)
#   _scalar = flashinfer.dispatch.traceable._scalar_value  (flashinfer/dispatch/traceable.py)
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
