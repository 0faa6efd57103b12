"""Reference models in plain torch, with their published parameter counts.

``get("resnet50").build(device="meta")`` builds a model without allocating its
weights, so even ``llama-70b`` costs no memory. Every entry records the
published parameter count it must match (tests check each one exactly) and
default input specs for ``torchwise inspect zoo:NAME``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from torchwise.errors import TorchwiseError

if TYPE_CHECKING:
    import torch

#: Real (non-meta) builds above this many parameters are refused: at 4 bytes each
#: they would not fit a laptop, and inspecting them on meta gives the same counts.
MAX_REAL_PARAMS = 2_000_000_000


@dataclass(frozen=True)
class ZooEntry:
    """One reference model: how to build it and what it should measure."""

    name: str
    description: str
    builder: Callable[..., torch.nn.Module]
    inputs: tuple[str, ...]
    published_params: int | None
    source: str
    options: dict[str, Any] = field(default_factory=dict)

    def build(self, device: str | torch.device = "cpu", **overrides: Any) -> torch.nn.Module:
        """Build the model with its parameters created directly on ``device``."""
        import torch

        options = {**self.options, **overrides}
        dev = torch.device(device)
        size = self.published_params or 0
        if dev.type != "meta" and size > MAX_REAL_PARAMS:
            raise TorchwiseError(
                f"zoo:{self.name} has {size:,} parameters; building it on {dev} would need "
                f"{size * 4 / 2**30:.0f} GiB",
                hint="inspect it on the meta device (the default): same counts, no memory",
            )
        try:
            with dev:
                model = self.builder(**options)
        except TypeError as exc:
            raise TorchwiseError(f"zoo:{self.name}: bad options {overrides}: {exc}") from None
        return model


def _entries() -> dict[str, ZooEntry]:
    from torchwise.zoo import bert, gpt2, llama, mobilenet, resnet, vit

    image = ("f32[batch=1,3,224,224]",)
    entries = [
        ZooEntry("resnet18", "ResNet-18 (He et al. 2015), torchvision layout", resnet.resnet18,
                 image, 11_689_512, "torchvision.models.resnet18"),
        ZooEntry("resnet50", "ResNet-50 v1.5 (stride in the 3x3 conv), torchvision layout",
                 resnet.resnet50, image, 25_557_032, "torchvision.models.resnet50"),
        ZooEntry("mobilenet_v2", "MobileNetV2 (Sandler et al. 2018), width 1.0",
                 mobilenet.mobilenet_v2, image, 3_504_872, "torchvision.models.mobilenet_v2"),
        ZooEntry("vit_b_16", "ViT-B/16 (Dosovitskiy et al. 2020) on nn.TransformerEncoderLayer",
                 vit.vit_b_16, image, 86_567_656, "torchvision.models.vit_b_16"),
        ZooEntry("gpt2", "GPT-2 small (124M), lm_head tied to the token embedding",
                 gpt2.gpt2, ("i64[batch=1,seq=1024]<50257",), 124_439_808, "HF gpt2"),
        ZooEntry("bert_base", "BERT-base encoder with pooler (bert-base-uncased BertModel)",
                 bert.bert_base,
                 ("i64[batch=1,seq=128]<30522", "attention_mask=bool[batch=1,seq=128]"),
                 109_482_240, "HF bert-base-uncased"),
        ZooEntry("llama", "Llama-style decoder, configurable (default: a tiny test size)",
                 llama.llama, ("i64[batch=1,seq=32]<256",), None, "Llama 2 architecture",
                 dict(llama.TINY)),
        ZooEntry("llama-tiny", "Llama-style decoder at test size (2 layers, GQA)",
                 llama.llama, ("i64[batch=1,seq=32]<256",), 123_712, "Llama 2 architecture",
                 dict(llama.TINY)),
        ZooEntry("llama-7b", "Llama-2-7B configuration", llama.llama,
                 ("i64[batch=1,seq=4096]<32000",), 6_738_415_616, "meta-llama/Llama-2-7b-hf",
                 dict(llama.LLAMA2_7B)),
        ZooEntry("llama-70b", "Llama-2-70B configuration (grouped-query attention)", llama.llama,
                 ("i64[batch=1,seq=4096]<32000",), 68_976_648_192, "meta-llama/Llama-2-70b-hf",
                 dict(llama.LLAMA2_70B)),
    ]  # fmt: skip
    return {e.name: e for e in entries}


_ZOO: dict[str, ZooEntry] | None = None


def zoo() -> dict[str, ZooEntry]:
    """All entries by name (built on first use: the model modules import torch)."""
    global _ZOO
    if _ZOO is None:
        _ZOO = _entries()
    return _ZOO


def names() -> list[str]:
    """Entry names, without importing torch."""
    return ["resnet18", "resnet50", "mobilenet_v2", "vit_b_16", "gpt2", "bert_base", "llama",
            "llama-tiny", "llama-7b", "llama-70b"]  # fmt: skip


def get(name: str) -> ZooEntry:
    """The entry called ``name`` (``-`` and ``_`` are interchangeable)."""
    entries = zoo()
    for spelling in (name, name.replace("_", "-"), name.replace("-", "_")):
        if spelling in entries:
            return entries[spelling]
    raise TorchwiseError(f"no zoo model {name!r}", hint=f"zoo models: {', '.join(names())}")


def __getattr__(attr: str) -> Any:
    # ``torchwise.zoo.ZOO`` is the registry dict, built lazily.
    if attr == "ZOO":
        return zoo()
    raise AttributeError(attr)
