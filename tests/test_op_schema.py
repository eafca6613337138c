"""The torch schema read from an API's signature (``flashinfer.dispatch.op_schema``): every
annotation the schema language holds maps as torch spells it, ``out=`` becomes an ``.out``
overload, written arguments are mutated, and anything else is refused with a reason (the op
then has no operator and graph-breaks when compiled)."""

from __future__ import annotations

import inspect

import pytest
import torch

import flashinfer
from flashinfer.dispatch.op_schema import SchemaUnavailable, op_schema

# Each annotation the schema language holds, and how torch spells it.
SPELLED = {
    "torch.Tensor": "Tensor",
    "torch.Tensor | None": "Tensor?",
    "float": "float",
    "int": "SymInt",
    "bool": "bool",
    "str": "str",
    "torch.dtype | None": "ScalarType?",
    "int | None": "SymInt?",
}


def _api(annotation: str, default: str = "", *, kw: bool = False):
    star = "*, " if kw else ""
    text = f"def api(x: torch.Tensor, {star}v: {annotation}{default}) -> torch.Tensor: ..."
    ns = {"torch": torch}
    exec(text, ns)
    return ns["api"]


@pytest.mark.parametrize("annotation", sorted(SPELLED))
@pytest.mark.parametrize("kw", [False, True])
def test_each_annotation_maps_as_torch_spells_it_and_torch_accepts_the_schema(annotation, kw):
    schema = op_schema(_api(annotation, kw=kw), (), dispatcher=False)
    spelled = SPELLED[annotation]
    assert f"{spelled} v" in schema.default
    assert schema.default.endswith("-> Tensor")
    assert ("*" in schema.default) is kw
    torch._C.parse_schema(f"test::api{schema.default}")  # torch's own parser accepts it


@pytest.mark.parametrize(
    ("default", "spelled"),
    [("=1e-6", "=1e-06"), ("=3", "=3"), ("=True", "=True"), ("='auto'", "='auto'")],
)
def test_defaults_are_stated_in_the_schema(default, spelled):
    annotation = {"=1e-6": "float", "=3": "int", "=True": "bool", "='auto'": "str"}[default]
    schema = op_schema(_api(annotation, default), (), dispatcher=False)
    assert f"v{spelled}" in schema.default
    torch._C.parse_schema(f"test::api{schema.default}")


@pytest.mark.parametrize(
    ("annotation", "why"),
    [
        ("list[int]", "no schema type holds"),
        ("int | float", "union of several types"),
        ("object", "no schema type holds"),
    ],
)
def test_an_annotation_without_a_schema_type_is_refused_with_the_reason(annotation, why):
    with pytest.raises(SchemaUnavailable, match=why):
        op_schema(_api(annotation), (), dispatcher=False)


def test_varargs_unannotated_and_unresolvable_signatures_are_refused():
    def star(*xs: torch.Tensor) -> torch.Tensor: ...

    def bare(x): ...

    def local(x: Local) -> torch.Tensor: ...  # noqa: F821  (resolved lazily, and fails)

    for fn, why in [(star, r"\*xs"), (bare, "no annotation"), (local, "cannot be resolved")]:
        with pytest.raises(SchemaUnavailable, match=why):
            op_schema(fn, (), dispatcher=False)


def test_a_written_out_argument_becomes_the_out_overload_and_leaves_the_default_one():
    def api(
        a: torch.Tensor, *, out: torch.Tensor | None = None, backend: str = "auto"
    ) -> torch.Tensor: ...

    schema = op_schema(api, ("out",), dispatcher=True)
    assert "out" not in schema.default
    assert schema.out is not None and "Tensor(z!) out" in schema.out
    assert schema.out.endswith("-> ()")
    assert schema.out_param == "out"
    for text in (schema.default, schema.out):
        assert "str backend='auto'" in text and "bool skip_check=False" in text
        torch._C.parse_schema(f"test::api{text}")


def test_written_required_arguments_are_each_mutated_with_their_own_alias_set():
    def api(x: torch.Tensor, r: torch.Tensor, w: torch.Tensor) -> None: ...

    schema = op_schema(api, ("x", "r"), dispatcher=False)
    assert "Tensor(a!) x" in schema.default and "Tensor(b!) r" in schema.default
    assert "Tensor w" in schema.default and schema.default.endswith("-> ()")
    parsed = torch._C.parse_schema(f"test::api{schema.default}")
    assert [a.alias_info is not None and a.alias_info.is_write for a in parsed.arguments] == [
        True,
        True,
        False,
    ]


def test_a_written_argument_that_is_not_a_tensor_is_refused():
    def api(x: torch.Tensor, n: int) -> torch.Tensor: ...

    with pytest.raises(SchemaUnavailable, match="writes 'n'"):
        op_schema(api, ("n",), dispatcher=False)


@pytest.mark.parametrize("name", ["rmsnorm", "mm", "fused_add_rmsnorm"])
def test_every_public_op_is_a_torch_operator_with_the_schema_of_its_signature(name):
    fn = getattr(flashinfer, name)  # the op module registers its operator when imported
    packet = getattr(torch.ops.flashinfer, name)
    params = list(inspect.signature(fn).parameters)
    expected = [n for n in params if n != "out"]
    if hasattr(fn, "dispatcher") and "skip_check" not in expected:
        expected.append("skip_check")  # the dispatcher's, declared or not
    assert [a.name for a in packet.default._schema.arguments] == expected
    if "out" in params:
        assert [a.name for a in packet.out._schema.arguments if a.name == "out"] == ["out"]
        assert packet.out._schema.arguments[-3].alias_info.is_write
