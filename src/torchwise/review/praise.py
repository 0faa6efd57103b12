"""What the reviewed code already does well, from evidence in the source.

An expert's written review says what is right, not only what is wrong. The
:class:`PraiseObserver` rides the engine's single pass like a rule (it is not
registered, so it never produces findings) and records good practices it can
see: gradients zeroed, models put in eval mode, ``torch.no_grad`` around
evaluation, ``weights_only=True`` loads, seeding, ``torch.amp``, and so on.
It rides every review's pass (a dictionary lookup per call) and its result is
cached with the findings, so a written review never analyses a file again.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from torchwise.review.engine import facts as F
from torchwise.review.engine.context import Context
from torchwise.review.engine.syntax import is_false, is_true, keyword
from torchwise.review.registry import Rule


@dataclass(frozen=True)
class Signal:
    key: str
    text: str  # one sentence for the report
    #: finding codes that contradict it: when any is present, do not praise
    contradicted_by: tuple[str, ...] = ()


SIGNALS: dict[str, Signal] = {
    signal.key: signal
    for signal in (
        Signal(
            "zero-grad", "Gradients are reset every step with `zero_grad()`.", ("TW101", "TW102")
        ),
        Signal("eval-mode", "Models are switched to evaluation mode with `.eval()`.", ("TW104",)),
        Signal(
            "train-mode", "Models are switched back to training mode with `.train()`.", ("TW105",)
        ),
        Signal(
            "no-grad",
            "Evaluation runs under `torch.no_grad()`/`torch.inference_mode()`.",
            ("TW108",),
        ),
        Signal(
            "weights-only",
            "Checkpoints are loaded with `torch.load(..., weights_only=True)`.",
            ("TW301",),
        ),
        Signal("safetensors", "Weights are stored with safetensors, which cannot run code.", ()),
        Signal("seeding", "Runs are seeded (`torch.manual_seed`, `seed_everything`, ...).", ()),
        Signal("deterministic", "Deterministic algorithms are requested explicitly.", ()),
        Signal(
            "amp", "Mixed precision uses the current `torch.amp` API.", ("TW109", "TW110", "TW401")
        ),
        Signal(
            "unscale", "Gradients are unscaled before clipping (`scaler.unscale_`).", ("TW109",)
        ),
        Signal("clip-grad", "Gradient norms are clipped (`clip_grad_norm_`).", ()),
        Signal(
            "state-dict-save",
            "Checkpoints save `state_dict()`s rather than pickled modules.",
            ("TW602",),
        ),
        Signal(
            "set-epoch", "Distributed samplers are reshuffled each epoch (`set_epoch`).", ("TW111",)
        ),
        Signal(
            "loader-workers", "Data loading runs in worker processes (`num_workers`).", ("TW201",)
        ),
        Signal("register-buffer", "Module state is registered with `register_buffer`.", ("TW121",)),
        Signal("compile", "Models are compiled with `torch.compile`.", ()),
        Signal(
            "checkpoint-reentrant", "Activation checkpointing sets `use_reentrant` explicitly.", ()
        ),
    )
}

_CALLS = {
    "torch.manual_seed": "seeding",
    "torch.cuda.manual_seed": "seeding",
    "torch.cuda.manual_seed_all": "seeding",
    "torch.random.manual_seed": "seeding",
    "random.seed": "seeding",
    "numpy.random.seed": "seeding",
    "numpy.random.default_rng": "seeding",
    "lightning.seed_everything": "seeding",
    "lightning.pytorch.seed_everything": "seeding",
    "pytorch_lightning.seed_everything": "seeding",
    "transformers.set_seed": "seeding",
    "torch.use_deterministic_algorithms": "deterministic",
    "torch.no_grad": "no-grad",
    "torch.inference_mode": "no-grad",
    "torch.autograd.no_grad": "no-grad",
    "torch.amp.autocast": "amp",
    "torch.autocast": "amp",
    "torch.amp.GradScaler": "amp",
    "torch.nn.utils.clip_grad_norm_": "clip-grad",
    "torch.nn.utils.clip_grad_value_": "clip-grad",
    "safetensors.torch.save_file": "safetensors",
    "safetensors.torch.load_file": "safetensors",
    "safetensors.torch.save_model": "safetensors",
    "safetensors.torch.load_model": "safetensors",
    "safetensors.safe_open": "safetensors",
    "torch.compile": "compile",
}


@dataclass
class Praise:
    """Good practices found in one file: signal key -> 1-based lines."""

    lines: dict[str, list[int]] = field(default_factory=dict)

    def add(self, key: str, node: ast.AST) -> None:
        self.lines.setdefault(key, []).append(getattr(node, "lineno", 1))


class PraiseObserver(Rule):
    """Subscribes to calls (and bare ``@torch.no_grad`` decorators); reports nothing."""

    code = "TW000"  # never registered; the engine only needs the handlers
    name = "praise"

    def __init__(self) -> None:
        self.praise = Praise()

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        qualname = ctx.call_name(node)
        key = _CALLS.get(qualname or "")
        if key is not None:
            self.praise.add(key, node)
        if qualname == "torch.load" and is_true(_value(node, "weights_only")):
            self.praise.add("weights-only", node)
        elif qualname == "torch.save" and node.args and _saves_state_dict(node.args[0]):
            self.praise.add("state-dict-save", node)
        elif qualname == "torch.utils.data.DataLoader":
            workers = keyword(node, "num_workers")
            if workers is not None and not (
                isinstance(workers.value, ast.Constant) and workers.value.value == 0
            ):
                self.praise.add("loader-workers", node)
        elif qualname == "torch.utils.checkpoint.checkpoint" and keyword(node, "use_reentrant"):
            self.praise.add("checkpoint-reentrant", node)
        func = node.func
        if not isinstance(func, ast.Attribute):
            return
        method, receiver_kind = func.attr, ctx.kind_of(func.value)
        if method == "zero_grad" and not is_false(_value(node, "set_to_none")):
            self.praise.add("zero-grad", node)
        elif method == "eval" and not node.args and receiver_kind == F.MODULE:
            self.praise.add("eval-mode", node)
        elif method == "train" and receiver_kind == F.MODULE and not _false_arg(node):
            self.praise.add("train-mode", node)
        elif method == "unscale_" and receiver_kind == F.SCALER:
            self.praise.add("unscale", node)
        elif method == "set_epoch" and receiver_kind in (F.SAMPLER, None):
            self.praise.add("set-epoch", node)
        elif method == "register_buffer" and ctx.dotted(func.value) == "self":
            self.praise.add("register-buffer", node)

    def visit_FunctionDef(self, node: ast.FunctionDef, ctx: Context) -> None:
        for decorator in node.decorator_list:
            if (
                not isinstance(decorator, ast.Call)
                and _CALLS.get(ctx.qualname(decorator) or "") == "no-grad"
            ):
                self.praise.add("no-grad", decorator)


def _value(call: ast.Call, name: str) -> ast.expr | None:
    item = keyword(call, name)
    return None if item is None else item.value


def _false_arg(call: ast.Call) -> bool:
    return bool(call.args) and is_false(call.args[0])


def _saves_state_dict(value: ast.expr) -> bool:
    def is_state_dict(expr: ast.expr | None) -> bool:
        return (
            isinstance(expr, ast.Call)
            and isinstance(expr.func, ast.Attribute)
            and expr.func.attr == "state_dict"
        )

    if isinstance(value, ast.Dict):
        return any(is_state_dict(item) for item in value.values)
    return is_state_dict(value)
