"""Folder scans: every checkpoint in the folder, whatever an index lists; the index's view beside.

A sharded checkpoint's loader reads the files its index names, whatever their names
(or wherever they lie); a folder can also hold checkpoints no index names. The scan
judges all of them and reports the index's view separately.
"""

from __future__ import annotations

import json
import pickle
import shutil
from pathlib import Path

from click.testing import CliRunner
from craft import payload_pickle

from torchwise.ckpt import scan
from torchwise.cli import app


def _sharded_folder(benign: dict[str, Path], tmp_path: Path) -> Path:
    folder = tmp_path / "model"
    shutil.copytree(benign["sharded (.bin)"], folder)
    return folder


def _index(folder: Path) -> Path:
    return next(folder.glob("*.index.json"))


def _rename_first_shard(folder: Path, name: str) -> Path:
    """Make the index name ``name`` for its first tensor; returns the index file."""
    index_path = _index(folder)
    index = json.loads(index_path.read_text())
    first = next(iter(index["weight_map"]))
    index["weight_map"][first] = name
    index_path.write_text(json.dumps(index))
    return index_path


def test_a_checkpoint_no_index_names_is_judged(
    benign: dict[str, Path], tmp_path: Path, marker: Path
) -> None:
    folder = _sharded_folder(benign, tmp_path)
    (folder / "extra.bin").write_bytes(payload_pickle(str(marker)))
    report = scan(folder)
    assert report.exit_code == 1
    verdicts = {Path(f.path).name: f.verdict for f in report.files}
    assert verdicts["extra.bin"] == "unsafe"
    [index] = report.indexes
    assert index.unlisted == ["extra.bin"] and not index.missing and not index.outside


def test_a_shard_without_a_checkpoint_suffix_is_judged(
    benign: dict[str, Path], tmp_path: Path, marker: Path
) -> None:
    folder = _sharded_folder(benign, tmp_path)
    _rename_first_shard(folder, "weights.data")
    (folder / "weights.data").write_bytes(payload_pickle(str(marker)))
    report = scan(folder)
    assert {Path(f.path).name: f.verdict for f in report.files}["weights.data"] == "unsafe"
    assert not marker.exists()


def test_a_shard_outside_the_folder_is_unsafe_and_judged(
    benign: dict[str, Path], tmp_path: Path, marker: Path
) -> None:
    folder = _sharded_folder(benign, tmp_path)
    index_path = _rename_first_shard(folder, "../elsewhere.bin")
    (tmp_path / "elsewhere.bin").write_bytes(pickle.dumps({"w": 1}, 2))
    report = scan(index_path)
    [view] = report.indexes
    assert view.outside == ["../elsewhere.bin"]
    assert report.exit_code == 1
    assert any(Path(f.path).name == "elsewhere.bin" for f in report.files)
    text = CliRunner().invoke(app, ["ckpt", "scan", str(index_path)]).output
    assert "shards outside the folder: ../elsewhere.bin" in text


def test_a_missing_shard_is_an_error(benign: dict[str, Path], tmp_path: Path) -> None:
    folder = _sharded_folder(benign, tmp_path)
    shard = sorted(folder.glob("*.bin"))[0]
    shard.unlink()
    report = scan(folder)
    assert report.exit_code == 2
    assert report.indexes[0].missing == [shard.name]


def test_files_found_by_their_first_bytes(tmp_path: Path, marker: Path) -> None:
    """A pickle with an odd suffix is judged; a text file that merely starts like a compressed
    stream (``x`` is zlib's first byte) is not a checkpoint and is left out, not an error."""
    (tmp_path / "weights.dat").write_bytes(payload_pickle(str(marker)))
    (tmp_path / "notes.txt").write_text("xylophone notes\n")
    report = scan(tmp_path)
    assert [Path(f.path).name for f in report.files] == ["weights.dat"]
    assert report.files[0].verdict == "unsafe"
    assert [Path(p).name for p in report.skipped] == ["notes.txt"]
