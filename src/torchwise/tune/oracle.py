"""Does a knob keep training correct? Its loss trajectory against fp32's, in a calibrated band.

A knob is *incorrect* only when it moves training further from the fp32
baseline than the change it makes explains, measured on this model:

- **The trajectory.** From identical weights, each arm trains ``steps`` steps on
  the same batch under the same seeds. Recorded per step: the step's own loss
  (in the arm's precision), and the fp32 loss at the arm's new weights, from a
  reference copy in train mode (batch statistics) and in eval mode (running
  statistics). A wrong forward, backward or update, or a step that is not the
  user's step, moves these by the size of training's own progress.
- **The band.** *Twins* of the baseline differ from it only by what the knob's
  change explains: the batch permuted (every batch reduction summed in another
  order), and the fp32 step with the knob's rounding emulated
  (:class:`torchwise.numerics.Rounded`; TF32's for the fp32 knobs, whose other
  kernels and layouts may differ as much as the TF32 convolutions PyTorch runs
  by default on Ampere and newer GPUs). The knob's largest deviation from the
  baseline must stay within :data:`MARGIN` times the twins' largest deviation:
  real autocast rounds more ops than the twin does, and a trajectory's
  sensitivity (batch statistics, Adam's sign-like first steps) amplifies both
  alike, so the ratio, not the raw size, is what is judged.
- **Dropout** is switched off in every arm and in the reference (modules' ``p``
  to 0, functional dropout and attention dropout to 0: :class:`NoDropout`), so
  train mode with batch statistics is deterministic and comparable. A model
  still random after that (stochastic depth drawn by hand) is judged in eval
  mode, and the result says so.
- **GradScaler** skips its first steps while its scale is too large for the
  gradients; that is how it works, not a bug. A throwaway copy finds the scale
  first (:meth:`~torchwise.tune.step.TrainingStep.calibrate_scaler`), and the
  arm is judged from that scale on.
- **Too sensitive for the precision.** A low-precision knob whose rounding moves
  the losses by more than :data:`HARM` of their size is incorrect even when the
  twin moves them as much: the model itself does not train the same way in that
  precision (doctor's amp-drift check shows where).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.overrides import TorchFunctionMode

from torchwise.numerics import BF16, FP16, FP32, TF32, Band, Precision, Rounded, band, deviation
from torchwise.tensortree import map_tensors, tensors_in
from torchwise.tune.step import (
    Batch,
    StepSettings,
    TrainingStep,
    Workload,
    copy_model,
    primary_output,
)

#: Steps in a trajectory: enough for the update to show in the losses after it
#: (one step's update is first-order small), few enough to stay cheap.
CHECK_STEPS = 3
#: How many times the twins' deviation a knob may reach. Real autocast rounds
#: more ops than the twin (elementwise ops in low precision too); the measured
#: ratios of correct knobs are in docs/benchmarks.md.
MARGIN = 8.0
#: A low-precision knob that moves the losses by more than this share of their
#: size is not a safe speedup for this model (doctor's amp-drift warns at 5%).
HARM = 0.05
#: ... and by more than this many times fp32's own move under another summation order.
#: Measured on CPU (bf16, 3 and 5 steps, seeds 0-2): correct knobs move the losses by
#: 5 to 16,000 times that move but under 0.2% of their size, a model bf16 cannot train
#: by 4e9 to 2e10 times it and over 500%: the 5% limit tells them apart, and this factor
#: only spares a trajectory as chaotic as fp32's own (docs/benchmarks.md, the oracle).
CHAOS = 2.0

_DROPOUTS = (nn.Dropout, nn.Dropout1d, nn.Dropout2d, nn.Dropout3d, nn.AlphaDropout)
_DROPOUT_FUNCTIONS = frozenset(
    {F.dropout, F.dropout1d, F.dropout2d, F.dropout3d, F.alpha_dropout, F.feature_alpha_dropout}
)


class NoDropout(TorchFunctionMode):
    """Functional dropout is the identity and attention's ``dropout_p`` is 0 (above autograd)."""

    def __torch_function__(
        self, func: Any, _types: Any, args: Any = (), kwargs: dict[str, Any] | None = None
    ) -> Any:
        kwargs = dict(kwargs or {})
        if func in _DROPOUT_FUNCTIONS:
            return args[0] if args else kwargs["input"]
        if func is F.scaled_dot_product_attention:
            if len(args) > 4:  # (query, key, value, attn_mask, dropout_p, ...)
                args = (*args[:4], 0.0, *args[5:])
            elif "dropout_p" in kwargs:
                kwargs["dropout_p"] = 0.0
        return func(*args, **kwargs)


