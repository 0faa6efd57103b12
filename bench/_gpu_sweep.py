"""An exhaustive sweep of the GPU knobs and their pairs, written apart from tune's own step.

Used by bench/gpu_check.py. Each combination is one full AdamW training step in
plain PyTorch (host batch copied in, zero_grad, forward, cross-entropy, backward,
optimizer step), built fresh from the same initial weights, warmed up, then timed
step by step with CUDA events (on CPU, with the wall clock: the ``--dry-run``).
Nothing here imports torchwise's step: it is the independent reference that
tune's picks and correctness verdicts are judged against.

A combination "trains correctly" when its losses over the warm-up and timed steps
stay finite and its last is within ``TRAINS_TOLERANCE`` of the fp32 baseline's
last, relative to the baseline's first (:func:`judge_training`),
which every knob here should: they change precision, layout or kernels, not the
update.
"""

from __future__ import annotations

import copy
import itertools
import math
import statistics
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

#: the sweep's knobs, and tune's id for each
KNOBS = {
    "bf16": "bf16-autocast",
    "fp16": "fp16-autocast",
    "tf32": "tf32",
    "channels_last": "channels-last",
    "cudnn_benchmark": "cudnn-benchmark",
    "fused": "fused-optimizer",
    "graphs": "cuda-graphs",
    "zero_grad_in_place": "zero-grad-in-place",
    "pinned": "pinned-memory",
}
#: pairs that cannot run together (one autocast; GradScaler's inf check cannot be captured)
EXCLUSIVE = {frozenset({"bf16", "fp16"}), frozenset({"fp16", "graphs"})}
CONV_ONLY = {"channels_last", "cudnn_benchmark"}
TRAINS_TOLERANCE = 0.05
WARMUP = 3


def set_tf32(enabled: bool) -> None:
    """TF32 on or off for matmuls and convolutions (``fp32_precision`` from torch 2.9 on)."""
    matmul, cudnn = torch.backends.cuda.matmul, torch.backends.cudnn
    if hasattr(matmul, "fp32_precision") and hasattr(cudnn, "conv"):
        value = "tf32" if enabled else "ieee"
        matmul.fp32_precision = value
        cudnn.conv.fp32_precision = value
    else:
        matmul.allow_tf32 = enabled
        cudnn.allow_tf32 = enabled


def combinations(conv: bool) -> list[frozenset[str]]:
    """The baseline, every knob alone, then every compatible pair."""
    knobs = [k for k in KNOBS if conv or k not in CONV_ONLY]
    singles = [frozenset({k}) for k in knobs]
    pairs = [
        frozenset(p) for p in itertools.combinations(knobs, 2) if frozenset(p) not in EXCLUSIVE
    ]
    return [frozenset(), *singles, *pairs]


def label(combo: Iterable[str]) -> str:
    return " + ".join(sorted(combo)) or "fp32 baseline"


@dataclass
class Measured:
    combo: frozenset[str]
    step_s: float | None = None
    step_times_s: list[float] = field(default_factory=list)
    losses: list[float] = field(default_factory=list)
    error: str | None = None
    trains: bool | None = None

    def to_dict(self, baseline_s: float | None) -> dict[str, Any]:
        speedup = baseline_s / self.step_s if baseline_s and self.step_s else None
        return {
            "combo": sorted(self.combo),
            "label": label(self.combo),
            "step_s": self.step_s,
            "speedup": speedup,
            "losses": self.losses,
            "trains": self.trains,
            "error": self.error,
        }


