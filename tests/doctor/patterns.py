"""Minimal reproductions (written here, not copied) of how popular models are built.

Each class reproduces one pattern from a well-known codebase that doctor must
treat correctly: nanoGPT's ``GPT(GPTConfig())`` with ``forward(idx, targets)``
returning ``(logits, loss)``; minGPT's ``mlpf`` lambda and causal-mask buffer; the
word-language-model LSTM of pytorch/examples, time-first with a tuple hidden
state; its time-first ``nn.TransformerEncoder``; and timm's ResNet with the last
norm of every residual block initialised to zero (``zero_init_last``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


@dataclass
class GPTConfig:
    block_size: int = 16
    vocab_size: int = 64
    n_layer: int = 2
    n_head: int = 2
    n_embd: int = 32
    dropout: float = 0.1
    bias: bool = True


class CausalSelfAttention(nn.Module):
    """nanoGPT-style: one fused qkv projection and SDPA with is_causal=True."""

    def __init__(self, config: GPTConfig, causal: bool = True) -> None:
        super().__init__()
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)
        self.c_proj = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
        self.resid_dropout = nn.Dropout(config.dropout)
        self.n_head, self.dropout, self.causal = config.n_head, config.dropout, causal

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(C, dim=2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        y = F.scaled_dot_product_attention(
            q, k, v, dropout_p=self.dropout if self.training else 0, is_causal=self.causal
        )
        y = y.transpose(1, 2).contiguous().view(B, T, C)  # (B, T, C)
        return self.resid_dropout(self.c_proj(y))


class Block(nn.Module):
    def __init__(self, config: GPTConfig, causal: bool = True) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(config.n_embd)
        self.attn = CausalSelfAttention(config, causal)
        self.ln_2 = nn.LayerNorm(config.n_embd)
        self.mlp = nn.Sequential(
            nn.Linear(config.n_embd, 4 * config.n_embd), nn.GELU(),
            nn.Linear(4 * config.n_embd, config.n_embd), nn.Dropout(config.dropout),
        )  # fmt: skip

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    """nanoGPT's shape: tied embeddings, scaled residual init, prints its size, own loss."""

    def __init__(self, config: GPTConfig, causal: bool = True) -> None:
        super().__init__()
        self.config = config
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(config.vocab_size, config.n_embd),
            wpe=nn.Embedding(config.block_size, config.n_embd),
            drop=nn.Dropout(config.dropout),
            h=nn.ModuleList([Block(config, causal) for _ in range(config.n_layer)]),
            ln_f=nn.LayerNorm(config.n_embd),
        ))  # fmt: skip
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        self.transformer.wte.weight = self.lm_head.weight  # weight tying
        self.apply(self._init_weights)
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight"):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * config.n_layer))
        print(f"number of parameters: {sum(p.numel() for p in self.parameters()) / 1e6:.2f}M")

    def _init_weights(self, module: nn.Module) -> None:
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def forward(
        self, idx: torch.Tensor, targets: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        t = idx.size(1)
        pos = torch.arange(0, t, dtype=torch.long, device=idx.device)  # (t,)
        x = self.transformer.drop(self.transformer.wte(idx) + self.transformer.wpe(pos))
        for block in self.transformer.h:
            x = block(x)
        logits = self.lm_head(self.transformer.ln_f(x))  # (B, T, vocab)
        if targets is None:
            return logits, None
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
        return logits, loss


class MinGPTBlock(nn.Module):
    """minGPT-style: a registered causal-mask buffer and an ``mlpf`` lambda over submodules."""

    def __init__(self, n_embd: int = 32, n_head: int = 2, block_size: int = 16) -> None:
        super().__init__()
        self.ln_1, self.ln_2 = nn.LayerNorm(n_embd), nn.LayerNorm(n_embd)
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.register_buffer(
            "bias",
            torch.tril(torch.ones(block_size, block_size)).view(1, 1, block_size, block_size),
        )
        self.n_head = n_head
        self.mlp = nn.ModuleDict(
            dict(c_fc=nn.Linear(n_embd, 4 * n_embd), c_proj=nn.Linear(4 * n_embd, n_embd),
                 act=nn.GELU())
        )  # fmt: skip
        m = self.mlp
        self.mlpf = lambda x: m.c_proj(m.act(m.c_fc(x)))  # the pattern under test

    def attn(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))  # (B, nh, T, T)
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf")).softmax(-1)
        return self.c_proj((att @ v).transpose(1, 2).contiguous().view(B, T, C))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlpf(self.ln_2(x))


