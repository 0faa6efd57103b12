"""device-consistency: every tensor forward uses follows the model to its device.

The model runs once with every parameter, buffer and input on the ``meta``
device (no compute, no memory), under a dispatch mode that looks at the devices
of every op's tensor arguments. A tensor made in forward without ``device=``
(``torch.arange(T)``, ``torch.zeros(n)``), a fixed ``device="cpu"``, a tensor kept
as a plain attribute, or a layer kept in a plain list stays on the CPU and meets
the model's tensors in some op: that op, the submodule running it and the user's
line are reported. Watching the ops, not waiting for an error, matters: some meta
kernels (an embedding lookup with CPU indices) accept what CUDA refuses.

The meta run stops at the first op that needs values (``.item()``, ``nonzero``: a
mixture of experts' routing). Past that point the model runs for real on its own
device with ``meta`` as the default device, so a tensor created without ``device=``
(``torch.zeros(n)``) lands on meta and meets the model's tensors in the next op,
where the same watch sees it.

A plain tensor attribute is fine when forward moves it to the input's device before
using it (``self.mask.to(x.device)``): only one that forward itself caches on the
module warns (the next forward after ``model.to("cuda")`` reuses it on the old
device). A plain list of layers is fine when each layer is also registered (pyGAT's
``add_module`` loop). The meta device lacks kernels for some ops (a grouped matmul
that accepts only bf16 on meta, an op that needs values): when the meta run stops at
one and no op before it met a stray tensor, the check says it could not check past
that op, never that the model has a device bug.
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from torchwise.doctor.checks.base import Check, Run, Verdict
from torchwise.doctor.report import Status
from torchwise.doctor.trace import innermost_user_frame
from torchwise.hooks import module_calls
from torchwise.tensortree import map_tensors, tensors_in

aten = torch.ops.aten
#: Ops that legitimately take tensors on two devices: copies between devices, and
#: advanced indexing, which moves CPU indices to the indexed tensor's device.
CROSS_DEVICE_OK = {
    aten.copy_.default, aten._to_copy.default, aten.index.Tensor, aten.index_put_.default,
    aten.index_put.default, aten._index_put_impl_.default, aten.lift_fresh.default,
    aten.lift_fresh_copy.default,
}  # fmt: skip
#: Why a meta run can stop short: ops that need the values (data-dependent shapes).
_META_LIMITS = ("cannot be called on meta", "data-dependent", "meta tensors", "nonzero", "item()")


@dataclass
class Stray:
    """One op that met a tensor on another device than the model's."""

    op: str
    module: str
    devices: list[str]
    line: str | None
    attribute: str | None  # the plain attribute it came from, when it is one


