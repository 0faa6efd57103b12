"""Module calls: which model ran where, in which mode, and whether a backward used it.

Two global forward hooks see every ``nn.Module`` call. A call made from outside
any other module's forward is a *root call* (``model(x)`` in the training or
evaluation loop; a loss module without parameters is not one): it records the
user's line, the grad mode, ``model.training``, the mode-dependent layers
(dropout, batch norm) that are active, and how many backwards had run. A
prehook on its output's autograd node marks the call *used* when a backward
reaches it. The evaluation checks (``run/monitors/evaluation.py``) judge these
records: an evaluation loop is two or more consecutive root calls at one line
that no backward used.

Every module's first call is kept too (its line and whether grad was on), for
the report of a parameter that never gets a gradient.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.nn.modules import module as module_hooks

from torchwise.run.monitors.loader import tensors_in
from torchwise.run.session import Session
from torchwise.run.sites import Site, user_site

MAX_ROOT_CALLS = 4000
#: root calls per line whose mode-dependent layers are listed (and every mode change)
MODE_SNAPSHOTS = 8


#: loose model calls fingerprinted per optimizer step (TWR304 compares them across steps)
FINGERPRINTS_PER_STEP = 16


@dataclass
class RootCall:
    """One call of a model from the user's loop."""

    number: int
    module_id: int
    module_type: str
    site: Site | None
    grad: bool
    training: bool
    backwards_before: int
    pass_number: int | None
    used: bool = False
    #: mode-dependent layers in training mode / in eval mode (names), when listed
    train_layers: tuple[str, ...] | None = None
    eval_layers: tuple[str, ...] | None = None
    fingerprint: tuple[object, ...] | None = None
    #: samples in the call's first tensor argument: its leading size when it
    #: has two or more dimensions, else 1 (one state, one token sequence)
    samples: int = 1


@dataclass
class ModuleRun:
    """A module's first call, and whether any call ran with grad enabled."""

    site: Site | None
    grad: bool
    order: int  # the module's place in the order of first calls


def _in_data_worker() -> bool:
    """Whether this process is a DataLoader worker (forked with the run's hooks)."""
    return torch.utils.data.get_worker_info() is not None


def _samples(args: tuple[Any, ...]) -> int:
    first = next((a for a in args if isinstance(a, torch.Tensor)), None)
    if first is None or first.dim() < 2:
        return 1
    return int(first.shape[0])


