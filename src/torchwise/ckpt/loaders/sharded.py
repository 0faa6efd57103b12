"""Sharded Hugging Face checkpoints: a folder with ``*.index.json`` naming its shards.

``from_pretrained`` reads the index and loads the shards its ``weight_map`` names,
whatever their names (one may not end in a checkpoint suffix, or may lie outside
the folder). :func:`read_sharded` reads them shard by shard, for inspect and
convert; the scan judges every file in the folder on its own and reports the
index's view beside it (:func:`index_view`).
"""

from __future__ import annotations

import json
from pathlib import Path

from torchwise.ckpt.budgets import Budgets
from torchwise.ckpt.formats.container import Container
from torchwise.errors import TorchwiseError


def read_sharded(path: Path, budgets: Budgets, probe_storages: bool) -> Container:
    """The checkpoint an index describes, its shards as the container's children."""
    if path.is_dir():
        indexes = sorted(path.glob("*.index.json"))
        if not indexes:
            raise TorchwiseError(
                f"{path}: a directory without a *.index.json",
                hint="pass a checkpoint file, or the directory of a sharded checkpoint",
            )
        path = indexes[0]
    try:
        index = json.loads(path.read_text(encoding="utf-8"))
        weight_map: dict[str, str] = dict(index["weight_map"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise TorchwiseError(f"{path}: not a sharded-checkpoint index ({exc})") from None
    from torchwise.ckpt.loaders.routes import read_container

    container = Container(path, "hf-sharded", metadata=dict(index.get("metadata") or {}))
    for shard in sorted(set(weight_map.values())):
        shard_path = path.parent / shard
        if not shard_path.is_file():
            raise TorchwiseError(
                f"{path}: shard {shard} is missing", hint="download every shard the index lists"
            )
        container.children.append(
            read_container(shard_path, budgets, probe_storages=probe_storages)
        )
        container.file_size += shard_path.stat().st_size
    container.metadata["weight_map"] = weight_map
    return container
