"""The private copy a measurement runs, and the proof that it never reaches the original.

``copy.deepcopy`` copies a module tree but treats functions as atoms: a lambda
stored on a module keeps the cells it closed over, so minGPT's
``self.mlpf = lambda x: m.c_proj(m.act(m.c_fc(x)))`` (with ``m = self.mlp``) would
still call the caller's own modules from the copy, running the caller's weights,
leaving ``.grad`` on them and bypassing the copy's hooks. :func:`private_copy`
therefore re-creates every function reachable from the module tree (attributes,
hooks, containers, ``functools.partial``, bound methods, nested closures) with
its closure cells, defaults and attributes copied through the same ``deepcopy``
memo, so they point at the copy.

Two checks make the guarantee hold instead of hoping it does:

- after copying, the copy's reachable objects are scanned for any of the
  original's modules, parameters or buffers; one found is a refusal that says
  where it was (:class:`ReferenceLeak`);
- :class:`Untouched` is a dispatch mode that refuses any op on an original
  parameter or buffer while the copy runs, which catches what no scan can see
  (a forward that reads a module-level global holding the caller's model).

Parameters and buffers are pre-mapped in the memo so that weights are never
duplicated: on meta as shape-only stand-ins, on the model's own device as
``detach()`` views (new ``Parameter`` objects sharing storage, so gradients land
on the copy), buffers always as real copies (forward may update them).
"""

from __future__ import annotations

import copy
import functools
import types
from collections.abc import Iterator
from typing import Any

import torch
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_map

from torchwise.errors import TorchwiseError

#: How deep the scan follows plain containers and objects from a module attribute.
MAX_DEPTH = 8
_ATOMS = (str, bytes, int, float, complex, bool, type(None), type, types.ModuleType, torch.dtype,
          torch.device, torch.Size)  # fmt: skip


class ReferenceLeak(TorchwiseError):
    """The copy would reach the caller's own modules or tensors: inspection refuses to run."""


def _fake(mode: FakeTensorMode, tensor: torch.Tensor) -> torch.Tensor:
    # A fake tensor claims a CPU device but is backed by meta: shape-only, yet code
    # that checks `x.device` or creates CPU constants in forward runs as on a CPU.
    return FakeTensor(mode, torch.empty_like(tensor, device="meta"), torch.device("cpu"))


def _weights_memo(
    model: torch.nn.Module, device: torch.device, fake: FakeTensorMode | None
) -> dict[int, Any]:
    memo: dict[int, Any] = {}
    for param in model.parameters():
        if fake is not None:
            data = _fake(fake, param)
        elif device.type == "meta":
            data = torch.empty_like(param, device="meta")
        elif param.device.type == "meta":
            # Shape-only weights: materialise uninitialised memory, counts stay exact.
            data = torch.empty_like(param, device=device)
        else:
            data = param.detach().to(device)  # no copy when already on device
        memo[id(param)] = torch.nn.Parameter(data, requires_grad=param.requires_grad)
    for buffer in model.buffers():
        if fake is not None:
            memo[id(buffer)] = _fake(fake, buffer)
        elif device.type == "meta" or buffer.device.type == "meta":
            memo[id(buffer)] = torch.empty_like(buffer, device=device)
        else:
            # Buffers change in forward (BatchNorm running stats): always a real copy.
            memo[id(buffer)] = buffer.detach().to(device, copy=True)
    return memo


def _attributes(module: torch.nn.Module) -> Iterator[tuple[str, Any]]:
    """A module's own state other than its registered children, parameters and buffers."""
    for key, value in vars(module).items():
        if key not in ("_modules", "_parameters", "_buffers"):
            yield key, value


def _reachable(model: torch.nn.Module) -> Iterator[tuple[str, Any]]:
    """(path, object) for everything reachable from the modules' own attributes.

    Follows containers, plain objects' ``__dict__``, functions (closure cells,
    defaults), bound methods and ``functools.partial``; stops at tensors, modules
    (each module is visited from the tree) and atoms.
    """
    seen: set[int] = set()

    def walk(path: str, value: Any, depth: int) -> Iterator[tuple[str, Any]]:
        if isinstance(value, _ATOMS) or id(value) in seen or depth > MAX_DEPTH:
            return
        seen.add(id(value))
        yield path, value
        if isinstance(value, torch.Tensor | torch.nn.Module):
            return
        children: list[tuple[str, Any]] = []
        if isinstance(value, dict):
            children = [(f"{path}[{k!r}]", v) for k, v in value.items()]
        elif isinstance(value, list | tuple | set | frozenset):
            children = [(f"{path}[{i}]", v) for i, v in enumerate(value)]
        elif isinstance(value, types.FunctionType):
            cells = zip(value.__code__.co_freevars, value.__closure__ or (), strict=True)
            children = [(f"{path} (closes over {name})", _cell(c)) for name, c in cells]
            children += [(f"{path} (default)", d) for d in value.__defaults__ or ()]
            children += [(f"{path} (default)", d) for d in (value.__kwdefaults__ or {}).values()]
        elif isinstance(value, types.MethodType):
            children = [(path, value.__func__), (f"{path} (bound to)", value.__self__)]
        elif isinstance(value, functools.partial):
            children = [(path, value.func), *((f"{path} (argument)", a) for a in value.args)]
            children += [(f"{path} (argument)", v) for v in value.keywords.values()]
        elif hasattr(value, "__dict__") and not isinstance(value, type):
            children = [(f"{path}.{k}", v) for k, v in vars(value).items()]
        for child_path, child in children:
            yield from walk(child_path, child, depth + 1)

    for name, module in model.named_modules():
        prefix = name or type(model).__name__
        for key, value in _attributes(module):
            yield from walk(f"{prefix}.{key}", value, 0)


