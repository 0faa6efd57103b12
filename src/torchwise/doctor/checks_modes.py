"""Mode and reproducibility checks: eval-determinism, train-eval-gap, determinism."""

from __future__ import annotations

import random
from typing import Any

import torch
from torch import nn

from torchwise.doctor.context import Context, backward, tensors_in
from torchwise.doctor.registry import register, result
from torchwise.doctor.report import CheckResult, Status
from torchwise.doctor.state import Snapshot
from torchwise.doctor.trace import Trace, first_divergence, recording


def _max_diff(a: Any, b: Any) -> float:
    worst = 0.0
    for x, y in zip(tensors_in(a), tensors_in(b), strict=False):
        if x.shape != y.shape:
            return float("inf")
        if x.is_floating_point():
            worst = max(
                worst,
                float(
                    (x.float() - y.float()).abs().nan_to_num(0.0).max(),
                )
                if x.numel()
                else 0.0,
            )
        elif not torch.equal(x, y):
            return float("inf")
    return worst


def _where(a: Trace, b: Trace) -> tuple[str, str] | None:
    return first_divergence(a, b, lambda t: t)


@register("eval-determinism", title="two eval-mode forwards agree", cost="2 fwd")
def eval_determinism(ctx: Context) -> CheckResult:
    with torch.no_grad():
        with recording(ctx.model) as first:
            y0 = ctx.forward(train=False)
        with recording(ctx.model) as second:
            y1 = ctx.forward(train=False)
    diff = _max_diff(y0, y1)
    if diff == 0.0:
        return result(
            "eval-determinism",
            Status.PASS,
            "two forwards in eval mode give bit-identical outputs",
            evidence={"max_abs_diff": 0.0},
        )
    where = _where(first, second)
    evidence: dict[str, Any] = {"max_abs_diff": diff}
    if where:
        evidence["first_divergence"] = where[1]
    return result(
        "eval-determinism",
        Status.FAIL,
        f"two forwards in eval mode differ (max abs diff {diff:.3g})",
        evidence=evidence,
        where=[where[0]] if where else [],
        causes=[
            "F.dropout(x, p) without training=self.training (its default is training=True)",
            "random noise or augmentation in forward that ignores self.training",
            "state carried between calls on self (a cached hidden state, a call counter)",
        ],
        fix="use nn.Dropout modules or F.dropout(x, p, training=self.training); gate any "
        "randomness on self.training; keep no per-call state on the module",
    )


_MODE_LAYERS = (nn.modules.dropout._DropoutNd, nn.modules.batchnorm._BatchNorm)


@register("train-eval-gap", title="how train and eval outputs differ, and why", cost="2+ fwd")
def train_eval_gap(ctx: Context) -> CheckResult:
    layers = [(n, m) for n, m in ctx.model.named_modules() if isinstance(m, _MODE_LAYERS)]
    bn_batches: dict[str, int] = {}
    handles = []
    for name, module in layers:
        if isinstance(module, nn.modules.batchnorm._BatchNorm):

            def pre(mod: nn.Module, args: tuple[Any, ...], name: str = name) -> None:
                sizes = [t.shape[0] for t in tensors_in(args) if t.ndim]
                if sizes:
                    bn_batches[name] = min(bn_batches.get(name, sizes[0]), sizes[0])

            handles.append(module.register_forward_pre_hook(pre))
    try:
        with torch.no_grad():
            y_eval = ctx.forward(train=False)
            try:
                y_train = ctx.forward(train=True)
            except Exception as exc:
                single = [n for n, b in bn_batches.items() if b == 1]
                return result(
                    "train-eval-gap",
                    Status.FAIL,
                    f"forward fails in train mode: {type(exc).__name__}: {exc}",
                    where=single,
                    evidence={"batch_norm_batch_sizes": bn_batches},
                    causes=["BatchNorm fed a batch of one sample (or one value per channel)"],
                    fix="feed BatchNorm whole batches, or use LayerNorm/GroupNorm there",
                )
    finally:
        for h in handles:
            h.remove()
    a = [t for t in tensors_in(y_eval) if t.is_floating_point()]
    b = [t for t in tensors_in(y_train) if t.is_floating_point()]
    gap = _rel_gap(a[0], b[0]) if a and b else 0.0
    evidence: dict[str, Any] = {"relative_gap": gap, "mode_dependent_layers": len(layers)}
    per_layer: dict[str, float] = {}
    for name, module in layers[:24]:  # one forward per layer; enough to rank the culprits
        ctx.model.eval()
        module.train()
        with torch.no_grad():
            only = [t for t in tensors_in(ctx.forward_current()) if t.is_floating_point()]
        per_layer[name] = _rel_gap(a[0], only[0]) if a and only else 0.0
    if per_layer:
        top = sorted(per_layer.items(), key=lambda kv: -kv[1])[:6]
        evidence["gap_by_layer"] = dict(top)
    B = ctx.batch_size
    single = [n for n, b in bn_batches.items() if b == 1]
    heavy = [n for n, m in layers if isinstance(m, nn.modules.dropout._DropoutNd) and m.p >= 0.8]
    if single:
        evidence["batch_norm_batch_sizes"] = bn_batches
        return result(
            "train-eval-gap",
            Status.WARN,
            f"{len(single)} BatchNorm layers see a batch of 1 in train mode"
            + (" (the whole batch is 1)" if B == 1 else f" although the batch is {B}"),
            evidence=evidence,
            where=single,
            causes=[
                "forward loops over samples and calls BatchNorm per sample",
                "BatchNorm after a reduction over the batch, or training with batch size 1",
            ],
            fix="call BatchNorm on the whole batch; for per-sample paths use LayerNorm, "
            "GroupNorm or InstanceNorm",
        )
    if heavy:
        return result(
            "train-eval-gap",
            Status.WARN,
            f"{len(heavy)} dropout layers drop 80% or more of their inputs in training",
            evidence={**evidence, "dropout_p": {n: dict(layers)[n].p for n in heavy}},
            where=heavy,
            causes=[
                "p taken as the keep probability (TensorFlow's keep_prob); in PyTorch p "
                "is the probability of dropping"
            ],
            fix="use p = 1 - keep_prob (typically 0.1-0.5)",
        )
    summary = f"train vs eval relative output gap {gap:.3g}"
    if per_layer:
        summary += f", mostly from `{max(per_layer, key=per_layer.__getitem__)}`"
    elif gap == 0:
        summary += " (no dropout or batch norm)"
    return result("train-eval-gap", Status.PASS, summary, evidence=evidence)


