"""ckpt convert: safetensors only after a clean scan, streamed, verified, and losing nothing.

The oracle for "nothing lost" is torch.load of the source (our own files, built
here): load_converted() of the output must equal it, types, nesting and all.
"""

from __future__ import annotations

import argparse
import collections
import fractions
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from ckpt_corpus import Hostile, TrainState
from safetensors import safe_open
from safetensors.torch import load_file

from torchwise.ckpt import convert
from torchwise.ckpt.conversion.restore import load_converted
from torchwise.errors import OutputError, TorchwiseError


def _metadata(path: Path) -> dict[str, str]:
    with safe_open(str(path), framework="pt") as f:
        return dict(f.metadata() or {})


def assert_same(a: Any, b: Any, where: str = "<root>") -> None:
    """Deep equality with types: dict kinds, tuples, Parameters, dtypes, NaN-safe bytes."""
    assert type(a) is type(b), (where, type(a), type(b))
    if isinstance(a, torch.Tensor):
        assert (a.dtype, a.shape, a.requires_grad) == (b.dtype, b.shape, b.requires_grad), where
        assert torch.equal(_comparable(a), _comparable(b)), where
    elif isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes(), where
    elif isinstance(a, dict):
        assert list(a) == list(b), where
        for key in a:
            assert_same(a[key], b[key], f"{where}.{key}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_same(x, y, f"{where}.{i}")
    elif isinstance(a, argparse.Namespace):
        assert_same(vars(a), vars(b), where)
    elif isinstance(a, float) and a != a:
        assert b != b, where
    else:
        assert a == b, where


def _comparable(t: torch.Tensor) -> torch.Tensor:
    """Bytes, not values (NaN != NaN, -0.0 == 0.0); dense values for the other layouts."""
    if t.is_quantized:
        return t.dequantize()
    if t.layout != torch.strided:
        return t.to_dense()
    return t.detach().reshape(-1).view(torch.uint8) if t.numel() else t.detach()


def round_trip(src: Path, tmp_path: Path, **options: Any) -> Any:
    out = tmp_path / f"{src.stem}.safetensors"
    result = convert(src, out, force=True, **options)
    assert_same(torch.load(src, weights_only=False), load_converted(out))
    return result


@pytest.mark.parametrize("kind", ["state dict", "legacy format", "protocol 4", "sharded (.bin)",
                                  "sharded (safetensors)", "safetensors"])  # fmt: skip
def test_state_dicts_convert_exactly(kind: str, benign: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "model.safetensors"
    result = convert(benign[kind], out)
    truth = torch.load(benign["state dict"], weights_only=True)
    back = load_file(out)
    assert set(back) == set(truth)
    for key, tensor in truth.items():
        assert_same(tensor, back[key], key)
    assert result.verified == result.tensors == len(truth)
    assert result.streamed == (kind != "legacy format")  # the legacy format has no offsets


def test_training_checkpoint_restores_exactly(benign: dict[str, Path], tmp_path: Path) -> None:
    result = round_trip(benign["training checkpoint"], tmp_path)
    assert result.streamed
    back = load_file(tmp_path / "train.safetensors")
    assert "model.0.weight" in back and "optimizer.state.0.exp_avg" in back
    structure = json.loads(_metadata(tmp_path / "train.safetensors")["torchwise.structure"])
    assert structure["epoch"] == 3  # real JSON: the integer optimizer keys are tagged, not lost
    assert {"epoch", "optimizer", "scheduler"} <= set(result.extras)


def test_lightning_numpy_and_namespace(benign: dict[str, Path], tmp_path: Path) -> None:
    for kind in ("Lightning checkpoint", "NumPy arrays", "argparse.Namespace"):
        round_trip(benign[kind], tmp_path)


def test_rng_state_tuple_and_odd_values(tmp_path: Path) -> None:
    src = tmp_path / "odd.pt"
    torch.save({"rng": np.random.get_state(), "torch_rng": torch.get_rng_state(),
                "betas": (0.9, 0.999), "nan": float("nan"), "blob": b"\x00\xff", "c": 1 + 2j,
                "dtype": torch.float16, "device": torch.device("cpu"), "size": torch.Size([2]),
                3: "int key", "counter": collections.Counter("aab"), "s": {1, 2},
                "fs": frozenset({3}), "$weird": None, "empty": {}}, src)  # fmt: skip
    round_trip(src, tmp_path)


def test_tied_views_and_strides(benign: dict[str, Path], tmp_path: Path) -> None:
    result = round_trip(benign["tied and strided tensors"], tmp_path)
    assert result.aliases == {"head.weight": "embed.weight"}
    assert "head.weight" not in load_file(tmp_path / "tied.safetensors")
    assert result.made_contiguous == ["transposed"] and "rows" in result.copied_views


def test_tensors_safetensors_cannot_hold(tmp_path: Path) -> None:
    src = tmp_path / "exotic.pt"
    qint = torch.quantize_per_tensor(torch.randn(4), 0.1, 3, torch.qint8)
    qch = torch.quantize_per_channel(torch.randn(2, 3), torch.tensor([0.1, 0.2]),
                                     torch.tensor([0, 1]), 0, torch.quint8)  # fmt: skip
    torch.save({"c128": torch.randn(3, dtype=torch.complex128), "q": qint, "qc": qch,
                "coo": torch.eye(3).to_sparse(), "csr": torch.eye(3).to_sparse_csr(),
                "w": torch.ones(2)}, src)  # fmt: skip
    with pytest.raises(TorchwiseError, match="safetensors cannot hold c128") as info:
        convert(src, tmp_path / "a.safetensors")
    assert "--split" in (info.value.hint or "")
    assert not (tmp_path / "a.safetensors").exists()
    result = round_trip(src, tmp_path, split=True)
    assert "c128" in result.split and "q.int_repr" in result.split and "coo.values" in result.split


def test_values_without_json_form(tmp_path: Path) -> None:
    src = tmp_path / "state.pt"
    torch.save({"model": {"w": torch.ones(2)}, "state": TrainState(3, torch.zeros(2))}, src)
    allow = frozenset({"ckpt_corpus.TrainState"})
    with pytest.raises(TorchwiseError, match="TrainState, which has no JSON form") as info:
        convert(src, tmp_path / "a.safetensors", allow=allow)
    assert "--drop-non-tensor" in (info.value.hint or "")
    result = convert(src, tmp_path / "b.safetensors", allow=allow, drop_non_tensor=True)
    assert result.dropped == ["state (ckpt_corpus.TrainState)"]
    assert load_converted(tmp_path / "b.safetensors")["state"] is None


def test_refuses_hostile_file(hostile: dict[str, Hostile], marker: Path, tmp_path: Path) -> None:
    out = tmp_path / "evil.safetensors"
    for technique in ("os.system", "legacy format (magic-number slot)", "nested archive"):
        with pytest.raises(TorchwiseError, match="not safe to load") as info:
            convert(hostile[technique].path, out)
        assert "--allow" in (info.value.hint or "")
    assert not out.exists() and not marker.exists()


def test_outputs_are_never_clobbered(benign: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "m.safetensors"
    out.write_bytes(b"mine")
    with pytest.raises(OutputError, match="exists"):
        convert(benign["state dict"], out)
    assert out.read_bytes() == b"mine"
    convert(benign["state dict"], out, force=True)
    assert load_file(out)
    with pytest.raises(OutputError, match="is a directory"):
        convert(benign["state dict"], tmp_path)
    with pytest.raises(OutputError, match="input file"):
        convert(benign["state dict"], benign["state dict"], force=True)
    assert not list(tmp_path.glob("*.partial"))


def test_per_section(benign: dict[str, Path], tmp_path: Path) -> None:
    result = convert(benign["training checkpoint"], tmp_path / "t.safetensors", per_section=True)
    names = sorted(Path(p).name for p in result.outputs)
    assert names == ["t-model.safetensors", "t-optimizer.safetensors"]
    model = load_converted(tmp_path / "t-model.safetensors")
    assert model["epoch"] == 3 and "0.weight" in model["model"]
    assert set(load_converted(tmp_path / "t-optimizer.safetensors")) == {"state", "param_groups"}


def test_streaming_holds_one_chunk_not_the_file(tmp_path: Path) -> None:
    src = tmp_path / "big.pt"
    torch.save({"a": torch.ones(12 << 20), "b": torch.ones(2, 3 << 20).t()}, src)  # 48 + 24 MiB
    result = convert(src, tmp_path / "big.safetensors")
    assert result.streamed
    # the contiguous tensor went through in 16 MiB chunks; the transposed one needed its
    # storage span (24 MiB) plus one block of rows
    assert result.peak_buffer <= (24 << 20) + (16 << 20)
    assert_same(
        torch.load(src, weights_only=True)["b"], load_file(tmp_path / "big.safetensors")["b"]
    )


def test_nested_and_meta_tensors_under_split(tmp_path: Path) -> None:
    """A nested tensor is kept as its components, a meta tensor (no data) as its dtype, shape
    and stride in the structure; without --split each is refused in one line."""
    src = tmp_path / "odd.pt"
    nested = torch.nested.nested_tensor([torch.ones(2), torch.arange(3.0)])
    torch.save(
        {"nested": nested, "meta": torch.empty(2, 3, device="meta"), "w": torch.ones(1)}, src
    )
    with pytest.raises(TorchwiseError, match="safetensors cannot hold"):
        convert(src, tmp_path / "a.safetensors")
    out = tmp_path / "b.safetensors"
    convert(src, out, split=True)
    back = load_converted(out)
    assert back["meta"].is_meta and back["meta"].shape == (2, 3)
    assert back["nested"].is_nested
    for got, want in zip(back["nested"].unbind(), nested.unbind(), strict=True):
        assert torch.equal(got, want)


def test_attributes_on_tensors_and_parameters_are_kept(tmp_path: Path) -> None:
    src = tmp_path / "attrs.pt"
    weight = torch.nn.Parameter(torch.ones(2))
    weight.tag = "encoder"  # type: ignore[attr-defined]
    buffer = torch.zeros(3)
    buffer.meta = {"units": "m", "scale": (1, 2)}  # type: ignore[attr-defined]
    torch.save({"weight": weight, "buffer": buffer}, src)
    round_trip(src, tmp_path)
    back = load_converted(tmp_path / "attrs.safetensors")
    assert back["weight"].tag == "encoder"
    assert back["buffer"].meta == {"units": "m", "scale": (1, 2)}


def test_an_attribute_without_a_json_form_is_refused(tmp_path: Path) -> None:
    src = tmp_path / "attrs.pt"
    tensor = torch.zeros(2)
    tensor.ratio = fractions.Fraction(1, 3)  # type: ignore[attr-defined]
    torch.save({"t": tensor}, src)
    with pytest.raises(TorchwiseError, match=r"t\.<attributes>\.ratio is a fractions\.Fraction"):
        convert(src, tmp_path / "a.safetensors", allow=frozenset({"fractions.Fraction"}))


def test_shared_references_stay_shared_and_cheap(tmp_path: Path) -> None:
    """Each list holds the previous one twice (2**60 paths): written as 61 lists, read back as
    61 objects, the sharing intact."""
    src = tmp_path / "dag.pt"
    node: list[Any] = [torch.ones(1)]
    for _ in range(60):
        node = [node, node]
    torch.save({"dag": node, "again": node}, src)
    result = convert(src, tmp_path / "dag.safetensors")
    assert result.tensors == 1
    back = load_converted(tmp_path / "dag.safetensors")
    assert back["dag"] is back["again"] and back["dag"][0] is back["dag"][1]
    meta = _metadata(tmp_path / "dag.safetensors")
    assert len(meta["torchwise.structure"]) < 10_000


def test_nesting_deeper_than_json_is_refused_in_one_line(tmp_path: Path) -> None:
    src = tmp_path / "deep.pt"
    value: Any = [torch.ones(1)]
    for _ in range(300):
        value = [value, 1]
    torch.save({"deep": value}, src)  # torch.save recurses too: keep under its limit
    with pytest.raises(TorchwiseError, match="nests more than 200 levels deep"):
        convert(src, tmp_path / "deep.safetensors")


def test_the_structure_is_read_back_and_compared(tmp_path: Path) -> None:
    """The check compares what the file holds with what torch loaded: a mismatch is named."""
    from torchwise.ckpt.conversion.plan import flatten
    from torchwise.ckpt.conversion.verify import Mismatch, check_structure

    value = {"t": torch.ones(2), "cfg": {"lr": 0.1, "betas": (0.9, 0.99)}}
    section = flatten(value, "", split=False, drop=False, streamed=False)
    text = json.dumps(section.structure)
    check_structure(value, text, section)
    with pytest.raises(Mismatch, match=r"cfg\.betas: a builtins\.tuple was written as a"):
        check_structure(value, text.replace('{"$tuple": [0.9, 0.99]}', "[0.9, 0.99]"), section)
