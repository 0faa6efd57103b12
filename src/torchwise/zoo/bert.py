"""BERT-base encoder with pooler, laid out like HF ``BertModel`` (109,482,240 params)."""

# nn.Module.__call__ is typed as returning Any; forward signatures carry the types.
# mypy: disable-error-code="no-any-return"
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class BertLayer(nn.Module):
    """Post-norm encoder layer: self-attention then a GELU MLP, each add & norm."""

    def __init__(self, dim: int, n_head: int, ffn: int, dropout: float) -> None:
        super().__init__()
        self.n_head = n_head
        self.query, self.key, self.value = (nn.Linear(dim, dim) for _ in range(3))
        self.attn_out = nn.Linear(dim, dim)
        self.attn_norm = nn.LayerNorm(dim, eps=1e-12)
        self.intermediate = nn.Linear(dim, ffn)
        self.output = nn.Linear(ffn, dim)
        self.out_norm = nn.LayerNorm(dim, eps=1e-12)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        B, T, C = x.shape
        q, k, v = (
            proj(x).view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
            for proj in (self.query, self.key, self.value)
        )
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)  # (B, nh, T, hs)
        y = self.attn_out(y.transpose(1, 2).reshape(B, T, C))  # (B, T, C)
        x = self.attn_norm(x + self.dropout(y))
        h = self.output(F.gelu(self.intermediate(x)))  # (B, T, C)
        return self.out_norm(x + self.dropout(h))


class BertModel(nn.Module):
    """Word + position + token-type embeddings, 12 layers, tanh pooler on [CLS]."""

    def __init__(
        self,
        vocab_size: int = 30522,
        max_position: int = 512,
        type_vocab: int = 2,
        dim: int = 768,
        n_layer: int = 12,
        n_head: int = 12,
        ffn: int = 3072,
        dropout: float = 0.1,
    ) -> None:
        super().__init__()
        self.word_embeddings = nn.Embedding(vocab_size, dim)
        self.position_embeddings = nn.Embedding(max_position, dim)
        self.token_type_embeddings = nn.Embedding(type_vocab, dim)
        self.emb_norm = nn.LayerNorm(dim, eps=1e-12)
        self.dropout = nn.Dropout(dropout)
        self.layers = nn.ModuleList(BertLayer(dim, n_head, ffn, dropout) for _ in range(n_layer))
        self.pooler = nn.Linear(dim, dim)

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        T = input_ids.shape[1]
        pos = torch.arange(T, device=input_ids.device)  # (T,)
        types = torch.zeros_like(input_ids) if token_type_ids is None else token_type_ids
        x = self.word_embeddings(input_ids) + self.position_embeddings(pos)
        x = self.dropout(self.emb_norm(x + self.token_type_embeddings(types)))  # (B, T, C)
        # (B, T) keep-mask -> (B, 1, 1, T) boolean mask broadcast over heads and queries
        mask = None if attention_mask is None else attention_mask.bool()[:, None, None, :]
        for layer in self.layers:
            x = layer(x, mask)
        pooled = torch.tanh(self.pooler(x[:, 0]))  # (B, C)
        return x, pooled


def bert_base(**overrides: int | float) -> BertModel:
    return BertModel(**overrides)  # type: ignore[arg-type]
