"""``summarize(model, args, kwargs)``: the measured facts about a model, as data.

Static facts (parameters, tied weights, buffers, dtypes) come from the module
tree; dynamic facts (shapes, FLOPs, activation memory) from one traced forward
(:mod:`torchwise.model.trace`), on meta by default, falling back to a fake-tensor
run and then a real CPU run when a model cannot run on meta, with the reason
recorded in ``notes``.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from typing import Any

import torch

from torchwise.errors import TorchwiseError, exception_line
from torchwise.model.attention import TARGETS
from torchwise.model.memory import TrainingMemory, training_memory
from torchwise.model.trace import ForwardError, TraceResult, trace

#: Bumped on any incompatible change to :meth:`ModelSummary.to_dict`'s layout.
SCHEMA_VERSION = 1
#: FLOP conventions: every product, or without attention's (see torchwise.model.flops).
CONVENTIONS = ("full", "no-attention")


@dataclass
class LayerInfo:
    """One module's row in the layer table (``name`` "" is the root)."""

    name: str
    type_name: str
    depth: int
    input_shapes: list[tuple[int, ...]]
    output_shapes: list[tuple[int, ...]]
    params_own: int
    params_total: int
    params_trainable: int
    trainable: bool | None  # None: no parameters; False also when only partly trainable
    flops: int
    #: the part of ``flops`` in attention (products of two activations), whatever
    #: the convention; under "no-attention" it is not included in ``flops``
    attention_flops: int
    activation_bytes: int
    calls: int


@dataclass
class ModelSummary:
    """Everything ``torchwise inspect`` reports; ``to_dict()`` is the JSON schema."""

    model_name: str
    layers: list[LayerInfo]
    total_params: int
    trainable_params: int
    shared_params: list[list[str]]
    buffer_count: int
    buffer_bytes: int
    param_bytes_by_dtype: dict[str, int]
    flops_forward: int
    macs_forward: int
    #: attention's share of the forward (products of two activations: QK^T and PV)
    attention_flops_forward: int
    #: "full" (every product) or "no-attention" (what the peers report; see flops.py)
    flops_convention: str
    flops_backward: int | None
    output_shapes: list[tuple[int, ...]]
    output_dtypes: list[str]
    input_shapes: list[tuple[int, ...]]
    device_used: str
    mode: str
    unsupported_ops: dict[str, int]
    peak_activation_bytes: int
    training: TrainingMemory | None
    notes: list[str] = field(default_factory=list)
    #: the device whose attention kernels a meta or fake run modelled; None for a real run
    memory_for: str | None = None
    #: F.scaled_dot_product_attention calls per kernel taken in that modelling (the
    #: training run's when there is one)
    attention_kernels: dict[str, int] = field(default_factory=dict)

    @property
    def param_bytes(self) -> int:
        return sum(self.param_bytes_by_dtype.values())

    @property
    def flops_training(self) -> int | None:
        """Forward + backward FLOPs of one training step (measured, not 3x guessed), in
        the full convention whatever ``flops_convention`` says (backward attention is
        not separated)."""
        if self.flops_backward is None:
            return None
        return self.flops_forward_full + self.flops_backward

    @property
    def flops_forward_full(self) -> int:
        """Forward FLOPs in the full convention (attention's products included)."""
        if self.flops_convention == "full":
            return self.flops_forward
        return self.flops_forward + self.attention_flops_forward

    def to_dict(self) -> dict[str, Any]:
        """The stable JSON form (see docs/inspect.md for the schema)."""
        data = {"schema_version": SCHEMA_VERSION, **asdict(self)}
        data.pop("training")
        data["param_bytes"] = self.param_bytes
        data["flops_training"] = self.flops_training
        data["macs_training"] = None if self.flops_training is None else self.flops_training // 2
        data["training_memory"] = None if self.training is None else self.training.to_dict()
        for key in ("output_shapes", "input_shapes"):
            data[key] = [list(s) for s in data[key]]
        for layer in data["layers"]:
            layer["input_shapes"] = [list(s) for s in layer["input_shapes"]]
            layer["output_shapes"] = [list(s) for s in layer["output_shapes"]]
        return data


def _unique_params(module: torch.nn.Module) -> list[torch.nn.Parameter]:
    return list(module.parameters())  # parameters() yields each tied tensor once


def _shared_groups(model: torch.nn.Module) -> list[list[str]]:
    names: dict[int, list[str]] = defaultdict(list)
    for name, param in model.named_parameters(remove_duplicate=False):
        names[id(param)].append(name)
    return [group for group in names.values() if len(group) > 1]


@dataclass(frozen=True)
class _Totals:
    flops: int = 0
    attention: int = 0
    activation_bytes: int = 0

    def __add__(self, other: _Totals) -> _Totals:
        return _Totals(
            self.flops + other.flops,
            self.attention + other.attention,
            self.activation_bytes + other.activation_bytes,
        )


