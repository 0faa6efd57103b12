"""One full training step (forward, loss, backward, optimizer step) under chosen settings.

A :class:`Workload` is what the user trains: their model (never modified), a
batch or a loader, a loss and an optimizer recipe. A :class:`TrainingStep` is one
arm of a trial: a private deep copy of the model with its own optimizer, built
under :class:`StepSettings` (channels_last, autocast, fused optimizer,
torch.compile, ...), whose :meth:`~TrainingStep.run` executes real steps.

The step is the canonical loop of :mod:`torchwise.tune.loop`:

    batch -> device; optimizer.zero_grad(); output = model(batch);
    loss = loss_fn(output, target); loss.backward(); optimizer.step()
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import itertools
import signal
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from torchwise.errors import TorchwiseError
from torchwise.tensortree import map_tensors, tensors_in
from torchwise.tune.optim import OptimizerSpec

if TYPE_CHECKING:
    from torchwise.tune.graphs import GraphedStep
    from torchwise.tune.loader import LoaderSettings, LoaderSource

LossFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
_AUTOCAST_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


@dataclass(frozen=True)
class StepSettings:
    """The knobs a step runs under; the defaults are plain fp32 eager PyTorch."""

    channels_last: bool = False
    autocast: str | None = None  # "bf16" | "fp16"
    grad_scaler: bool = False
    optimizer_impl: str | None = None  # None: torch's default; "foreach" | "fused" | "for-loop"
    compile: bool = False
    compile_backend: str = "inductor"
    checkpointing: bool = False
    set_to_none: bool = True
    threads: int | None = None
    tf32: bool = False
    cudnn_benchmark: bool = False
    pinned: bool = False
    cuda_graph: bool = False
    loader: LoaderSettings | None = None

    def merged(self, **changes: Any) -> StepSettings:
        return dataclasses.replace(self, **changes)


@dataclass
class Batch:
    """One batch as the step consumes it: forward arguments and the loss target."""

    args: tuple[Any, ...]
    kwargs: dict[str, Any] = field(default_factory=dict)
    target: torch.Tensor | None = None


@dataclass
class Workload:
    """What is being trained. ``batch`` is a host-side example batch with its target."""

    model: nn.Module
    batch: Batch
    loss_fn: LossFn
    optimizer: OptimizerSpec
    device: torch.device
    loader: LoaderSource | None = None
    name: str = "model"


def primary_output(out: Any) -> torch.Tensor:
    """The tensor the loss is computed on: the output, ``.logits``, or the first float tensor."""
    if isinstance(out, torch.Tensor):
        return out
    logits = out.get("logits") if isinstance(out, Mapping) else getattr(out, "logits", None)
    if isinstance(logits, torch.Tensor):
        return logits
    for tensor in tensors_in(out if not hasattr(out, "to_tuple") else out.to_tuple()):
        if tensor.is_floating_point():
            return tensor
    raise TorchwiseError(
        f"the model returned {type(out).__name__} with no floating-point tensor in it",
        hint="tune needs forward() to return a tensor, a tuple/dict of tensors or .logits",
    )


def copy_model(model: nn.Module) -> nn.Module:
    """A private deep copy: trials train it, the user's model is never touched."""
    try:
        return copy.deepcopy(model)
    except Exception as exc:
        raise TorchwiseError(
            f"tune trains private copies of the model, but copy.deepcopy({type(model).__name__}) "
            f"raised {type(exc).__name__}: {exc}",
            hint="make the model deep-copyable (no open files, locks or generators as attributes)",
        ) from None


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


# -- process-wide settings -------------------------------------------------------


@contextlib.contextmanager
def global_settings(settings: StepSettings, device: torch.device) -> Iterator[None]:
    """Apply the process-wide knobs (threads, TF32, cudnn.benchmark) and restore them after."""
    saved_threads = torch.get_num_threads()
    cuda = device.type == "cuda"
    saved_tf32 = _tf32_state() if cuda else None
    saved_benchmark = torch.backends.cudnn.benchmark
    try:
        if settings.threads is not None:
            torch.set_num_threads(settings.threads)
        if cuda:
            _set_tf32(settings.tf32)
            torch.backends.cudnn.benchmark = settings.cudnn_benchmark
        yield
    finally:
        if torch.get_num_threads() != saved_threads:
            torch.set_num_threads(saved_threads)
        if saved_tf32 is not None:
            _restore_tf32(saved_tf32)
        torch.backends.cudnn.benchmark = saved_benchmark


def _cudnn_conv() -> Any:
    # torch.backends.cudnn.conv exists from torch 2.9 on; its stubs do not declare it.
    return torch.backends.cudnn.conv  # type: ignore[attr-defined]


