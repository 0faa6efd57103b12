"""What a scan of a folder covers: every checkpoint in it, and each index file's view.

A loader of a sharded checkpoint reads its ``*.index.json`` and loads the files
its ``weight_map`` names, whatever their names: one may lack a checkpoint
suffix, or lie outside the folder (``../../x.bin``). And a folder can hold
checkpoints no index names. So a folder scan judges every file in it (and
below) that has a checkpoint suffix, that an index names, or whose first bytes
are a format some loader reads (a pickle of protocol 2 or later, a zip, an
``.npy``, a flatbuffer module, a joblib compressed stream), and reports each
index's view beside the files: the shards it names, the ones missing, the ones
outside the folder (unsafe: the loader reads a file the folder does not hold),
and the checkpoints in the folder it does not name.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from torchwise.ckpt.formats.compressed import detect
from torchwise.ckpt.loaders.torch_load import readable
from torchwise.errors import TorchwiseError

#: suffixes always scanned in a folder (a file with one of them no loader reads is an error)
CHECKPOINT_SUFFIXES = frozenset(
    {".pt", ".pth", ".bin", ".ckpt", ".pkl", ".pickle", ".safetensors", ".tar", ".model",
     ".pyt", ".pt2", ".joblib", ".pte", ".npy", ".npz", ".ptl"}
)  # fmt: skip
_MAGICS = (b"PK\x03\x04", b"PK\x05\x06", b"\x93NUMPY")


@dataclass
class IndexView:
    """A sharded checkpoint as its index file describes it."""

    path: str
    #: the files its weight_map names, as written
    shards: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    #: named files that resolve outside the index's folder
    outside: list[str] = field(default_factory=list)
    #: checkpoint files in the folder the index does not name
    unlisted: list[str] = field(default_factory=list)
    #: why the index itself cannot be read, or None
    error: str | None = None


@dataclass
class Targets:
    """The files a scan judges, and the index views to report."""

    #: (path, sniffed): sniffed files are judged only if some loader reads them
    files: list[tuple[Path, bool]] = field(default_factory=list)
    indexes: list[IndexView] = field(default_factory=list)

    def add(self, path: Path, sniffed: bool = False) -> None:
        if all(path != known for known, _ in self.files):
            self.files.append((path, sniffed))


def expand(targets: Sequence[str | Path]) -> Targets:
    """The files to scan for ``targets`` (files, folders, index files)."""
    out = Targets()
    for target in map(Path, targets):
        if not target.exists():
            raise TorchwiseError(f"{target}: no such file or directory")
        with readable(target):
            if target.is_dir():
                _folder(target, out)
            elif target.name.endswith(".index.json"):
                out.indexes.append(_index(target, out))
            else:
                out.add(target)
    if not out.files and not out.indexes:
        raise TorchwiseError(
            f"{', '.join(map(str, targets))}: no checkpoint files "
            f"(*{', *'.join(sorted(CHECKPOINT_SUFFIXES))}, or files a loader reads)",
            hint="pass the file itself if it has another extension",
        )
    return out


def _folder(folder: Path, out: Targets) -> None:
    files = sorted(p for p in folder.rglob("*") if p.is_file())
    indexes = [p for p in files if p.name.endswith(".index.json")]
    for index in indexes:
        out.indexes.append(_index(index, out))
    for path in files:
        if path in indexes:
            continue
        if path.suffix.lower() in CHECKPOINT_SUFFIXES:
            out.add(path)
        elif sniff(path):
            out.add(path, sniffed=True)


def sniff(path: Path) -> bool:
    """The first bytes are a format some loader reads (cheap: 16 bytes)."""
    try:
        with path.open("rb") as handle:
            head = handle.read(16)
    except OSError:
        return False
    if head[:1] == b"\x80" and head[1:2] in (b"\x02", b"\x03", b"\x04", b"\x05"):
        return True
    return head.startswith(_MAGICS) or head[4:8] == b"PTMF" or detect(head) is not None


def _index(index: Path, out: Targets) -> IndexView:
    view = IndexView(str(index))
    try:
        weight_map = json.loads(index.read_text(encoding="utf-8"))["weight_map"]
        shards = sorted({str(name) for name in dict(weight_map).values()})
    except (OSError, ValueError, KeyError, TypeError) as exc:
        view.error = f"not a sharded-checkpoint index ({exc})"
        return view
    folder = index.parent.resolve()
    view.shards = shards
    for shard in shards:
        path = index.parent / shard
        resolved = Path(os.path.normpath(folder / shard))
        if folder not in resolved.parents:
            view.outside.append(shard)
        if not path.is_file():
            view.missing.append(shard)
            continue
        out.add(path)
    named = {Path(os.path.normpath(folder / s)) for s in shards}
    view.unlisted = sorted(
        p.name
        for p in index.parent.iterdir()
        if p.is_file()
        and p.suffix.lower() in CHECKPOINT_SUFFIXES
        and Path(os.path.normpath(p.resolve())) not in named
    )
    return view
