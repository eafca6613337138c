"""flashinfer reads ``TRITON_INTERPRET`` as Triton does (``triton.knobs``: ``1``, ``true``,
``on``, ``yes``, ``y`` in any case, nothing stripped).  Were it stricter, a Triton that
interprets (``TRITON_INTERPRET=true``) would be refused CPU tensors and its kernels would run
without their interpreter workarounds; were it looser, CPU tensors would reach a Triton that
compiles for the GPU."""

from __future__ import annotations

import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flashinfer.kernels import availability

knobs = pytest.importorskip("triton.knobs")

SPELLINGS = ["1", "true", "TRUE", "True", "on", "ON", "yes", "Yes", "y", "Y", "0", "false"]
SPELLINGS += ["", " 1", "1 ", "t", "2", "enable", "no", "off"]


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.sampled_from(SPELLINGS), st.text(alphabet="1yYesonTRUtrf0 ", max_size=5)))
def test_flashinfer_reads_the_variable_as_triton_does(raw):
    saved = os.environ.get("TRITON_INTERPRET")
    os.environ["TRITON_INTERPRET"] = raw
    try:
        triton_says = bool(knobs.runtime.interpret)  # read from the environment at each access
        assert availability.interpreter_enabled() == triton_says, raw
        assert availability.triton_true(raw) == triton_says, raw
    finally:
        if saved is None:
            os.environ.pop("TRITON_INTERPRET", None)
        else:
            os.environ["TRITON_INTERPRET"] = saved
