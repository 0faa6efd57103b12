"""Formats torch reads (zip, pre-1.0 tar, legacy, .pt2, TorchScript) and the allowlist's edges."""

from __future__ import annotations

import contextlib
import io
import pickle
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import pytest
import torch
from craft import Entry, build_zip, simple_tar_checkpoint, tar_checkpoint, torch_entries
from hypothesis import given, settings
from hypothesis import strategies as st

from torchwise.ckpt import inspect, scan
from torchwise.ckpt.policy import INERT, SAFE, WEIGHTS_ONLY, classify
from torchwise.ckpt.scan import scan_file
from torchwise.errors import TorchwiseError


def test_allowlist_is_torchs_weights_only_allowlist() -> None:
    # A torch upgrade that changes its allowlist fails here, loudly, instead of drifting.
    from torch._weights_only_unpickler import _get_allowed_globals

    assert set(_get_allowed_globals()) == WEIGHTS_ONLY
    assert WEIGHTS_ONLY | set(INERT) == SAFE
    for name in INERT:  # the extras really are refused by weights_only: the note says so
        assert name not in _get_allowed_globals()
        assert classify(name).note and "add_safe_globals" in (classify(name).note or "")


@pytest.mark.parametrize(
    "value",
    [{1, 2}, frozenset({3}), 1 + 2j, range(5), slice(1, 9, 2), bytearray(b"ab"), b"", b"xy",
     torch.device("cpu"), torch.Size([2, 3]), torch.float16, {"nested": (1, [2.5, None])}],
    ids=lambda v: type(v).__name__,
)  # fmt: skip
def test_plain_python_values_are_safe(value: object, tmp_path: Path) -> None:
    path = tmp_path / "v.pt"
    torch.save({"w": torch.ones(2), "v": value}, path)
    [result] = scan(path).files
    assert result.verdict == "safe", result.findings


@pytest.mark.parametrize("protocol", [0, 1, 2])
def test_python2_names_are_mapped_as_the_unpickler_maps_them(protocol: int, tmp_path: Path) -> None:
    path = tmp_path / "p2.pkl"
    path.write_bytes(pickle.dumps({"s": {1}, "f": frozenset(), "r": range(3)}, protocol=protocol))
    assert b"__builtin__" in path.read_bytes()
    assert scan_file(path).verdict == "safe"


def test_python2_name_after_protocol_3_is_not_mapped(tmp_path: Path) -> None:
    path = tmp_path / "p3.pkl"
    path.write_bytes(
        b"\x80\x03c__builtin__\nset\n)R."
    )  # Unpickler imports __builtin__: no such module
    result = scan_file(path)
    assert result.verdict == "unsafe" and result.globals == {"__builtin__.set": 1}


def test_tar_checkpoint_is_read_scanned_and_inspected(tmp_path: Path) -> None:
    path = tmp_path / "old.pt"
    path.write_bytes(simple_tar_checkpoint())
    [result] = scan(path).files
    assert (result.format, result.verdict) == ("torch-tar", "safe")
    assert {"tar:storages pickle #1", "tar:tensors pickle #2", "tar:pickle"} <= set(result.members)
    info = inspect(path)
    [tensor] = info.tensors
    assert (tensor.key, tensor.dtype, tensor.shape, tensor.storage_nbytes) == (
        "w",
        "float32",
        (2, 3),
        24,
    )


def test_tar_without_its_members_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "broken.pt"
    path.write_bytes(tar_checkpoint(pickle.dumps({}, 2), [], [], members={"tensors": b""})[:2048])
    [result] = scan(path).files
    assert result.verdict in ("error", "safe") and result.format == "torch-tar"


def test_a_pickle_in_a_tar_members_name_is_judged(tmp_path: Path) -> None:
    # torch.load(io.BytesIO(data)) skips the tar attempt and unpickles byte 0: the first name.
    evil = "cbuiltins\nopen\n(Vx\nVw\ntR."  # protocol 0: ASCII, so the name is stored as is
    path = tmp_path / "polyglot.pt"
    path.write_bytes(tar_checkpoint(pickle.dumps({}, 2), [], [], first=(evil, b"x")))
    assert path.read_bytes().startswith(evil.encode())
    [result] = scan(path).files
    assert result.verdict == "unsafe"
    assert any(f.global_name == "builtins.open" for f in result.findings)


