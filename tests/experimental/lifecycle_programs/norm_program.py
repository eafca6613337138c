"""A user's program written against the experimental API ``fused_add_rmsnorm`` (issue 32's
done-when): run unchanged before and after ``flashinfer lifecycle graduate fused_add_rmsnorm
--apply``.  Prints one JSON line: the results' checksums and every warning."""

import hashlib
import json
import os
import warnings

os.environ["TRITON_INTERPRET"] = "1"

import torch  # noqa: E402

import flashinfer  # noqa: E402

torch.manual_seed(0)
x = torch.randn(4, 64)
r = torch.randn(4, 64)
w = torch.randn(64)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    flashinfer.fused_add_rmsnorm(x, r, w)
    flashinfer.fused_add_rmsnorm(x, r, w)
print(
    json.dumps(
        {
            "input": hashlib.sha256(x.numpy().tobytes()).hexdigest(),
            "residual": hashlib.sha256(r.numpy().tobytes()).hexdigest(),
            "warnings": [f"{w.category.__name__}: {w.message}" for w in caught],
        }
    )
)
