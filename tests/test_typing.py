"""A type checker sees each API's real parameters and return type (``mypy --strict``).

mypy runs in a subprocess on small user scripts in a temporary folder, and finds
``flashinfer`` the way it finds an installed package: through ``PYTHONPATH`` (a search
path that needs the package's ``py.typed``), never as the current directory's source
(which would not).  An editable install's import hook is invisible to mypy, hence this.
The last test proves the set-up: without ``py.typed`` the package is not checked at all.
"""

from __future__ import annotations

import shutil

from mypy_runner import REPO, run_mypy

PACKAGE = REPO / "flashinfer"

WRONG = """
    import torch
    import flashinfer

    a = torch.zeros(2, 2)
    flashinfer.mm(a, "not a tensor", backend=3)
    c: int = flashinfer.rmsnorm(a, torch.ones(2))
    flashinfer.rmsnorm(a, torch.ones(2), skip_check="yes")
    flashinfer.mm(a, a, alpha=2.0)
    n: int = flashinfer.mm.suitable_auto_backends[0]
"""

# (line in WRONG, error code, words the message must contain)
EXPECTED_ERRORS = [
    (5, "arg-type", ('Argument 2 to "__call__"', '"str"', '"Tensor"')),
    (5, "arg-type", ('Argument "backend"', '"int"', '"str"')),
    (6, "assignment", ('"Tensor"', '"int"')),
    (7, "arg-type", ('Argument "skip_check"', '"str"', '"bool"')),
    (8, "call-arg", ('Unexpected keyword argument "alpha"',)),
    (9, "assignment", ('"str"', '"int"')),
]

RIGHT = """
    import torch
    import flashinfer
    from flashinfer.utils import BackendOp, UnsupportedInputsError


    def normalise_then_multiply(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        y: torch.Tensor = flashinfer.rmsnorm(x, w, 1e-6, skip_check=True)
        y = flashinfer.rmsnorm(x, w, out=y, backend="torch")
        c: torch.Tensor = flashinfer.mm(y, y.t(), out_dtype=torch.float32, skip_check=True)
        best: str = flashinfer.mm.suitable_auto_backends[0]
        candidates: list[str] = list(flashinfer.mm.suitable_auto_backends)
        dropped: tuple[str, ...] = tuple(flashinfer.mm.dropped_experimental_backends)
        usable: bool = flashinfer.mm.has_backend(best) and flashinfer.rmsnorm.is_backend_supported(
            "torch", 90
        )
        why: str | None = flashinfer.mm.backend_runnable_reason("triton", None)
        print(candidates, dropped, usable, why, flashinfer.mm.api_name)
        return c


    def catches(error: Exception) -> bool:
        return isinstance(error, (ValueError, flashinfer.BackendSupportedError)) and isinstance(
            error, UnsupportedInputsError
        )


    op: BackendOp[..., torch.Tensor] = flashinfer.rmsnorm
"""


def test_wrong_arguments_and_result_use_are_reported(tmp_path, mypy_cache):
    lines = run_mypy(tmp_path, WRONG, mypy_cache)
    errors = [line for line in lines if ": error: " in line]
    remaining = list(errors)
    for line_no, code, words in EXPECTED_ERRORS:
        match = [
            e
            for e in remaining
            if e.startswith(f"user.py:{line_no}: error: ")
            and e.endswith(f"[{code}]")
            and all(w in e for w in words)
        ]
        assert match, f"no {code} error on line {line_no} with {words}; mypy said:\n" + "\n".join(
            lines
        )
        remaining.remove(match[0])
    assert remaining == [], "unexpected errors:\n" + "\n".join(remaining)


def test_a_correct_script_is_clean(tmp_path, mypy_cache):
    """Including skip_check (declared by the operators), the op's attributes, and its type
    named as BackendOp[..., Tensor]."""
    assert run_mypy(tmp_path, RIGHT, mypy_cache) == []


def test_each_operator_is_seen_with_its_own_signature(tmp_path, mypy_cache):
    source = """
        import flashinfer
        reveal_type(flashinfer.mm)
        reveal_type(flashinfer.rmsnorm)
    """
    notes = [line for line in run_mypy(tmp_path, source, mypy_cache) if "Revealed" in line]
    assert len(notes) == 2, notes
    mm, rmsnorm = notes
    for note, params in (
        (mm, ("a: torch._tensor.Tensor", "b: torch._tensor.Tensor", "out_dtype:")),
        (rmsnorm, ("input: torch._tensor.Tensor", "weight: torch._tensor.Tensor", "eps: float =")),
    ):
        assert "flashinfer.backend_dispatch.BackendOp[[" in note
        assert all(p in note for p in params), note
        assert note.endswith('skip_check: bool =], torch._tensor.Tensor]"'), note


def test_without_py_typed_the_package_is_not_checked(tmp_path, mypy_cache):
    """The set-up above depends on ``py.typed``: a copy of the package without it is
    skipped by mypy as untyped (so removing the file would fail the tests above)."""
    assert (PACKAGE / "py.typed").is_file()
    site = tmp_path / "site"
    shutil.copytree(
        PACKAGE, site / "flashinfer", ignore=shutil.ignore_patterns("__pycache__", "py.typed")
    )
    work = tmp_path / "work"
    work.mkdir()
    lines = run_mypy(work, WRONG, mypy_cache, site)
    assert any('"flashinfer"' in line and "[import-untyped]" in line for line in lines), lines
