"""``--scaling seq=128,256,512``: measure how cost grows with an input dimension.

Runs :func:`~torchwise.model.summarize` at each size of one named input
dimension and fits ``cost = c * size^k`` by least squares in log-log space, so
"attention is quadratic" is measured rather than assumed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from torchwise.errors import TorchwiseError
from torchwise.inputs import check_dim_names
from torchwise.model.summary import SCHEMA_VERSION, summarize
from torchwise.target import InputSpec, ResolvedTarget, make_inputs, resolve_target


@dataclass(frozen=True)
class ScalingPoint:
    size: int
    flops: int
    peak_activation_bytes: int


@dataclass(frozen=True)
class ScalingResult:
    """Measurements at each size and the fitted exponents."""

    dimension: str
    points: list[ScalingPoint]
    flops_exponent: float | None
    activation_exponent: float | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "dimension": self.dimension,
            "points": [
                {
                    "size": p.size,
                    "flops": p.flops,
                    "macs": p.flops // 2,
                    "peak_activation_bytes": p.peak_activation_bytes,
                }
                for p in self.points
            ],
            "flops_exponent": self.flops_exponent,
            "activation_exponent": self.activation_exponent,
        }


def parse_scaling(text: str) -> tuple[str, list[int]]:
    """``"seq=128,256,512"`` -> ``("seq", [128, 256, 512])``."""
    name, sep, values = text.partition("=")
    try:
        sizes = [int(v) for v in values.split(",") if v.strip()]
    except ValueError:
        sizes = []
    if not sep or not name.strip() or len(sizes) < 2 or min(sizes) < 1:
        raise TorchwiseError(
            f"bad --scaling {text!r}: expected DIM=N1,N2[,...] with at least two positive sizes",
            hint="name the dimension in the input spec, e.g. --input 'i64[batch=1,seq=128]<50257' "
            "--scaling seq=128,256,512",
        )
    return name.strip(), sorted(set(sizes))


def check_scaling(target: ResolvedTarget, dimension: str) -> None:
    """Raise now when no input spec of ``target`` names ``dimension``: called before
    the first measurement, so a typo costs nothing."""
    if not target.input_specs:
        raise TorchwiseError("--scaling needs input specs with a named dimension")
    check_dim_names(target.input_specs, [dimension])


def fit_exponent(sizes: Sequence[int], values: Sequence[int]) -> float | None:
    """Least-squares slope of log(value) against log(size); None if a value is 0."""
    if len(sizes) < 2 or min(values) <= 0:
        return None
    xs = [math.log(s) for s in sizes]
    ys = [math.log(v) for v in values]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    var = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / var


def scaling(
    target: ResolvedTarget | str,
    dimension: str,
    sizes: Sequence[int],
    *,
    device: str = "meta",
    mode: str = "eval",
    flops_convention: str = "full",
    memory_for: str = "cuda",
) -> ScalingResult:
    """Measure forward FLOPs and peak activation memory at each size of ``dimension``.

    ``memory_for``: on meta, whose attention kernels the memory models (see
    :func:`~torchwise.model.summarize`).

    ``target`` is a :class:`~torchwise.target.ResolvedTarget` or a target string
    (``"zoo:llama-tiny"``), resolved on ``device`` with its default inputs.
    """
    if isinstance(target, str):
        target = resolve_target(target, device=device)
    check_scaling(target, dimension)
    specs: list[InputSpec] = target.input_specs
    points = []
    for size in sizes:
        args, kwargs = make_inputs(specs, device=device, sizes={dimension: size})
        summary = summarize(
            target.model, args, kwargs, device=device, mode=mode, estimate_training=False,
            depth=0, flops_convention=flops_convention, memory_for=memory_for,
        )  # fmt: skip
        points.append(ScalingPoint(size, summary.flops_forward, summary.peak_activation_bytes))
    return ScalingResult(
        dimension=dimension,
        points=points,
        flops_exponent=fit_exponent(sizes, [p.flops for p in points]),
        activation_exponent=fit_exponent(sizes, [p.peak_activation_bytes for p in points]),
    )
