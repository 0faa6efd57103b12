"""``torch.export.load``'s route through a ``.pt2``: the tensors it describes in JSON.

A ``.pt2`` (``torch.export.save``) has no ``data.pkl``: ``torch.export.load``
reads its weights and constants from the archive's ``data/weights`` and
``data/constants`` folders, described by ``*_config.json`` records, and
unpickles the pickled ones (``weights_only=False``); the zip route
(:mod:`.torch_zip`) decodes every such member as a payload. This module reads
the configs, for inspect.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from torchwise.ckpt.budgets import BudgetExceeded
from torchwise.ckpt.formats.container import Container
from torchwise.ckpt.formats.zipdir import ZipDirectory, ZipError
from torchwise.ckpt.formats.zipstream import MemberStream

if TYPE_CHECKING:
    from torchwise.ckpt.loaders.torch_zip import TorchRecords, ZipContext


def read_pt2_configs(container: Container, ctx: ZipContext, records: TorchRecords) -> None:
    """Tensors a .pt2 describes in JSON: data/weights/*_config.json, data/constants/*."""
    for name in records.names:
        member = records.find(name.decode("utf-8", "replace"))
        if member is None or not (name.startswith(b"data/") and name.endswith(b"_config.json")):
            continue
        if ZipDirectory.check_extractable(member) or member.size > ctx.budgets.max_bytes:
            continue
        try:
            config = json.loads(
                MemberStream(ctx.raw, member, ctx.budgets.max_bytes, ctx.meter).read()
            )
        except (ValueError, ZipError, BudgetExceeded):
            container.notes.append(f"{member.name} is not valid JSON")
            continue
        if isinstance(config, dict) and isinstance(config.get("config"), dict):
            section = name.decode("utf-8", "replace").split("/")[1]
            for key, entry in config["config"].items():
                container.described[f"{section}:{key}"] = entry