def _tf32_state() -> tuple[Any, ...]:
    if hasattr(torch.backends.cuda.matmul, "fp32_precision"):
        return (
            "precision",
            torch.backends.cuda.matmul.fp32_precision,
            _cudnn_conv().fp32_precision,
        )
    return ("allow", torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)


def _set_tf32(enabled: bool) -> None:
    # torch >= 2.9 controls TF32 per backend and op with ``fp32_precision``
    # ("ieee" | "tf32"); older releases have the ``allow_tf32`` booleans.
    if hasattr(torch.backends.cuda.matmul, "fp32_precision"):
        value = "tf32" if enabled else "ieee"
        torch.backends.cuda.matmul.fp32_precision = value
        _cudnn_conv().fp32_precision = value
    else:
        torch.backends.cuda.matmul.allow_tf32 = enabled
        torch.backends.cudnn.allow_tf32 = enabled


def _restore_tf32(state: tuple[Any, ...]) -> None:
    if state[0] == "precision":
        torch.backends.cuda.matmul.fp32_precision = state[1]
        _cudnn_conv().fp32_precision = state[2]
    else:
        torch.backends.cuda.matmul.allow_tf32 = state[1]
        torch.backends.cudnn.allow_tf32 = state[2]


class CompileTimeout(TimeoutError):
    """torch.compile's first step took longer than its budget."""


@contextlib.contextmanager
def time_limit(seconds: float | None, what: str) -> Iterator[None]:
    """Interrupt the block after ``seconds`` with :class:`CompileTimeout` (main thread, Unix).

    torch.compile spends its time in Python and in waits on the C++ compiler, so a
    SIGALRM lands promptly. Elsewhere (Windows, worker threads) the block runs
    unbounded.
    """
    usable = (
        seconds is not None
        and hasattr(signal, "setitimer")
        and threading.current_thread() is threading.main_thread()
    )
    if not usable:
        yield
        return

    def interrupt(signum: int, frame: Any) -> None:
        raise CompileTimeout(f"{what} took longer than its {seconds:g} s budget")

    previous = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, seconds)  # type: ignore[arg-type]
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


# -- the step ------------------------------------------------------------------


