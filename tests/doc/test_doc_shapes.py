"""Symbolic shapes by experiment: names for the dims that vary, numbers for the rest."""

from __future__ import annotations

import torch
from torch import nn

from torchwise.doc.shapes import forward_input_names, infer
from torchwise.target import parse_input_spec


def shapes_of(model: nn.Module, *specs: str) -> tuple[list[str], list[str]]:
    parsed = [parse_input_spec(s) for s in specs]
    result = infer(model, parsed, forward_input_names(model, parsed))
    return [x.shape_text() for x in result.inputs], [x.shape_text() for x in result.outputs]


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 5))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x)


def test_mlp_batch_varies_features_are_fixed() -> None:
    model = MLP()
    weight_before = model.body[0].weight.clone()
    assert shapes_of(model, "f32[4,20]") == (["(batch, 20)"], ["(batch, 5)"])
    # The caller's model is untouched: still on the CPU, same weights.
    assert model.body[0].weight.device.type == "cpu"
    assert torch.equal(model.body[0].weight, weight_before)


class ConvNet(nn.Module):
    """A stride-2 conv then a valid 3x3 conv; a second output flattens the spatial dims."""

    def __init__(self) -> None:
        super().__init__()
        self.down = nn.Conv2d(3, 8, 3, stride=2, padding=1)
        self.valid = nn.Conv2d(8, 8, 3)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.down(x)  # (B, 8, H/2, W/2)
        return self.valid(h), h.flatten(2)  # (B, 8, H/2-2, W/2-2), (B, 8, H*W/4)


def test_conv_net_spatial_formulas_and_products() -> None:
    inputs, outputs = shapes_of(ConvNet(), "f32[2,3,32,32]")
    assert inputs == ["(batch, 3, height, width)"]
    # 32 -> 16 -> 14 at the example size: H/2 - 2, checked at 64 and 96 too.
    assert outputs == ["(batch, 8, height/2 - 2, width/2 - 2)", "(batch, 8, height*width/4)"]


class FixedHead(nn.Module):
    """Flatten into a Linear: the spatial size is baked into the weights."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3, padding=1)
        self.head = nn.Linear(4 * 8 * 8, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.conv(x).flatten(1))


def test_dims_that_cannot_change_stay_numbers() -> None:
    assert shapes_of(FixedHead(), "f32[2,1,8,8]") == (["(batch, 1, 8, 8)"], ["(batch, 10)"])


class Tagger(nn.Module):
    """Token ids + a padding mask that must share (batch, seq_len)."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(100, 16)
        self.encoder = nn.TransformerEncoderLayer(16, 2, 32, batch_first=True)
        self.head = nn.Linear(16, 7)

    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> dict[str, torch.Tensor]:
        h = self.encoder(self.embed(ids), src_key_padding_mask=mask)  # (B, T, 16)
        return {"tags": self.head(h), "pooled": h.mean(1)}


def test_sequence_model_finds_batch_and_seq_len_shared_across_inputs() -> None:
    inputs, outputs = shapes_of(Tagger(), "i64[2,12]<100", "mask=bool[2,12]")
    assert inputs == ["(batch, seq_len)", "(batch, seq_len)"]
    assert outputs == ["(batch, seq_len, 7)", "(batch, 16)"]


def test_named_dims_in_specs_name_the_symbols() -> None:
    inputs, outputs = shapes_of(Tagger(), "i64[b=2,tokens=12]<100", "mask=bool[b=2,tokens=12]")
    assert inputs == ["(b, tokens)", "(b, tokens)"]
    assert outputs[0] == "(b, tokens, 7)"


def test_default_dim_names_follow_the_batch_dim() -> None:
    from torchwise.doc.shapes import _default_name
    from torchwise.target import parse_input_spec

    ids = parse_input_spec("i64[7,4]<50")  # (T, B) token ids, time first
    assert [_default_name(ids, d, {0, 1}, batch_dim=1) for d in (0, 1)] == ["seq_len", "batch"]
    assert [_default_name(ids, d, {0, 1}) for d in (0, 1)] == ["batch", "seq_len"]
    hidden = parse_input_spec("f32[2,4,16]")  # an LSTM's (layers, B, H)
    assert _default_name(hidden, 1, {1}, batch_dim=1) == "batch"
