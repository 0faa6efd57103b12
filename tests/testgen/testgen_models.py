"""Minimal models for the test-generation tests, as source files, healthy and with bugs planted.

A scenario writes a model file into a project directory; the generated test
module imports it from there, exactly as in a user's project. Each planted bug
is a small edit of the healthy source, the kind people really make, and names
the generated test that must catch it.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass

#: A small classifier with the parts the generated tests exercise: a custom
#: running-statistics buffer (state outside the parameters), BatchNorm, dropout and
#: a residual branch.
NET = textwrap.dedent(
    '''
    """A small classifier over feature vectors."""

    import torch
    import torch.nn.functional as F
    from torch import nn


    class Standardize(nn.Module):
        """Standardizes features with running statistics, updated in training."""

        def __init__(self, dim: int, momentum: float = 0.1) -> None:
            super().__init__()
            self.momentum = momentum
            self.register_buffer("mean", torch.zeros(dim))
            self.register_buffer("var", torch.ones(dim))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            if self.training:
                with torch.no_grad():
                    self.mean.lerp_(x.mean(0), self.momentum)
                    self.var.lerp_(x.var(0), self.momentum)
            return (x - self.mean) / (self.var + 1e-5).sqrt()


    class Net(nn.Module):
        def __init__(self, features: int = 12, hidden: int = 32, classes: int = 5) -> None:
            super().__init__()
            self.standardize = Standardize(features)
            self.fc1 = nn.Linear(features, hidden)
            self.bn = nn.BatchNorm1d(hidden)
            self.skip = nn.Linear(features, hidden)
            self.drop = nn.Dropout(0.2)
            self.head = nn.Linear(hidden, classes)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            x = self.standardize(x)  # (B, features)
            h = F.relu(self.bn(self.fc1(x))) + self.skip(x)  # (B, hidden)
            return self.head(self.drop(h))  # (B, classes)
    '''
).lstrip()

#: A nanoGPT-style decoder with nanoGPT's interface: ``forward(idx, targets=None)``
#: returns ``(logits, loss)``, logits for every position when targets are given.
GPT = textwrap.dedent(
    '''
    """A tiny GPT in the style of nanoGPT."""

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


    class CausalSelfAttention(nn.Module):
        def __init__(self, config: GPTConfig) -> None:
            super().__init__()
            self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd)
            self.c_proj = nn.Linear(config.n_embd, config.n_embd)
            self.attn_dropout = nn.Dropout(config.dropout)
            self.n_head = config.n_head
            mask = torch.tril(torch.ones(config.block_size, config.block_size))
            self.register_buffer("bias", mask.view(1, 1, config.block_size, config.block_size))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            B, T, C = x.size()
            q, k, v = self.c_attn(x).split(C, dim=2)
            q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
            k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
            v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
            att = (q @ k.transpose(-2, -1)) / math.sqrt(k.size(-1))  # (B, nh, T, T)
            att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
            att = self.attn_dropout(F.softmax(att, dim=-1))
            y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)  # (B, T, C)
            return self.c_proj(y)


    class Block(nn.Module):
        def __init__(self, config: GPTConfig) -> None:
            super().__init__()
            self.ln_1 = nn.LayerNorm(config.n_embd)
            self.attn = CausalSelfAttention(config)
            self.ln_2 = nn.LayerNorm(config.n_embd)
            self.mlp = nn.Sequential(
                nn.Linear(config.n_embd, 4 * config.n_embd),
                nn.GELU(),
                nn.Linear(4 * config.n_embd, config.n_embd),
                nn.Dropout(config.dropout),
            )

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))


    class GPT(nn.Module):
        def __init__(self, config: GPTConfig) -> None:
            super().__init__()
            self.config = config
            self.wte = nn.Embedding(config.vocab_size, config.n_embd)
            self.wpe = nn.Embedding(config.block_size, config.n_embd)
            self.drop = nn.Dropout(config.dropout)
            self.h = nn.ModuleList(Block(config) for _ in range(config.n_layer))
            self.ln_f = nn.LayerNorm(config.n_embd)
            self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
            self.wte.weight = self.lm_head.weight  # weight tying

        def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None):
            t = idx.size(1)
            pos = torch.arange(0, t, dtype=torch.long, device=idx.device)
            x = self.drop(self.wte(idx) + self.wpe(pos))  # (B, T, n_embd)
            for block in self.h:
                x = block(x)
            x = self.ln_f(x)
            if targets is None:  # inference: only the last position's logits
                return self.lm_head(x[:, [-1], :]), None
            logits = self.lm_head(x)  # (B, T, vocab_size)
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
            return logits, loss
    '''
).lstrip()


@dataclass(frozen=True)
class Bug:
    name: str
    source: str  # "net" or "gpt": which healthy model it is planted in
    old: str
    new: str
    caught_by: str  # the generated test that must fail

    def plant(self, healthy: str) -> str:
        assert self.old in healthy, f"{self.name}: the text to replace is not in the model"
        return healthy.replace(self.old, self.new, 1)


BUGS = [
    Bug(
        "batchnorm-batch-leak",
        "net",
        "nn.BatchNorm1d(hidden)",
        "nn.BatchNorm1d(hidden, track_running_stats=False)",  # batch statistics in eval
        "test_doctor[batch-independence]",
    ),
    Bug(
        "causal-leak",
        "gpt",
        'att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))',
        "pass  # the causal mask was dropped in a refactor",
        "test_doctor[causal-leak]",
    ),
    Bug(
        "dead-gradients",
        "net",
        "+ self.skip(x)",
        "+ self.skip(x).round()",  # quantized without a straight-through estimator
        "test_doctor[grad-flow]",
    ),
    Bug(
        "detached-branch",
        "net",
        "+ self.skip(x)",
        "+ self.skip(x).detach()",
        "test_doctor[grad-flow]",
    ),
    Bug(
        "dropout-on-in-eval",
        "net",
        "return self.head(self.drop(h))",
        "return self.head(F.dropout(h, 0.2))",  # F.dropout defaults to training=True
        "test_eval_is_deterministic",
    ),
    Bug(
        "buffer-missing-from-state-dict",
        "net",
        'self.register_buffer("mean", torch.zeros(dim))',
        'self.register_buffer("mean", torch.zeros(dim), persistent=False)',
        "test_state_dict_round_trip",
    ),
    Bug(
        "softmax-before-cross-entropy",
        "net",
        "return self.head(self.drop(h))",
        "return self.head(self.drop(h)).softmax(-1)",
        "test_doctor[overfit-batch]",
    ),
    Bug(
        "fixed-device-tensor",
        "net",
        "h = F.relu(self.bn(self.fc1(x))) + self.skip(x)",
        "h = F.relu(self.bn(self.fc1(x))) + self.skip(x) + torch.zeros(32, device='cpu')",
        "test_doctor[device-consistency]",
    ),
]

#: Bugs planted in the example project's CifarNet (examples/cifar_project/model.py).
CIFAR_BUGS = [
    Bug(
        "cifar-batchnorm-batch-leak",
        "model",
        "self.bn = nn.BatchNorm2d(out_channels)",
        "self.bn = nn.BatchNorm2d(out_channels, track_running_stats=False)",
        "test_doctor[batch-independence]",
    ),
    Bug(
        "cifar-dropout-on-in-eval",
        "model",
        "return self.head(self.dropout(x))",
        "return self.head(F.dropout(x, 0.1))",
        "test_eval_is_deterministic",
    ),
]
