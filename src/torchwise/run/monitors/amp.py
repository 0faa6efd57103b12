"""The order of calls around a step: schedulers, GradScaler, clipping (TWR105-TWR108).

These bugs are in the sequence of calls, so they are judged from the calls,
whether or not the GradScaler is active on this machine: ``torch.cuda.amp.
GradScaler()`` disables itself without a GPU, and the misuse it would crash or
mis-scale on the GPU node is still visible in what the script calls. A scaler
the script itself built with ``enabled=False`` is left alone.

- TWR105: a learning-rate scheduler's first ``step()`` comes before any
  optimizer step (a GradScaler step that skipped the optimizer counts as one);
- TWR106: ``clip_grad_norm_``/``clip_grad_value_`` on gradients a GradScaler
  scaled and ``unscale_`` has not unscaled;
- TWR107: ``scaler.step(optimizer)`` twice for one optimizer with no
  ``scaler.update()`` between (the GPU raises; the scale never adapts);
- TWR108: ``optimizer.step()`` called directly after ``scaler.scale(loss).backward()``,
  which applies the scaled gradients.
"""

from __future__ import annotations

import functools
import inspect
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.amp.grad_scaler import GradScaler
from torch.optim import lr_scheduler
from torch.optim.optimizer import Optimizer

from torchwise.run.monitors.optim import OptimizerMonitor
from torchwise.run.session import Session
from torchwise.run.sites import is_user_file, user_site


@dataclass
class ScalerState:
    intended: bool  # what the script asked for (enabled=...), not what this machine allows
    pending: bool = False  # scale() called since update()
    unscaled: set[int] = field(default_factory=set)  # optimizers unscaled since update()
    stepped: set[int] = field(default_factory=set)  # optimizers stepped since update()
    in_step: bool = False
    ever_stepped: set[int] = field(default_factory=set)