def _rel_gap(a: torch.Tensor, b: torch.Tensor) -> float:
    if a.shape != b.shape:
        return float("inf")
    return float((a.float() - b.float()).norm() / a.float().norm().clamp_min(1e-12))


def _seeded_step(ctx: Context, seed: int, all_rngs: bool) -> tuple[Any, list[Any], Trace]:
    torch.manual_seed(seed)
    if all_rngs:
        random.seed(seed)
        try:
            import numpy as np

            np.random.seed(seed)
        except ImportError:  # pragma: no cover
            pass
    ctx.zero_grads()
    with recording(ctx.model, keep_inputs=True) as trace:
        out, loss = ctx.train_loss()
    if loss.requires_grad:
        backward(loss)
    grads = [None if p.grad is None else p.grad.clone() for p in ctx.model.parameters()]
    return [t.detach().clone() for t in tensors_in(out)], grads, trace


@register("determinism", title="same seed, same output and gradients", cost="2-4 fwd+bwd")
def determinism(ctx: Context) -> CheckResult:
    seed = ctx.options.seed
    start = Snapshot(ctx.model)  # both runs start from the same model state
    out0, g0, t0 = _seeded_step(ctx, seed, all_rngs=False)
    start.restore(rng=False)  # numpy/python RNGs move on, as in real training
    out1, g1, t1 = _seeded_step(ctx, seed, all_rngs=False)
    d_out, d_grad = (
        _max_diff(out0, out1),
        _max_diff([g for g in g0 if g is not None], [g for g in g1 if g is not None]),
    )
    evidence: dict[str, Any] = {"seed": seed, "output_diff": d_out, "grad_diff": d_grad}
    if d_out == 0.0 and d_grad == 0.0:
        return result(
            "determinism",
            Status.PASS,
            "torch.manual_seed reproduces the outputs and gradients exactly",
            evidence=evidence,
        )
    where = _where(t0, t1)
    if where:
        evidence["first_divergence"] = where[1]
    start.restore(rng=False)
    out2, _, _ = _seeded_step(ctx, seed, all_rngs=True)
    start.restore(rng=False)
    out3, _, _ = _seeded_step(ctx, seed, all_rngs=True)
    if _max_diff(out2, out3) == 0.0:
        return result(
            "determinism",
            Status.WARN,
            "forward draws from numpy or python `random`: torch.manual_seed alone does not "
            "reproduce it",
            evidence=evidence,
            where=[where[0]] if where else [],
            causes=["np.random / random used inside forward (noise, augmentation, sampling)"],
            fix="draw randomness with torch (torch.rand(..., device=x.device)) so one "
            "torch.manual_seed reproduces the run, and torch.utils.data seeds workers",
        )
    return result(
        "determinism",
        Status.FAIL,
        f"the same seed gives different results (output diff {d_out:.3g}, grad diff {d_grad:.3g})",
        evidence=evidence,
        where=[where[0]] if where else [],
        causes=[
            "a non-deterministic kernel (scatter_add/index_add on GPU, atomics)",
            "randomness from an unseeded source (os.urandom, time, a private Generator "
            "seeded at import)",
        ],
        fix="torch.use_deterministic_algorithms(True) names the op; seed every generator",
    )
