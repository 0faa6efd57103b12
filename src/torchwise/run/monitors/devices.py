"""``--as-cuda``: every tensor carries the device it would have on a GPU node (TWR401-TWR403).

The tensors stay ordinary CPU tensors; a torch function mode follows, beside
each, the device it would live on (a ``_torchwise_device`` attribute, "cuda:0"
or "cpu"), and answers ``.device``, ``.is_cuda`` and ``.get_device()`` with it,
so the script takes its GPU paths. What creates tensors sets their device: a
factory's ``device=`` (rewritten to the CPU, remembered as CUDA), ``.to()``,
``.cuda()`` and ``.cpu()`` (a copy, as on a GPU), a DataLoader batch (CPU), a
parameter (CPU until the module moves). Every other function's result is on
the device of its tensor arguments. A function whose arguments sit on two
devices is the ``Expected all tensors to be on the same device`` the GPU would
raise: reported at the user's line (TWR401), then computed anyway so the run
goes on. A CPU tensor with no dimensions mixes with CUDA ones, as on a GPU.

Autograd stays untouched: gradients are created by the engine, not by torch
functions, and take their parameter's device when the script reads ``.grad``.
A tensor whose device is unknown (unpickled, made inside an extension) is
never reported.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from torchwise.run.monitors.cuda_api import SimulatedCuda
from torchwise.run.monitors.determinism import DeterminismJudge
from torchwise.run.monitors.loader import tensors_in
from torchwise.run.session import Pass, Session
from torchwise.run.sites import Site, is_user_file, user_site

TAG = "_torchwise_device"
ORIGIN = "_torchwise_origin"  # where a CPU tensor came from, for the message
MADE = "_torchwise_made"  # (path, line, step) of a factory call in the user's code
_T = torch.Tensor
# the property accessors a function mode sees (mypy sees the properties' values)
DEVICE_GET: Any = vars(torch._C.TensorBase)["device"].__get__
IS_CUDA_GET: Any = vars(torch._C.TensorBase)["is_cuda"].__get__
GRAD_GET: Any = vars(torch._C.TensorBase)["grad"].__get__
DATA_SET: Any = vars(torch._C.TensorBase)["data"].__set__
#: functions whose arguments may sit on different devices on a GPU too
CROSS_DEVICE = {
    _T.to, _T.cuda, _T.cpu, _T.copy_, _T.__getitem__, _T.__setitem__, _T.index_put_,
    _T.__repr__, _T.__format__, _T.__str__, _T.item, _T.tolist, _T.numpy, _T.__len__,
    _T.__bool__, _T.__float__, _T.__int__, _T.__index__, _T.size, _T.dim, _T.numel,
    _T.element_size, _T.data_ptr, _T.__reduce_ex__, _T.__deepcopy__,
    _T.new_tensor, _T.pin_memory, _T.get_device,
}  # fmt: skip
#: factories of tensors a script might build on the CPU and then move (TWR403)
FACTORIES = {"zeros", "ones", "empty", "full", "arange", "rand", "randn", "randint", "eye",
             "linspace", "tril", "triu", "zeros_like", "ones_like", "full_like"}  # fmt: skip


def device_of(tensor: torch.Tensor) -> str | None:
    """The simulated device ("cuda:0", "cpu"), or None when it is not known."""
    return getattr(tensor, TAG, None)


def _set(
    tensor: Any,
    device: str | None,
    origin: str | None = None,
    made: tuple[str, int, int] | None = None,
) -> None:
    if isinstance(tensor, torch.Tensor) and device is not None:
        try:
            setattr(tensor, TAG, device)
            if origin is not None:
                setattr(tensor, ORIGIN, origin)
            if made is not None:
                setattr(tensor, MADE, made)
        except (AttributeError, TypeError):  # a tensor type without a __dict__
            pass


def handled_at(origin: str, label: str) -> str:
    """``origin`` with the user's line ``label`` that handled the CPU tensor again.

    The origin keeps where the tensor came from, the first user line that handled it
    after that (in the loop, often where a `.to(device)` is missing: `x = x.float()`),
    and the last (often inside the model, where it meets the CUDA tensors).
    """
    base, _, rest = origin.partition(", handled at ")
    base = base.partition(", last made at ")[0]
    first = rest.partition(", last made at ")[0] or None
    if base.endswith(f" at {label}") or first == label:
        return origin if first == label or not first else f"{base}, handled at {first}"
    if first is None:
        return f"{base}, handled at {label}"
    return f"{base}, handled at {first}, last made at {label}"


def _inherited_origin(tensors: list[torch.Tensor], device: str) -> str | None:
    """The origin of the first argument on ``device`` that has one: a CPU batch
    sliced, cast and reshaped still names the line it came from."""
    for tensor in tensors:
        origin = getattr(tensor, ORIGIN, None)
        if origin is not None and device_of(tensor) == device:
            return origin  # type: ignore[no-any-return]
    return None


class PlainAttributes:
    """Tensors a module holds as plain attributes (``self.pe = pe``), not as
    parameters or buffers: ``module.to()`` and ``.cuda()`` leave them where
    they are, the classic CPU tensor inside a CUDA model. Recorded by storage,
    so a slice of the attribute (``self.pe[:, :T]``) is recognised."""

    def __init__(self) -> None:
        self.by_storage: dict[int, str] = {}

    def record(self, module: torch.nn.Module, name: str, value: torch.Tensor) -> None:
        if isinstance(value, torch.nn.Parameter) or len(self.by_storage) >= 4096:
            return
        site = user_site()
        if site is None:
            return
        try:
            key = value.untyped_storage().data_ptr()
        except (RuntimeError, NotImplementedError):
            return
        if key:
            self.by_storage[key] = (
                f"{type(module).__name__}.{name}, a plain tensor attribute set at {site.label}: "
                "module.to() and .cuda() move parameters and buffers only (register_buffer)"
            )

    def describe(self, tensor: torch.Tensor) -> str | None:
        if not self.by_storage or device_of(tensor) != "cpu":
            return None
        try:
            return self.by_storage.get(tensor.untyped_storage().data_ptr())
        except (RuntimeError, NotImplementedError):
            return None


def _arguments(args: Any, kwargs: Any) -> list[torch.Tensor]:
    found: list[torch.Tensor] = []
    for value in (*args, *(kwargs or {}).values()):
        if isinstance(value, torch.Tensor):
            found.append(value)
        elif isinstance(value, (list, tuple)):
            found.extend(item for item in value[:64] if isinstance(item, torch.Tensor))
    return found


class _SimulatedDevices(TorchFunctionMode):
    """The function mode that follows devices (see the module docstring)."""

    def __init__(self, monitor: DeviceMonitor) -> None:
        super().__init__()
        self.monitor = monitor

    def __torch_function__(
        self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None
    ) -> Any:
        kwargs = kwargs or {}
        monitor = self.monitor
        if func == DEVICE_GET:
            tag = device_of(args[0])
            return torch.device(tag) if tag is not None else func(*args)
        if func == IS_CUDA_GET:
            return (device_of(args[0]) or "cpu").startswith("cuda")
        if func is _T.get_device:
            tag = device_of(args[0]) or "cpu"
            return int(tag.split(":")[1]) if tag.startswith("cuda") else -1
        if func is _T.to:
            return monitor.to(args[0], args[1:], kwargs)
        if func is _T.cuda:
            device = args[1] if len(args) > 1 else kwargs.get("device")
            return monitor.move(args[0], f"cuda:{monitor.cuda.device_index(device)}")
        if func is _T.cpu:
            return monitor.move(args[0], "cpu")
        if func is _T.pin_memory:
            return args[0]
        if func == DATA_SET:
            func(*args)
            _set(args[0], device_of(args[1]), getattr(args[1], ORIGIN, None))
            return None
        if func == GRAD_GET:
            grad = func(*args)
            if grad is not None and device_of(grad) is None:
                _set(grad, device_of(args[0]))
            return grad
        if func is _T.numpy and (device_of(args[0]) or "").startswith("cuda"):
            monitor.report_numpy(args[0])
        return monitor.call(func, args, kwargs)


class DeviceMonitor:
    """Installs the simulated GPU and the device-following mode."""

    def __init__(self, session: Session) -> None:
        self.session = session
        count = session.options.gpus or max(session.world, 1)
        # Every process starts on cuda:0, whatever its rank, as on a GPU node:
        # `.cuda()` before `set_device(local_rank)` puts every rank's model there.
        self.cuda = SimulatedCuda(session.patches, count, 0)
        self.mode = _SimulatedDevices(self)
        self.determinism = DeterminismJudge(session)
        #: creation line -> the steps at which a tensor made there moved to the GPU
        self.moved_each_step: dict[Site, set[int]] = {}
        self.attributes = PlainAttributes()

    def install(self) -> None:
        session = self.session
        self.cuda.install()
        os.environ.setdefault("PYTORCH_DDP_USE_SIDE_STREAM", "0")
        self._patch_parameters()
        self._patch_load()
        self._patch_from_numpy()
        original_to = torch.nn.Module.to

        def module_to(module: torch.nn.Module, *args: Any, **kwargs: Any) -> Any:
            args, kwargs = _cuda_indices(args, kwargs)  # model.to(local_rank)
            return original_to(module, *args, **kwargs)

        session.patches.setattr(torch.nn.Module, "to", module_to)
        original_setattr = torch.nn.Module.__setattr__
        attributes = self.attributes

        def module_setattr(module: torch.nn.Module, name: str, value: Any) -> None:
            original_setattr(module, name, value)
            if type(value) is torch.Tensor and name not in (module.__dict__.get("_buffers") or {}):
                attributes.record(module, name, value)

        session.patches.setattr(torch.nn.Module, "__setattr__", module_setattr)
        self._patch_data_parallel()
        session.listen("batch", self._batch)
        self.mode.__enter__()  # type: ignore[no-untyped-call]
        session.patches.call_on_undo(
            lambda: self.mode.__exit__(None, None, None)  # type: ignore[no-untyped-call]
        )

    # tensors entering the program -------------------------------------------------
    def _patch_parameters(self) -> None:
        original_new = torch.nn.Parameter.__new__

        def new(cls: type, data: Any = None, requires_grad: bool = True) -> Any:
            parameter: torch.Tensor = original_new(cls, data, requires_grad)
            source = device_of(data) if isinstance(data, torch.Tensor) else None
            _set(parameter, source or "cpu")
            return parameter

        self.session.patches.setattr(torch.nn.Parameter, "__new__", new)
        original_grad = torch.autograd.grad

        def grad(outputs: Any, inputs: Any, *args: Any, **kwargs: Any) -> Any:
            result = original_grad(outputs, inputs, *args, **kwargs)
            sources = [inputs] if isinstance(inputs, torch.Tensor) else list(inputs)
            for value, source in zip(result, sources, strict=False):
                if isinstance(source, torch.Tensor):
                    _set(value, device_of(source))
            return result

        self.session.patches.setattr(torch.autograd, "grad", grad)

    def _patch_from_numpy(self) -> None:
        """``torch.from_numpy`` bypasses function modes; its tensor is on the CPU."""
        original = torch.from_numpy

        def from_numpy(array: Any) -> torch.Tensor:
            tensor = original(array)
            site = user_site()
            _set(tensor, "cpu", f"created at {site.label}" if site else None)
            return tensor

        self.session.patches.setattr(torch, "from_numpy", from_numpy)

    def _patch_load(self) -> None:
        original = torch.load
        monitor = self

        def load(f: Any, map_location: Any = None, *args: Any, **kwargs: Any) -> Any:
            target = None
            if map_location is not None and "cuda" in str(map_location):
                target, map_location = f"cuda:{monitor.cuda.device_index(map_location)}", "cpu"
            result = original(f, map_location, *args, **kwargs)
            if target is not None:
                for tensor in _all_tensors(result):
                    _set(tensor, target)
            return result

        self.session.patches.setattr(torch, "load", load)

    def _patch_data_parallel(self) -> None:
        """One simulated device: DataParallel's scatter becomes a move to it (no NCCL)."""
        monitor = self

        def scatter(dp: Any, inputs: Any, kwargs: Any, device_ids: Any) -> Any:
            target = f"cuda:{monitor.cuda.device_index(device_ids[0] if device_ids else None)}"
            moved = _map_tensors(
                (tuple(inputs), dict(kwargs or {})), lambda t: monitor.move(t, target)
            )
            return (moved[0],), (moved[1],)

        self.session.patches.setattr(torch.nn.DataParallel, "scatter", scatter)

    def _batch(self, running: Pass, batch: Any) -> None:
        site = running.iter_site or running.loader_site
        origin = f"a batch of the DataLoader{f' at {site.label}' if site else ''}"
        for tensor in tensors_in(batch, limit=64):
            if device_of(tensor) in (None, "cpu"):
                _set(tensor, "cpu", origin)

    # the mode's work --------------------------------------------------------------
    def to(self, tensor: torch.Tensor, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        args, kwargs = _cuda_indices(args, dict(kwargs))
        copy = bool(kwargs.pop("copy", False))
        target: str | None = None
        if args and isinstance(args[0], torch.Tensor):
            target = device_of(args[0]) or "cpu"
            args = (args[0].dtype, *args[1:])
        parsed: tuple[Any, ...] = torch._C._nn._parse_to(*args, **kwargs)
        device, dtype, non_blocking, memory_format = parsed
        if device is not None:
            target = "cpu" if device.type == "cpu" else f"cuda:{self.cuda.device_index(device)}"
        options: dict[str, Any] = {"non_blocking": non_blocking, "copy": copy}
        if dtype is not None:
            options["dtype"] = dtype
        if memory_format is not None:
            options["memory_format"] = memory_format
        result = tensor.to(**options)
        if target is None:
            _set(result, device_of(tensor))
            return result
        return self.move(result, target, source=tensor)

    def move(self, tensor: torch.Tensor, target: str, *, source: torch.Tensor | None = None) -> Any:
        source = tensor if source is None else source
        current = device_of(source) or "cpu"
        if current == target:
            if tensor is not source:
                _set(tensor, target, getattr(source, ORIGIN, None))
            return tensor
        if target.startswith("cuda") and current == "cpu":
            self._note_move(source)
        result = tensor.clone() if tensor is source else tensor  # a copy, as on a GPU
        site = user_site()
        _set(result, target, f"moved to {target} at {site.label}" if site else None)
        return result

    def call(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        device = kwargs.get("device")
        requested: str | None = None
        if device is not None:
            index = str(device)
            if "cuda" in index:
                requested = f"cuda:{self.cuda.device_index(device)}"
                kwargs = {**kwargs, "device": "cpu"}
            else:
                requested = "cpu"
        tensors = _arguments(args, kwargs)
        devices = {device_of(t) for t in tensors if t.dim() > 0} - {None}
        crossing = func in CROSS_DEVICE and not _cuda_index_on_cpu(func, args)
        if len(devices) > 1 and not crossing and not _private(func):
            self.report_mixed(func, tensors)
        self.determinism.check(func, args, kwargs, devices)
        result = func(*args, **kwargs)
        if requested is None:
            known = {device_of(t) for t in tensors} - {None}
            cuda = sorted(d for d in known if d and d.startswith("cuda"))
            requested = cuda[0] if cuda else ("cpu" if known or not tensors else None)
        if requested is not None and func not in (_T.item, _T.tolist, _T.numpy):
            made = self._made_here() if requested == "cpu" else None
            origin = None
            if made is not None and not tensors:
                origin = f"created at {Site(made[0], made[1]).label}"
            else:
                origin = _inherited_origin(tensors, requested)
                if made is not None and origin is not None:
                    origin = handled_at(origin, Site(made[0], made[1]).label)
            handled = made is not None  # by the user's own line
            if made is not None and (tensors or _name(func) not in FACTORIES):
                made = None  # TWR403 follows factories only; the origin follows every creation
            for produced in _results(result):
                fresh = not any(produced is t for t in tensors)
                if fresh or device_of(produced) is None:
                    _set(produced, requested, origin, made)
                elif handled and origin is not None and device_of(produced) == "cpu":
                    # `batch.float()` hands back the same tensor: that line still handled it
                    _set(produced, "cpu", origin)
        return result

    # findings ---------------------------------------------------------------------
    def report_mixed(self, func: Any, tensors: list[torch.Tensor]) -> None:
        described = []
        for tensor in tensors:
            tag = device_of(tensor)
            if tag is None or tensor.dim() == 0:
                continue
            origin = self.attributes.describe(tensor) or getattr(tensor, ORIGIN, None)
            entry = f"{tag} {tuple(tensor.shape)} {str(tensor.dtype).removeprefix('torch.')}"
            described.append(entry + (f" ({origin})" if origin else ""))
        devices = " and ".join(sorted({entry.split(" ")[0] for entry in described}))
        self.session.report(
            "TWR401",
            user_site(),
            f"{_name(func)} gets tensors on {devices}: "
            "on a GPU this raises 'Expected all tensors to be on the same device'",
            evidence={"tensors": "; ".join(described[:4])},
        )

    def report_numpy(self, tensor: torch.Tensor) -> None:
        self.session.report(
            "TWR402",
            user_site(),
            f"numpy() on a tensor on {device_of(tensor)}: on a GPU this raises 'can't convert "
            "cuda:0 device type tensor to numpy' (call .cpu() first)",
            evidence={"tensor": f"{tuple(tensor.shape)} {tensor.dtype}"},
        )

    def _made_here(self) -> tuple[str, int, int] | None:
        """(path, line, step) when the factory was called straight from the user's code."""
        frame = sys._getframe(3)  # _made_here <- call <- __torch_function__ <- the caller
        if not is_user_file(frame.f_code.co_filename):
            return None
        return (os.path.abspath(frame.f_code.co_filename), frame.f_lineno, self.session.steps)

    def _note_move(self, tensor: torch.Tensor) -> None:
        made = getattr(tensor, MADE, None)
        if made is None or made[2] != self.session.steps:
            return  # not a factory's, or made at an earlier step and kept: moving once is fine
        site = Site(made[0], made[1])
        steps = self.moved_each_step.setdefault(site, set())
        steps.add(self.session.steps)
        if len(steps) == 2:
            self.session.report(
                "TWR403",
                site,
                "a tensor is created on the CPU and copied to the GPU at every step: create it "
                "on the device (device=x.device) or once, outside the loop",
                evidence={"steps seen": len(steps)},
            )

    def finish(self) -> None:
        self.determinism.finish()


def _cuda_indices(
    args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """``.to(1)``: a bare index is an accelerator's, which torch resolves (and a CPU build
    refuses) before any mode sees it; it becomes ``torch.device("cuda", 1)``."""

    def device(value: Any) -> Any:
        is_index = isinstance(value, int) and not isinstance(value, bool)
        return torch.device("cuda", value) if is_index else value

    if "device" in kwargs:
        kwargs = {**kwargs, "device": device(kwargs["device"])}
    return (device(args[0]), *args[1:]) if args else args, kwargs


def _cuda_index_on_cpu(func: Any, args: tuple[Any, ...]) -> bool:
    """``cpu_tensor[cuda_indices]``: a GPU allows CPU indices on CUDA tensors, not this."""
    if func not in (_T.__getitem__, _T.__setitem__, _T.index_put_) or len(args) < 2:
        return False
    if (device_of(args[0]) or "cpu") != "cpu":
        return False
    index = args[1] if isinstance(args[1], (tuple, list)) else (args[1],)
    return any(
        isinstance(i, torch.Tensor) and (device_of(i) or "").startswith("cuda") for i in index
    )


def _private(func: Any) -> bool:
    """torch's private plumbing (``_has_compatible_shallow_copy_type``) compares devices."""
    name = _name(func)
    return name.startswith("_") and not name.startswith("__")


def _name(func: Any) -> str:
    return getattr(func, "__name__", None) or str(func)


def _results(result: Any) -> list[torch.Tensor]:
    if isinstance(result, torch.Tensor):
        return [result]
    if isinstance(result, (tuple, list)):
        return [item for item in result if isinstance(item, torch.Tensor)]
    return []


def _map_tensors(value: Any, change: Any, depth: int = 6) -> Any:
    if isinstance(value, torch.Tensor):
        return change(value)
    if depth == 0:
        return value
    if isinstance(value, dict):
        return type(value)((k, _map_tensors(v, change, depth - 1)) for k, v in value.items())
    if isinstance(value, (list, tuple)) and not hasattr(value, "_fields"):
        return type(value)(_map_tensors(v, change, depth - 1) for v in value)
    return value


def _all_tensors(value: Any, depth: int = 6) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if depth == 0:
        return []
    if isinstance(value, dict):
        return [t for item in value.values() for t in _all_tensors(item, depth - 1)]
    if isinstance(value, (list, tuple)):
        return [t for item in value for t in _all_tensors(item, depth - 1)]
    return []
