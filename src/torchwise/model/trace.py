"""Run one forward (and optionally backward) on a private copy of a model, measuring it.

The caller's model is never touched: the run is on a private copy
(:mod:`torchwise.model.private`, which also refuses any op on the caller's own
tensors), and hooks go on the copy only.

One ``TorchDispatchMode`` sees every aten op: it adds the op's FLOPs
(:mod:`torchwise.model.flops`) and newly allocated bytes
(:mod:`torchwise.model.memory`) to every module on the current call stack, which
:func:`torchwise.hooks.module_calls` maintains.
"""

from __future__ import annotations

import contextlib
import weakref
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import torch
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode
from torch.utils._pytree import tree_flatten

from torchwise.errors import TorchwiseError, UserCodeError
from torchwise.hooks import ModuleCall, module_calls
from torchwise.model import flops as F
from torchwise.model.attention import TargetAttention
from torchwise.model.memory import LiveBytes, alive_bytes
from torchwise.model.private import Untouched, private_copy, to_device


@dataclass
class ModuleRecord:
    """What one module did during the traced forward (summed over its calls)."""

    calls: int = 0
    input_shapes: list[tuple[int, ...]] = field(default_factory=list)
    output_shapes: list[tuple[int, ...]] = field(default_factory=list)
    flops: int = 0
    #: the part of ``flops`` in products of two activations (attention's QK^T and PV)
    attention_flops: int = 0
    #: bytes of tensors the module created that are still alive when it returns: its
    #: outputs and, with autograd recording, what was saved for backward.
    activation_bytes: int = 0
    #: storages created during the current call: (weak reference, bytes).
    pending: list[tuple[Any, int]] = field(default_factory=list, repr=False)


@dataclass
class TraceResult:
    """The measurements of one traced run."""

    records: dict[str, ModuleRecord]
    flops_forward: int
    #: the part of ``flops_forward`` in products of two activations
    attention_flops_forward: int
    flops_backward: int | None
    unsupported_ops: dict[str, int]
    peak_activation_bytes: int
    saved_activation_bytes: int
    output_shapes: list[tuple[int, ...]]
    output_dtypes: list[str]
    device: str
    #: SDPA calls per kernel, when a meta or fake run modelled a target device's choice
    attention_kernels: dict[str, int] = field(default_factory=dict)


class ForwardError(UserCodeError):
    """The model's forward raised: the one message for it (submodule, the user's
    ``file:line``), with the shapes that submodule received as the hint."""


def _shapes(values: Any) -> list[tuple[int, ...]]:
    leaves, _ = tree_flatten(values)
    return [tuple(t.shape) for t in leaves if isinstance(t, torch.Tensor)]


def _fmt_shapes(values: Any) -> str:
    leaves, _ = tree_flatten(values)
    parts = [
        f"{str(t.dtype).removeprefix('torch.')}{list(t.shape)}"
        for t in leaves
        if isinstance(t, torch.Tensor)
    ]
    return ", ".join(parts) or "no tensors"


def _grouped_mm_shape_only(
    a: torch.Tensor,
    b: torch.Tensor,
    offs: torch.Tensor | None = None,
    bias: torch.Tensor | None = None,
    out_dtype: torch.dtype | None = None,
) -> torch.Tensor:
    """``_grouped_mm``'s output on meta/fake tensors, from shapes alone.

    torch's meta kernel accepts only bfloat16 (it mirrors the CUDA kernel) while the
    CPU kernel runs float32 too, so transformers' Mixtral cannot run on meta without
    this. 2D x 3D: (M, N); 3D x 3D: (G, M, N); 3D x 2D: (M, N); 2D x 2D: (G, M, N)
    with G the number of offsets.
    """
    if a.dim() == 2 and b.dim() == 2:
        assert offs is not None
        size = [offs.shape[0], a.shape[0], b.shape[1]]
    elif a.dim() == 2:
        size = [a.shape[0], b.shape[-1]]
    elif b.dim() == 2:
        size = [a.shape[1], b.shape[1]]
    else:
        size = [a.shape[0], a.shape[1], b.shape[-1]]
    return torch.empty(size, dtype=out_dtype or a.dtype, device=a.device)


