"""wiring: the model is wired as its parts say. Four bugs that leave every other check
quiet, each found from what the model does (:mod:`._wiring_probes`):

- **a weight that never trains**: a buffer passed as a layer's ``weight``/``bias``
  (``register_buffer("weight", ...)`` where ``nn.Parameter`` was meant), or a buffer
  named as a weight in a matrix product; buffers forward updates (EMA codebooks) and
  fixed position tables are left alone;
- **a residual added twice**: a repeated block whose layers are all set to zero still
  multiplies its input by 2 (``x + (x + f(x))``); a residual block passes it once;
- **attention normalised over the wrong axis**: softmax weights summed by the next
  matrix product over another dim than the one that sums to one (queries instead of
  keys in spatial attention);
- **a broken weight tie**: the config asks for tied embeddings but the input and output
  embeddings are separate parameters, or two trainable parameters hold exactly the
  same values without being one (a ``Parameter`` copied instead of shared), or two
  parameters share memory without being one (``b.data = a.data``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from torchwise.doctor.checks._wiring_probes import (
    AxisFinding,
    SkipGain,
    SoftmaxWatch,
    WeightWatch,
    copied_parameters,
    shared_storage,
    skip_gain,
)
from torchwise.doctor.checks.base import Check, Run, Verdict
from torchwise.doctor.context import Context
from torchwise.doctor.report import Status
from torchwise.hooks import ModuleCall, module_calls

#: a skip path this strong (with the block's layers zeroed, y = gain * x) is doubled
DOUBLED_GAIN = 1.5
#: how exactly y must be a multiple of x to call it a plain skip path
MISFIT = 1e-2
#: buffers named like this are weights when they feed a matrix product
WEIGHT_NAMES = ("weight", "bias", "kernel")
#: at most this many repeated blocks are probed (one call each)
MAX_BLOCKS = 32


@dataclass
class WiringM:
    buffers_as_weights: dict[str, str] = field(default_factory=dict)  # name -> how used
    gains: list[SkipGain] = field(default_factory=list)
    axis: list[AxisFinding] = field(default_factory=list)
    softmaxes_consumed: int = 0
    config_tie_broken: tuple[str, str] | None = None
    copies: list[tuple[str, str]] = field(default_factory=list)
    shared: list[tuple[str, str]] = field(default_factory=list)


@dataclass(frozen=True)
class Finding:
    status: Status
    text: str
    where: list[str]
    cause: str


def repeated_blocks(model: nn.Module) -> list[str]:
    """``layers.0``, ``layers.1``, ...: children of a ModuleList/Sequential that repeat a type."""
    found = []
    for name, module in model.named_modules():
        if not isinstance(module, (nn.ModuleList, nn.Sequential)):
            continue
        children = list(module.named_children())
        types = [type(child) for _, child in children]
        for key, child in children:
            if types.count(type(child)) >= 2 and any(True for _ in child.parameters()):
                found.append(f"{name}.{key}" if name else key)
    return found[:MAX_BLOCKS]


def _position_table(name: str) -> bool:
    parts = [p for part in name.lower().split(".") for p in part.split("_")]
    return any(p.startswith(("pos", "position")) for p in parts)


class Wiring(Check[WiringM]):
    cost = "1 fwd watched, 1 call per repeated block, +1 fwd when a buffer feeds a layer"

    def measure(self, run: Run) -> WiringM:
        ctx = run.ctx
        m = WiringM()
        named = list(ctx.model.named_parameters(remove_duplicate=False))
        m.config_tie_broken = _config_tie(ctx.model)
        m.copies = copied_parameters(named)
        m.shared = shared_storage(named)
        blocks = set(repeated_blocks(ctx.model))
        inputs: dict[str, tuple[tuple[Any, ...], dict[str, Any]]] = {}

        def entered(call: ModuleCall) -> None:
            if call.name in blocks and call.name not in inputs:
                inputs[call.name] = (call.args, dict(call.kwargs))

        ctx.model.eval()
        ctx.reseed()
        args, kwargs = ctx.fresh_inputs()
        weights = WeightWatch()
        with module_calls(ctx.model, on_enter=entered) as calls:
            softmax = SoftmaxWatch(calls.stack, type(ctx.model).__name__)
            with torch.no_grad(), weights, softmax:
                ctx.model(*args, **kwargs)
        m.axis, m.softmaxes_consumed = softmax.findings, softmax.consumed
        m.buffers_as_weights = _buffers_as_weights(ctx, weights.as_weight)
        for name, (block_args, block_kwargs) in inputs.items():
            gain = skip_gain(ctx.model.get_submodule(name), name, block_args, block_kwargs)
            if gain is not None:
                m.gains.append(gain)
        return m

    def judge(self, m: WiringM) -> Verdict:
        evidence: dict[str, Any] = {
            "repeated_blocks_probed": len(m.gains),
            "softmax_outputs_followed": m.softmaxes_consumed,
        }
        doubled = [g for g in m.gains if _doubled(g)]
        if m.gains:
            evidence["skip_gains"] = {g.block: round(g.gain, 3) for g in m.gains[:6]}
        findings: list[Finding] = []
        if m.config_tie_broken:
            inp, out = m.config_tie_broken
            findings.append(Finding(
                Status.FAIL,
                f"the config ties the word embeddings, but `{inp}` and `{out}` are separate "
                "parameters",
                [inp, out],
                "a Parameter replaced after tie_weights(), or an output layer built with its "
                "own weight",
            ))  # fmt: skip
        if m.copies:
            findings.append(Finding(
                Status.WARN,
                f"{len(m.copies)} pairs of trainable parameters hold exactly the same values "
                "without being one parameter: a tie broken by copying; they train apart from "
                "the first step",
                [f"{x} = {y}" for x, y in m.copies[:6]],
                "nn.Parameter(other.weight.clone()) or load_state_dict instead of assigning "
                "the same Parameter (b.weight = a.weight)",
            ))  # fmt: skip
        if m.shared:
            findings.append(Finding(
                Status.WARN,
                f"{len(m.shared)} pairs of distinct parameters share memory (b.data = a.data): "
                "the optimizer updates that memory twice per step",
                [f"{x} ~ {y}" for x, y in m.shared[:6]],
                "a tie made through .data instead of assigning the Parameter",
            ))  # fmt: skip
        if m.buffers_as_weights:
            findings.append(Finding(
                Status.WARN,
                f"{len(m.buffers_as_weights)} buffers are used as layer weights, so they never "
                "train",
                sorted(m.buffers_as_weights),
                "register_buffer(...) where nn.Parameter(...) was meant",
            ))  # fmt: skip
        if doubled:
            findings.append(Finding(
                Status.WARN,
                f"{len(doubled)} repeated blocks pass their input through {doubled[0].gain:.2g} "
                "times instead of once: the residual is added twice",
                [g.block for g in doubled],
                "x = x + block(x) where block already returns x + f(x), or `return out + x` "
                "after out += x",
            ))  # fmt: skip
        if m.axis:
            first = m.axis[0]
            findings.append(Finding(
                Status.WARN,
                f"attention weights normalised over dim {first.softmax_dim} of "
                f"{list(first.shape)} are summed over dim {first.summed_dim} by the next matrix "
                f"product (aten.{first.op} in `{first.module}`)",
                list(dict.fromkeys(f.module for f in m.axis)),
                "softmax over the wrong dim (dim=1 instead of -1 for (B, queries, keys) "
                "scores), or the weights transposed before the product",
            ))  # fmt: skip
        if not findings:
            return Verdict(Status.PASS, _clean_summary(m), evidence=evidence)
        status = Status.FAIL if any(f.status is Status.FAIL for f in findings) else Status.WARN
        if m.buffers_as_weights:
            evidence["buffers_as_weights"] = m.buffers_as_weights
        if m.axis:
            evidence["softmax_axis"] = [
                f"softmax(dim={f.softmax_dim}) of {list(f.shape)} summed over dim "
                f"{f.summed_dim} in {f.module}" for f in m.axis[:4]
            ]  # fmt: skip
        return Verdict(
            status,
            "; ".join(f.text for f in findings),
            evidence=evidence,
            where=[w for f in findings for w in f.where][:12],
            causes=[f.cause for f in findings],
            fix="make trained tensors nn.Parameters; add each residual once; take softmax over "
            "the keys (dim=-1 of (B, queries, keys)); tie by assigning the same Parameter",
        )


def _doubled(g: SkipGain) -> bool:
    return g.homogeneous and g.misfit < MISFIT and g.gain >= DOUBLED_GAIN


def _clean_summary(m: WiringM) -> str:
    parts = []
    if m.gains:
        parts.append(f"{len(m.gains)} repeated blocks pass their input through their skip "
                     "path at most once")  # fmt: skip
    if m.softmaxes_consumed:
        parts.append(f"{m.softmaxes_consumed} softmax outputs are summed over the dim they "
                     "normalise")  # fmt: skip
    parts.append("no buffer is used as a layer weight and no parameter is a copy of another")
    return "; ".join(parts) + (
        " (fails on a tie the config asks for that is broken; warns on a doubled residual, a "
        "softmax summed over another dim, a buffer used as a weight, a copied parameter)"
    )


def _config_tie(model: nn.Module) -> tuple[str, str] | None:
    """(input, output) embedding names when the config ties them and they are not tied."""
    config = getattr(model, "config", None)
    text_config = getattr(config, "get_text_config", None)
    tied = getattr(text_config() if callable(text_config) else config, "tie_word_embeddings", None)
    getters = (getattr(model, "get_input_embeddings", None),
               getattr(model, "get_output_embeddings", None))  # fmt: skip
    if tied is not True or not all(callable(g) for g in getters):
        return None
    try:
        inp, out = (g() for g in getters)  # type: ignore[misc]
    except Exception:
        return None
    w_in, w_out = getattr(inp, "weight", None), getattr(out, "weight", None)
    if not isinstance(w_in, nn.Parameter) or not isinstance(w_out, nn.Parameter):
        return None
    if w_in is w_out or w_in.shape != w_out.shape:
        return None
    names = {id(p): n for n, p in model.named_parameters(remove_duplicate=False)}
    return names.get(id(w_in), "input embeddings"), names.get(id(w_out), "output embeddings")


def _buffers_as_weights(ctx: Context, used: dict[int, str]) -> dict[str, str]:
    """Floating buffers a layer function took as its weight/bias, minus those forward
    updates in training (EMA statistics) and position tables."""
    found = {
        name: used[id(buf)]
        for name, buf in ctx.model.named_buffers()
        if id(buf) in used and buf.is_floating_point() and buf.numel() >= 2
        and not _position_table(name)
        and (used[id(buf)].startswith("F.") or name.rsplit(".", 1)[-1] in WEIGHT_NAMES)
    }  # fmt: skip
    if not found:
        return {}
    buffers = dict(ctx.model.named_buffers())
    before = {name: buffers[name].detach().clone() for name in found}
    ctx.reseed()
    with torch.no_grad():
        ctx.forward(train=True)
    return {n: how for n, how in found.items() if torch.equal(before[n], buffers[n])}