@pytest.mark.filterwarnings("ignore")
def test_pt2_archive_is_recognised(tmp_path: Path) -> None:
    class Net(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = torch.nn.Linear(3, 2)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.lin(x)

    path = tmp_path / "net.pt2"
    torch.export.save(torch.export.export(Net(), (torch.randn(1, 3),)), path)
    [result] = scan(path).files
    assert (result.format, result.verdict) == ("pt2", "safe"), result.findings
    info = inspect(path)
    assert {t.key: t.shape for t in info.tensors} == {"lin.weight": (2, 3), "lin.bias": (2,)}
    assert scan(tmp_path).files[0].path == str(path)  # directory walks pick up .pt2
    # a pickled constant that torch.export.load would unpickle (weights_only=False)
    evil = tmp_path / "evil.pt2"
    with zipfile.ZipFile(path) as src, zipfile.ZipFile(evil, "w") as dst:
        for item in src.infolist():
            dst.writestr(item, src.read(item))
        dst.writestr("net/data/constants/opaque_obj_0", b"\x80\x02cbuiltins\nexec\nVx\n\x85R.")
    [bad] = scan(evil).files
    assert bad.verdict == "unsafe" and any(f.global_name == "builtins.exec" for f in bad.findings)


@pytest.mark.filterwarnings("ignore")
def test_torchscript_is_unsafe_because_its_code_runs(tmp_path: Path) -> None:
    path = tmp_path / "scripted.pt"
    torch.jit.script(torch.nn.Linear(2, 2)).save(str(path))
    [result] = scan(path).files
    assert result.format == "torchscript" and result.verdict == "unsafe"
    assert any(f.rule == "torchscript-code" for f in result.findings)


def test_storage_that_is_also_a_pickle_is_judged(tmp_path: Path) -> None:
    # torch reads data/0 as raw bytes; the same bytes are a payload for anything that unpickles
    # them, and no member may hide one.
    payload = b"\x80\x02cbuiltins\nexec\nVx\n\x85R."
    buf = io.BytesIO()
    torch.save({"w": torch.zeros(len(payload), dtype=torch.uint8)}, buf)
    with zipfile.ZipFile(io.BytesIO(buf.getvalue())) as z:
        data_pkl = z.read("archive/data.pkl")
    path = tmp_path / "s.pt"
    path.write_bytes(
        build_zip(torch_entries(data_pkl, b"archive", Entry(b"archive/data/0", payload)))
    )
    result = scan_file(path)
    assert result.verdict == "unsafe" and "archive/data/0" in result.members
    assert inspect(path).tensors[0].storage_nbytes == len(payload)  # and it still inspects


def test_inspect_reads_no_storage_bytes_even_with_tricky_directories(tmp_path: Path) -> None:
    path = tmp_path / "m.pt"
    storage = Entry(b"archive/data/0", b"\x00" * 4096)
    path.write_bytes(build_zip(torch_entries(pickle.dumps({}, 2), b"archive", storage)))
    assert inspect(path).bytes_read < 2048  # the directory and data.pkl, not the 4 KiB storage


def test_scan_and_inspect_work_without_torch(tmp_path: Path) -> None:
    path = tmp_path / "m.pt"
    torch.save({"w": torch.ones(2), "opt": {"lr": 0.1}}, path)
    tar = tmp_path / "old.pt"
    tar.write_bytes(simple_tar_checkpoint())
    code = (
        "import sys; sys.modules['torch'] = None; sys.modules['numpy'] = None\n"
        "from torchwise.ckpt import scan, inspect\n"
        f"assert scan([{str(path)!r}, {str(tar)!r}]).exit_code == 0\n"
        f"assert inspect({str(path)!r}).parameters == 2\n"
        f"assert inspect({str(tar)!r}).tensors[0].shape == (2, 3)\n"
        "from torchwise.cli import main\n"
        f"main(['ckpt', 'scan', {str(path)!r}])\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "SAFE" in done.stdout


def test_text_members_are_data_not_pickles(tmp_path: Path) -> None:
    # "cuda: true\n..." decodes as GLOBAL("uda: true", ...): nothing can import that.
    config = Entry(b"archive/extra/config.txt", b"cuda: true\nlr: 0.1\nmore text\n")
    path = tmp_path / "m.pt"
    path.write_bytes(build_zip(torch_entries(pickle.dumps({}, 2), b"archive", config)))
    assert scan_file(path).verdict == "safe"


_SEEDS: list[bytes] = []


def _seeds() -> list[bytes]:
    if not _SEEDS:
        zipped, legacy = io.BytesIO(), io.BytesIO()
        torch.save({"w": torch.ones(3), "opt": {"lr": 0.1}}, zipped)
        torch.save({"w": torch.ones(3)}, legacy, _use_new_zipfile_serialization=False)
        _SEEDS.extend([zipped.getvalue(), legacy.getvalue(), simple_tar_checkpoint(),
                       pickle.dumps({"a": [1, 2.5]}, 4)])  # fmt: skip
    return _SEEDS


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 3), st.lists(st.tuples(st.integers(0, 2**20), st.integers(0, 255)),
                                   min_size=1, max_size=6))  # fmt: skip
def test_damaged_files_never_crash_the_reader(seed: int, edits: list[tuple[int, int]]) -> None:
    # Bad input is a verdict or a clear error, never an internal error (1,500 more in a
    # fuzz run: see docs/benchmarks.md).
    data = bytearray(_seeds()[seed])
    for position, value in edits:
        data[position % len(data)] = value
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "damaged.pt"
        path.write_bytes(bytes(data))
        assert scan_file(path).verdict in ("safe", "warning", "unsafe", "error")
        with contextlib.suppress(TorchwiseError):  # a clear error is fine; a crash is not
            inspect(path)
