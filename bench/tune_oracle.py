"""How far correct knobs and broken steps land from the oracle's band, on real models.

For each model (torchwise's zoo, and transformers models at tiny configurations,
no weights), on CPU in train mode: every CPU knob tune tries, fp16 autocast with
GradScaler (which runs on CPU too), and three broken steps (the update applied
twice, the gradients scrambled, the loss scaled) are judged by
``torchwise.tune.oracle.Oracle``. Printed per case: the knob's deviation from the
fp32 baseline over its trajectory in units of the twins' (the *ratio* the
oracle's MARGIN bounds), and the verdict. Correct knobs should sit far below
MARGIN, broken steps far above it.

    PYTHONPATH=src python3 bench/tune_oracle.py [--models gpt2-hf,bert-hf,...]
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from torchwise.tune.api import build_workload
from torchwise.tune.options import TuneOptions
from torchwise.tune.oracle import MARGIN, Oracle
from torchwise.tune.step import StepSettings, TrainingStep, Workload


class Logits(nn.Module):
    """A transformers model's ``.logits`` as the output (tune reads it the same way)."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.model(x).logits  # type: ignore[no-any-return]


def _hf(kind: str) -> tuple[nn.Module, torch.Tensor]:
    import transformers as tf

    if kind == "gpt2":
        config = tf.GPT2Config(n_layer=2, n_embd=64, n_head=2, vocab_size=512, n_positions=64)
        return Logits(tf.GPT2LMHeadModel(config)), torch.randint(0, 512, (4, 32))
    if kind == "bert":
        config = tf.BertConfig(
            hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=128,
            vocab_size=512, num_labels=5,
        )  # fmt: skip
        return Logits(tf.BertForSequenceClassification(config)), torch.randint(0, 512, (4, 32))
    if kind == "vit":
        config = tf.ViTConfig(
            hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=128,
            image_size=32, patch_size=8, num_labels=10,
        )  # fmt: skip
        return Logits(tf.ViTForImageClassification(config)), torch.randn(4, 3, 32, 32)
    config = tf.ConvNextConfig(
        num_channels=3,
        hidden_sizes=[16, 32],
        depths=[1, 1],
        num_stages=2,
        num_labels=10,
        image_size=32,
    )
    return Logits(tf.ConvNextForImageClassification(config)), torch.randn(4, 3, 32, 32)


def _zoo(name: str, shape: str) -> tuple[nn.Module, torch.Tensor]:
    from torchwise import zoo

    model = zoo.get(name).build()
    if shape.startswith("i64"):
        return model, torch.randint(0, 256, (4, 32))
    return model, torch.randn(4, 3, 64, 64)


MODELS: dict[str, Callable[[], tuple[nn.Module, torch.Tensor]]] = {
    "resnet18": lambda: _zoo("resnet18", "f32[4,3,64,64]"),
    "mobilenetv2": lambda: _zoo("mobilenet_v2", "f32[4,3,64,64]"),
    "llama-tiny": lambda: _zoo("llama-tiny", "i64[4,32]<256"),
    "gpt2-hf": lambda: _hf("gpt2"),
    "bert-hf": lambda: _hf("bert"),
    "vit-hf": lambda: _hf("vit"),
    "convnext-hf": lambda: _hf("convnext"),
}

KNOBS = {
    "bf16-autocast": StepSettings(autocast="bf16"),
    "fp16-autocast": StepSettings(autocast="fp16", grad_scaler=True),
    "channels-last": StepSettings(channels_last=True),
    "foreach-optimizer": StepSettings(optimizer_impl="foreach"),
    "fused-optimizer": StepSettings(optimizer_impl="fused"),
    "threads-2": StepSettings(threads=2),
    "zero-grad-in-place": StepSettings(set_to_none=False),
    "bf16 + channels-last": StepSettings(autocast="bf16", channels_last=True),
}


class TwoSteps(TrainingStep):
    def optimizer_step(self) -> None:
        super().optimizer_step()
        super().optimizer_step()


class Scrambled(TrainingStep):
    def optimizer_step(self) -> None:
        with torch.no_grad():
            for p in self.module.parameters():
                if p.grad is not None:
                    p.grad.copy_(p.grad.flip(0))
        super().optimizer_step()


class ScaledLoss(TrainingStep):
    def forward_loss(self, batch: Any) -> torch.Tensor:
        return super().forward_loss(batch) * 1.01


BROKEN: dict[str, type[TrainingStep]] = {
    "broken: two updates a step": TwoSteps,
    "broken: scrambled gradients": Scrambled,
    "broken: loss 1% off": ScaledLoss,
}


def workload(model: nn.Module, x: torch.Tensor, name: str) -> Workload:
    wl, _ = build_workload(model, x, None, None, None, TuneOptions(), torch.device("cpu"), name)
    return wl


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MODELS))
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(f"MARGIN = {MARGIN:g}; ratio = deviation / the twins' deviation")
    worst_correct, least_broken = 0.0, math.inf
    for name in args.models.split(","):
        torch.manual_seed(0)
        model, x = MODELS[name]()
        wl = workload(model, x, name)
        started = time.perf_counter()
        oracle = Oracle(wl)
        print(f"\n{name}: {oracle.mode}")
        cases: dict[str, TrainingStep] = {}
        for knob, settings in KNOBS.items():
            if settings.channels_last and x.dim() != 4:
                continue
            cases[knob] = TrainingStep(wl, settings)
        cases |= {label: cls(wl) for label, cls in BROKEN.items()}
        for label, step in cases.items():
            result = oracle.judge(step)
            verdict = "correct" if result.ok else f"incorrect ({result.problem})"
            print(f"  {label:28} ratio {result.ratio:8.3g}  {verdict}")
            if label.startswith("broken"):
                least_broken = min(least_broken, result.ratio)
            else:
                worst_correct = max(worst_correct, result.ratio)
        print(f"  ({time.perf_counter() - started:.1f} s)")
    print(f"\nlargest ratio of a correct knob: {worst_correct:.3g}; smallest of a broken step: "
          f"{least_broken:.3g}; MARGIN {MARGIN:g}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