class MinGPT(nn.Module):
    def __init__(self, vocab: int = 64, n_embd: int = 32, block_size: int = 16) -> None:
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, n_embd), nn.Embedding(block_size, n_embd)
        self.blocks = nn.ModuleList([MinGPTBlock(n_embd, 2, block_size) for _ in range(2)])
        self.ln_f, self.head = nn.LayerNorm(n_embd), nn.Linear(n_embd, vocab, bias=False)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(0, idx.size(1), dtype=torch.long, device=idx.device).unsqueeze(0)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))  # (B, T, vocab)


class RNNModel(nn.Module):
    """pytorch/examples word_language_model style: time-first LSTM, (h, c) in and out."""

    def __init__(self, ntoken: int = 50, ninp: int = 16, nhid: int = 32, nlayers: int = 2) -> None:
        super().__init__()
        self.drop = nn.Dropout(0.2)
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnn = nn.LSTM(ninp, nhid, nlayers, dropout=0.2)
        self.decoder = nn.Linear(nhid, ntoken)

    def forward(
        self, input: torch.Tensor, hidden: tuple[torch.Tensor, torch.Tensor]
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        output, hidden = self.rnn(self.drop(self.encoder(input)), hidden)  # (T, B, nhid)
        return self.decoder(self.drop(output)), hidden  # (T, B, ntoken)


class FlattenedRNN(RNNModel):
    """BUG: a sentence classifier that flattens the time-first output as if batch-first."""

    def __init__(self) -> None:
        super().__init__()
        self.classify = nn.Linear(8 * 50, 4)

    def forward(  # type: ignore[override]
        self, input: torch.Tensor, hidden: tuple[torch.Tensor, torch.Tensor]
    ) -> torch.Tensor:
        logits, _ = super().forward(input, hidden)  # (T, B, ntoken)
        return self.classify(logits.reshape(input.shape[1], -1))  # rows mix samples


class TransformerLM(nn.Module):
    """pytorch/examples style: time-first nn.TransformerEncoder with a causal mask."""

    def __init__(self, ntoken: int = 50, d: int = 32, causal: bool = True) -> None:
        super().__init__()
        self.emb = nn.Embedding(ntoken, d)
        layer = nn.TransformerEncoderLayer(d, 4, 64, dropout=0.1)
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.decoder = nn.Linear(d, ntoken)
        self.causal = causal

    def forward(self, src: torch.Tensor) -> torch.Tensor:
        mask = None
        if self.causal:
            mask = nn.Transformer.generate_square_subsequent_mask(len(src), device=src.device)
        x = self.emb(src) * math.sqrt(self.emb.embedding_dim)  # (T, B, d)
        return F.log_softmax(self.decoder(self.encoder(x, mask=mask)), dim=-1)  # (T, B, ntoken)


class BasicBlock(nn.Module):
    """timm-style residual block whose last norm starts at zero (zero_init_last)."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)
        nn.init.zeros_(self.bn2.weight)  # the block starts as the identity

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(x + self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x))))))


class ZeroInitResNet(nn.Module):
    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16),
                                  nn.ReLU())  # fmt: skip
        self.layers = nn.Sequential(BasicBlock(16), BasicBlock(16))
        self.fc = nn.Linear(16, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.layers(self.stem(x)).mean((2, 3)))  # (B, classes)


class SoftmaxLossGPT(GPT):
    """BUG: the loss inside forward applies softmax to the logits before cross_entropy."""

    def forward(
        self, idx: torch.Tensor, targets: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        logits, _ = super().forward(idx)
        if targets is None:
            return logits, None
        probs = logits.softmax(-1)  # cross_entropy applies log_softmax again
        return logits, F.cross_entropy(probs.view(-1, probs.size(-1)), targets.view(-1))
