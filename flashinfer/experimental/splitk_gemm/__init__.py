"""Experimental split-K GEMM: a backend of :func:`flashinfer.mm` (``backend="splitk"``).

Its declaration, checker and runner are in :mod:`.support` (light: core imports it); the
Triton kernel is :mod:`.kernel`, imported when the backend first runs.  This file stays
empty so that importing the feature imports nothing.
"""
