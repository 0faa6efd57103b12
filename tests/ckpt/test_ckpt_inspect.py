"""ckpt inspect: keys, shapes, dtypes and totals read from opcodes, never from storages."""

from __future__ import annotations

import json
import struct
import zipfile
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from torchwise.ckpt import inspect
from torchwise.cli import app
from torchwise.errors import TorchwiseError

# The corpus model: Conv2d(3, 4, 3) -> BatchNorm2d(4) -> Flatten -> Linear(4, 2)
PARAMS = (4 * 3 * 3 * 3 + 4) + (4 + 4) + (4 * 2 + 2)  # conv 112 + bn 8 + linear 10 = 130
BUFFERS = 4 + 4 + 1  # running_mean, running_var, num_batches_tracked


def _torch_state(path: Path) -> dict[str, torch.Tensor]:
    return torch.load(path, weights_only=True)  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    "kind",
    [
        "state dict",
        "legacy format",
        "protocol 4",
        "safetensors",
        "sharded (safetensors)",
        "sharded (.bin)",
    ],
)
def test_state_dict_tensors_and_totals(kind: str, benign: dict[str, Path]) -> None:
    result = inspect(benign[kind])
    truth = _torch_state(benign["state dict"])
    got = {t.key: t for t in result.tensors}
    assert set(got) == set(truth)
    for key, tensor in truth.items():
        assert got[key].shape == tuple(tensor.shape), key
        assert got[key].dtype == str(tensor.dtype).removeprefix("torch."), key
    assert (result.parameters, result.buffers) == (PARAMS, BUFFERS)
    assert got["1.num_batches_tracked"].role == "buffer"
    assert result.kind == "state dict"


def test_formats_are_identified(benign: dict[str, Path]) -> None:
    formats = {
        k: inspect(benign[k]).format
        for k in ("state dict", "legacy format", "safetensors", "sharded (.bin)")
    }
    assert formats == {
        "state dict": "torch-zip",
        "legacy format": "torch-legacy",
        "safetensors": "safetensors",
        "sharded (.bin)": "hf-sharded",
    }


def test_training_checkpoint_structure(benign: dict[str, Path]) -> None:
    result = inspect(benign["training checkpoint"])
    assert result.kind == "training checkpoint"
    [opt] = result.optimizers
    assert opt.key == "optimizer" and opt.params_with_state == 6
    assert opt.state_names == ["exp_avg", "exp_avg_sq", "step"]
    assert opt.param_groups[0]["lr"] == pytest.approx(1e-3) and opt.param_groups[0]["params"] == 6
    # Adam keeps exp_avg and exp_avg_sq per parameter element, plus one step per parameter.
    assert result.optimizer_elements == 2 * PARAMS + 6
    assert result.parameters == PARAMS
    assert result.structure["epoch"] == 3 and result.structure["loss"] == 0.25
    assert {t.role for t in result.tensors if t.key.startswith("optimizer.")} == {"optimizer"}


def test_lightning_checkpoint(benign: dict[str, Path]) -> None:
    result = inspect(benign["Lightning checkpoint"])
    assert result.kind == "Lightning checkpoint"
    assert result.structure["global_step"] == 40
    assert result.structure["hyper_parameters"] == {"lr": 1e-3, "hidden": [4, 2]}
    assert result.optimizers[0].key == "optimizer_states.0"
    assert "state_dict.model.0.weight" in {t.key for t in result.tensors}


def test_tied_shared_and_strided(benign: dict[str, Path]) -> None:
    result = inspect(benign["tied and strided tensors"])
    got = {t.key: t for t in result.tensors}
    assert got["embed.weight"].aliases == ["head.weight"]  # the very same tensor object
    # ...and the alias has a row of its own that points at it (and at its storage)
    assert got["head.weight"].alias_of == "embed.weight"
    assert got["head.weight"].storage_key == got["embed.weight"].storage_key
    # the tied weight counts once; views of its storage count on their own (documented):
    # embed 4x4 (16) + rows 3x4 (12) + transposed 4x4 (16) + half bfloat16[3] (3) = 47
    assert result.parameters == 16 + 12 + 16 + 3
    assert "embed.weight" in got["rows"].shares_storage_with  # a view of the same storage
    assert not got["transposed"].contiguous and got["transposed"].shape == (4, 4)
    assert got["half"].dtype == "bfloat16"


def test_numpy_and_namespace_are_shown(benign: dict[str, Path]) -> None:
    np_result = inspect(benign["NumPy arrays"])
    mean = next(t for t in np_result.tensors if t.key == "mean")
    assert (mean.kind, mean.dtype, mean.shape, mean.role) == ("ndarray", "float64", (3,), "other")
    ns = inspect(benign["argparse.Namespace"]).structure["args"]
    assert ns == {
        "<argparse.Namespace>": {
            "state": {"lr": 0.1, "data": {"<pathlib.PurePosixPath>": {"args": ["/", "data"]}}}
        }
    }


def test_pickled_module(tmp_path: Path) -> None:
    torch.save(torch.nn.Linear(3, 2), tmp_path / "m.pt")
    result = inspect(tmp_path / "m.pt")
    assert result.kind.startswith("pickled nn.Module")
    assert result.parameters == 3 * 2 + 2
    assert {t.kind for t in result.tensors} == {"parameter"}


