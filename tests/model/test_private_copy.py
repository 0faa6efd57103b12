"""inspect never touches the caller's model, even when forward reaches modules through closures.

MinGPT below is a minimal reproduction of minGPT's pattern (not its code): each
block keeps its MLP in a ModuleDict and calls it through a lambda that closes over
that dict, so a plain deepcopy would leave the copy calling the caller's modules.
"""

from __future__ import annotations

import functools
import math
import threading

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from torchwise.model import ReferenceLeak, private_copy, summarize

EMBED, HEADS, VOCAB, BLOCK = 16, 2, 32, 8


class SelfAttention(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.qkv = nn.Linear(EMBED, 3 * EMBED)
        self.proj = nn.Linear(EMBED, EMBED)
        self.drop = nn.Dropout(0.1)
        self.register_buffer("mask", torch.tril(torch.ones(BLOCK, BLOCK)).view(1, 1, BLOCK, BLOCK))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(EMBED, dim=2)
        q, k, v = (z.view(b, t, HEADS, c // HEADS).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(c // HEADS)  # (B, nh, T, T)
        att = att.masked_fill(self.mask[:, :, :t, :t] == 0, float("-inf")).softmax(-1)
        y = (self.drop(att) @ v).transpose(1, 2).reshape(b, t, c)  # (B, T, C)
        return self.proj(y)


class LambdaBlock(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(EMBED)
        self.attn = SelfAttention()
        self.ln_2 = nn.LayerNorm(EMBED)
        self.mlp = nn.ModuleDict(
            {"c_fc": nn.Linear(EMBED, 4 * EMBED), "act": nn.GELU(),
             "c_proj": nn.Linear(4 * EMBED, EMBED), "dropout": nn.Dropout(0.1)}
        )  # fmt: skip
        m = self.mlp
        self.mlpf = lambda x: m.dropout(m.c_proj(m.act(m.c_fc(x))))  # closes over the ModuleDict

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlpf(self.ln_2(x))


class MinGPT(nn.Module):
    def __init__(self, n_layer: int = 2) -> None:
        super().__init__()
        self.wte = nn.Embedding(VOCAB, EMBED)
        self.wpe = nn.Embedding(BLOCK, EMBED)
        self.h = nn.ModuleList(LambdaBlock() for _ in range(n_layer))
        self.ln_f = nn.LayerNorm(EMBED)
        self.lm_head = nn.Linear(EMBED, VOCAB, bias=False)

    def forward(
        self, idx: torch.Tensor, targets: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.h:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))  # (B, T, vocab)
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten())
        return logits, loss


def snapshot(model: nn.Module) -> dict[str, object]:
    params, modules = list(model.named_parameters()), list(model.named_modules())
    return {
        "state": {k: v.clone() for k, v in model.state_dict().items()},
        "grads": {n: None if p.grad is None else p.grad.clone() for n, p in params},
        "modes": {n: m.training for n, m in modules},
        "requires_grad": {n: p.requires_grad for n, p in params},
        "hooks": {n: (dict(m._forward_hooks), dict(m._forward_pre_hooks)) for n, m in modules},
        "lambdas": [block.mlpf for block in model.h],
        "devices": {p.device.type for p in model.parameters()},
    }


def assert_same(before: dict[str, object], model: nn.Module) -> None:
    after = snapshot(model)
    for key in ("modes", "requires_grad", "hooks", "lambdas", "devices"):
        assert after[key] == before[key], key
    for key in ("state", "grads"):
        old, new = before[key], after[key]
        assert isinstance(old, dict) and isinstance(new, dict)
        for name, value in old.items():
            other = new[name]
            assert (value is None and other is None) or torch.equal(value, other), (key, name)


@pytest.mark.parametrize("device", ["meta", "cpu"])
@pytest.mark.parametrize("mode", ["eval", "train"])
def test_mingpt_style_model_is_untouched(device: str, mode: str) -> None:
    model = MinGPT().train()
    model.h[1].eval()  # mixed modes must survive too
    model.lm_head.weight.grad = torch.full_like(model.lm_head.weight, 3.0)  # an existing grad
    calls: list[str] = []
    model.h[0].mlp.c_fc.register_forward_hook(lambda *_: calls.append("c_fc"))
    before = snapshot(model)
    idx = torch.randint(0, VOCAB, (2, BLOCK))
    summary = summarize(model, (idx, idx), device=device, mode=mode)
    assert_same(before, model)
    assert calls == []  # the hook ran on the copy, with its own copy of `calls`
    rows = {layer.name: layer for layer in summary.layers}
    # The lambda's modules ran as the copy's: FLOPs land on them and on their block.
    # c_fc: 2 FLOPs x (2*8 tokens) x 16 in x 64 out = 32,768
    assert rows["h.0.mlp.c_fc"].flops == 2 * 16 * EMBED * 4 * EMBED == 32_768
    assert rows["h.0.mlp.c_fc"].calls == 1 and rows["h.1.mlp.c_proj"].calls == 1
    assert rows["h.0"].flops >= rows["h.0.mlp.c_fc"].flops + rows["h.0.mlp.c_proj"].flops


def test_the_copys_lambda_closes_over_the_copys_modules() -> None:
    model = MinGPT()
    work = private_copy(model, torch.device("meta"))
    assert work.h[0].mlpf is not model.h[0].mlpf
    cells = [c.cell_contents for c in work.h[0].mlpf.__closure__]
    assert cells == [work.h[0].mlp]


class Indirect(nn.Module):
    """Other ways to reach modules outside ``forward``'s ``self.x``: each must be redirected."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(4, 4)
        self.b = nn.Linear(4, 4)
        self.c = nn.Linear(4, 4)
        self.bound = self.a.forward  # a bound method of a submodule
        self.partial = functools.partial(F.linear, weight=self.b.weight)  # a partial over a weight
        self.default = lambda x, layer=self.c: layer(x)  # a default argument

        def outer(layer: nn.Module):  # a closure built by a nested function
            return lambda x: layer(x)

        self.nested = {"fns": [outer(self.a)]}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.nested["fns"][0](self.default(self.partial(self.bound(x))))


def test_bound_methods_partials_defaults_and_nested_closures_are_redirected() -> None:
    model = Indirect()
    before = {n: p.clone() for n, p in model.named_parameters()}
    summary = summarize(model, (torch.randn(2, 4),), device="cpu", mode="train")
    assert all(p.grad is None for p in model.parameters())
    assert all(torch.equal(before[n], p) for n, p in model.named_parameters())
    assert summary.macs_forward == 4 * (2 * 4 * 4)  # four (2, 4) @ (4, 4) products
    rows = {layer.name: layer for layer in summary.layers}
    # a.forward called directly skips module hooks (as in PyTorch): one call is seen
    assert rows["a"].calls == 1 and rows["c"].calls == 1


GLOBAL_HEAD = nn.Linear(4, 2)


class UsesGlobal(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Linear(4, 4)
        self.head = GLOBAL_HEAD  # registered, but forward calls the global itself

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return GLOBAL_HEAD(self.body(x))


@pytest.mark.parametrize("device", ["meta", "cpu"])
def test_a_forward_that_reaches_the_original_through_a_global_is_refused(device: str) -> None:
    model = UsesGlobal()
    with pytest.raises(ReferenceLeak, match=r"used your own 'head\.weight'"):
        summarize(model, (torch.randn(2, 4),), device=device, mode="train")
    assert all(p.grad is None for p in model.parameters())


class Uncopyable(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)
        state = (threading.Lock(), self.fc)  # a lock cannot be deep-copied
        self.call = lambda x: state[1](x)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.call(x)


def test_a_closure_that_cannot_be_copied_is_refused_with_the_path() -> None:
    with pytest.raises(ReferenceLeak, match=r"Uncopyable\.call \(closes over state\)\[1\]"):
        summarize(Uncopyable(), (torch.randn(2, 4),))