def _layer_totals(model: torch.nn.Module, result: TraceResult) -> dict[str, _Totals]:
    """Each module's FLOPs, attention FLOPs and activation bytes. Modules never called
    themselves (``ModuleList``, a ``Sequential`` iterated by hand) get the sums over
    their outermost called descendants."""
    totals: dict[str, _Totals] = {}

    def visit(prefix: str, module: torch.nn.Module) -> _Totals:
        record = result.records.get(prefix)
        sums = [visit(f"{prefix}.{n}" if prefix else n, c) for n, c in module.named_children()]
        if record is not None and record.calls:
            own = _Totals(record.flops, record.attention_flops, record.activation_bytes)
        else:
            own = sum(sums, _Totals())
        totals[prefix] = own
        return own

    visit("", model)
    return totals


def _static_layers(model: torch.nn.Module, result: TraceResult, convention: str) -> list[LayerInfo]:
    totals = _layer_totals(model, result)
    layers = []
    for name, module in model.named_modules():
        own = list(module.parameters(recurse=False))
        total = _unique_params(module)
        trainable = sum(p.numel() for p in total if p.requires_grad)
        count = sum(p.numel() for p in total)
        record = result.records.get(name)
        measured = totals.get(name, _Totals())
        flops = measured.flops - (measured.attention if convention == "no-attention" else 0)
        layers.append(
            LayerInfo(
                name=name,
                type_name=type(module).__name__,
                depth=0 if not name else name.count(".") + 1,
                input_shapes=record.input_shapes if record else [],
                output_shapes=record.output_shapes if record else [],
                params_own=sum(p.numel() for p in own),
                params_total=count,
                params_trainable=trainable,
                trainable=None if count == 0 else trainable == count,
                flops=flops,
                attention_flops=measured.attention,
                activation_bytes=measured.activation_bytes,
                calls=record.calls if record else 0,
            )
        )
    return layers


