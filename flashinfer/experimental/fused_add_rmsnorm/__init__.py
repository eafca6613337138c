"""Experimental fused residual-add + RMS norm, behind :func:`flashinfer.fused_add_rmsnorm`
(its marked entry point is in ``flashinfer/fused_norm.py``).

The implementation is :mod:`.implementation` (validation, torch path) and the Triton kernel
:mod:`.kernel`; the entry point imports them on its first call.  This file stays empty so
that importing the feature imports nothing.
"""