#: Ops whose meta kernels are stricter than the CPU kernels they stand for.
_SHAPE_ONLY: dict[Any, Any] = {torch.ops.aten._grouped_mm.default: _grouped_mm_shape_only}


def _without_data(args: tuple[Any, ...]) -> bool:
    return any(isinstance(a, FakeTensor) or (isinstance(a, torch.Tensor) and a.is_meta)
               for a in args)  # fmt: skip


class _Measure(Untouched):  # type: ignore[no-untyped-call]
    """Adds each op's FLOPs and new bytes to every module on the call stack (and,
    as :class:`Untouched`, refuses any op on the caller's own tensors)."""

    def __init__(
        self,
        original: torch.nn.Module,
        stack: list[str],
        records: dict[str, ModuleRecord],
        live: LiveBytes,
    ) -> None:
        super().__init__(original)
        self.stack = stack
        self.records = records
        self.live = live
        self.flops = 0
        self.attention_flops = 0
        self.unsupported: Counter[str] = Counter()
        #: tensors computed from the forward's inputs, id -> weak reference (ids are
        #: reused once a tensor dies, so a hit must still point at the same object)
        self.activations: dict[int, weakref.ref[torch.Tensor]] = {}

    def track_inputs(self, values: Any) -> None:
        """Seed the activations: everything computed from these is one too."""
        for leaf in tree_flatten(values)[0]:
            if isinstance(leaf, torch.Tensor):
                self.activations[id(leaf)] = weakref.ref(leaf)

    def is_activation(self, value: Any) -> bool:
        ref = self.activations.get(id(value))
        return ref is not None and ref() is value

    def _from_activations(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
        for arg in (*args, *kwargs.values()):
            items = arg if isinstance(arg, list | tuple) else (arg,)
            if any(self.is_activation(item) for item in items):
                return True
        return False

    def __torch_dispatch__(
        self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None
    ) -> Any:
        kwargs = kwargs or {}
        self.check(args, kwargs)
        if func in _SHAPE_ONLY and _without_data(args):
            out = _SHAPE_ONLY[func](*args, **kwargs)
        else:
            out = func(*args, **kwargs)
        kind = F.classify(func)
        if kind == "counted":
            n, attention = F.count(func, args, kwargs, out, self.is_activation)
            self.flops += n
            self.attention_flops += attention
            for name in self.stack:
                record = self.records[name]
                record.flops += n
                record.attention_flops += attention
        elif kind == "unsupported":
            self.unsupported[str(func.overloadpacket).removeprefix("aten.")] += 1
        leaves, _ = tree_flatten(out)
        derived = bool(self.activations) and self._from_activations(args, kwargs)
        for leaf in leaves:
            if isinstance(leaf, torch.Tensor):
                if derived:
                    self.activations[id(leaf)] = weakref.ref(leaf)
                ref, nbytes = self.live.allocated(leaf)
                if ref is not None:
                    for name in self.stack:
                        self.records[name].pending.append((ref, nbytes))
        self.live.collect()
        return out


def forward_error(
    exc: BaseException,
    model: torch.nn.Module,
    work: torch.nn.Module,
    failed: ModuleCall | None,
    inputs: Any,
) -> ForwardError:
    """The one message for a forward that raised: which submodule, where in the user's
    code, and (as the hint) the shapes that submodule received."""
    where = None
    if failed is not None and failed.name:
        where = f"{failed.name} ({type(work.get_submodule(failed.name)).__name__})"
    received = _fmt_shapes((failed.args, failed.kwargs) if failed else inputs)
    error = ForwardError.from_exception(
        exc,
        doing=f"forward of {type(model).__name__}",
        where=where,
        hint=f"it received {received}; check that --input describes forward's arguments",
    )
    assert isinstance(error, ForwardError)  # from_exception builds cls
    return error


def _loss(output: Any) -> torch.Tensor | None:
    leaves, _ = tree_flatten(output)
    parts = [t.float().sum() for t in leaves if isinstance(t, torch.Tensor) and t.requires_grad]
    return torch.stack(parts).sum() if parts else None


def trace(
    model: torch.nn.Module,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    *,
    device: torch.device,
    train: bool,
    backward: bool = False,
    fake: bool = False,
    attention: str | None = None,
) -> TraceResult:
    """Run ``model`` once on a private copy and measure shapes, FLOPs and memory.

    ``train`` runs in training mode with autograd recording (so saved activations
    are measured); otherwise eval mode under ``no_grad`` (inference, which also
    exercises fused inference kernels). ``backward`` additionally counts the
    FLOPs of ``sum(outputs).backward()``. ``fake`` runs on FakeTensorMode tensors
    that claim to be on the CPU (for forwards that create CPU tensors or check
    devices, which meta cannot run). ``attention`` (``"cuda"`` or ``"cpu"``): on meta
    or fake tensors, run ``F.scaled_dot_product_attention`` with the kernel that
    device would take (:mod:`torchwise.model.attention`); a real run always takes
    its real kernel.
    """
    fake_mode = FakeTensorMode() if fake else None
    work = private_copy(model, device, fake_mode)
    work.train(train)
    args, kwargs = to_device((args, kwargs), device, fake_mode)
    records = {name: ModuleRecord() for name, _ in work.named_modules()}

    def entered(call: ModuleCall) -> None:
        record = records[call.name]
        record.calls += 1
        if record.calls == 1:
            record.input_shapes = _shapes((call.args, call.kwargs))

    def returned(call: ModuleCall, out: Any) -> None:
        record = records[call.name]
        if record.calls == 1:
            record.output_shapes = _shapes(out)
        record.activation_bytes += alive_bytes(record.pending)
        record.pending.clear()

    existing = [*work.parameters(), *work.buffers()]
    existing += [t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)]
    live = LiveBytes(existing)
    grad = torch.enable_grad() if train else torch.no_grad()
    outer = fake_mode if fake_mode is not None else contextlib.nullcontext()
    modelled = fake or device.type == "meta"
    kernels = TargetAttention(attention) if attention and modelled else None
    with module_calls(work, on_enter=entered, on_exit=returned) as calls:
        mode = _Measure(model, calls.stack, records, live)
        mode.track_inputs((args, kwargs))
        try:
            # The measuring mode is entered last, so it sees each op before the fake mode.
            with grad, outer, mode, kernels or contextlib.nullcontext():
                output = work(*args, **kwargs)
        except TorchwiseError:
            raise
        except Exception as exc:
            raise forward_error(exc, model, work, calls.failed, (args, kwargs)) from exc
    saved = live.current
    flops_backward = None
    if backward and train:
        loss = _loss(output)
        if loss is not None:
            back = _Measure(model, [], records, LiveBytes())
            try:
                with outer, back:
                    loss.backward()  # type: ignore[no-untyped-call]
            except TorchwiseError:
                raise
            except Exception as exc:
                # a backward op with no meta kernel (a data-dependent index in training
                # code): a ForwardError, so the caller falls back to fake or real tensors
                raise forward_error(exc, model, work, None, (args, kwargs)) from exc
            flops_backward = back.flops
            mode.unsupported.update(back.unsupported)
    leaves = [t for t in tree_flatten(output)[0] if isinstance(t, torch.Tensor)]
    return TraceResult(
        records=records,
        flops_forward=mode.flops,
        attention_flops_forward=mode.attention_flops,
        flops_backward=flops_backward,
        unsupported_ops=dict(mode.unsupported),
        peak_activation_bytes=live.peak,
        saved_activation_bytes=saved,
        output_shapes=[tuple(t.shape) for t in leaves],
        output_dtypes=[str(t.dtype).removeprefix("torch.") for t in leaves],
        device="cpu (fake tensors)" if fake else str(device),
        attention_kernels=dict(kernels.kernels) if kernels else {},
    )