class AmpMonitor:
    """Wraps LRScheduler.step, GradScaler's methods and the clipping functions."""

    def __init__(self, session: Session, optimizers: OptimizerMonitor) -> None:
        self.session = session
        self.optimizers = optimizers
        self.scalers: dict[int, tuple[weakref.ref[GradScaler], ScalerState]] = {}
        self.skipped: dict[int, int] = {}  # optimizer id -> scaler.step calls
        self.schedulers_seen: set[int] = set()

    def install(self) -> None:
        patches = self.session.patches
        schedulers = [lr_scheduler.LRScheduler] + [
            cls for cls in vars(lr_scheduler).values()
            if isinstance(cls, type) and issubclass(cls, lr_scheduler.LRScheduler)
            and "step" in vars(cls) and cls is not lr_scheduler.LRScheduler
        ]  # fmt: skip
        for cls in schedulers:
            patches.setattr(cls, "step", self._scheduler_step(vars(cls)["step"]))
        for name in ("__init__", "scale", "unscale_", "step", "update"):
            patches.setattr(
                GradScaler,
                name,
                getattr(self, f"_wrap_{name.strip('_')}")(getattr(GradScaler, name)),
            )
        for module in (torch.nn.utils, torch.nn.utils.clip_grad):
            for name in ("clip_grad_norm_", "clip_grad_value_"):
                if hasattr(module, name):
                    patches.setattr(module, name, self._clip(getattr(module, name)))
        self.session.listen("step_pre", self._optimizer_step)

    def _state(self, scaler: GradScaler) -> ScalerState | None:
        entry = self.scalers.get(id(scaler))
        return entry[1] if entry is not None and entry[0]() is scaler else None

    # schedulers -----------------------------------------------------------------
    def _scheduler_step(self, original: Callable[..., Any]) -> Callable[..., Any]:
        monitor = self

        @functools.wraps(original)
        def step(scheduler: Any, *args: Any, **kwargs: Any) -> Any:
            caller = inspect.currentframe()
            caller = caller.f_back if caller is not None else None
            first_user_call = (
                id(scheduler) not in monitor.schedulers_seen
                and not isinstance(scheduler, lr_scheduler.ReduceLROnPlateau)
                and caller is not None
                and is_user_file(caller.f_code.co_filename)
            )
            if first_user_call:
                monitor.schedulers_seen.add(id(scheduler))
            if first_user_call and not monitor.session.replaying:
                optimizer = scheduler.optimizer
                done = monitor.session.optimizer_steps.get(id(optimizer), 0)
                if done + monitor.skipped.get(id(optimizer), 0) == 0:
                    monitor.session.report(
                        "TWR105",
                        user_site(),
                        f"{type(scheduler).__name__}.step() is called before the first "
                        "optimizer.step(): the first learning rate of the schedule is skipped",
                        evidence={"optimizer steps so far": 0},
                    )
            return original(scheduler, *args, **kwargs)

        return step

    # GradScaler ------------------------------------------------------------------
    def _wrap_init(self, original: Callable[..., Any]) -> Callable[..., Any]:
        signature = inspect.signature(original)
        monitor = self

        @functools.wraps(original)
        def init(scaler: GradScaler, *args: Any, **kwargs: Any) -> None:
            original(scaler, *args, **kwargs)
            try:
                enabled = signature.bind(scaler, *args, **kwargs).arguments.get("enabled", True)
            except TypeError:
                enabled = True
            monitor.scalers[id(scaler)] = (weakref.ref(scaler), ScalerState(bool(enabled)))

        return init

    def _wrap_scale(self, original: Callable[..., Any]) -> Callable[..., Any]:
        monitor = self

        @functools.wraps(original)
        def scale(scaler: GradScaler, outputs: Any) -> Any:
            state = monitor._state(scaler)
            if state is not None:
                state.pending = True
            return original(scaler, outputs)

        return scale

    def _wrap_unscale(self, original: Callable[..., Any]) -> Callable[..., Any]:
        monitor = self

        @functools.wraps(original)
        def unscale_(scaler: GradScaler, optimizer: Optimizer) -> Any:
            state = monitor._state(scaler)
            if state is not None:
                state.unscaled.add(id(optimizer))
            return original(scaler, optimizer)

        return unscale_

    def _wrap_step(self, original: Callable[..., Any]) -> Callable[..., Any]:
        monitor = self

        @functools.wraps(original)
        def step(scaler: GradScaler, optimizer: Optimizer, *args: Any, **kwargs: Any) -> Any:
            state = monitor._state(scaler)
            monitor.skipped[id(optimizer)] = monitor.skipped.get(id(optimizer), 0) + 1
            if state is None or not state.intended:
                return original(scaler, optimizer, *args, **kwargs)
            if id(optimizer) in state.stepped:
                monitor.session.report(
                    "TWR107",
                    user_site(),
                    "scaler.step() is called again for the same optimizer without "
                    "scaler.update() in between: on a GPU this raises 'step() has already "
                    "been called since the last update()', and the loss scale never adapts",
                )
            state.stepped.add(id(optimizer))
            state.ever_stepped.add(id(optimizer))
            state.in_step = True
            try:
                return original(scaler, optimizer, *args, **kwargs)
            finally:
                state.in_step = False

        return step

    def _wrap_update(self, original: Callable[..., Any]) -> Callable[..., Any]:
        monitor = self

        @functools.wraps(original)
        def update(scaler: GradScaler, *args: Any, **kwargs: Any) -> Any:
            state = monitor._state(scaler)
            if state is not None:
                state.pending = False
                state.unscaled.clear()
                state.stepped.clear()
            return original(scaler, *args, **kwargs)

        return update

    def _active(self) -> list[ScalerState]:
        return [
            state for ref, state in self.scalers.values() if ref() is not None and state.intended
        ]

    def _optimizer_step(self, optimizer: Optimizer) -> None:
        if self.session.replaying:
            return
        for state in self._active():
            if state.pending and not state.in_step and id(optimizer) not in state.ever_stepped:
                self.session.report(
                    "TWR108",
                    user_site(),
                    f"{type(optimizer).__name__}.step() is called directly after "
                    "scaler.scale(loss).backward(): it applies gradients multiplied by the "
                    "loss scale (65536 at first); call scaler.step(optimizer) and scaler.update()",
                )

    # clipping --------------------------------------------------------------------
    def _clip(self, original: Callable[..., Any]) -> Callable[..., Any]:
        monitor = self

        @functools.wraps(original)
        def clip(parameters: Any, *args: Any, **kwargs: Any) -> Any:
            if isinstance(parameters, torch.Tensor):
                parameters = [parameters]
            else:
                parameters = list(parameters)
            monitor._check_clip(parameters, original.__name__)
            return original(parameters, *args, **kwargs)

        return clip

    def _check_clip(self, parameters: list[torch.Tensor], name: str) -> None:
        active = [state for state in self._active() if state.pending]
        if not active or self.session.replaying:
            return
        keys = {id(p) for p in parameters}
        for optimizer in self.optimizers.known_optimizers():
            held = any(id(p) in keys for p in self.optimizers.optimizer_params(optimizer))
            if held and all(id(optimizer) not in state.unscaled for state in active):
                self.session.report(
                    "TWR106",
                    user_site(),
                    f"{name} clips gradients that a GradScaler scaled (by 65536 at first): "
                    "the threshold is compared with scaled values; call "
                    "scaler.unscale_(optimizer) before clipping",
                )
                return
