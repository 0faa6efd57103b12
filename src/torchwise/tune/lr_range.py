"""A learning-rate range test that says how sure it is, and refuses when it cannot know.

The test (Smith, "Cyclical Learning Rates", 2017) trains a fresh copy for
``steps`` steps while the learning rate grows geometrically from ``lr_min`` to
``lr_max``, recording the loss, and stops once the loss diverges.

The analysis (:func:`analyse_curve`, pure, tested on synthetic curves):

- **Smoothing** with a centred running median then a centred moving average over
  the same window: centred, so the smoothed curve does not lag behind the raw
  one (an exponential average, as in fastai, shifts the pick to larger rates).
- **Noise** is the robust spread (1.4826 x MAD) of the raw losses around the
  smoothed curve; the **drop** is how far the smoothed loss falls from its start
  to its minimum.
- **Refusals**: no pick when the loss rises from the first rates (the range
  starts too high or training diverges at once), when it is flat (the drop is
  under 3 noise widths or 2% of the loss), or when it is too noisy (the drop is
  under 5 noise widths).
- **The pick** is the rate of steepest descent of the smoothed loss against
  log(lr), searched before the minimum. **Confidence** comes from its stability:
  the pick is recomputed with half and double the window and on the odd and even
  points alone; all within a quarter decade is high, a half decade medium, else
  low, and a curve still falling at ``lr_max`` is at most low.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from torchwise.tune.stats import median
from torchwise.tune.step import StepSettings, TrainingStep, Workload

DIVERGENCE_FACTOR = 4.0


@dataclass
class CurveAnalysis:
    pick: float | None
    confidence: str  # "high" | "medium" | "low" | "none"
    reason: str
    smoothed: list[float]
    noise: float
    drop: float
    min_lr: float | None
    picks: list[float] = field(default_factory=list)


@dataclass
class LRResult:
    lrs: list[float]
    losses: list[float]
    analysis: CurveAnalysis
    data: str
    diverged_at: float | None

    @property
    def pick(self) -> float | None:
        return self.analysis.pick

    def to_dict(self) -> dict[str, Any]:
        a = self.analysis
        return {
            "lrs": self.lrs,
            "losses": self.losses,
            "smoothed": a.smoothed,
            "pick": a.pick,
            "confidence": a.confidence,
            "reason": a.reason,
            "noise": a.noise,
            "drop": a.drop,
            "lr_at_min_loss": a.min_lr,
            "alternative_picks": a.picks,
            "data": self.data,
            "diverged_at": self.diverged_at,
        }


def _running_median(values: list[float], window: int) -> list[float]:
    half = window // 2
    return [median(values[max(0, i - half) : i + half + 1]) for i in range(len(values))]


def _running_mean(values: list[float], window: int) -> list[float]:
    half = window // 2
    out = []
    for i in range(len(values)):
        chunk = values[max(0, i - half) : i + half + 1]
        out.append(sum(chunk) / len(chunk))
    return out


def smooth(losses: list[float], window: int) -> list[float]:
    window = max(3, window | 1)  # odd, so the window is centred
    return _running_mean(_running_median(losses, window), window)


def _steepest(lrs: list[float], smoothed: list[float], end: int) -> float | None:
    """The lr where the smoothed loss falls fastest per decade, before index ``end``."""
    best, best_slope = None, 0.0
    for i in range(1, max(1, end)):
        run = math.log10(lrs[i + 1]) - math.log10(lrs[i - 1]) if i + 1 < len(lrs) else 0.0
        if run <= 0:
            continue
        slope = (smoothed[i + 1] - smoothed[i - 1]) / run
        if slope < best_slope:
            best, best_slope = lrs[i], slope
    return best


def analyse_curve(
    lrs: list[float], losses: list[float], *, diverged: bool = False
) -> CurveAnalysis:
    """Pick a learning rate from a range test's curve, or refuse (module docstring).

    ``diverged``: the test stopped because the loss blew up, so a minimum near the
    end of the curve is the last point before divergence, not a curve still falling.
    """
    n = len(losses)
    if n < 10:
        return CurveAnalysis(None, "none", f"too few points ({n}) for a curve", losses, 0, 0, None)
    window = max(5, n // 15)
    smoothed = smooth(losses, window)
    residuals = [abs(raw - s) for raw, s in zip(losses, smoothed, strict=True)]
    noise = 1.4826 * median(residuals)
    head = max(2, n // 10)
    start = median(smoothed[:head])
    imin = min(range(n), key=lambda i: smoothed[i])
    drop = start - smoothed[imin]
    min_lr = lrs[imin]

    def refuse(reason: str) -> CurveAnalysis:
        return CurveAnalysis(None, "none", reason, smoothed, noise, drop, min_lr)

    if imin < head and smoothed[-1] > smoothed[imin] + max(3 * noise, 0.02 * abs(start)):
        return refuse(
            "the loss rises from the smallest rates tried: training diverges at "
            "once or the range starts too high (lower the minimum lr)"
        )
    if drop < max(3 * noise, 0.02 * abs(start)):
        return refuse(
            f"the loss is flat: it falls by {drop:.3g}, within its noise "
            f"({noise:.3g}) or under 2% of its value"
        )
    snr = drop / noise if noise > 0 else math.inf
    if snr < 5:
        return refuse(
            f"too noisy to pick: the loss falls by {drop:.3g} against noise "
            f"of {noise:.3g} (signal/noise {snr:.1f} < 5)"
        )
    pick = _steepest(lrs, smoothed, imin)
    if pick is None:
        return refuse("no descending stretch before the minimum")
    alternatives = []
    for w in (max(3, window // 2), window * 2):
        alt = _steepest(lrs, smooth(losses, w), imin)
        if alt is not None:
            alternatives.append(alt)
    for offset in (0, 1):
        sub_lrs, sub_losses = lrs[offset::2], losses[offset::2]
        sub_smooth = smooth(sub_losses, max(3, window // 2))
        sub_min = min(range(len(sub_smooth)), key=lambda i: sub_smooth[i])
        alt = _steepest(sub_lrs, sub_smooth, sub_min)
        if alt is not None:
            alternatives.append(alt)
    spread = max((abs(math.log10(a / pick)) for a in alternatives), default=math.inf)
    if spread <= 0.25:
        confidence = "high"
    elif spread <= 0.5:
        confidence = "medium"
    else:
        confidence = "low"
    reason = (
        f"steepest descent of the smoothed loss (drop {drop:.3g}, noise {noise:.3g}); "
        f"the pick moves {spread:.2f} decades across smoothings and subsamples"
    )
    still_falling = imin >= n - head and not diverged
    if still_falling:
        confidence = "low"
        reason += "; the loss still falls at the largest rate tried (raise the maximum lr)"
    elif snr < 10 and confidence == "high":
        confidence = "medium"
    return CurveAnalysis(pick, confidence, reason, smoothed, noise, drop, min_lr, alternatives)


def lr_range_test(
    workload: Workload,
    *,
    lr_min: float = 1e-7,
    lr_max: float = 10.0,
    steps: int = 100,
    seed: int = 0,
) -> LRResult:
    """Run the range test on a fresh copy with the workload's optimizer; analyse the curve."""
    import torch

    torch.manual_seed(seed)
    step = TrainingStep(workload, StepSettings())
    ratio = (lr_max / lr_min) ** (1 / max(1, steps - 1))
    lrs: list[float] = []
    losses: list[float] = []
    best = math.inf
    diverged_at = None
    with step.scope():
        for i in range(steps):
            lr = lr_min * ratio**i
            for group in step.optimizer.param_groups:
                group["lr"] = lr
            loss = float(step.step())
            lrs.append(lr)
            losses.append(loss)
            if not math.isfinite(loss):
                diverged_at = lr
                losses.pop()
                lrs.pop()
                break
            best = min(best, loss)
            if i > steps // 10 and loss > DIVERGENCE_FACTOR * best:
                diverged_at = lr
                break
    data = (
        "the loader's batches"
        if workload.loader is not None
        else ("one fixed synthetic batch (pass --loader for real data)")
    )
    analysis = analyse_curve(lrs, losses, diverged=diverged_at is not None)
    return LRResult(lrs, losses, analysis, data, diverged_at)
