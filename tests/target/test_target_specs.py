"""Input specs: parsing, error pointers, and materialising inputs."""

from __future__ import annotations

import pytest
import torch

from torchwise.errors import TorchwiseError
from torchwise.target import (
    Dim,
    batch_dim_of,
    make_inputs,
    parse_input_spec,
    parse_input_specs,
    spec_from_value,
)


def test_plain_positional_tensor() -> None:
    spec = parse_input_spec("f32[8,3,224,224]")
    assert (spec.name, spec.dtype, spec.shape(), spec.high) == (None, "f32", (8, 3, 224, 224), None)


def test_keyword_int_with_bound() -> None:
    spec = parse_input_spec("ids=i64[2,128]<50257")
    assert (spec.name, spec.dtype, spec.shape(), spec.high) == ("ids", "i64", (2, 128), 50257)


def test_named_dims_and_long_dtype_names() -> None:
    spec = parse_input_spec(" int64[ batch=2, seq=128 ] < 100 ")
    assert spec.dims == (Dim(2, "batch"), Dim(128, "seq"))
    assert spec.shape({"seq": 512}) == (2, 512)
    assert spec.dtype == "i64"


def test_scalar_and_bool() -> None:
    assert parse_input_spec("f32[]").shape() == ()
    assert parse_input_spec("mask=bool[4,4]").torch_dtype() == torch.bool


def test_nested_dict_round_trips() -> None:
    text = "batch={image: f32[2,3,32,32], meta: {mask: bool[2,32,32], y: i64[2]<10}}"
    spec = parse_input_spec(text)
    assert spec.name == "batch" and spec.children is not None
    assert set(spec.children) == {"image", "meta"}
    assert parse_input_spec(str(spec)) == spec


@pytest.mark.parametrize(
    ("text", "message", "column"),
    [
        ("f32[8,3,32", "expected ']'", 10),
        ("f33[8]", "unknown dtype 'f33'", 0),
        ("f32[8]<10", "only applies to integer dtypes", 7),
        ("i64[seq]", "needs a size", 7),
        ("{a: f32[1], a: f32[2]}", "duplicate dict key 'a'", 13),
        ("f32[2] extra", "unexpected text", 7),
    ],
)
def test_bad_specs_point_at_the_problem(text: str, message: str, column: int) -> None:
    with pytest.raises(TorchwiseError) as info:
        parse_input_spec(text)
    error = str(info.value)
    assert message in error
    pointer_line = error.splitlines()[2]
    assert pointer_line.index("^") - 2 == column  # two spaces of indent before the echo


def test_make_inputs_respects_dtype_bounds_and_keywords() -> None:
    specs = [parse_input_spec("i64[4,16]<7"), parse_input_spec("mask=bool[4,16]")]
    args, kwargs = make_inputs(specs)
    assert args[0].dtype == torch.int64 and args[0].shape == (4, 16)
    assert int(args[0].min()) >= 0 and int(args[0].max()) < 7
    assert kwargs["mask"].dtype == torch.bool


def test_make_inputs_is_seeded_and_resizes_by_name() -> None:
    specs = [parse_input_spec("f32[batch=2,seq=8]")]
    a1, _ = make_inputs(specs, seed=3)
    a2, _ = make_inputs(specs, seed=3)
    assert torch.equal(a1[0], a2[0])
    (big,), _ = make_inputs(specs, sizes={"seq": 32, "batch": 1})
    assert big.shape == (1, 32)


def test_make_inputs_on_meta_allocates_nothing() -> None:
    (x,), _ = make_inputs([parse_input_spec("f32[1024,1024,1024]")], device="meta")
    assert x.device.type == "meta" and x.shape == (1024, 1024, 1024)


def test_unknown_size_name_is_an_error_not_ignored() -> None:
    with pytest.raises(TorchwiseError, match="no input has a dimension named sq"):
        make_inputs([parse_input_spec("f32[seq=4]")], sizes={"sq": 8})


def test_dict_inputs_materialise_nested() -> None:
    (batch,), _ = make_inputs([parse_input_spec("{x: f32[2,3], y: {z: i64[2]<5}}")])
    assert batch["x"].shape == (2, 3) and batch["y"]["z"].dtype == torch.int64


def test_one_string_holds_several_arguments_with_a_tuple() -> None:
    # an LSTM language model: forward(input, (h, c)), time-first
    specs = parse_input_specs("i64[seq=35,batch=20]<50, (f32[2,batch=20,200], f32[2,batch=20,200])")
    assert [s.kind for s in specs] == ["tensor", "tuple"]
    (tokens, (h, c)), kwargs = make_inputs(specs)
    assert tokens.shape == (35, 20) and h.shape == c.shape == (2, 20, 200) and kwargs == {}
    assert batch_dim_of(specs) == 1


@pytest.mark.parametrize(
    "text",
    [
        "(f32[2],)",
        "()",
        "[f32[2], i64[3]<4]",
        "x={a: (f32[1], [bool[2]]), 'b c': i64[1]<3}",
        "use_cache=False",
        "n=3",
        "scale=0.5",
        "reduction='mean'",
        "mask=None",
    ],
)
def test_containers_and_values_round_trip(text: str) -> None:
    spec = parse_input_spec(text)
    assert parse_input_spec(str(spec)) == spec


def test_plain_values_are_passed_as_they_are() -> None:
    specs = parse_input_specs("f32[2,3], use_cache=False, n=3, eps=1e-5, mode='sum', m=None")
    args, kwargs = make_inputs(specs)
    assert args[0].shape == (2, 3)
    assert kwargs == {"use_cache": False, "n": 3, "eps": 1e-5, "mode": "sum", "m": None}


def test_lists_stay_lists_and_tuples_tuples() -> None:
    (pair, items), _ = make_inputs(parse_input_specs("(f32[1], f32[2]), [i64[1]<5]"))
    assert isinstance(pair, tuple) and isinstance(items, list)


def test_parse_input_spec_refuses_two_arguments() -> None:
    with pytest.raises(TorchwiseError, match="holds 2 arguments"):
        parse_input_spec("f32[1], f32[2]")


def test_batch_named_at_different_dims_is_ambiguous() -> None:
    with pytest.raises(TorchwiseError, match="different dims"):
        batch_dim_of(parse_input_specs("f32[batch=2,3], f32[3,batch=2]"))


def test_spec_from_value_describes_nested_examples() -> None:
    value = (torch.zeros(2, 3), {"h": (torch.ones(1, 2), None)}, True)
    spec = spec_from_value(value)
    assert str(spec) == "(f32[2,3], {h: (f32[1,2], None)}, True)"


def test_one_dtype_table_spells_torch_dtypes_both_ways() -> None:
    import torch

    from torchwise.inputs import FLOAT_DTYPES, INT_DTYPES, TORCH_DTYPE_NAMES, spec_dtype

    for spec, name in TORCH_DTYPE_NAMES.items():
        assert spec_dtype(getattr(torch, name)) == spec
    assert spec_dtype(torch.float8_e4m3fn) == "float8_e4m3fn"  # no spec spelling: torch's name
    assert TORCH_DTYPE_NAMES.keys() >= FLOAT_DTYPES | INT_DTYPES