class _DeviceWatch(TorchDispatchMode):  # type: ignore[no-untyped-call]
    def __init__(self, stack: list[str], plain: dict[int, str], root: str) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.stack, self.root = stack, root
        self.plain = plain  # id(tensor) -> attribute name, for plain tensor attributes
        self.strays: list[Stray] = []
        self.ops = 0  # ops seen, for "checked up to"
        self.last_op = ""

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        self.ops += 1
        self.last_op = str(func.overloadpacket.__name__)
        if func not in CROSS_DEVICE_OK and len(self.strays) < 20:
            tensors = [t for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
            # a 0-d CPU tensor mixes with any device (torch treats it as a scalar)
            devices = {
                t.device.type for t in tensors if not (t.device.type == "cpu" and t.ndim == 0)
            }
            if len(devices) > 1:
                off = next((t for t in tensors if t.device.type != "meta" and t.ndim), None)
                self.strays.append(
                    Stray(
                        str(func.overloadpacket.__name__),
                        (self.stack[-1] or self.root) if self.stack else "forward",
                        sorted(devices),
                        innermost_user_frame(traceback.extract_stack()),
                        self.plain.get(id(off)) if off is not None else None,
                    )
                )
        return func(*args, **(kwargs or {}))


def _unregistered(
    model: nn.Module, before: set[tuple[int, str]]
) -> tuple[dict[int, str], list[str], list[str]]:
    """(plain tensor attributes by id, lists/dicts of modules nn.Module does not see,
    the plain tensors forward itself put on the module)."""
    tensors: dict[int, str] = {}
    containers = []
    cached = []
    registered = {id(m) for m in model.modules()}
    for name, module in model.named_modules():
        prefix = f"{name}." if name else ""
        for key, value in vars(module).items():
            if isinstance(value, torch.Tensor) and not isinstance(value, nn.Parameter):
                tensors[id(value)] = prefix + key
                if (id(module), key) not in before:
                    cached.append(prefix + key)
            elif _unregistered_modules(value, key, registered):
                containers.append(prefix + key)
    return tensors, containers, cached


def _unregistered_modules(value: Any, key: str, registered: set[int]) -> bool:
    """A list/tuple/dict attribute holding a module that nn.Module does not know about."""
    if isinstance(value, (list, tuple)):
        held = [v for v in value if isinstance(v, nn.Module)]
    elif isinstance(value, dict) and not key.startswith("_"):
        held = [v for v in value.values() if isinstance(v, nn.Module)]
    else:
        return False
    return any(id(module) not in registered for module in held)


@dataclass
class DeviceM:
    plain: list[str]
    containers: list[str]
    strays: list[Stray] = field(default_factory=list)
    cached: list[str] = field(default_factory=list)  # plain tensors forward put on self
    stopped: str | None = None  # why the meta run ended early (data-dependent op)
    error: str | None = None  # a device error the meta run raised
    failing_module: str | None = None
    #: the meta run stopped at an op with no meta kernel for these inputs (not a device bug)
    gap: str | None = None
    ops_checked: int = 0
    #: after a data-dependent stop: the real run with meta as the default device finished
    real_run: bool = False


def _real_run(ctx: Any, plain: dict[int, str]) -> tuple[list[Stray], bool]:
    """A real forward on the model's device with ``meta`` as the default device: a tensor
    made without ``device=`` lands on meta, which the watch sees meeting the model's.
    (strays, whether the run finished)."""
    args, kwargs = ctx.fresh_inputs()
    ctx.model.eval()
    with module_calls(ctx.model) as calls:
        watch = _DeviceWatch(calls.stack, plain, type(ctx.model).__name__)
        try:
            with torch.no_grad(), torch.device("meta"), watch:
                ctx.model(*args, **kwargs)
        except Exception:
            return watch.strays, False
    return watch.strays, True


class DeviceConsistency(Check[DeviceM]):
    cost = "1 fwd on the meta device (no compute)"

    def measure(self, run: Run) -> DeviceM:
        ctx = run.ctx
        plain, containers, cached = _unregistered(ctx.model, ctx.plain_before)
        m = DeviceM(sorted(plain.values()), containers, cached=cached)
        meta = {
            name: t.to("meta")
            for name, t in [*ctx.model.named_parameters(), *ctx.model.named_buffers()]
        }
        args, kwargs = map_tensors(ctx.fresh_inputs(), lambda t: t.to("meta"))
        ctx.model.eval()
        with module_calls(ctx.model) as calls:
            watch = _DeviceWatch(calls.stack, plain, type(ctx.model).__name__)
            try:
                with torch.no_grad(), watch:
                    out = torch.func.functional_call(ctx.model, meta, args, kwargs, strict=False)
                stray = [t for t in tensors_in(out) if t.device.type != "meta"]
                if stray and not watch.strays:
                    m.error = (
                        f"an output tensor is on {stray[0].device} although every input was on meta"
                    )
            except Exception as exc:
                text = f"{type(exc).__name__}: {str(exc).splitlines()[0][:240]}"
                failed = calls.failed
                module = (failed.name or type(ctx.model).__name__) if failed else None
                if any(marker in text for marker in _META_LIMITS) and "device" not in text:
                    m.stopped = text
                elif "device" in text.lower() or watch.strays:
                    m.error, m.failing_module = text, module
                else:
                    m.gap = f"aten.{watch.last_op} in `{module or 'forward'}`: {text}"
        m.strays = watch.strays
        m.ops_checked = watch.ops
        if m.stopped and not m.strays:
            m.strays, m.real_run = _real_run(ctx, plain)
        return m

    def judge(self, m: DeviceM) -> Verdict:
        evidence: dict[str, Any] = {}
        if m.plain:
            evidence["unregistered_tensors"] = m.plain
        if m.containers:
            evidence["unregistered_module_containers"] = m.containers
        if m.stopped:
            evidence["meta_run_stopped"] = f"at a data-dependent op: {m.stopped}"
        if m.strays or m.error or m.containers:
            return self._fail(m, evidence)
        if m.gap:
            return Verdict.cannot_run(
                f"could not check on meta: the meta run stopped at {m.gap[:200]} (an op with "
                f"no meta kernel for these inputs, not a device bug); the {m.ops_checked} ops "
                "before it saw their tensors on the model's device",
                **evidence,
            )
        if m.cached:
            evidence["cached_by_forward"] = m.cached
            return Verdict(
                Status.WARN,
                f"forward caches {len(m.cached)} tensors on the module as plain attributes, "
                "which .to(device) and state_dict skip: after model.to('cuda') the next "
                "forward can reuse them on the old device (warns on a cache; fails when "
                "forward uses a tensor on another device)",
                evidence=evidence,
                where=m.cached,
                causes=[
                    "forward caches a tensor on self (self.mask = ...) instead of a buffer",
                ],
                fix="use self.register_buffer(name, tensor, persistent=False) for caches, so "
                "they move with the model, or rebuild them on x.device each call",
            )
        summary = (
            "every op in forward saw its tensors on the model's device (run on meta; fails on "
            "any tensor left on another device)"
        )
        if m.plain:
            summary += (
                f"; {len(m.plain)} plain tensor attributes are moved to the input's device "
                "before use, or not used"
            )
        if m.stopped and m.real_run:
            summary = (
                "every op in forward saw its tensors on the model's device (run on meta up to "
                "the first data-dependent op, then for real with meta as the default device; "
                "fails on any tensor left on another device)"
            )
        elif m.stopped:
            summary = (
                "every op up to the first data-dependent one saw its tensors on the model's "
                "device (the meta run stops there; see evidence)"
            )
        return Verdict(Status.PASS, summary, evidence=evidence)

    def _fail(self, m: DeviceM, evidence: dict[str, Any]) -> Verdict:
        where: list[str] = []
        causes: list[str] = []
        summary = "the model does not follow its parameters to another device"
        if m.strays:
            first = m.strays[0]
            source = (
                f"the plain attribute `{first.attribute}`"
                if first.attribute
                else ("a tensor created in forward without device=")
            )
            at = f" ({first.line})" if first.line else ""
            summary = (
                f"{source} stays on the CPU and meets the model's tensors in aten.{first.op} in "
                f"`{first.module}`{at}; on a GPU this raises 'Expected all tensors to be on the "
                "same device'"
            )
            evidence["stray_ops"] = [
                f"aten.{s.op} in {s.module}" + (f" at {s.line}" if s.line else "")
                for s in m.strays[:8]
            ]
            where = list(dict.fromkeys(s.module for s in m.strays))
            if any(s.attribute for s in m.strays):
                causes.append(
                    "a tensor stored as a plain attribute (self.mask = torch.ones(...)) instead "
                    "of register_buffer, so .to()/.cuda() does not move it"
                )
            if any(s.attribute is None for s in m.strays):
                causes.append(
                    "a tensor created in forward without device= (torch.zeros(n), "
                    "torch.arange(T), torch.tensor(...)) or with a fixed device='cpu'"
                )
        elif m.error:
            evidence["meta_run_error"] = m.error
            if m.failing_module:
                evidence["failing_module"] = m.failing_module
                where.append(m.failing_module)
            summary += f" (fails in `{m.failing_module}`)" if m.failing_module else ""
            causes.append("a tensor created in forward on a fixed device")
        if m.containers:
            where += m.containers
            causes.append(
                "submodules kept in a plain list/dict (use nn.ModuleList/nn.ModuleDict), so "
                "their parameters are neither moved, saved nor trained"
            )
        return Verdict(
            Status.FAIL,
            summary,
            evidence=evidence,
            where=where,
            causes=causes,
            fix="create tensors with device=x.device (or torch.zeros_like / x.new_zeros); "
            "register_buffer for constant tensors; nn.ModuleList for lists of layers",
        )
