"""Experimental split-K GEMM, ``backend="splitk"`` of :func:`flashinfer.mm` (declared in
:mod:`.support`).  Empty: importing the feature imports nothing."""