class TrainingStep:
    """One arm: a private model copy, its optimizer, and a source of batches."""

    def __init__(self, workload: Workload, settings: StepSettings = StepSettings()) -> None:
        self.workload = workload
        self.settings = settings
        self.device = workload.device
        if settings.cuda_graph and settings.grad_scaler:
            from torchwise.tune.graphs import NotApplicable

            raise NotApplicable(
                "GradScaler reads its inf check back to the host every step: a CUDA graph "
                "cannot capture that"
            )
        self.module = copy_model(workload.model).to(self.device)
        self.module.train()
        if settings.channels_last:
            self.module = self.module.to(memory_format=torch.channels_last)  # type: ignore[call-overload]
        if settings.checkpointing:
            from torchwise.tune.checkpointing import apply_checkpointing

            apply_checkpointing(self.module)
        self.forward_module: Callable[..., Any] = self.module
        if settings.compile:
            self.forward_module = torch.compile(self.module, backend=settings.compile_backend)
        self.optimizer = workload.optimizer.build(self.module.parameters(), **self._impl_kwargs())
        self.scaler = self._scaler() if settings.grad_scaler else None
        self.batches = self._batches()
        self.losses: list[torch.Tensor] = []
        self._graph: GraphedStep | None = None

    def _scaler(self, init_scale: float = 2.0**16) -> torch.amp.GradScaler:
        return torch.amp.GradScaler(self.device.type, init_scale=init_scale)

    def calibrate_scaler(self, batch: Batch, max_steps: int = 32) -> tuple[int, float]:
        """Start GradScaler at the scale its first steps would settle on: (steps skipped, scale).

        GradScaler starts at 2**16 and halves its scale at every step whose
        gradients overflow, skipping that step: expected behaviour, not a bug. A
        throwaway copy takes those steps on ``batch``; this arm's scaler then
        starts at the first scale that did not overflow, so its own steps are all
        real ones (and the arm's model is untouched by the probe).
        """
        assert self.scaler is not None
        probe = TrainingStep(self.workload, dataclasses.replace(self.settings, cuda_graph=False))
        assert probe.scaler is not None
        skipped = 0
        with probe.scope():
            for _ in range(max_steps):
                before = probe.scaler.get_scale()
                probe.step_on(batch)
                if probe.scaler.get_scale() >= before:
                    break
                skipped += 1
        scale = before
        self.scaler = self._scaler(scale)
        return skipped, scale

    def _impl_kwargs(self) -> dict[str, Any]:
        impl, kwargs = self.settings.optimizer_impl, {}
        if impl == "fused":
            kwargs["fused"] = True
        elif impl == "foreach":
            kwargs["foreach"] = True
        elif impl == "for-loop":
            kwargs["foreach"] = False
        if self.settings.cuda_graph and self.workload.optimizer.accepts("capturable"):
            kwargs["capturable"] = True
        return kwargs

    def _batches(self) -> Iterator[Batch]:
        if self.workload.loader is not None:
            return self.workload.loader.batches(self.settings.loader, self.device)
        batch = self.workload.batch
        if self.settings.pinned and self.device.type == "cuda":
            batch = Batch(*map_tensors((batch.args, batch.kwargs, batch.target), _pin))
        return itertools.repeat(batch)

    def scope(self) -> contextlib.AbstractContextManager[None]:
        return global_settings(self.settings, self.device)

    # -- phases, each usable on its own for the profile's split -------------------

    def next_batch(self) -> Batch:
        """Fetch the next host batch and move it to the device (the "data" phase)."""
        batch = next(self.batches)
        non_blocking = self.settings.pinned and self.device.type == "cuda"
        four_d = self.settings.channels_last

        def move(t: torch.Tensor) -> torch.Tensor:
            t = t.to(self.device, non_blocking=non_blocking)
            if four_d and t.dim() == 4 and t.is_floating_point():
                t = t.contiguous(memory_format=torch.channels_last)
            return t

        args, kwargs, target = map_tensors((batch.args, batch.kwargs, batch.target), move)
        return Batch(args, kwargs, target)

    def autocast(self) -> contextlib.AbstractContextManager[Any]:
        if self.settings.autocast is None:
            return contextlib.nullcontext()
        # A captured graph must not reuse autocast's cast cache across replays
        # (torch.cuda.graphs' documented requirement).
        return torch.autocast(
            self.device.type,
            dtype=_AUTOCAST_DTYPES[self.settings.autocast],
            cache_enabled=not self.settings.cuda_graph,
        )

    def forward_loss(self, batch: Batch) -> torch.Tensor:
        with self.autocast():
            output = self.forward_module(*batch.args, **batch.kwargs)
            prediction = primary_output(output)
            target = batch.target
            if target is None:  # a loader of bare inputs: the made-up labels, cut to size
                target = self.workload.batch.target
                if target is None:
                    raise TorchwiseError("no target for the loss: the loader's batches carry none")
                target = target[: prediction.shape[0]]
            return self.workload.loss_fn(prediction, target.to(self.device))

    def backward(self, loss: torch.Tensor) -> None:
        scaled = self.scaler.scale(loss) if self.scaler is not None else loss
        scaled.backward()  # type: ignore[no-untyped-call]

    def optimizer_step(self) -> None:
        if self.scaler is not None:
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            self.optimizer.step()

    def zero_grad(self) -> None:
        self.optimizer.zero_grad(set_to_none=self.settings.set_to_none)

    # -- whole steps -------------------------------------------------------------

    def step(self) -> torch.Tensor:
        """One full training step; returns the loss (detached, not synchronised)."""
        if self.settings.cuda_graph:
            if self._graph is None:
                from torchwise.tune.graphs import GraphedStep

                self._graph = GraphedStep(self)
            return self._graph.step(self.next_batch())
        batch = self.next_batch()
        self.zero_grad()
        loss = self.forward_loss(batch)
        self.backward(loss)
        self.optimizer_step()
        return loss.detach()

    def release_graph(self) -> None:
        """Forget a captured CUDA graph: the next steps warm up and capture again (after a
        correctness check, which captured the step with dropout off)."""
        self._graph = None

    def step_on(self, batch: Batch) -> torch.Tensor:
        """One step on the given host batch (the correctness check feeds every arm the same)."""
        saved, self.batches = self.batches, itertools.repeat(batch)
        try:
            return self.step()
        finally:
            self.batches = saved

    def run(self, steps: int) -> None:
        """``steps`` steps, then wait for the device: the unit the session times."""
        loss = None
        for _ in range(steps):
            loss = self.step()
        synchronize(self.device)
        if loss is not None:
            self.losses.append(loss)
            del self.losses[:-4]

    def last_loss(self) -> float:
        return float(self.losses[-1]) if self.losses else float("nan")


def _pin(t: torch.Tensor) -> torch.Tensor:
    return t.pin_memory() if t.device.type == "cpu" else t
