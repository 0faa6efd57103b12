"""train-eval-gap: how train and eval outputs differ, which layer causes it, and two bugs.

Informational on healthy models: dropout and BatchNorm make train and eval
outputs differ by design, and at initialisation BatchNorm's running statistics
are still mean 0 / variance 1, so the gap can be large (ResNet-50 at init: about
30 in relative L2). It warns only on BatchNorm that sees one sample in train mode
and on dropout that drops 80% or more (TensorFlow's ``keep_prob`` taken as ``p``);
it fails when train mode crashes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from torchwise.doctor.checks._compare import relative_gap
from torchwise.doctor.checks.base import Check, Run, Verdict
from torchwise.doctor.context import primary_output
from torchwise.doctor.report import Status
from torchwise.doctor.trace import Trace, recording
from torchwise.hooks import ModuleCall, module_calls
from torchwise.tensortree import tensors_in

_MODE_LAYERS = (nn.modules.dropout._DropoutNd, nn.modules.batchnorm._BatchNorm)
#: dropout at or above this p warns: p is the probability of *dropping*
HEAVY_DROPOUT = 0.8


@dataclass
class TrainEvalM:
    batch: int | None
    layers: dict[str, str]  # name -> "BatchNorm2d" / "Dropout(p=0.1)"
    gap: float = 0.0
    by_layer: dict[str, float] = field(default_factory=dict)
    bn_batches: dict[str, int] = field(default_factory=dict)
    heavy_dropout: dict[str, float] = field(default_factory=dict)
    train_error: str | None = None


def _gap_added_by(layers: dict[str, str], a: Trace, b: Trace) -> dict[str, float]:
    """For each mode-dependent layer, how much train/eval gap it adds to what it receives."""
    added: dict[str, float] = {}
    for ra, rb in zip(a.records, b.records, strict=False):
        if ra.name not in layers or ra.name in added or not ra.outputs or not rb.outputs:
            continue
        out_gap = relative_gap(ra.outputs[0], rb.outputs[0])
        in_gap = relative_gap(ra.inputs[0], rb.inputs[0]) if ra.inputs and rb.inputs else 0.0
        added[ra.name] = max(out_gap - in_gap, 0.0)
    return added


def _describe(module: nn.Module) -> str:
    if isinstance(module, nn.modules.dropout._DropoutNd):
        return f"{type(module).__name__}(p={module.p:g})"
    return type(module).__name__


class TrainEvalGap(Check[TrainEvalM]):
    cost = "2 fwd, recorded module by module"

    def measure(self, run: Run) -> TrainEvalM:
        ctx = run.ctx
        layers = [(n, m) for n, m in ctx.model.named_modules() if isinstance(m, _MODE_LAYERS)]
        m = TrainEvalM(ctx.batch_size, {n: _describe(mod) for n, mod in layers})
        m.heavy_dropout = {
            n: mod.p
            for n, mod in layers
            if isinstance(mod, nn.modules.dropout._DropoutNd) and mod.p >= HEAVY_DROPOUT
        }
        norms = [n for n, mod in layers if isinstance(mod, nn.modules.batchnorm._BatchNorm)]

        def batch_of(call: ModuleCall) -> None:
            # BatchNorm's input is (N, C, ...): dim 0 is what it averages over
            sizes = [t.shape[0] for t in tensors_in(call.args) if t.ndim]
            if sizes:
                m.bn_batches[call.name] = min(m.bn_batches.get(call.name, sizes[0]), sizes[0])

        with torch.no_grad(), module_calls(ctx.model, on_enter=batch_of, only=norms):
            with recording(ctx.model) as in_eval:
                y_eval = primary_output(ctx.forward(train=False))
            ctx.reseed()
            try:
                with recording(ctx.model) as in_train:
                    y_train = primary_output(ctx.forward(train=True))
            except Exception as exc:
                m.train_error = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
                return m
        m.gap = relative_gap(y_eval, y_train)
        m.by_layer = _gap_added_by(m.layers, in_eval, in_train)
        return m

    def judge(self, m: TrainEvalM) -> Verdict:
        single = [n for n, b in m.bn_batches.items() if b == 1]
        evidence: dict[str, Any] = {"relative_gap": m.gap, "mode_dependent_layers": len(m.layers)}
        if m.by_layer:
            top = sorted(m.by_layer.items(), key=lambda kv: -kv[1])[:6]
            evidence["gap_added_by_layer"] = dict(top)
        if m.train_error:
            evidence["batch_norm_batch_sizes"] = m.bn_batches
            return Verdict(
                Status.FAIL,
                f"forward fails in train mode: {m.train_error}",
                evidence=evidence,
                where=single,
                causes=["BatchNorm fed a batch of one sample (or one value per channel)"]
                if single
                else ["code that runs only in train mode (self.training branches) raises"],
                fix="feed BatchNorm whole batches, or use LayerNorm/GroupNorm there"
                if single
                else "run the model in train mode by hand and fix the exception",
            )
        if single:
            evidence["batch_norm_batch_sizes"] = m.bn_batches
            return Verdict(
                Status.WARN,
                f"{len(single)} BatchNorm layers see a batch of 1 in train mode"
                + (
                    " (the whole batch is 1)"
                    if m.batch == 1
                    else f" although the batch is {m.batch}"
                ),
                evidence=evidence,
                where=single,
                causes=[
                    "forward loops over samples and calls BatchNorm per sample",
                    "BatchNorm after a reduction over the batch, or training with batch size 1",
                ],
                fix="call BatchNorm on the whole batch; for per-sample paths use LayerNorm, "
                "GroupNorm or InstanceNorm",
            )
        if m.heavy_dropout:
            return Verdict(
                Status.WARN,
                f"{len(m.heavy_dropout)} dropout layers drop {HEAVY_DROPOUT:.0%} or more of their "
                "inputs in training",
                evidence={**evidence, "dropout_p": m.heavy_dropout},
                where=list(m.heavy_dropout),
                causes=[
                    "p taken as the keep probability (TensorFlow's keep_prob); in PyTorch p is "
                    "the probability of dropping"
                ],
                fix="use p = 1 - keep_prob (typically 0.1-0.5)",
            )
        return Verdict(Status.PASS, self._explain(m), evidence=evidence)

    def _explain(self, m: TrainEvalM) -> str:
        rule = (
            f"informational: warns only on BatchNorm over one sample or dropout p >= "
            f"{HEAVY_DROPOUT:g}"
        )
        if not m.layers:
            return f"train and eval outputs are the same: no dropout or BatchNorm ({rule})"
        if m.gap == 0:
            return (
                f"train and eval outputs are identical: none of the {len(m.layers)} dropout/"
                f"BatchNorm layers changes them here ({rule})"
            )
        text = f"train vs eval outputs differ by {m.gap:.3g} (relative L2)"
        if m.by_layer and max(m.by_layer.values()) > 0:
            top = max(m.by_layer, key=m.by_layer.__getitem__)
            kind = m.layers[top]
            why = (
                "batch statistics in train mode vs running statistics in eval, which start at "
                "mean 0 / variance 1, so a large gap before training is expected"
                if "Norm" in kind
                else "dropout is active only in train mode"
            )
            text += f", mostly from `{top}` ({kind}: {why})"
        return f"{text}; {rule}"