class Step:
    """One combination's training step, on a fresh copy of ``model``."""

    def __init__(
        self, model: nn.Module, batch: tuple[torch.Tensor, torch.Tensor], combo: frozenset[str]
    ) -> None:
        self.combo = combo
        self.device = next(model.parameters()).device
        cuda = self.device.type == "cuda"
        if cuda:
            set_tf32("tf32" in combo)
            torch.backends.cudnn.benchmark = "cudnn_benchmark" in combo
        self.model = copy.deepcopy(model)
        if "channels_last" in combo:
            self.model = self.model.to(memory_format=torch.channels_last)  # type: ignore[call-overload]
        extra: dict[str, Any] = {}
        if "fused" in combo:
            extra["fused"] = True
        if "graphs" in combo and cuda:
            extra["capturable"] = True
        self.optimizer = torch.optim.AdamW(self.model.parameters(), **extra)
        scaler_device = self.device.type
        self.scaler = torch.amp.GradScaler(scaler_device) if "fp16" in combo else None
        inputs, target = batch
        if "pinned" in combo and cuda:
            inputs, target = inputs.pin_memory(), target.pin_memory()
        self.host = (inputs, target)
        self.dtype = (
            torch.bfloat16 if "bf16" in combo else torch.float16 if "fp16" in combo else None
        )
        self.graph: Any = None
        self.static: tuple[torch.Tensor, torch.Tensor] | None = None
        self.static_loss: torch.Tensor | None = None
        self.steps = 0

    def _to_device(self) -> tuple[torch.Tensor, torch.Tensor]:
        blocking = not ("pinned" in self.combo and self.device.type == "cuda")
        inputs = self.host[0].to(self.device, non_blocking=not blocking)
        target = self.host[1].to(self.device, non_blocking=not blocking)
        if "channels_last" in self.combo and inputs.dim() == 4:
            inputs = inputs.contiguous(memory_format=torch.channels_last)
        return inputs, target

    def _loss(self, inputs: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        graphs = "graphs" in self.combo
        context = (
            torch.autocast(self.device.type, dtype=self.dtype, cache_enabled=not graphs)
            if self.dtype is not None
            else torch.autocast(self.device.type, enabled=False)
        )
        with context:
            out = self.model(inputs)
            return F.cross_entropy(out.flatten(0, -2).float(), target.flatten())

    def _eager(self, inputs: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        self.optimizer.zero_grad(set_to_none="zero_grad_in_place" not in self.combo)
        loss = self._loss(inputs, target)
        if self.scaler is not None:
            self.scaler.scale(loss).backward()
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            loss.backward()
            self.optimizer.step()
        return loss.detach()

    def step(self) -> torch.Tensor:
        """One training step; with graphs, the first WARMUP run eagerly on a side stream."""
        inputs, target = self._to_device()
        self.steps += 1
        if "graphs" not in self.combo or self.device.type != "cuda":
            return self._eager(inputs, target)
        if self.graph is not None:
            assert self.static is not None and self.static_loss is not None
            self.static[0].copy_(inputs)
            self.static[1].copy_(target)
            self.graph.replay()
            return self.static_loss.detach().clone()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            loss = self._eager(inputs, target)
        torch.cuda.current_stream().wait_stream(side)
        if self.steps == WARMUP:
            self.static = (inputs.clone(), target.clone())
            self.graph = torch.cuda.CUDAGraph()
            self.optimizer.zero_grad(set_to_none=True)
            with torch.cuda.graph(self.graph):
                self.static_loss = self._loss(*self.static)
                self.static_loss.backward()
                self.optimizer.step()
        return loss


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_steps(step: Step, steps: int) -> list[float]:
    """Seconds of each of ``steps`` steps: CUDA events on the GPU, the wall clock on CPU."""
    if step.device.type != "cuda":
        out = []
        for _ in range(steps):
            started = time.perf_counter()
            step.step()
            out.append(time.perf_counter() - started)
        return out
    events = [
        (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
        for _ in range(steps)
    ]
    for begin, end in events:
        begin.record()
        step.step()
        end.record()
    torch.cuda.synchronize(step.device)
    return [begin.elapsed_time(end) / 1e3 for begin, end in events]


def measure(
    model: nn.Module,
    batch: tuple[torch.Tensor, torch.Tensor],
    combo: frozenset[str],
    *,
    steps: int = 10,
) -> Measured:
    """Build, warm up and time one combination; its losses over every step."""
    result = Measured(combo)
    torch.manual_seed(0)
    try:
        step = Step(model, batch, combo)
        losses = [step.step() for _ in range(WARMUP)]
        _sync(step.device)
        times = time_steps(step, steps)
        losses.append(step.step())
        result.losses = [float(v) for v in losses]
        result.step_times_s = times
        result.step_s = statistics.median(times)
    except Exception as exc:  # a combination that breaks is a row, not a crash
        result.error = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
    finally:
        if torch.cuda.is_available():
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
    return result


def judge_training(rows: list[Measured]) -> None:
    """Each row's ``trains``: finite losses whose last one is within TRAINS_TOLERANCE of
    the baseline's last, relative to the baseline's largest loss (its first).

    Relative to the losses' starting size, not to the last loss: a model that
    overfits the one batch ends near 0 (ResNet-50 on an H200: 0.0137), where
    0.0126 against 0.0137 is 8% of a loss that no longer means anything, and the
    first version called pinned memory "not training". Only the last loss: fp16's
    GradScaler skips its first steps while it calibrates the scale, so fp16's
    early losses stay where they started."""
    base = next((r for r in rows if not r.combo and r.losses), None)
    for row in rows:
        if not row.losses or base is None:
            row.trains = None if row.error is None else False
            continue
        scale = max(abs(v) for v in base.losses) or 1.0
        finite = all(math.isfinite(v) for v in row.losses)
        row.trains = finite and abs(row.losses[-1] - base.losses[-1]) <= TRAINS_TOLERANCE * scale


def retime(
    model: nn.Module,
    batch: tuple[torch.Tensor, torch.Tensor],
    combos: list[frozenset[str]],
    *,
    rounds: int = 3,
    steps: int = 10,
    build: Callable[..., Measured] = measure,
) -> dict[str, float | None]:
    """Median step time of each combination over ``rounds`` alternating fresh builds."""
    times: dict[str, list[float]] = {label(c): [] for c in combos}
    for _ in range(rounds):
        for combo in combos:
            row = build(model, batch, combo, steps=steps)
            times[label(combo)] += row.step_times_s
    return {k: statistics.median(v) if v else None for k, v in times.items()}