def test_dtypes_without_legacy_storage_classes(tmp_path: Path) -> None:
    # float8 and uint16 pickle through UntypedStorage + _rebuild_tensor_v3 with a dtype.
    state = {
        "f8": torch.zeros(5, dtype=torch.float8_e4m3fn),
        "u16": torch.zeros(3, 2, dtype=torch.uint16),
    }
    torch.save(state, tmp_path / "new.pt")
    got = {t.key: t for t in inspect(tmp_path / "new.pt").tensors}
    assert (got["f8"].dtype, got["f8"].nbytes, got["f8"].storage_nbytes) == ("float8_e4m3fn", 5, 5)
    assert (got["u16"].dtype, got["u16"].shape, got["u16"].nbytes) == ("uint16", (3, 2), 12)


def _data_ranges(path: Path) -> list[tuple[int, int]]:
    """Byte ranges of the storage members' data (after each local file header)."""
    ranges = []
    with zipfile.ZipFile(path) as z, path.open("rb") as f:
        for info in z.infolist():
            if "/data/" in info.filename:
                f.seek(info.header_offset + 26)
                name_len, extra_len = struct.unpack("<HH", f.read(4))
                start = info.header_offset + 30 + name_len + extra_len
                ranges.append((start, start + info.compress_size))
    return ranges


def test_inspect_reads_no_storage_bytes(tmp_path: Path) -> None:
    big = tmp_path / "big.pt"
    torch.save({"big": torch.zeros(16 * 2**20), "small": torch.ones(3)}, big)  # 64 MiB of f32
    result = inspect(big)
    assert result.tensor_bytes == 16 * 2**20 * 4 + 12
    assert result.bytes_read < 16 * 1024 < result.file_size // 1000
    from torchwise.ckpt.loaders.routes import read_container

    storages = _data_ranges(big)
    for start, end in read_container(big).read_ranges:
        assert all(end <= s or start >= e for s, e in storages), (start, end)


def test_legacy_inspect_reads_only_the_pickles(tmp_path: Path) -> None:
    big = tmp_path / "big_legacy.pt"
    torch.save({"big": torch.zeros(4 * 2**20)}, big, _use_new_zipfile_serialization=False)
    result = inspect(big)
    assert result.tensors[0].shape == (4 * 2**20,)
    assert result.bytes_read <= 128 * 1024  # the pickles plus one read-ahead buffer


def test_corrupt_file_is_a_clear_error(benign: dict[str, Path], tmp_path: Path) -> None:
    cut = tmp_path / "cut.pt"
    cut.write_bytes(benign["legacy format"].read_bytes()[:200])
    with pytest.raises(TorchwiseError, match="truncated"):
        inspect(cut)
    result = CliRunner().invoke(app, ["ckpt", "inspect", str(cut)])
    assert result.exit_code == 2 and "Traceback" not in result.output


def test_cli_text_and_json(benign: dict[str, Path]) -> None:
    runner = CliRunner()
    text = runner.invoke(app, ["ckpt", "inspect", str(benign["training checkpoint"])])
    assert text.exit_code == 0, text.output
    assert f"parameters {PARAMS:,}" in text.output and "model.0.weight" in text.output
    assert "optimizer optimizer: state for 6 parameters" in text.output
    js = runner.invoke(app, ["ckpt", "inspect", "--format", "json", str(benign["safetensors"])])
    data = json.loads(js.output)
    assert data["format"] == "safetensors" and data["parameters"] == PARAMS


class _Py2OrderedDict:
    """Pickles as Python 2's OrderedDict did: OrderedDict([[key, value], ...])."""

    def __init__(self, items: list[list[object]]) -> None:
        self.items = items

    def __reduce__(self) -> tuple[object, ...]:
        import collections

        return collections.OrderedDict, (self.items,)


def test_python2_ordered_dict_of_tensors(tmp_path: Path) -> None:
    # Found on real files: lpips' bundled weights pickle their state dict this way.
    path = tmp_path / "py2.pth"
    torch.save(_Py2OrderedDict([["lin.weight", torch.ones(2, 3)]]), path)
    result = inspect(path)
    assert result.kind == "state dict"
    assert [(t.key, t.shape) for t in result.tensors] == [("lin.weight", (2, 3))]


def test_a_shared_reference_dag_is_as_cheap_as_its_nodes(tmp_path: Path) -> None:
    """Each list holds the previous one twice: 2**60 paths through 61 lists, and a tensor at
    the bottom. Every object is visited once; the tensor is listed once."""
    from craft import build_zip, torch_entries

    storage = (
        b"(X\x07\x00\x00\x00storagectorch\nFloatStorage\nX\x01\x00\x00\x000"
        b"X\x03\x00\x00\x00cpuK\x02tQ"
    )
    tensor = (
        b"ctorch._utils\n_rebuild_tensor_v2\n(" + storage + b"K\x00K\x02\x85K\x01\x85\x89"
        b"ccollections\nOrderedDict\n)RtR"
    )
    shared = b"\x80\x02" + tensor + b"q\x00" + b"(h\x00h\x00lq\x00" * 60 + b"."
    path = tmp_path / "dag.pt"
    path.write_bytes(build_zip(torch_entries(shared)))
    result = inspect(path)
    originals = [t for t in result.tensors if t.alias_of is None]
    assert len(originals) == 1 and originals[0].shape == (2,)
    assert len(result.tensors) <= 3  # the first path and its alias, nothing more
    assert "same object as" in json.dumps(result.structure)


def test_nesting_deeper_than_the_recursion_limit(tmp_path: Path) -> None:
    from craft import build_zip, torch_entries

    deep = b"\x80\x02" + b"](" * 5000 + b"N" + b"K\x01e" * 5000 + b"."
    path = tmp_path / "deep.pt"
    path.write_bytes(build_zip(torch_entries(deep)))
    result = inspect(path)
    assert result.tensors == []
