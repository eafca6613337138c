"""A user's program written against the experimental split-K backend (issue 32's done-when):
run unchanged before and after ``flashinfer lifecycle graduate mm:splitk --apply``.

Prints one JSON line: the result's checksum and bytes, every warning (category and text),
and what loading the tuning file did.  ``argv[1]``: the tuning file (tuned on the first run).
"""

import hashlib
import json
import os
import sys
import warnings

os.environ["TRITON_INTERPRET"] = "1"
os.environ["FLASHINFER_ALLOW_EXPERIMENTAL_AUTO_BACKENDS"] = "1"

import torch  # noqa: E402

import flashinfer  # noqa: E402
from flashinfer.autotuner import AutoTuner, autotune, load_tuning_file  # noqa: E402

path = sys.argv[1]
torch.manual_seed(0)
a = torch.randn(16, 1024)
b = torch.randn(1024, 32)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    named = flashinfer.mm(a, b, backend="splitk")
    report = None
    if os.path.exists(path):
        report = load_tuning_file(path)
        tuned = flashinfer.mm(a, b)
    else:
        with flashinfer.use_backends(mm=["splitk"]), autotune(tuning_file=path):
            tuned = flashinfer.mm(a, b)
print(
    json.dumps(
        {
            "named": hashlib.sha256(named.numpy().tobytes()).hexdigest(),
            "tuned": hashlib.sha256(tuned.numpy().tobytes()).hexdigest(),
            "warnings": [f"{w.category.__name__}: {w.message}" for w in caught],
            "loaded": None if report is None else report.loaded,
            "skipped": None if report is None else report.skipped,
            "choices": sorted(c.backend for c in AutoTuner.get().choices().values()),
        }
    )
)
