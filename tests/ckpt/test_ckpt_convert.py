"""ckpt convert: safetensors only after a clean scan, verified tensor by tensor."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from ckpt_corpus import Hostile, TrainState
from click.testing import CliRunner
from safetensors import safe_open
from safetensors.torch import load_file

from torchwise.ckpt import convert
from torchwise.cli import app
from torchwise.errors import TorchwiseError


def _metadata(path: Path) -> dict[str, str]:
    with safe_open(str(path), framework="pt") as f:
        return dict(f.metadata() or {})


def _assert_same(a: torch.Tensor, b: torch.Tensor) -> None:
    assert a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)


@pytest.mark.parametrize("kind", ["state dict", "legacy format", "sharded (.bin)"])
def test_state_dict_round_trip(kind: str, benign: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "model.safetensors"
    result = convert(benign[kind], out)
    truth = torch.load(benign["state dict"], weights_only=True)
    back = load_file(out)
    assert set(back) == set(truth)
    for key, tensor in truth.items():
        _assert_same(back[key], tensor)
    assert result.verified == len(truth) == result.tensors


def test_training_checkpoint_is_flattened(benign: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "train.safetensors"
    result = convert(benign["training checkpoint"], out)
    back = load_file(out)
    assert "model.0.weight" in back and "optimizer.state.0.exp_avg" in back
    extra = json.loads(_metadata(out)["torchwise.extra"])
    assert extra["epoch"] == 3 and extra["optimizer.param_groups"][0]["lr"] == pytest.approx(1e-3)
    assert "epoch" in result.extras


def test_split_writes_one_file_per_section(benign: dict[str, Path], tmp_path: Path) -> None:
    result = convert(benign["training checkpoint"], tmp_path / "train.safetensors", split=True)
    names = sorted(Path(p).name for p in result.outputs)
    # The scheduler state holds no tensors: it goes to the metadata, not to a file.
    assert names == ["train-model.safetensors", "train-optimizer.safetensors"]
    model = load_file(tmp_path / "train-model.safetensors")
    assert "model.0.weight" in model and not any(k.startswith("optimizer") for k in model)
    assert (
        json.loads(_metadata(tmp_path / "train-model.safetensors")["torchwise.extra"])["epoch"] == 3
    )


def test_tied_views_and_strides(benign: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "tied.safetensors"
    result = convert(benign["tied and strided tensors"], out)
    original = torch.load(benign["tied and strided tensors"], weights_only=True)
    back = load_file(out)
    assert result.aliases == {"head.weight": "embed.weight"}
    assert "head.weight" not in back
    assert json.loads(_metadata(out)["torchwise.aliases"]) == {"head.weight": "embed.weight"}
    assert result.made_contiguous == ["transposed"] and "rows" in result.copied_views
    for key in ("embed.weight", "rows", "transposed", "half"):
        _assert_same(back[key], original[key].detach())
    assert result.verified == 5  # head.weight checked through its alias


def test_numpy_values_become_tensors(benign: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "np.safetensors"
    convert(benign["NumPy arrays"], out)
    back = load_file(out)
    _assert_same(back["mean"], torch.arange(3.0, dtype=torch.float64))


def test_refuses_hostile_file(hostile: dict[str, Hostile], marker: Path, tmp_path: Path) -> None:
    out = tmp_path / "evil.safetensors"
    for technique in ("os.system", "legacy format (magic-number slot)", "nested archive"):
        with pytest.raises(TorchwiseError, match="not safe to load") as info:
            convert(hostile[technique].path, out)
        assert "--allow" in (info.value.hint or "")
    assert not out.exists() and not marker.exists()


def test_allow_converts_a_trusted_class(tmp_path: Path) -> None:
    src = tmp_path / "state.pt"
    torch.save({"model": {"w": torch.ones(2)}, "state": TrainState(3, torch.full((2,), 0.5))}, src)
    with pytest.raises(TorchwiseError):
        convert(src, tmp_path / "a.safetensors")
    convert(src, tmp_path / "b.safetensors", allow=["ckpt_corpus.TrainState"])
    back = load_file(tmp_path / "b.safetensors")
    _assert_same(back["state.ema"], torch.full((2,), 0.5))


def test_does_not_overwrite_without_force(benign: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "m.safetensors"
    out.write_bytes(b"mine")
    with pytest.raises(TorchwiseError, match="exists"):
        convert(benign["state dict"], out)
    assert out.read_bytes() == b"mine"
    convert(benign["state dict"], out, force=True)
    assert load_file(out)


def test_cli_convert(benign: dict[str, Path], hostile: dict[str, Hostile], tmp_path: Path) -> None:
    runner = CliRunner()
    ok = runner.invoke(
        app,
        [
            "ckpt",
            "convert",
            str(benign["tied and strided tensors"]),
            "-o",
            str(tmp_path / "t.safetensors"),
        ],
    )
    assert ok.exit_code == 0, ok.output
    assert "read back identical" in ok.output and "head.weight -> embed.weight" in ok.output
    bad = runner.invoke(
        app,
        [
            "ckpt",
            "convert",
            str(hostile["builtins.eval"].path),
            "-o",
            str(tmp_path / "e.safetensors"),
        ],
    )
    assert bad.exit_code == 2 and "builtins.eval" in bad.output