@contextlib.contextmanager
def dropout_off(module: nn.Module) -> Iterator[None]:
    """Every dropout module's ``p`` at 0 (restored after), and :class:`NoDropout` active."""
    saved = [(m, m.p) for m in module.modules() if isinstance(m, _DROPOUTS)]
    for m, _ in saved:
        m.p = 0.0
    try:
        with NoDropout():
            yield
    finally:
        for m, p in saved:
            m.p = p


@contextlib.contextmanager
def one_thread_unless(settings: StepSettings) -> Iterator[None]:
    """One intra-op thread for a check, unless the arm sets the count itself.

    A check's numbers do not depend on its speed, and on a busy machine two
    OpenMP threads can make each step wait at a barrier for a pre-empted peer
    (steps 100x slower were seen); one thread never does.
    """
    saved = torch.get_num_threads()
    if settings.threads is None:
        torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(saved)


def precision_of(settings: StepSettings) -> Precision:
    """The loosest precision a step's settings compute in."""
    if settings.autocast == "bf16":
        return BF16
    if settings.autocast == "fp16":
        return FP16
    return TF32 if settings.tf32 else FP32


def _twin_precision(precision: Precision) -> Precision:
    # fp32 knobs are held to TF32's rounding: see the module docstring.
    return precision if precision.mantissa_bits <= TF32.mantissa_bits else TF32


@dataclass(frozen=True)
class Trajectory:
    """Per step: the arm's own loss, and the fp32 reference's at its new weights."""

    step: tuple[float, ...]
    train: tuple[float, ...]
    eval: tuple[float, ...]
    updated: bool = True

    def values(self) -> tuple[float, ...]:
        return self.step + self.train + self.eval


@dataclass(frozen=True)
class CheckResult:
    """The evidence that a knob trains as the baseline does (or how it does not)."""

    ok: bool
    mode: str
    steps: int
    precision: str
    deviation: float
    band: Band
    twins: tuple[str, ...]
    baseline: Trajectory
    knob: Trajectory
    scaler: str | None = None
    problem: str | None = None
    notes: tuple[str, ...] = field(default=())

    @property
    def ratio(self) -> float:
        """The deviation in units of the twins' (inf when the twins did not move)."""
        if self.band.noise > 0:
            return self.deviation / self.band.noise
        return 0.0 if self.deviation == 0 else math.inf

    def worst_series(self) -> tuple[str, float, float]:
        """(which losses, the knob's last, the baseline's last) where they differ most."""
        series = {
            "the step's own": (self.knob.step, self.baseline.step),
            "train mode": (self.knob.train, self.baseline.train),
            "eval mode": (self.knob.eval, self.baseline.eval),
        }
        name, (knob, base) = max(series.items(), key=lambda item: deviation(*item[1]))
        return name, knob[-1], base[-1]

    def summary(self) -> str:
        which, knob, base = self.worst_series()
        text = (
            f"losses over {self.steps} steps within {self.deviation:.3g} of fp32's "
            f"(last step, {which}: {knob:.6g} vs {base:.6g}); {self.precision} explains up to "
            f"{self.band.noise:.3g} ({' and '.join(self.twins)}), bound {self.band.limit:.3g} "
            f"({self.band.margin:g}x); {self.mode}"
        )
        if self.scaler:
            text += f"; {self.scaler}"
        return text if self.problem is None else f"{self.problem}: {text}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "problem": self.problem,
            "summary": self.summary(),
            "mode": self.mode,
            "steps": self.steps,
            "precision": self.precision,
            "deviation": self.deviation,
            "noise": self.band.noise,
            "bound": self.band.limit,
            "margin": self.band.margin,
            "ratio": self.ratio,
            "twins": list(self.twins),
            "baseline_losses": list(self.baseline.values()),
            "knob_losses": list(self.knob.values()),
            "scaler": self.scaler,
        }


