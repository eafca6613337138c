# flashinfer.fused_add_rmsnorm: its generated code, as written at import time.
#
# GENERATED FILE, do not edit.  Written by `python scripts/docs/write_dispatchers.py`
# from the generated functions' __generated_source__, in a fresh interpreter before
# any call (the dispatcher regenerates itself as it learns call patterns; this is its
# first form).  tests/test_generated_dispatchers.py fails when this file is stale.
# It is never imported: the package runs the code it generates, not this copy.
#
# The API: flashinfer.fused_norm.fused_add_rmsnorm  (flashinfer/fused_norm.py)


# ---- fused_add_rmsnorm_experimental_API_wrapper ---------------------------------------------------
# A traceback names it <flashinfer generated experimental API wrapper for flashinfer.fused_norm.fused_add_rmsnorm>
# Its globals: module flashinfer.codegen.generated.fused_add_rmsnorm_experimental_API_wrapper.  The names it uses:
#   _d_eps = 1e-06
#   _flag = a flashinfer.gating.warn_once.OnceFlag  (flashinfer/gating/warn_once.py)
#   _first = flashinfer.gating.experimental_marker._wrap_function.<locals>.first_call  (flashinfer/gating/experimental_marker.py)
#   _func = flashinfer.fused_norm.fused_add_rmsnorm  (flashinfer/fused_norm.py)

def fused_add_rmsnorm_experimental_API_wrapper(input, residual, weight, eps=_d_eps):
    if not _flag.warned:
        _first()
    return _func(input, residual, weight, eps)