def _cell(cell: Any) -> Any:
    try:
        return cell.cell_contents
    except ValueError:  # an empty cell (a name assigned later in the enclosing scope)
        return None


def _fresh(function: types.FunctionType) -> types.FunctionType:
    """The same code with new, empty closure cells (filled once the copy exists)."""
    cells = tuple(types.CellType() for _ in function.__closure__ or ())
    fresh = types.FunctionType(
        function.__code__, function.__globals__, function.__name__, None, cells or None
    )
    fresh.__qualname__ = function.__qualname__
    fresh.__module__ = function.__module__
    fresh.__doc__ = function.__doc__
    return fresh


def _fill(fresh: types.FunctionType, original: types.FunctionType, memo: dict[int, Any]) -> None:
    """Copy the closure, defaults and attributes through ``memo`` into ``fresh``."""
    for new, old in zip(fresh.__closure__ or (), original.__closure__ or (), strict=True):
        try:
            value = old.cell_contents
        except ValueError:
            continue  # still empty in the original
        new.cell_contents = _copied(value, memo)
    fresh.__defaults__ = _copied(original.__defaults__, memo)
    fresh.__kwdefaults__ = _copied(original.__kwdefaults__, memo)
    fresh.__dict__.update(_copied(dict(original.__dict__), memo))


def _copied(value: Any, memo: dict[int, Any]) -> Any:
    try:
        return copy.deepcopy(value, memo)
    except Exception:
        # Not copyable (a lock, a file): shared. If it holds the caller's modules or
        # tensors, the scan below refuses the copy; otherwise sharing is harmless.
        return value


def _originals(model: torch.nn.Module) -> dict[int, str]:
    """id -> qualified name of the caller's modules, parameters and buffers."""
    found: dict[int, str] = {}
    for name, module in model.named_modules():
        found.setdefault(id(module), f"module {name or type(model).__name__}")
    for name, param in model.named_parameters():
        found.setdefault(id(param), f"parameter {name}")
    for name, buffer in model.named_buffers():
        found.setdefault(id(buffer), f"buffer {name}")
    return found


def private_copy(
    model: torch.nn.Module, device: torch.device, fake: FakeTensorMode | None = None
) -> torch.nn.Module:
    """A copy of ``model`` on ``device`` (or fake CPU tensors) sharing no mutable state.

    Raises :class:`ReferenceLeak` when the copy would still reach the caller's
    modules or tensors, and :class:`TorchwiseError` when the model cannot be copied.
    """
    memo = _weights_memo(model, device, fake)
    functions = [f for _, f in _reachable(model) if isinstance(f, types.FunctionType)]
    functions = [f for f in functions if f.__closure__ or f.__defaults__ or f.__kwdefaults__]
    for function in functions:
        memo[id(function)] = _fresh(function)
    try:
        work = copy.deepcopy(model, memo)
    except Exception as exc:
        raise TorchwiseError(
            f"cannot copy {type(model).__name__} to inspect it without touching it: "
            f"deepcopy raised {type(exc).__name__}: {exc}",
            hint="torchwise never runs your own model object; make the module deep-copyable "
            "(no open files, locks or generators as attributes)",
        ) from None
    for function in functions:
        _fill(memo[id(function)], function, memo)
    originals = _originals(model)
    for path, value in _reachable(work):
        if id(value) in originals:
            raise ReferenceLeak(
                f"cannot inspect {type(model).__name__} without touching it: {path} still "
                f"refers to your {originals[id(value)]} after copying",
                hint="torchwise runs a private copy and refuses to run your own weights; "
                "keep submodules as registered attributes (or closures over them) rather "
                "than in objects that cannot be deep-copied",
            )
    return work


def to_device(values: Any, device: torch.device, fake: FakeTensorMode | None = None) -> Any:
    """Move every tensor in a nested structure to ``device`` (meta: shape only)."""

    def move(value: Any) -> Any:
        if not isinstance(value, torch.Tensor):
            return value
        if fake is not None:
            return _fake(fake, value)
        if device.type == "meta":
            return torch.empty_like(value, device="meta")
        if value.device.type == "meta":
            # Shape-only inputs have no values: zeros are valid for any dtype and index.
            return torch.zeros_like(value, device=device)
        return value.to(device)

    return tree_map(move, values)


class Untouched(TorchDispatchMode):  # type: ignore[no-untyped-call]
    """Refuses any op on the caller's own parameters or buffers while a copy runs.

    A forward can reach the original model through a path no copy can redirect
    (a module-level global); the first op on one of its tensors stops the run
    before it executes, so nothing of the caller's changes.
    """

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.model_name = type(model).__name__
        self.originals = {
            id(t): name for name, t in [*model.named_parameters(), *model.named_buffers()]
        }

    def check(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """Raise if an op's arguments include an original tensor (aten args are flat
        or lists of tensors, so one level of lists is searched)."""
        for arg in (*args, *kwargs.values()):
            if isinstance(arg, list | tuple):
                for item in arg:
                    self._check_one(item)
            else:
                self._check_one(arg)

    def _check_one(self, value: Any) -> None:
        if isinstance(value, torch.Tensor) and id(value) in self.originals:
            raise ReferenceLeak(
                f"cannot inspect {self.model_name} without touching it: its forward used "
                f"your own {self.originals[id(value)]!r} through a reference the private copy "
                "cannot redirect (a global variable or an object outside the module tree)",
                hint="reach submodules through self (registered attributes) in forward",
            )

    def __torch_dispatch__(
        self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None
    ) -> Any:
        kwargs = kwargs or {}
        self.check(args, kwargs)
        return func(*args, **kwargs)