def mode_layers(model: nn.Module) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The layers whose behaviour depends on ``training``: (in train mode, in eval mode).

    Dropout with ``p > 0``, batch norm that tracks running statistics, and
    stochastic-depth layers (``DropPath``) with a positive drop probability.
    """
    in_train: list[str] = []
    in_eval: list[str] = []
    for name, layer in model.named_modules():
        if not _mode_dependent(layer):
            continue
        (in_train if layer.training else in_eval).append(name or type(layer).__name__)
    return tuple(in_train), tuple(in_eval)


def _mode_dependent(layer: nn.Module) -> bool:
    if isinstance(layer, nn.modules.dropout._DropoutNd):
        return float(layer.p) > 0
    if isinstance(layer, nn.modules.batchnorm._BatchNorm):
        return bool(layer.track_running_stats)
    if (
        "droppath" in type(layer).__name__.lower()
        or "stochasticdepth" in type(layer).__name__.lower()
    ):
        return float(getattr(layer, "drop_prob", getattr(layer, "p", 0.0)) or 0.0) > 0
    return False


def _has_parameters(module: nn.Module) -> bool:
    return next(iter(module.parameters()), None) is not None


class ModuleMonitor:
    """Global forward hooks that keep root calls and every module's first call."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.depth = 0
        self.calls: list[RootCall] = []
        #: strong references: the script's objects die with its namespace, before judging
        self.roots: dict[int, nn.Module] = {}
        self.runs: dict[int, ModuleRun] = {}
        self._has_params: dict[int, bool] = {}
        self._snapshots: dict[tuple[Site | None, int], int] = {}
        self._last_mode: dict[tuple[Site | None, int], bool] = {}
        self._fingerprinted: dict[int, int] = {}  # step -> loose calls fingerprinted
        #: the latest root call with grad enabled: (module, args, kwargs), for replays
        self.last_forward: tuple[nn.Module, tuple[Any, ...], dict[str, Any]] | None = None
        #: module id -> (line of the last .eval(), line of the last .train())
        self.mode_calls: dict[int, tuple[Site | None, Site | None]] = {}

    def install(self) -> None:
        patches = self.session.patches
        patches.handle(module_hooks.register_module_forward_pre_hook(self._before))
        patches.handle(
            module_hooks.register_module_forward_hook(
                self._after, with_kwargs=True, always_call=True
            )
        )
        original_train = nn.Module.train
        monitor = self

        def train(module: nn.Module, mode: bool = True) -> nn.Module:
            site = user_site()
            if site is not None:
                last_eval, last_train = monitor.mode_calls.get(id(module), (None, None))
                pair = (last_eval, site) if mode else (site, last_train)
                monitor.mode_calls[id(module)] = pair
            return original_train(module, mode)

        patches.setattr(nn.Module, "train", train)

    # hooks -----------------------------------------------------------------------
    def _before(self, module: nn.Module, args: tuple[Any, ...]) -> None:
        self.depth += 1
        key = id(module)
        if self.depth == 1:
            if _in_data_worker():
                return  # a DataLoader worker's transforms: not the program's model calls
            if key not in self._has_params:
                self._has_params[key] = _has_parameters(module)
            if self._has_params[key]:  # a transform or a loss module is not a model call
                self.session.record_root_call()
            self._root_call(module, args)
        elif key not in self.runs:
            self.runs[key] = ModuleRun(user_site(), torch.is_grad_enabled(), len(self.runs))
        elif not self.runs[key].grad and torch.is_grad_enabled():
            self.runs[key].grad = True

    def _after(
        self,
        module: nn.Module,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        output: Any = None,
    ) -> None:
        self.depth = max(0, self.depth - 1)
        if output is None:
            return
        if self.depth == 0 and self.calls and self.calls[-1].module_id == id(module):
            call = self.calls[-1]
            if call.grad:
                self.last_forward = (module, args, kwargs)
                self._watch_use(call, output)

    def _root_call(self, module: nn.Module, args: tuple[Any, ...]) -> None:
        key = id(module)
        if key not in self._has_params:
            self._has_params[key] = _has_parameters(module)
        if not self._has_params[key] or len(self.calls) >= MAX_ROOT_CALLS:
            return
        self.roots.setdefault(key, module)
        if key not in self.runs:
            self.runs[key] = ModuleRun(None, torch.is_grad_enabled(), len(self.runs))
        site = user_site()
        session = self.session
        running = session.current_pass()
        call = RootCall(
            number=len(self.calls) + 1,
            module_id=key,
            module_type=type(module).__name__,
            site=site,
            grad=torch.is_grad_enabled() and not torch.is_inference_mode_enabled(),
            training=module.training,
            backwards_before=session.backwards,
            pass_number=running.number if running is not None else None,
            samples=_samples(args),
        )
        self.runs[key].site = self.runs[key].site or site
        slot = (site, key)
        taken = self._snapshots.get(slot, 0)
        if taken < MODE_SNAPSHOTS or self._last_mode.get(slot) != module.training:
            call.train_layers, call.eval_layers = mode_layers(module)
            self._snapshots[slot] = taken + 1
        self._last_mode[slot] = module.training
        if running is None and session.steps < 8 and self._fingerprints_at(session.steps):
            from torchwise.run.monitors.loader import fingerprint

            call.fingerprint = fingerprint(args)
        self.calls.append(call)

    def _fingerprints_at(self, step: int) -> bool:
        """Whether a loose call at this step is fingerprinted: the first few of each step
        only (an agent's rollout calls its policy hundreds of times per step)."""
        taken = self._fingerprinted.get(step, 0)
        self._fingerprinted[step] = taken + 1
        return taken < FINGERPRINTS_PER_STEP

    def _watch_use(self, call: RootCall, output: Any) -> None:
        def mark(*_: Any) -> None:
            call.used = True

        for tensor in tensors_in(output, limit=8):
            node = tensor.grad_fn
            if node is not None:
                node.register_prehook(mark)
                node.metadata.setdefault("torchwise_call", call.number)  # type: ignore[attr-defined]

    # queries ---------------------------------------------------------------------
    def root_modules(self) -> list[nn.Module]:
        return list(self.roots.values())

    def parameter_owners(self) -> dict[int, tuple[str, int]]:
        """id(parameter) -> (qualified name, id of the module that holds it)."""
        owners: dict[int, tuple[str, int]] = {}
        for root in self.root_modules():
            for prefix, module in root.named_modules():
                for name, parameter in module.named_parameters(recurse=False):
                    qualified = f"{prefix}.{name}" if prefix else name
                    owners.setdefault(id(parameter), (qualified, id(module)))
        return owners

    def module_names(self) -> dict[int, str]:
        names: dict[int, str] = {}
        for root in self.root_modules():
            for prefix, module in root.named_modules():
                names.setdefault(id(module), prefix or type(module).__name__)
        return names