def _run(
    model: torch.nn.Module,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    device: str,
    train: bool,
    backward: bool,
    notes: list[str],
    memory_for: str,
) -> TraceResult:
    if device == "cpu (fake tensors)":
        return trace(model, args, kwargs, device=torch.device("meta"), train=train,
                     backward=backward, fake=True, attention=memory_for)  # fmt: skip
    dev = torch.device(device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise TorchwiseError(
            "--device cuda: no CUDA device is available here", hint="use meta or cpu"
        )
    try:
        return trace(model, args, kwargs, device=dev, train=train, backward=backward,
                     attention=memory_for)  # fmt: skip
    except ForwardError as exc:
        if dev.type != "meta":
            raise
        reason = _reason(exc)
    # Some forwards cannot run on meta. Fake tensors that claim to be on the CPU
    # cover code that creates CPU tensors or checks devices; data-dependent code
    # (.item(), control flow on values) needs real tensors. Each fallback is noted.
    try:
        result = trace(model, args, kwargs, device=dev, train=train, backward=backward,
                       fake=True, attention=memory_for)  # fmt: skip
    except ForwardError as exc:
        if not all(p.device.type != "meta" for p in model.parameters()):
            raise  # shape-only weights: nothing real to fall back to
        fake_reason = _reason(exc)
    else:
        notes.append(f"the meta-device forward failed ({reason}); measured with fake tensors")
        return result
    # If the real run fails too, its error (CPU kernels explain shape errors best) shows.
    result = trace(model, args, kwargs, device=torch.device("cpu"), train=train, backward=backward)
    notes.append(
        f"the meta-device forward failed ({reason}) and so did fake tensors ({fake_reason}); "
        "measured with a real CPU forward"
    )
    return result


#: A note quotes at most this much of an exception's first line.
REASON_LENGTH = 160


def _reason(error: ForwardError) -> str:
    """Why a run failed, short enough for a note: the exception's first line, cut
    before any tensor repr (FakeTensor's errors print whole tensors)."""
    cause = error.__cause__ or error
    line = exception_line(cause)
    cut = re.search(r"\b(?:Fake)?[Tt]ensor\(|\bParameter containing", line)
    if cut is not None:
        line = line[: cut.start()].rstrip(" ,:(") + " ..."
    return line if len(line) <= REASON_LENGTH else line[: REASON_LENGTH - 3] + "..."


def summarize(
    model: torch.nn.Module,
    args: tuple[Any, ...] | list[Any] | torch.Tensor = (),
    kwargs: dict[str, Any] | None = None,
    *,
    device: str = "meta",
    depth: int | None = None,
    mode: str = "eval",
    estimate_training: bool = True,
    name: str | None = None,
    flops_convention: str = "full",
    memory_for: str = "cuda",
) -> ModelSummary:
    """Measure ``model(*args, **kwargs)`` without touching ``model``.

    ``device``: ``"meta"`` (default: no compute, no memory), ``"cpu"`` or
    ``"cuda"``. ``mode``: ``"eval"`` (inference under ``no_grad``) or ``"train"``.
    ``depth`` keeps layers at most that deep (root is 0). ``estimate_training``
    also runs a training-mode forward and backward to measure saved activations
    and backward FLOPs (in ``"train"`` mode that is the same run).
    ``flops_convention``: ``"full"`` counts every product, attention's included;
    ``"no-attention"`` leaves out products of two activations (attention's QK^T
    and PV), as fvcore, ptflops and timm's model cards do. The attention share
    is measured either way (``attention_flops_forward``); backward FLOPs always
    count every product. ``args`` may be one tensor (``summarize(model, x)``, as
    torchinfo's ``input_data``) or a list of arguments. ``memory_for``
    (``"cuda"`` or ``"cpu"``): on meta and fake tensors, the device whose
    ``F.scaled_dot_product_attention`` kernels the memory figures model (the fused
    kernels keep no ``T x T`` scores for backward; see
    :mod:`torchwise.model.attention`); a real cpu/cuda run takes its real kernels.
    """
    if isinstance(args, torch.Tensor):
        args = (args,)
    elif isinstance(args, list):
        args = tuple(args)
    elif not isinstance(args, tuple):
        raise TorchwiseError(
            f"args must be a tensor or a tuple of forward's arguments, not {type(args).__name__}"
        )
    if mode not in ("eval", "train"):
        raise TorchwiseError(f"mode must be 'eval' or 'train', not {mode!r}")
    if memory_for not in TARGETS:
        raise TorchwiseError(f"memory_for must be one of {', '.join(TARGETS)}, not {memory_for!r}")
    if flops_convention not in CONVENTIONS:
        raise TorchwiseError(
            f"flops_convention must be one of {', '.join(CONVENTIONS)}, not {flops_convention!r}"
        )
    kwargs = kwargs or {}
    notes: list[str] = []
    train = mode == "train"
    result = _run(model, args, kwargs, device, train, train and estimate_training, notes,
                  memory_for)  # fmt: skip
    train_result = result
    if estimate_training and not train:
        train_result = _run(model, args, kwargs, result.device, True, True, notes, memory_for)
    params = _unique_params(model)
    by_dtype: dict[str, int] = defaultdict(int)
    for param in params:
        by_dtype[str(param.dtype).removeprefix("torch.")] += param.numel() * param.element_size()
    trainable_bytes = sum(p.numel() * p.element_size() for p in params if p.requires_grad)
    buffers = list(model.buffers())
    layers = _static_layers(model, result, flops_convention)
    if depth is not None:
        layers = [layer for layer in layers if layer.depth <= depth]
    training = None
    if estimate_training:
        activations = train_result.saved_activation_bytes
        outputs = _float_output_bytes(result.output_shapes, result.output_dtypes)
        training = training_memory(sum(by_dtype.values()), trainable_bytes, activations, outputs)
    if result.unsupported_ops:
        notes.append(
            "FLOPs exclude unsupported ops: "
            + ", ".join(f"{op} x{n}" for op, n in sorted(result.unsupported_ops.items()))
        )
    input_shapes = [s for s in _flat_shapes((args, kwargs))]
    flops_forward = result.flops_forward
    if flops_convention == "no-attention":
        flops_forward -= result.attention_flops_forward
    return ModelSummary(
        model_name=name or type(model).__name__,
        layers=layers,
        total_params=sum(p.numel() for p in params),
        trainable_params=sum(p.numel() for p in params if p.requires_grad),
        shared_params=_shared_groups(model),
        buffer_count=len(buffers),
        buffer_bytes=sum(b.numel() * b.element_size() for b in buffers),
        param_bytes_by_dtype=dict(by_dtype),
        flops_forward=flops_forward,
        macs_forward=flops_forward // 2,
        attention_flops_forward=result.attention_flops_forward,
        flops_convention=flops_convention,
        flops_backward=train_result.flops_backward,
        output_shapes=result.output_shapes,
        output_dtypes=result.output_dtypes,
        input_shapes=input_shapes,
        device_used=result.device,
        mode=mode,
        unsupported_ops=dict(result.unsupported_ops),
        peak_activation_bytes=result.peak_activation_bytes,
        training=training,
        notes=notes,
        memory_for=memory_for if result.device in ("meta", "cpu (fake tensors)") else None,
        attention_kernels=train_result.attention_kernels,
    )


def _float_output_bytes(shapes: list[tuple[int, ...]], dtypes: list[str]) -> int:
    """Bytes of the floating-point outputs: what a loss's backward makes copies of."""
    total = 0
    for shape, dtype in zip(shapes, dtypes, strict=False):
        torch_dtype = getattr(torch, dtype.removeprefix("torch."), None)
        if isinstance(torch_dtype, torch.dtype) and torch_dtype.is_floating_point:
            total += math.prod(shape) * torch_dtype.itemsize
    return total


def _flat_shapes(values: Any) -> list[tuple[int, ...]]:
    from torch.utils._pytree import tree_flatten

    return [tuple(t.shape) for t in tree_flatten(values)[0] if isinstance(t, torch.Tensor)]