def _permuted(batch: Batch) -> Batch:
    """The batch in reverse sample order: the same sums, each in another order."""
    sizes = [t.shape[0] for t in tensors_in((batch.args, batch.kwargs)) if t.dim() > 0]
    size = sizes[0] if sizes else 0
    if size < 2:
        return batch

    def flip(t: torch.Tensor) -> torch.Tensor:
        return t.flip(0) if t.dim() > 0 and t.shape[0] == size else t

    args, kwargs, target = map_tensors((batch.args, batch.kwargs, batch.target), flip)
    return Batch(args, kwargs, target)


def _fingerprint(module: nn.Module) -> list[float]:
    with torch.no_grad():
        return [float(p.detach().float().norm()) for p in module.parameters()]


class Oracle:
    """Judges knobs against one fp32 baseline trajectory and its twins (computed once each)."""

    def __init__(
        self, workload: Workload, *, seed: int = 0, steps: int = CHECK_STEPS, margin: float = MARGIN
    ) -> None:
        self.workload = workload
        self.seed = seed
        self.steps = steps
        self.margin = margin
        self.reference = copy_model(workload.model).to(workload.device)
        for m in self.reference.modules():
            if isinstance(m, _DROPOUTS):
                m.p = 0.0
        self.batch = workload.batch
        self.device_batch = _to_device(workload.batch, workload.device)
        self.train_mode = not self.is_stochastic()
        self._cache: dict[tuple[str, int], Trajectory] = {}

    @property
    def mode(self) -> str:
        if self.train_mode:
            return "train mode (batch statistics, dropout off) and eval mode"
        return "eval mode (the model is random in train mode even with dropout off)"

    def reference_loss(self, weights: nn.Module, *, train: bool, seed: int) -> float:
        """The fp32 loss of the batch at ``weights``' parameters and buffers (buffers copied)."""
        state = {
            **dict(weights.named_parameters()),
            **{n: b.clone() for n, b in weights.named_buffers()},
        }
        self.reference.train(train)
        with torch.no_grad(), NoDropout():
            torch.manual_seed(seed)
            out = torch.func.functional_call(
                self.reference,
                state,
                self.device_batch.args,
                self.device_batch.kwargs,
                strict=False,
            )
            target = self.device_batch.target
            assert target is not None
            return float(self.workload.loss_fn(primary_output(out).float(), target))

    def is_stochastic(self) -> bool:
        """Whether two train-mode forwards with different seeds disagree, dropout off."""
        first = self.reference_loss(self.reference, train=True, seed=self.seed)
        second = self.reference_loss(self.reference, train=True, seed=self.seed + 1)
        return first != second

    def trajectory(
        self,
        step: TrainingStep,
        steps: int,
        *,
        rounding: Precision | None = None,
        permute: bool = False,
    ) -> Trajectory:
        """Train ``step`` (fresh) ``steps`` steps on the batch, recording the losses."""
        batch = _permuted(self.batch) if permute else self.batch
        before = _fingerprint(step.module)
        losses, train, evals = [], [], []
        with one_thread_unless(step.settings), step.scope(), dropout_off(step.module):
            step.module.train(self.train_mode)
            for t in range(steps):
                emulate = Rounded(rounding) if rounding is not None else contextlib.nullcontext()
                with emulate:
                    torch.manual_seed(self.seed + t)
                    losses.append(float(step.step_on(batch)))
                train.append(self.reference_loss(step.module, train=self.train_mode, seed=t))
                evals.append(self.reference_loss(step.module, train=False, seed=t))
            step.module.train(True)
        step.release_graph()  # it was captured with dropout off: timing captures its own
        return Trajectory(
            tuple(losses), tuple(train), tuple(evals), _fingerprint(step.module) != before
        )

    def _cached(self, key: str, steps: int, **how: Any) -> Trajectory:
        if (key, steps) not in self._cache:
            self._cache[(key, steps)] = self.trajectory(
                TrainingStep(self.workload, StepSettings()), steps, **how
            )
        return self._cache[(key, steps)]

    def baseline(self, steps: int) -> Trajectory:
        return self._cached("baseline", steps)

    def twins(self, precision: Precision, steps: int) -> dict[str, Trajectory]:
        """The runs that differ from the baseline only by what ``precision``'s change explains."""
        rounding = _twin_precision(precision)
        return {
            "another summation order": self._cached("order", steps, permute=True),
            f"{rounding.name} rounding emulated": self._cached(
                rounding.name, steps, rounding=rounding
            ),
        }  # computed once each per tune run, when a knob first needs them

    def judge(
        self, step: TrainingStep, *, steps: int | None = None, precision_accepted: bool = False
    ) -> CheckResult:
        """Train the knob's fresh ``step`` and judge its trajectory (module docstring).

        ``precision_accepted``: the step's precision was judged harmless on its own
        (an earlier stage's incumbent): a knob added on top of it (CUDA graphs under
        bf16) is judged by the band alone, not again for the precision's harm, which
        is not the knob's and which a longer trajectory (graphs warm up first) only
        blurs."""
        steps = steps or self.steps
        precision = precision_of(step.settings)
        scaler = None
        if step.scaler is not None:
            skipped, scale = step.calibrate_scaler(self.batch)
            scaler = (
                f"GradScaler calibrated first: {skipped} skipped step(s), scale {scale:g}"
                if skipped
                else f"GradScaler's scale {scale:g} needed no calibration"
            )
        knob = self.trajectory(step, steps)
        base = self.baseline(steps)
        twins = self.twins(precision, steps)
        limits = band(base.values(), [t.values() for t in twins.values()], margin=self.margin)
        moved = deviation(knob.values(), base.values())
        problem = None
        if not all(math.isfinite(v) for v in knob.values()):
            problem = "non-finite loss"
        elif base.updated and not knob.updated:
            problem = "the step did not update the parameters"
        elif not limits.admits(moved):
            problem = "the losses differ from fp32's more than the precision explains"
            if limits.admits(deviation(knob.step + knob.train, base.step + base.train)):
                problem += (
                    " (in eval mode only: the running statistics differ, e.g. BatchNorm "
                    "updated twice a step when its forward is recomputed)"
                )
        elif (
            precision is not FP32
            and not precision_accepted
            and harmful(moved, base.values(), twins["another summation order"].values())
        ):
            problem = (
                f"{precision.name} moves this model's losses by over {HARM:.0%} "
                "(doctor's amp-drift check shows where)"
            )
        return CheckResult(
            problem is None,
            self.mode,
            steps,
            precision.name,
            moved,
            limits,
            tuple(twins),
            base,
            knob,
            scaler,
            problem,
        )


def harmful(moved: float, baseline: Sequence[float], reordered: Sequence[float]) -> bool:
    """Whether a low-precision knob that moved the losses by ``moved`` harms the model.

    It must move them by over :data:`HARM` of their size *and* by over
    :data:`CHAOS` times what fp32 itself moves them when only the summation order
    changes (``reordered``, the fp32 twin). The second condition calibrates the
    first against the trajectory's own noise: training that overfits one batch
    quickly is chaotic, and there any change of rounding moves the losses far
    (GPT-2 over 5 steps on an H200: fp32 with another summation order moved them
    by 6%, bf16 with CUDA graphs by 12%, while both trained as well as fp32 in
    a longer run), so 5% alone called a correct knob harmful."""
    size = max((abs(v) for v in baseline), default=0.0)
    return moved > HARM * size and moved > CHAOS * deviation(reordered, baseline)


def _to_device(batch: Batch, device: torch.device) -> Batch:
    args, kwargs, target = map_tensors(
        (batch.args, batch.kwargs, batch.target), lambda t: t.to(device)
    )
    return Batch(args, kwargs, target)
