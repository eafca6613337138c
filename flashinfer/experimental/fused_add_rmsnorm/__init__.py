"""Experimental fused residual-add + RMS norm, behind :func:`flashinfer.fused_add_rmsnorm`
(entry point in ``flashinfer/fused_norm.py``).  Empty: importing the feature imports nothing."""
