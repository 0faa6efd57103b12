"""ViT-B/16 with torchvision's parameter layout, on ``nn.TransformerEncoderLayer``.

Using PyTorch's own encoder layer means eval-mode CPU inference takes its fused
fast path (``aten._transformer_encoder_layer_fwd``), which FLOP counters must see
through.
"""

# nn.Module.__call__ is typed as returning Any; forward signatures carry the types.
# mypy: disable-error-code="no-any-return"
from __future__ import annotations

import torch
from torch import nn


class VisionTransformer(nn.Module):
    """Patchify, prepend a class token, add positions, encode, classify the token."""

    def __init__(
        self,
        image_size: int = 224,
        patch_size: int = 16,
        num_layers: int = 12,
        num_heads: int = 12,
        hidden_dim: int = 768,
        mlp_dim: int = 3072,
        num_classes: int = 1000,
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        self.patch_size = patch_size
        seq_len = (image_size // patch_size) ** 2 + 1
        self.conv_proj = nn.Conv2d(3, hidden_dim, patch_size, patch_size)
        self.class_token = nn.Parameter(torch.zeros(1, 1, hidden_dim))
        self.pos_embedding = nn.Parameter(torch.empty(1, seq_len, hidden_dim).normal_(std=0.02))
        self.dropout = nn.Dropout(dropout)
        self.layers = nn.ModuleList(
            nn.TransformerEncoderLayer(
                hidden_dim,
                num_heads,
                mlp_dim,
                dropout,
                activation="gelu",
                layer_norm_eps=1e-6,
                batch_first=True,
                norm_first=True,
            )
            for _ in range(num_layers)
        )
        self.ln = nn.LayerNorm(hidden_dim, eps=1e-6)
        self.head = nn.Linear(hidden_dim, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv_proj(x)  # (B, D, H/p, W/p)
        x = x.flatten(2).transpose(1, 2)  # (B, N, D), N = HW/p^2
        cls = self.class_token.expand(x.shape[0], -1, -1)  # (B, 1, D)
        x = self.dropout(torch.cat([cls, x], dim=1) + self.pos_embedding)  # (B, N+1, D)
        for layer in self.layers:
            x = layer(x)  # (B, N+1, D)
        return self.head(self.ln(x)[:, 0])  # (B, num_classes)


def vit_b_16(num_classes: int = 1000, image_size: int = 224) -> VisionTransformer:
    return VisionTransformer(image_size=image_size, num_classes=num_classes)
