"""A Llama-2-style decoder: RMSNorm, rotary positions, SwiGLU, grouped-query attention."""

# nn.Module.__call__ is typed as returning Any; forward signatures carry the types.
# mypy: disable-error-code="no-any-return"
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

TINY = dict(dim=64, n_layers=2, n_heads=4, n_kv_heads=2, vocab_size=256, hidden_dim=172)
LLAMA2_7B = dict(
    dim=4096, n_layers=32, n_heads=32, n_kv_heads=32, vocab_size=32000, hidden_dim=11008
)
LLAMA2_70B = dict(
    dim=8192, n_layers=80, n_heads=64, n_kv_heads=8, vocab_size=32000, hidden_dim=28672
)


class RMSNorm(nn.Module):
    """x / rms(x) * weight (no mean subtraction, no bias)."""

    def __init__(self, dim: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rms = torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + self.eps)  # (..., 1)
        return (x.float() * rms).type_as(x) * self.weight


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    # Rotate (x1, x2) halves by position-dependent angles; real arithmetic so meta works.
    x1, x2 = x.chunk(2, dim=-1)  # (B, h, T, hs/2) each
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


class Attention(nn.Module):
    """Causal attention with ``n_kv_heads`` key/value heads shared by query groups."""

    def __init__(self, dim: int, n_heads: int, n_kv_heads: int) -> None:
        super().__init__()
        self.n_heads, self.n_kv_heads, self.head_dim = n_heads, n_kv_heads, dim // n_heads
        self.wq = nn.Linear(dim, n_heads * self.head_dim, bias=False)
        self.wk = nn.Linear(dim, n_kv_heads * self.head_dim, bias=False)
        self.wv = nn.Linear(dim, n_kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(n_heads * self.head_dim, dim, bias=False)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        B, T, _ = x.shape
        q = self.wq(x).view(B, T, self.n_heads, self.head_dim).transpose(1, 2)  # (B, h, T, hs)
        k = self.wk(x).view(B, T, self.n_kv_heads, self.head_dim).transpose(1, 2)  # (B, kv, T, hs)
        v = self.wv(x).view(B, T, self.n_kv_heads, self.head_dim).transpose(1, 2)  # (B, kv, T, hs)
        q, k = _rotate(q, cos, sin), _rotate(k, cos, sin)
        groups = self.n_heads // self.n_kv_heads
        k, v = (
            k.repeat_interleave(groups, dim=1),
            v.repeat_interleave(groups, dim=1),
        )  # (B, h, T, hs)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, h, T, hs)
        return self.wo(y.transpose(1, 2).reshape(B, T, -1))  # (B, T, dim)


class FeedForward(nn.Module):
    """SwiGLU: w2(silu(w1 x) * w3 x)."""

    def __init__(self, dim: int, hidden_dim: int) -> None:
        super().__init__()
        self.w1 = nn.Linear(dim, hidden_dim, bias=False)
        self.w2 = nn.Linear(hidden_dim, dim, bias=False)
        self.w3 = nn.Linear(dim, hidden_dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(F.silu(self.w1(x)) * self.w3(x))  # (B, T, dim)


class TransformerBlock(nn.Module):
    """Pre-norm attention and feed-forward, both residual."""

    def __init__(
        self, dim: int, n_heads: int, n_kv_heads: int, hidden_dim: int, eps: float
    ) -> None:
        super().__init__()
        self.attention_norm = RMSNorm(dim, eps)
        self.attention = Attention(dim, n_heads, n_kv_heads)
        self.ffn_norm = RMSNorm(dim, eps)
        self.feed_forward = FeedForward(dim, hidden_dim)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        x = x + self.attention(self.attention_norm(x), cos, sin)
        return x + self.feed_forward(self.ffn_norm(x))


class Llama(nn.Module):
    """Embedding, ``n_layers`` blocks, final RMSNorm, untied output projection."""

    def __init__(
        self,
        dim: int = 4096,
        n_layers: int = 32,
        n_heads: int = 32,
        n_kv_heads: int = 32,
        vocab_size: int = 32000,
        hidden_dim: int = 11008,
        norm_eps: float = 1e-5,
        max_seq_len: int = 4096,
        rope_theta: float = 10000.0,
    ) -> None:
        super().__init__()
        self.tok_embeddings = nn.Embedding(vocab_size, dim)
        self.layers = nn.ModuleList(
            TransformerBlock(dim, n_heads, n_kv_heads, hidden_dim, norm_eps)
            for _ in range(n_layers)
        )
        self.norm = RMSNorm(dim, norm_eps)
        self.output = nn.Linear(dim, vocab_size, bias=False)
        head_dim = dim // n_heads
        inv_freq = 1.0 / rope_theta ** (torch.arange(0, head_dim, 2).float() / head_dim)
        angles = torch.outer(torch.arange(max_seq_len).float(), inv_freq)  # (max_T, hs/2)
        # Derived, not learned: non-persistent so checkpoints and counts exclude them.
        self.register_buffer("rope_cos", angles.cos(), persistent=False)
        self.register_buffer("rope_sin", angles.sin(), persistent=False)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        T = tokens.shape[1]
        cos: torch.Tensor = self.rope_cos[:T]  # type: ignore[index]  # (T, hs/2)
        sin: torch.Tensor = self.rope_sin[:T]  # type: ignore[index]
        x = self.tok_embeddings(tokens)  # (B, T, dim)
        for layer in self.layers:
            x = layer(x, cos, sin)
        return self.output(self.norm(x))  # (B, T, vocab_size)


def llama(**config: int | float) -> Llama:
    return Llama(**config)  # type: ignore[arg-type]
